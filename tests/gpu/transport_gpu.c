/* GPU ranks exchanging GPU buffers: every rank registers a device buffer with
 * mscclppRegisterBuffer, connects to every other rank and, round after round, writes a message of
 * varying size and offset into each peer's buffer, signals through a host semaphore, and checks
 * every byte it received (copied back with cudaMemcpy) before acknowledging.
 *
 *   transport_gpu MEMORY PATH
 * MEMORY  legacy: cudaMalloc (legacy CUDA IPC handles)  vmm: mscclppMemAlloc(mscclppMemCuda) (fd passing)
 * PATH    conn: mscclppConnectionWrite over P2P (Auto)   peerptr: cudaMemcpy to the peer pointer of
 *         mscclppRegMemInfo   tcp: mscclppConnectionWrite over a forced tcp connection (staged)
 *         net: mscclppConnectionWrite over a forced net connection (libfabric), every rank its own
 *         stand-in host (MSCCLPP_HOSTID=gpu-host-RANK, set here): GPU memory directly where the
 *         provider grants FI_HMEM, else staged through pinned host rings (MSCCLPP_NET_GPU_MEM);
 *         needs MSCCLPP_NET_TRANSPORT=on (ctest sets it); skips (77) where the net transport cannot
 *         work, or where MSCCLPP_NET_GPU_MEM=hmem and the provider does not grant FI_HMEM.
 * Exits 77 without CUDA, a driver, or at least 2 devices. Each rank uses device local_rank % count. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "sys/cudawrap.h"
#include "transport/net.h"

#if !MSCCLPP_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else

#define SLOT ((2u << 20) + 24)
#define FILL 0xEE
#define ROUNDS 12

#define CUDA_OK(call)                                                                                        \
  do {                                                                                                       \
    cudaError_t e_ = (call);                                                                                 \
    if (e_ != cudaSuccess) TEST_FAIL("rank %d (device %d): %s failed: %s", g_rank, g_dev, #call, cudaGetErrorString(e_)); \
  } while (0)

static int g_rank = -1, g_dev = -1;

struct plan {
  uint64_t dst_off, src_off, size;
};

static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* What rank `from` sends rank `to` in `round`: the same on both sides. */
static struct plan plan_of(int round, int from, int to) {
  uint64_t r = mix((uint64_t)round << 40 | (uint64_t)from << 20 | (uint64_t)to | 1ull << 60);
  static const uint64_t special[] = {0, 1, 7, 4097, SLOT - 8};
  struct plan p = {.dst_off = r % 8, .src_off = (r >> 3) % 8};
  uint64_t pick = (r >> 6) % 8;
  p.size = pick < 5 ? special[pick] : mix(r) % (SLOT - 8);
  return p;
}

static unsigned char byte_of(int round, int from, int to, uint64_t i) {
  return (unsigned char)mix((uint64_t)round * 1000003u + (uint64_t)from * 7919u + (uint64_t)to * 104729u + i);
}

struct ctx {
  mscclppComm_t comm;
  int rank, n, vmm, path; /* path: 0 conn, 1 peerptr, 2 tcp, 3 net */
  unsigned char* dbuf;    /* device: n receive slots, then n send slots */
  unsigned char* host;    /* SLOT bytes of staging */
  mscclppRegisteredMemory reg;
  mscclppConnection_t* conn;
  mscclppHostSemaphore_t* sem;
};

static void send_to(struct ctx* c, int round, int p) {
  struct plan pl = plan_of(round, c->rank, p);
  for (uint64_t i = 0; i < pl.size; i++) c->host[i] = byte_of(round, c->rank, p, i);
  uint64_t src = (uint64_t)(c->n + p) * SLOT + pl.src_off, dst = (uint64_t)c->rank * SLOT + pl.dst_off;
  CUDA_OK(cudaMemcpy(c->dbuf + src, c->host, pl.size, cudaMemcpyHostToDevice));
  if (c->path == 1) {
    void* peer = NULL;
    CHECK_OK(mscclppRegMemInfo(c->reg.remote[p], &peer, NULL, NULL));
    CHECK_MSG(peer != NULL, "rank %d: rank %d's buffer is not mapped here (mscclppRegMemInfo gave NULL)", c->rank, p);
    CUDA_OK(cudaMemcpy((char*)peer + dst, c->dbuf + src, pl.size, cudaMemcpyDefault));
    CUDA_OK(cudaDeviceSynchronize()); /* a device-to-device cudaMemcpy may return before it lands */
  } else {
    CHECK_OK(mscclppConnectionWrite(c->conn[p], c->reg.remote[p], dst, c->reg.local, src, pl.size));
    if (round % 2) CHECK_OK(mscclppConnectionFlush(c->conn[p], 30000));
  }
  CHECK_OK(mscclppHostSemaphoreSignal(c->sem[p]));
}

/* Copies slot p back to the host, checks every byte and refills the slot. */
static void verify_slot(struct ctx* c, int round, int p) {
  struct plan pl = plan_of(round, p, c->rank);
  CUDA_OK(cudaMemcpy(c->host, c->dbuf + (size_t)p * SLOT, SLOT, cudaMemcpyDeviceToHost));
  for (uint64_t i = 0; i < SLOT; i++) {
    int inside = i >= pl.dst_off && i < pl.dst_off + pl.size;
    unsigned char want = inside ? byte_of(round, p, c->rank, i - pl.dst_off) : FILL;
    if (c->host[i] != want)
      TEST_FAIL("rank %d (device %d) round %d: byte %llu of the slot written by rank %d is 0x%02x, expected 0x%02x "
                "(%s memory, message of %llu bytes at offset %llu)",
                c->rank, g_dev, round, (unsigned long long)i, p, c->host[i], want, c->vmm ? "cuMem" : "cudaMalloc",
                (unsigned long long)pl.size, (unsigned long long)pl.dst_off);
  }
  /* Not synchronized on purpose: the ack signal (p2p) is ordered after the default stream's work. */
  CUDA_OK(cudaMemset(c->dbuf + (size_t)p * SLOT, FILL, SLOT));
}

static void run_round(struct ctx* c, int round) {
  for (int k = 1; k < c->n; k++) send_to(c, round, (c->rank + k) % c->n);
  for (int k = 1; k < c->n; k++) {
    int p = (c->rank - k + c->n) % c->n;
    CHECK_OK(mscclppHostSemaphoreWait(c->sem[p], 30000));
    verify_slot(c, round, p);
    CHECK_OK(mscclppHostSemaphoreSignal(c->sem[p]));
  }
  for (int p = 0; p < c->n; p++)
    if (p != c->rank) CHECK_OK(mscclppHostSemaphoreWait(c->sem[p], 30000));
}

static void setup(struct ctx* c) {
  size_t bytes = (size_t)2 * c->n * SLOT;
  if (c->vmm)
    CHECK_OK(mscclppMemAlloc((void**)&c->dbuf, bytes, mscclppMemCuda));
  else
    CUDA_OK(cudaMalloc((void**)&c->dbuf, bytes));
  CUDA_OK(cudaMemset(c->dbuf, FILL, bytes));
  CUDA_OK(cudaDeviceSynchronize()); /* filled before the barrier lets peers write */
  CHECK((c->host = malloc(SLOT)) != NULL);
  CHECK_OK(mscclppRegisterBuffer(c->comm, c->dbuf, bytes, &c->reg));
  c->conn = calloc((size_t)c->n, sizeof(*c->conn));
  c->sem = calloc((size_t)c->n, sizeof(*c->sem));
  static const mscclppTransport_t want[] = {mscclppTransportAuto, mscclppTransportAuto, mscclppTransportTCP,
                                            mscclppTransportNet};
  static const mscclppTransport_t expect[] = {mscclppTransportP2P, mscclppTransportP2P, mscclppTransportTCP,
                                              mscclppTransportNet};
  for (int p = 0; p < c->n; p++) { /* increasing peer order on every rank: no cycle of waits */
    if (p == c->rank) continue;
    mscclppResult_t r = mscclppConnectionCreate(c->comm, p, 9, want[c->path], &c->conn[p]);
    /* both sides refuse alike: no FI_HMEM, or the provider the test names (shm, the one that may
     * grant it) cannot carry the transport here at all */
    if (r == mscclppInvalidUsage && c->path == 3 &&
        (strstr(mscclppGetLastError(), "FI_HMEM") != NULL || getenv("MSCCLPP_NET_PROVIDER") != NULL))
      TEST_SKIP("rank %d: %s", c->rank, mscclppGetLastError());
    CHECK_OK(r);
    mscclppTransport_t got;
    CHECK_OK(mscclppConnectionTransport(c->conn[p], &got));
    CHECK_MSG(got == expect[c->path], "rank %d: connection to rank %d uses transport %d", c->rank, p, (int)got);
    CHECK_OK(mscclppHostSemaphoreCreate(c->comm, c->conn[p], &c->sem[p]));
  }
}

static void teardown(struct ctx* c) {
  for (int p = 0; p < c->n; p++) {
    if (p == c->rank) continue;
    CHECK_OK(mscclppConnectionFlush(c->conn[p], 30000));
    CHECK_OK(mscclppHostSemaphoreDestroy(c->sem[p]));
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  for (int p = 0; p < c->n; p++)
    if (p != c->rank) CHECK_OK(mscclppConnectionDestroy(c->conn[p]));
  CHECK_OK(mscclppRegisteredMemoryRelease(&c->reg));
  if (c->vmm)
    CHECK_OK(mscclppMemFree(c->dbuf));
  else
    CUDA_OK(cudaFree(c->dbuf));
  free(c->host);
  free(c->conn);
  free(c->sem);
  CHECK_OK(mscclppCommDestroy(c->comm));
}

/* Every rank its own host (as ranks of different machines): MSCCLPP_HOSTID from MSCCLPP_RANK, set
 * before the library reads its parameters; the net transport must be on. */
static void stand_in_host(void) {
  const char* on = getenv("MSCCLPP_NET_TRANSPORT");
  if (on == NULL || strcmp(on, "on") != 0) TEST_SKIP("the net path needs MSCCLPP_NET_TRANSPORT=on");
  char why[512], id[64];
  snprintf(id, sizeof(id), "gpu-host-%s", getenv("MSCCLPP_RANK") ? getenv("MSCCLPP_RANK") : "0");
  setenv("MSCCLPP_HOSTID", id, 1);
  if (!net_probe(why, sizeof(why))) TEST_SKIP("the net transport cannot work here: %s", why);
}

int main(int argc, char** argv) {
  if (argc < 3) TEST_FAIL("usage: %s legacy|vmm conn|peerptr|tcp|net", argv[0]);
  int net = strcmp(argv[2], "net") == 0;
  if (net) stand_in_host();
  int count = 0;
  if (!cu_available() || cudaGetDeviceCount(&count) != cudaSuccess || count < 2)
    TEST_SKIP("needs CUDA and at least 2 GPUs (found %d)", count);
  const char* lr = getenv("MSCCLPP_LOCAL_RANK");
  g_rank = atoi(getenv("MSCCLPP_RANK") ? getenv("MSCCLPP_RANK") : "0");
  g_dev = (lr ? atoi(lr) : g_rank) % count;
  CUDA_OK(cudaSetDevice(g_dev));
  struct ctx c = {.vmm = strcmp(argv[1], "vmm") == 0,
                  .path = strcmp(argv[2], "peerptr") == 0 ? 1 : strcmp(argv[2], "tcp") == 0 ? 2 : net ? 3 : 0};
  mscclppConfig_t cfg = MSCCLPP_CONFIG_INITIALIZER;
  cfg.rankKind = mscclppRankGpu;
  cfg.cudaDevice = g_dev;
  cfg.bootstrapTimeoutMs = 30000;
  CHECK_OK(mscclppCommInitFromEnv(&c.comm, &cfg));
  CHECK_OK(mscclppCommRank(c.comm, &c.rank));
  CHECK_OK(mscclppCommSize(c.comm, &c.n));
  setup(&c);
  CHECK_OK(mscclppBootstrapBarrier(c.comm)); /* every buffer is filled before anyone writes */
  for (int r = 1; r <= ROUNDS; r++) run_round(&c, r);
  if (c.rank == 0) printf("transport_gpu %s/%s: %d ranks, %d rounds verified\n", argv[1], argv[2], c.n, ROUNDS);
  teardown(&c);
  return 0;
}
#endif
