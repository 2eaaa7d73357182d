/* Port channels between GPU ranks through each rank's proxy service: signal/wait ping-pong,
 * put-with-signal to every peer at once, put-with-signal-and-flush, the proxy round trip (flush
 * pushed -> completion observed), and a FIFO stress where 128 threads of 64 blocks push 768 puts
 * and 128 signals through one 64-slot FIFO (14 laps, producers held back when it is full) while
 * the peer waits on another stream; every byte is checked. 77 without enough GPUs.
 *
 * The kernels are loaded before the stress (cudaFuncGetAttributes): under CUDA's lazy loading,
 * the first launch of k_stress, queued beside the spinning k_wait_peers, waited for it to finish -
 * on both GPUs, so no signal came until the waits timed out (seen on 2x H200; gone with
 * CUDA_MODULE_LOADING=EAGER or the waits run after the pushes). The stress is kept below ~1000
 * queued copies (a CUDA stream holds about that many before cudaMemcpyAsync blocks the proxy).
 *
 *   gpu_portchan [PINGPONG_ITERS] */
#include "gpu_common.h"

#define SLOT (4u << 20)

__global__ void k_pingpong(const mscclppPortChannel* ch, int first, int iters, int* rc, unsigned long long* ns) {
  uint64_t t0 = gt_ns();
  int r = MSCCLPP_DEVICE_OK;
  for (int i = 0; i < iters && r == MSCCLPP_DEVICE_OK; i++) {
    if (first) r = mscclppPortChannelSignal(ch);
    if (r == MSCCLPP_DEVICE_OK) r = mscclppPortChannelWait(ch);
    if (!first && r == MSCCLPP_DEVICE_OK) r = mscclppPortChannelSignal(ch);
  }
  *ns = gt_ns() - t0;
  *rc = r;
}

/* Block g: put-with-signal of n bytes into peer g's slot for this rank, flush, wait for the peer's. */
__global__ void k_put_all(const mscclppPortChannel* chans, const int* peers, int rank, uint64_t n, int and_flush, int* rc) {
  if (threadIdx.x != 0) return;
  const mscclppPortChannel* ch = &chans[peers[blockIdx.x]];
  int r = and_flush ? mscclppPortChannelPutWithSignalAndFlush(ch, (uint64_t)rank * SLOT + 3, 1, n)
                    : mscclppPortChannelPutWithSignal(ch, (uint64_t)rank * SLOT + 3, 1, n);
  if (r == MSCCLPP_DEVICE_OK && !and_flush) r = mscclppPortChannelFlush(ch);
  if (r == MSCCLPP_DEVICE_OK) r = mscclppPortChannelWait(ch);
  rc[blockIdx.x] = r;
}

__global__ void k_flush_rt(const mscclppPortChannel* ch, int iters, int* rc, unsigned long long* ns) {
  uint64_t t0 = gt_ns();
  int r = MSCCLPP_DEVICE_OK;
  for (int i = 0; i < iters && r == MSCCLPP_DEVICE_OK; i++) r = mscclppPortChannelFlush(ch);
  *ns = gt_ns() - t0;
  *rc = r;
}

/* Every thread pushes `pieces` puts of `piece` bytes to peer (global thread id % npeers), then
 * signals it once. Thread g's pieces are at (g * pieces + k) * piece in this rank's slot. */
__global__ void k_stress(const mscclppPortChannel* chans, const int* peers, int npeers, int rank, int pieces,
                         uint64_t piece, int* rc) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  const mscclppPortChannel* ch = &chans[peers[g % npeers]];
  int r = MSCCLPP_DEVICE_OK;
  for (int k = 0; k < pieces && r == MSCCLPP_DEVICE_OK; k++) {
    uint64_t off = ((uint64_t)g * pieces + k) * piece;
    r = mscclppPortChannelPut(ch, (uint64_t)rank * SLOT + off, off, piece);
  }
  if (r == MSCCLPP_DEVICE_OK) r = mscclppPortChannelSignal(ch);
  if (r != MSCCLPP_DEVICE_OK) rc[0] = r;
}

/* Block g waits `count` times on peer g's channel. */
__global__ void k_wait_peers(const mscclppPortChannel* chans, const int* peers, int count, int* rc) {
  int r = MSCCLPP_DEVICE_OK;
  for (int i = 0; i < count && r == MSCCLPP_DEVICE_OK; i++) r = mscclppPortChannelWait(&chans[peers[blockIdx.x]]);
  rc[blockIdx.x] = r;
}

struct env {
  struct gt_ctx c;
  mscclppProxyService_t proxy;
  mscclppPortChannel* d_chans;
  int *d_peers, peers[GT_MAX_RANKS], npeers, *d_rc;
  unsigned long long* d_ns;
};

static void test_pingpong(struct env* e, int iters) {
  struct gt_ctx* c = &e->c;
  if (c->rank > 1) return;
  k_pingpong<<<1, 1, 0, gt_stream>>>(&e->d_chans[1 - c->rank], c->rank == 0, iters, e->d_rc, e->d_ns);
  CUDA_OK(gt_sync());
  gt_check_rc(c, e->d_rc, 1, "port ping-pong");
  unsigned long long ns = 0;
  CUDA_OK(gt_memcpy(&ns, e->d_ns, sizeof(ns), cudaMemcpyDeviceToHost));
  if (c->rank == 0) printf("gpu_portchan: signal+wait round trip %.2f us (%d iterations)\n", ns / 1e3 / iters, iters);
}

static void check_slots(struct env* e, uint64_t n, int tag, const char* what) {
  struct gt_ctx* c = &e->c;
  for (int g = 0; g < e->npeers; g++) {
    int p = e->peers[g];
    unsigned long long bad = gt_count_bad(c->scratch + (uint64_t)p * SLOT + 3, n, 1, tag, p);
    CHECK_MSG(bad == 0, "%s of %llu bytes from rank %d: %llu bytes wrong", what, (unsigned long long)n, p, bad);
  }
}

static void test_put_all(struct env* e) {
  struct gt_ctx* c = &e->c;
  static const uint64_t sizes[] = {1, 4093, 1 << 20, (3 << 20) + 5};
  for (int and_flush = 0; and_flush < 2; and_flush++)
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
      int tag = (int)(10 * and_flush + k + 1);
      gt_fill<<<264, 256, 0, gt_stream>>>(c->src, c->bytes, tag, c->rank);
      CUDA_OK(cudaMemsetAsync(c->scratch, 0, c->bytes, gt_stream));
      CUDA_OK(gt_sync());
      CHECK_OK(mscclppBootstrapBarrier(c->comm));
      k_put_all<<<e->npeers, 32, 0, gt_stream>>>(e->d_chans, e->d_peers, c->rank, sizes[k], and_flush, e->d_rc);
      CUDA_OK(gt_sync());
      gt_check_rc(c, e->d_rc, e->npeers, and_flush ? "put-with-signal-and-flush" : "put-with-signal");
      check_slots(e, sizes[k], tag, and_flush ? "put-with-signal-and-flush" : "put-with-signal");
      CHECK_OK(mscclppBootstrapBarrier(c->comm));
    }
}

static void test_flush_rt(struct env* e) {
  struct gt_ctx* c = &e->c;
  const int iters = 2000;
  k_flush_rt<<<1, 1, 0, gt_stream>>>(&e->d_chans[e->peers[0]], iters, e->d_rc, e->d_ns);
  CUDA_OK(gt_sync());
  gt_check_rc(c, e->d_rc, 1, "flush round trips");
  unsigned long long ns = 0;
  CUDA_OK(gt_memcpy(&ns, e->d_ns, sizeof(ns), cudaMemcpyDeviceToHost));
  printf("gpu_portchan: rank %d proxy round trip (flush pushed -> observed) %.2f us\n", c->rank, ns / 1e3 / iters);
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

static void test_stress(struct env* e) {
  struct gt_ctx* c = &e->c;
  /* Every peer gets the same number of pushing threads: a multiple of npeers blocks. */
  const int blocks = 64 - 64 % e->npeers, threads = 2, pieces = 6;
  const uint64_t piece = 200;
  CHECK(blocks * threads * pieces * piece <= SLOT);
  gt_fill<<<264, 256, 0, gt_stream>>>(c->src, c->bytes, 77, c->rank);
  CUDA_OK(cudaMemsetAsync(c->scratch, 0, c->bytes, gt_stream));
  CUDA_OK(cudaMemsetAsync(e->d_rc, 0, sizeof(int) * GT_MAX_RANKS, gt_stream));
  CUDA_OK(gt_sync());
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  cudaStream_t waiter;
  CUDA_OK(cudaStreamCreateWithFlags(&waiter, cudaStreamNonBlocking));
  cudaFuncAttributes attr; /* load both kernels now: see the note at the top */
  CUDA_OK(cudaFuncGetAttributes(&attr, (const void*)k_stress));
  CUDA_OK(cudaFuncGetAttributes(&attr, (const void*)k_wait_peers));
  int per_peer = blocks * threads / e->npeers; /* signals each peer sends us */
  CHECK(blocks * threads % e->npeers == 0);
  /* The waits run beside the pushes (on another stream); STRESS_SERIAL=1 runs them after. */
  int serial = getenv("STRESS_SERIAL") != NULL;
  if (!serial) k_wait_peers<<<e->npeers, 1, 0, waiter>>>(e->d_chans, e->d_peers, per_peer, e->d_rc + GT_MAX_RANKS);
  k_stress<<<blocks, threads, 0, gt_stream>>>(e->d_chans, e->d_peers, e->npeers, c->rank, pieces, piece, e->d_rc);
  if (serial) k_wait_peers<<<e->npeers, 1, 0, gt_stream>>>(e->d_chans, e->d_peers, per_peer, e->d_rc + GT_MAX_RANKS);
  CUDA_OK(gt_sync());
  CUDA_OK(cudaStreamSynchronize(waiter));
  gt_check_rc(c, e->d_rc, 1, "FIFO stress pushes");
  gt_check_rc(c, e->d_rc + GT_MAX_RANKS, e->npeers, "FIFO stress waits");
  CHECK(blocks * threads * pieces * piece <= SLOT);
  /* Peer p's thread g wrote its pieces only when g % npeers is our index in p's peer list. */
  for (int g = 0; g < e->npeers; g++) {
    int p = e->peers[g], idx = c->rank < p ? c->rank : c->rank - 1;
    for (int t = idx; t < blocks * threads; t += e->npeers) {
      uint64_t off = (uint64_t)t * pieces * piece;
      unsigned long long bad = gt_count_bad(c->scratch + (uint64_t)p * SLOT + off, pieces * piece, off, 77, p);
      CHECK_MSG(bad == 0, "FIFO stress: rank %d thread %d's puts: %llu bytes wrong", p, t, bad);
    }
  }
  CUDA_OK(cudaStreamDestroy(waiter));
  CHECK_OK(mscclppProxyServiceCheck(e->proxy));
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 5000;
  struct env e;
  memset(&e, 0, sizeof(e));
  gt_init(&e.c);
  struct gt_ctx* c = &e.c;
  gt_setup(c, (size_t)c->nranks * SLOT < (64u << 20) ? (64u << 20) : (size_t)c->nranks * SLOT);
  CHECK_OK(mscclppProxyServiceCreate(c->comm, 64, &e.proxy));
  mscclppPortChannel chans[GT_MAX_RANKS];
  memset(chans, 0, sizeof(chans));
  for (int p = 0; p < c->nranks; p++) {
    if (p == c->rank) continue;
    int sem = -1;
    CHECK_OK(mscclppProxyServiceAddSemaphore(e.proxy, c->conn[p], &sem));
    CHECK_OK(mscclppPortChannelCreate(e.proxy, sem, c->peer_scratch[p], c->src_reg, p, &chans[p]));
    e.peers[e.npeers++] = p;
  }
  e.d_chans = gt_to_device(chans, c->nranks);
  e.d_peers = gt_to_device(e.peers, e.npeers);
  CUDA_OK(cudaMalloc((void**)&e.d_rc, sizeof(int) * 2 * GT_MAX_RANKS));
  CUDA_OK(cudaMalloc((void**)&e.d_ns, sizeof(*e.d_ns)));
  CHECK_OK(mscclppProxyServiceStart(e.proxy));
  test_pingpong(&e, iters);
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  test_put_all(&e);
  test_flush_rt(&e);
  test_stress(&e);
  CHECK_OK(mscclppProxyServiceStop(e.proxy));
  CHECK_OK(mscclppProxyServiceDestroy(e.proxy));
  CUDA_OK(cudaFree(e.d_chans));
  CUDA_OK(cudaFree(e.d_peers));
  CUDA_OK(cudaFree(e.d_rc));
  CUDA_OK(cudaFree(e.d_ns));
  gt_teardown(c);
  if (c->rank == 0) printf("gpu_portchan: %d ranks ok\n", c->nranks);
  return 0;
}
