/* The net transport (libfabric RMA) among CPU ranks of this host, forced with mscclppTransportNet:
 *   data  (n = 2, or a ring of n >= 4) ring: writes of sizes 0..5 MiB+1 at odd offsets to the next rank, each
 *         followed by a signal; the receiver finds every byte (and the guard bytes around it
 *         untouched) once its wait returns; 2000 one-word writes outstanding before one signal; a
 *         64 MiB write; a flush after which the peer sees the data with no semaphore (told through
 *         the bootstrap); bad arguments are refused naming what was wrong.
 *   kill  (n = 2) rank 1 exits without teardown; rank 0's flush of a write and its semaphore wait
 *         each fail with RemoteError naming rank 1 within 2 s (the death is seen through closed
 *         sockets and the bootstrap's ring, not a timeout).
 *   released (n = 2) a signal to a registration the peer released is dropped there, a write to it
 *         fails the flush and the connection, naming the peer.
 *   badprov / off (n = 2) a provider that does not exist (MSCCLPP_NET_PROVIDER) / the transport
 *         left off: a forced net connection is InvalidUsage naming the parameter.
 * Skips (77) where the library has no libfabric or no provider can be used.
 *
 *   transport_net data|kill|released|badprov|off */
#include <unistd.h>

#include "transport_mp.h"

#define SLOT ((5u << 20) + 64)
#define BIG ((64u << 20) + 16)
#define GUARD 0xA5
#define TAG_SYNC 41
#define MANY 2000

struct ctx {
  mscclppComm_t comm;
  int rank, n, next, prev;
  unsigned char* buf; /* [0, SLOT): what prev writes here; [SLOT, 2 SLOT): what this rank sends; then BIG */
  mscclppRegisteredMemory reg;
  mscclppConnection_t to_next, to_prev;
  mscclppHostSemaphore_t sem_next, sem_prev;
};

static void setup(struct ctx* c) {
  c->comm = tmp_init(&c->rank, &c->n);
  mscclppTransport_t t = tmp_transport("net");
  c->next = (c->rank + 1) % c->n;
  c->prev = (c->rank + c->n - 1) % c->n;
  c->buf = malloc(2 * SLOT + BIG);
  CHECK(c->buf != NULL);
  memset(c->buf, GUARD, 2 * SLOT);
  CHECK_OK(mscclppRegisterBuffer(c->comm, c->buf, 2 * SLOT + BIG, &c->reg));
  if (c->n == 2) { /* one pair: one connection and one semaphore serve both directions */
    CHECK_OK(mscclppConnectionCreate(c->comm, c->next, 1, t, &c->to_next));
    CHECK_OK(mscclppHostSemaphoreCreate(c->comm, c->to_next, &c->sem_next));
    c->to_prev = c->to_next;
    c->sem_prev = c->sem_next;
  }
  /* Pairs connect one at a time in the same order on both sides: even ranks first to next. */
  for (int step = 0; step < 2 && c->n > 2; step++) {
    if ((c->rank % 2 == 0) == (step == 0)) {
      CHECK_OK(mscclppConnectionCreate(c->comm, c->next, 1, t, &c->to_next));
      CHECK_OK(mscclppHostSemaphoreCreate(c->comm, c->to_next, &c->sem_next));
    } else {
      CHECK_OK(mscclppConnectionCreate(c->comm, c->prev, 1, t, &c->to_prev));
      CHECK_OK(mscclppHostSemaphoreCreate(c->comm, c->to_prev, &c->sem_prev));
    }
  }
  mscclppTransport_t got;
  CHECK_OK(mscclppConnectionTransport(c->to_next, &got));
  CHECK_MSG(got == mscclppTransportNet, "connection uses transport %d, not net", (int)got);
}

/* Checks [0, SLOT) after prev's message of size bytes at off of `round`, then restores the guard. */
static void check_slot(struct ctx* c, int round, uint64_t off, uint64_t size) {
  for (uint64_t i = 0; i < SLOT; i++) {
    int inside = i >= off && i < off + size;
    unsigned char want = inside ? tmp_byte(round, c->prev, c->rank, i - off) : GUARD;
    if (c->buf[i] != want)
      TEST_FAIL("rank %d round %d: byte %llu is 0x%02x, expected 0x%02x (message of %llu bytes at %llu from rank %d)",
                c->rank, round, (unsigned long long)i, c->buf[i], want, (unsigned long long)size,
                (unsigned long long)off, c->prev);
  }
  memset(c->buf + off, GUARD, size);
}

/* Ring rounds of writes of every size class, each followed by a signal; the wait must show it all. */
static void test_sizes(struct ctx* c) {
  static const uint64_t sizes[] = {0, 1, 7, 8, 4097, (1u << 20) + 3, (4u << 20), (5u << 20) + 1};
  const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
  for (int round = 0; round < nsizes * 2; round++) {
    uint64_t size = sizes[round % nsizes], off = (uint64_t)(round * 13) % 61, src_off = (uint64_t)(round * 7) % 57;
    unsigned char* src = c->buf + SLOT + src_off;
    for (uint64_t i = 0; i < size; i++) src[i] = tmp_byte(round, c->rank, c->next, i);
    CHECK_OK(mscclppConnectionWrite(c->to_next, c->reg.remote[c->next], off, c->reg.local, SLOT + src_off, size));
    CHECK_OK(mscclppHostSemaphoreSignal(c->sem_next));
    CHECK_OK(mscclppHostSemaphoreWait(c->sem_prev, 10000));
    check_slot(c, round, off, size);
    /* The sender may reuse its slot only once the receiver checked: a second signal says so. */
    CHECK_OK(mscclppHostSemaphoreSignal(c->sem_prev));
    CHECK_OK(mscclppHostSemaphoreWait(c->sem_next, 10000));
  }
}

/* MANY one-word writes in flight before one signal: all land, in place, before the wait returns. */
static void test_many(struct ctx* c) {
  uint64_t* words = (uint64_t*)(void*)(c->buf + SLOT);
  for (uint64_t i = 0; i < MANY; i++) {
    words[i] = 0x5eed000000000000ull | (uint64_t)c->rank << 32 | i;
    CHECK_OK(mscclppConnectionWrite(c->to_next, c->reg.remote[c->next], i * 8, c->reg.local, SLOT + i * 8, 8));
  }
  CHECK_OK(mscclppHostSemaphoreSignal(c->sem_next));
  CHECK_OK(mscclppHostSemaphoreWait(c->sem_prev, 10000));
  const uint64_t* got = (const uint64_t*)(const void*)c->buf;
  for (uint64_t i = 0; i < MANY; i++)
    CHECK_MSG(got[i] == (0x5eed000000000000ull | (uint64_t)c->prev << 32 | i), "word %llu is %#llx",
              (unsigned long long)i, (unsigned long long)got[i]);
  memset(c->buf, GUARD, MANY * 8);
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

/* Rank 0 writes 64 MiB to rank 1 and flushes; rank 1, told through the bootstrap only, checks it. */
static void test_big_flush(struct ctx* c) {
  unsigned char* big = c->buf + 2 * SLOT;
  int v = 0;
  if (c->rank == 0) {
    for (uint64_t i = 0; i < BIG - 16; i++) big[i] = tmp_byte(7, 0, 1, i);
    double t0 = tmp_now();
    CHECK_OK(mscclppConnectionWrite(c->to_next, c->reg.remote[1], 2 * SLOT + 16, c->reg.local, 2 * SLOT, BIG - 16));
    CHECK_OK(mscclppConnectionFlush(c->to_next, 30000));
    printf("transport_net: 64 MiB written and flushed in %.3f s\n", tmp_now() - t0);
    CHECK_OK(mscclppBootstrapSend(c->comm, 1, TAG_SYNC, &v, sizeof(v)));
  } else if (c->rank == 1) {
    CHECK_OK(mscclppBootstrapRecv(c->comm, 0, TAG_SYNC, &v, sizeof(v)));
    for (uint64_t i = 0; i < BIG - 16; i++)
      if (big[16 + i] != tmp_byte(7, 0, 1, i))
        TEST_FAIL("byte %llu of the 64 MiB write is 0x%02x after the flush", (unsigned long long)i, big[16 + i]);
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

static void test_bad_args(struct ctx* c) {
  uint64_t v;
  EXPECT(mscclppConnectionWrite(c->to_next, c->reg.remote[c->next], 2 * SLOT + BIG - 4, c->reg.local, 0, 8),
         mscclppInvalidArgument, "exceed");
  EXPECT(mscclppConnectionWrite(c->to_next, c->reg.remote[c->next], 0, c->reg.local, 2 * SLOT + BIG, 1),
         mscclppInvalidArgument, "exceed");
  EXPECT(mscclppConnectionUpdateAndSync(c->to_next, c->reg.remote[c->next], 4, &v, 1), mscclppInvalidArgument,
         "aligned");
  EXPECT(mscclppConnectionWrite(c->to_next, c->reg.local, 0, c->reg.local, 0, 8), mscclppInvalidUsage, "not the peer");
  CHECK_OK(mscclppConnectionFlush(c->to_next, 1000)); /* the connection carries on */
}

static void teardown(struct ctx* c) {
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  CHECK_OK(mscclppHostSemaphoreDestroy(c->sem_next));
  if (c->n > 2) CHECK_OK(mscclppHostSemaphoreDestroy(c->sem_prev));
  CHECK_OK(mscclppConnectionDestroy(c->to_next));
  if (c->n > 2) CHECK_OK(mscclppConnectionDestroy(c->to_prev));
  CHECK_OK(mscclppRegisteredMemoryRelease(&c->reg));
  CHECK_OK(mscclppCommDestroy(c->comm));
  free(c->buf);
}

static int run_data(void) {
  struct ctx c;
  memset(&c, 0, sizeof(c));
  setup(&c);
  double t0 = tmp_now();
  test_sizes(&c);
  test_many(&c);
  test_big_flush(&c);
  test_bad_args(&c);
  printf("transport_net data: rank %d of %d passed in %.2f s\n", c.rank, c.n, tmp_now() - t0);
  teardown(&c);
  return 0;
}

static int run_kill(void) {
  int rank, n;
  mscclppComm_t comm = tmp_init(&rank, &n);
  if (n != 2) TEST_FAIL("kill mode needs exactly 2 ranks");
  mscclppTransport_t t = tmp_transport("net");
  unsigned char* buf = malloc(1 << 20);
  CHECK(buf != NULL);
  mscclppRegisteredMemory reg;
  CHECK_OK(mscclppRegisterBuffer(comm, buf, 1 << 20, &reg));
  mscclppConnection_t conn;
  CHECK_OK(mscclppConnectionCreate(comm, 1 - rank, 0, t, &conn));
  mscclppHostSemaphore_t sem;
  CHECK_OK(mscclppHostSemaphoreCreate(comm, conn, &sem));
  /* One round trip first, so that the provider's connection exists when the peer dies. */
  CHECK_OK(mscclppConnectionWrite(conn, reg.remote[1 - rank], 0, reg.local, 0, 4096));
  CHECK_OK(mscclppHostSemaphoreSignal(sem));
  CHECK_OK(mscclppHostSemaphoreWait(sem, 10000));
  CHECK_OK(mscclppConnectionFlush(conn, 10000));
  int v = 1;
  if (rank == 1) {
    CHECK_OK(mscclppBootstrapRecv(comm, 0, 1, &v, sizeof(v)));
    _exit(0); /* as if it crashed */
  }
  CHECK_OK(mscclppBootstrapSend(comm, 1, 1, &v, sizeof(v)));
  usleep(100 * 1000); /* rank 1 is on its way out */
  double t0 = tmp_now();
  mscclppResult_t r = mscclppConnectionWrite(conn, reg.remote[1], 0, reg.local, 0, 1 << 20);
  CHECK_MSG(r == mscclppSuccess || r == mscclppRemoteError, "write returned %d: %s", (int)r, mscclppGetLastError());
  CHECK_RES(mscclppConnectionFlush(conn, 30000), mscclppRemoteError);
  CHECK_ERR_MENTIONS("rank 1");
  double dt_flush = tmp_now() - t0;
  t0 = tmp_now();
  CHECK_RES(mscclppHostSemaphoreWait(sem, 30000), mscclppRemoteError);
  CHECK_ERR_MENTIONS("rank 1");
  double dt_wait = tmp_now() - t0;
  printf("transport_net kill: flush failed in %.3f s, wait in %.3f s\n", dt_flush, dt_wait);
  CHECK_MSG(dt_flush < 2.0 && dt_wait < 2.0, "noticing the dead peer took %.2f s / %.2f s", dt_flush, dt_wait);
  CHECK_OK(mscclppHostSemaphoreDestroy(sem));
  CHECK_OK(mscclppConnectionDestroy(conn));
  CHECK_OK(mscclppRegisteredMemoryRelease(&reg));
  CHECK_OK(mscclppCommAbort(comm));
  free(buf);
  return 0;
}

/* A registration rank 1 released: rank 0's signal to it is dropped there (the connection goes on),
 * its RMA write fails the flush and, from then on, the connection (RemoteError naming rank 1). */
static int run_released(void) {
  int rank, n;
  mscclppComm_t comm = tmp_init(&rank, &n);
  if (n != 2) TEST_FAIL("released mode needs exactly 2 ranks");
  mscclppTransport_t t = tmp_transport("net");
  unsigned char* buf = calloc(1, 4096);
  CHECK(buf != NULL);
  mscclppRegisteredMemory reg;
  CHECK_OK(mscclppRegisterBuffer(comm, buf, 4096, &reg));
  mscclppConnection_t conn;
  CHECK_OK(mscclppConnectionCreate(comm, 1 - rank, 0, t, &conn));
  mscclppRegMem_t gone = tmp_released_reg(comm, rank, 42);
  if (rank == 0) {
    uint64_t v;
    CHECK_OK(mscclppConnectionUpdateAndSync(conn, gone, 8, &v, 5));
    CHECK_OK(mscclppConnectionFlush(conn, 10000));
    CHECK_OK(mscclppConnectionWrite(conn, reg.remote[1], 0, reg.local, 0, 64)); /* still usable */
    CHECK_OK(mscclppConnectionFlush(conn, 10000));
    CHECK_OK(mscclppConnectionWrite(conn, gone, 0, reg.local, 0, 64));
    EXPECT(mscclppConnectionFlush(conn, 10000), mscclppRemoteError, "rank 1");
    EXPECT(mscclppConnectionWrite(conn, reg.remote[1], 0, reg.local, 0, 64), mscclppRemoteError, "rank 1");
    printf("transport_net released: %s\n", mscclppGetLastError());
    CHECK_OK(mscclppRegMemRelease(gone));
  }
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppConnectionDestroy(conn));
  CHECK_OK(mscclppRegisteredMemoryRelease(&reg));
  CHECK_OK(mscclppCommDestroy(comm));
  free(buf);
  return 0;
}

/* A forced net connection that cannot be made fails on both ranks, naming `what`. */
static int run_refused(const char* what) {
  int rank, n;
  char why[512];
  if (!net_probe(why, sizeof(why)) && strstr(why, "without libfabric") != NULL) {
    printf("SKIP: %s\n", why);
    return 77;
  }
  mscclppComm_t comm = tmp_init(&rank, &n);
  mscclppConnection_t conn;
  EXPECT(mscclppConnectionCreate(comm, 1 - rank, 0, mscclppTransportNet, &conn), mscclppInvalidUsage, what);
  printf("transport_net: refused as expected: %s\n", mscclppGetLastError());
  CHECK_OK(mscclppCommDestroy(comm));
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) TEST_FAIL("usage: %s data|kill|released|badprov|off", argv[0]);
  if (strcmp(argv[1], "data") == 0) return run_data();
  if (strcmp(argv[1], "kill") == 0) return run_kill();
  if (strcmp(argv[1], "released") == 0) return run_released();
  if (strcmp(argv[1], "badprov") == 0) return run_refused("MSCCLPP_NET_PROVIDER");
  if (strcmp(argv[1], "off") == 0) return run_refused("MSCCLPP_NET_TRANSPORT=on");
  TEST_FAIL("unknown mode '%s'", argv[1]);
}
