/* Data movement with signal/wait among all ranks: in every round each rank writes a message of
 * random size (0, 1, 7, non-multiples of 8, up to a whole slot) at a random, often unaligned,
 * offset into its slot of every other rank's buffer, signals, and each receiver checks every byte
 * of its buffer (the message, and that nothing around it changed) before acknowledging.
 *
 *   transport_data TRANSPORT MEMORY ROUNDS [HOSTS]
 * TRANSPORT shm|tcp|auto; MEMORY memfd (mscclppMemAlloc host) or malloc; HOSTS > 0 makes the
 * ranks act as that many different hosts (MSCCLPP_HOST_ID), so Auto mixes shm and tcp. */
#include <unistd.h>

#include "transport_mp.h"

#define SLOT (64 * 1024 + 24)
#define FILL 0xEE

struct plan {
  uint64_t dst_off, src_off, size;
};

/* What rank `from` sends rank `to` in `round`: the same on both sides. */
static struct plan plan_of(int round, int from, int to) {
  uint64_t s = (uint64_t)round << 40 | (uint64_t)from << 20 | (uint64_t)to;
  uint64_t r = tmp_rand(&s);
  struct plan p = {.dst_off = r % 8, .src_off = (r >> 3) % 8};
  static const uint64_t special[] = {0, 1, 7, 8, 9, 4095, 4097};
  uint64_t pick = (r >> 6) % 10, max = SLOT - 8;
  p.size = pick < 7 ? special[pick] : pick == 7 ? max : tmp_rand(&s) % max;
  return p;
}

struct ctx {
  mscclppComm_t comm;
  int rank, n;
  unsigned char* buf; /* n receive slots, then n send slots */
  mscclppRegisteredMemory reg;
  mscclppConnection_t* conn;
  mscclppHostSemaphore_t* sem;
};

static void send_round(struct ctx* c, int round) {
  for (int k = 1; k < c->n; k++) {
    int p = (c->rank + k) % c->n;
    struct plan pl = plan_of(round, c->rank, p);
    unsigned char* src = c->buf + (size_t)(c->n + p) * SLOT + pl.src_off;
    for (uint64_t i = 0; i < pl.size; i++) src[i] = tmp_byte(round, c->rank, p, i);
    CHECK_OK(mscclppConnectionWrite(c->conn[p], c->reg.remote[p], (uint64_t)c->rank * SLOT + pl.dst_off, c->reg.local,
                                    (uint64_t)(c->n + p) * SLOT + pl.src_off, pl.size));
    CHECK_OK(mscclppHostSemaphoreSignal(c->sem[p]));
  }
}

/* Checks slot p after round's message from p, then refills it. */
static void verify_slot(struct ctx* c, int round, int p) {
  struct plan pl = plan_of(round, p, c->rank);
  unsigned char* slot = c->buf + (size_t)p * SLOT;
  for (uint64_t i = 0; i < SLOT; i++) {
    int inside = i >= pl.dst_off && i < pl.dst_off + pl.size;
    unsigned char want = inside ? tmp_byte(round, p, c->rank, i - pl.dst_off) : FILL;
    if (slot[i] != want)
      TEST_FAIL("rank %d round %d: byte %llu of the slot of rank %d is 0x%02x, expected 0x%02x (message of %llu bytes at "
                "offset %llu)",
                c->rank, round, (unsigned long long)i, p, slot[i], want, (unsigned long long)pl.size,
                (unsigned long long)pl.dst_off);
  }
  memset(slot, FILL, SLOT);
}

static void run_round(struct ctx* c, int round) {
  send_round(c, round);
  for (int k = 1; k < c->n; k++) {
    int p = (c->rank - k + c->n) % c->n;
    CHECK_OK(mscclppHostSemaphoreWait(c->sem[p], 20000)); /* p's data */
    verify_slot(c, round, p);
    CHECK_OK(mscclppHostSemaphoreSignal(c->sem[p])); /* our ack of it */
  }
  for (int p = 0; p < c->n; p++)
    if (p != c->rank) CHECK_OK(mscclppHostSemaphoreWait(c->sem[p], 20000)); /* p's ack of ours */
}

static void setup(struct ctx* c, mscclppTransport_t t, int use_memfd) {
  size_t bytes = (size_t)2 * c->n * SLOT;
  if (use_memfd)
    CHECK_OK(mscclppMemAlloc((void**)&c->buf, bytes, mscclppMemHost));
  else
    CHECK((c->buf = malloc(bytes)) != NULL);
  memset(c->buf, FILL, bytes);
  CHECK_OK(mscclppRegisterBuffer(c->comm, c->buf, bytes, &c->reg));
  c->conn = calloc((size_t)c->n, sizeof(*c->conn));
  c->sem = calloc((size_t)c->n, sizeof(*c->sem));
  for (int p = 0; p < c->n; p++) {
    if (p == c->rank) continue;
    CHECK_OK(mscclppConnectionCreate(c->comm, p, 5, t, &c->conn[p]));
    CHECK_OK(mscclppHostSemaphoreCreate(c->comm, c->conn[p], &c->sem[p]));
  }
}

static void teardown(struct ctx* c, int use_memfd) {
  for (int p = 0; p < c->n; p++) {
    if (p == c->rank) continue;
    CHECK_OK(mscclppConnectionFlush(c->conn[p], -1));
    CHECK_OK(mscclppHostSemaphoreDestroy(c->sem[p]));
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  for (int p = 0; p < c->n; p++)
    if (p != c->rank) CHECK_OK(mscclppConnectionDestroy(c->conn[p]));
  CHECK_OK(mscclppRegisteredMemoryRelease(&c->reg));
  if (use_memfd)
    CHECK_OK(mscclppMemFree(c->buf));
  else
    free(c->buf);
  free(c->conn);
  free(c->sem);
  CHECK_OK(mscclppCommDestroy(c->comm));
}

int main(int argc, char** argv) {
  if (argc < 4) TEST_FAIL("usage: %s shm|tcp|auto memfd|malloc ROUNDS [HOSTS]", argv[0]);
  int hosts = argc > 4 ? atoi(argv[4]) : 0;
  if (hosts > 0) {
    char id[32];
    snprintf(id, sizeof(id), "test-host-%d", atoi(getenv("MSCCLPP_RANK") ? getenv("MSCCLPP_RANK") : "0") % hosts);
    setenv("MSCCLPP_HOST_ID", id, 1);
  }
  struct ctx c = {0};
  c.comm = tmp_init(&c.rank, &c.n);
  int use_memfd = strcmp(argv[2], "memfd") == 0, rounds = atoi(argv[3]);
  setup(&c, tmp_transport(argv[1]), use_memfd);
  CHECK_OK(mscclppBootstrapBarrier(c.comm)); /* every buffer is filled before anyone writes */
  double t0 = tmp_now();
  for (int r = 1; r <= rounds; r++) run_round(&c, r);
  double dt = tmp_now() - t0;
  if (c.rank == 0) {
    mscclppTransport_t t;
    CHECK_OK(mscclppConnectionTransport(c.conn[1], &t));
    printf("transport_data %s/%s: %d ranks, %d rounds in %.3f s (rank 0 -> 1 over transport %d)\n", argv[1], argv[2], c.n,
           rounds, dt, (int)t);
  }
  teardown(&c, use_memfd);
  return 0;
}
