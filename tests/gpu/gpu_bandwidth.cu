/* Put and get bandwidth from 4 KiB to 1 GiB: by SM (memory channels, 528 blocks x 512 threads split
 * among the peers) and by copy engine (puts: port channels through the proxy; gets: copies this
 * rank enqueues from the peer's memory mapped here, one stream per peer), to one peer (rank 0 ->
 * rank 1, or rank 0 getting from rank 1) and to all peers at once (every rank to / from every
 * other). Medians of many runs; the data of the largest size of every mode is checked. 77 without
 * enough GPUs.
 *
 *   gpu_bandwidth [MAX_BYTES] */
#include "gpu_common.h"

#define BLOCKS 528
#define THREADS 512

/* SM transfer of n bytes with each peer: put this rank's src[0, n) into the peer's scratch slot of
 * this rank, or get the peer's scratch slot of this rank into src[g * n, +n). */
__global__ void __launch_bounds__(THREADS) k_sm(const mscclppMemoryChannel* chans, const int* peers, int npeers,
                                                uint64_t slot, int rank, uint64_t n, int get) {
  int g = blockIdx.x % npeers;
  const mscclppMemoryChannel* ch = &chans[peers[g]];
  uint32_t tid = (blockIdx.x / npeers) * blockDim.x + threadIdx.x, nt = (gridDim.x / npeers) * blockDim.x;
  if (get)
    mscclppMemoryChannelGet(ch, (uint64_t)g * n, (uint64_t)rank * slot, n, tid, nt);
  else
    mscclppMemoryChannelPut(ch, (uint64_t)rank * slot, 0, n, tid, nt);
}

/* Copy-engine put of n bytes to each of np peers by one thread, then a flush of each: returns when
 * all are done. All puts go first: a flush occupies the proxy thread until its connection's copies
 * are done, so a flush pushed between two puts would serialize them. */
__global__ void k_ce(const mscclppPortChannel* chans, const int* peers, int np, uint64_t slot, int rank, uint64_t n,
                     int* rc) {
  int r = MSCCLPP_DEVICE_OK;
  for (int g = 0; g < np && r == MSCCLPP_DEVICE_OK; g++) r = mscclppPortChannelPut(&chans[peers[g]], (uint64_t)rank * slot, 0, n);
  for (int g = 0; g < np && r == MSCCLPP_DEVICE_OK; g++) r = mscclppPortChannelFlush(&chans[peers[g]]);
  if (r != MSCCLPP_DEVICE_OK) *rc = r;
}

struct bw {
  struct gt_ctx c;
  uint64_t slot;
  int peers[GT_MAX_RANKS], npeers, *d_peers, *d_rc;
  mscclppMemoryChannel* d_mem;
  mscclppPortChannel* d_port;
  mscclppProxyService_t proxy;
  char* peer_scratch[GT_MAX_RANKS];     /* [g]: peers[g]'s scratch, mapped here */
  cudaStream_t get_stream[GT_MAX_RANKS]; /* [g]: this rank's copy-engine gets from peers[g] */
  cudaEvent_t get_done[GT_MAX_RANKS];    /* [g]: recorded on get_stream[g] after its get */
};

enum mode { SM_PUT, SM_GET, CE_PUT, CE_GET, NMODES };
static const char* mode_name[NMODES] = {"SM put", "SM get", "CE put", "CE get"};

/* Copy-engine get of n bytes from each of the first np peers at once: peers[g]'s scratch slot of
 * this rank -> src[g * n, +n), each on its own stream (as each connection has its own proxy lane
 * for CE puts). All copies are enqueued first, then the joins. Every get stream waits for `start`
 * (recorded on gt_stream), and gt_stream waits for every get_done: whatever gt_stream records next
 * completes after all the gets. The source was written before the peer entered the barrier this
 * rank passed before calling (prepare); nothing writes it during the gets. */
static void ce_get(struct bw* b, int np, uint64_t n, cudaEvent_t start) {
  struct gt_ctx* c = &b->c;
  for (int g = 0; g < np; g++) {
    CUDA_OK(cudaStreamWaitEvent(b->get_stream[g], start, 0));
    const char* from = b->peer_scratch[g] + (uint64_t)c->rank * b->slot;
    CUDA_OK(gt_copy_ce(c->src + (uint64_t)g * n, from, n, b->get_stream[g]));
  }
  for (int g = 0; g < np; g++) {
    CUDA_OK(cudaEventRecord(b->get_done[g], b->get_stream[g]));
    CUDA_OK(cudaStreamWaitEvent(gt_stream, b->get_done[g], 0));
  }
}

/* Runs mode once with every active peer; returns the time in us (cudaEvents on gt_stream around the
 * kernel, or around the gets joined back into gt_stream). */
static double run_once(struct bw* b, int mode, int all, uint64_t n) {
  struct gt_ctx* c = &b->c;
  int np = all ? b->npeers : 1;
  const int* peers = all ? b->d_peers : b->d_peers + 0; /* rank 0's first peer is rank 1 */
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  CUDA_OK(cudaEventRecord(e0, gt_stream));
  if (mode == CE_PUT)
    k_ce<<<1, 1, 0, gt_stream>>>(b->d_port, peers, np, b->slot, c->rank, n, b->d_rc);
  else if (mode == CE_GET)
    ce_get(b, np, n, e0);
  else
    k_sm<<<BLOCKS / np * np, THREADS, 0, gt_stream>>>(b->d_mem, peers, np, b->slot, c->rank, n, mode == SM_GET);
  CUDA_OK(cudaEventRecord(e1, gt_stream));
  CUDA_OK(cudaEventSynchronize(e1));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
  CUDA_OK(cudaEventDestroy(e0));
  CUDA_OK(cudaEventDestroy(e1));
  return ms * 1e3;
}

/* Pattern tags: what a rank's puts send (its src), and what a rank leaves in its scratch for the
 * gets of its peers. Different tags: a get that did not happen leaves the put pattern (or zeros). */
#define TAG_PUT 3
#define TAG_GET 4

/* The data of the last run: a put of rank p lands in its peer's scratch slot p and must hold p's put
 * pattern; the get of this rank from peer g lands in src[g * n, +n) and must hold the pattern that
 * peer wrote (prepare). */
static void verify(struct bw* b, int mode, int all, uint64_t n) {
  struct gt_ctx* c = &b->c;
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  if (mode == SM_GET || mode == CE_GET) {
    if (all || c->rank == 0)
      for (int g = 0; g < (all ? b->npeers : 1); g++) {
        unsigned long long bad = gt_count_bad(c->src + (uint64_t)g * n, n, 0, TAG_GET, b->peers[g]);
        CHECK_MSG(bad == 0, "%s of %llu bytes from rank %d: %llu wrong", mode_name[mode], (unsigned long long)n, b->peers[g], bad);
      }
  } else {
    for (int g = 0; g < b->npeers; g++) {
      int p = b->peers[g];
      if (!all && !(p == 0 && c->rank == 1)) continue;
      unsigned long long bad = gt_count_bad(c->scratch + (uint64_t)p * b->slot, n, 0, TAG_PUT, p);
      CHECK_MSG(bad == 0, "%s of %llu bytes from rank %d: %llu wrong", mode_name[mode], (unsigned long long)n, p, bad);
    }
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

/* Prepares the data of one mode: src is zeroed, then src[0, slot) holds this rank's put pattern.
 * A put mode zeroes the scratch, so only the puts can bring their senders' patterns there; a get
 * mode writes this rank's get pattern into its scratch slot of every peer (what that peer gets).
 * Ordering: the fills are done (stream synchronized, so the writes are visible to the peers' reads
 * through the mapping) before this rank enters the barrier that every get of a peer comes after. */
static void prepare(struct bw* b, int mode) {
  struct gt_ctx* c = &b->c;
  CUDA_OK(cudaMemsetAsync(c->src, 0, c->bytes, gt_stream));
  gt_fill<<<528, 512, 0, gt_stream>>>(c->src, b->slot, TAG_PUT, c->rank);
  CUDA_OK(cudaMemsetAsync(c->scratch, 0, c->bytes, gt_stream));
  if (mode == SM_GET || mode == CE_GET)
    for (int g = 0; g < b->npeers; g++)
      gt_fill<<<528, 512, 0, gt_stream>>>(c->scratch + (uint64_t)b->peers[g] * b->slot, b->slot, TAG_GET, c->rank);
  CUDA_OK(gt_sync());
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

static void measure(struct bw* b, int mode, int all, uint64_t max) {
  struct gt_ctx* c = &b->c;
  int active = all || c->rank == 0;
  double t[64];
  for (uint64_t n = 4096; n <= max; n *= 4) {
    int iters = n <= (1u << 20) ? 50 : n <= (64u << 20) ? 20 : 7;
    for (int i = 0; i < iters + 2; i++) {
      CHECK_OK(mscclppBootstrapBarrier(c->comm)); /* every active rank starts together */
      if (active) t[i < 2 ? 0 : i - 2] = run_once(b, mode, all, n);
    }
    gt_check_rc(c, b->d_rc, 1, mode_name[mode]);
    if (c->rank == 0) {
      double us = gt_median(t, iters);
      double gbs = (double)n * (all ? b->npeers : 1) / (us * 1e3);
      printf("gpu_bandwidth: %-7s %-9s %10llu B  %10.1f us  %7.1f GB/s per GPU\n", mode_name[mode],
             all ? "all peers" : "one peer", (unsigned long long)n, us, gbs);
    }
    if (n * 4 > max) verify(b, mode, all, n);
  }
}

int main(int argc, char** argv) {
  uint64_t max = argc > 1 ? strtoull(argv[1], NULL, 0) : (1ull << 30);
  struct bw b;
  memset(&b, 0, sizeof(b));
  gt_init(&b.c);
  struct gt_ctx* c = &b.c;
  b.slot = max < 4096 ? 4096 : max;
  gt_setup(c, b.slot * (uint64_t)c->nranks);
  mscclppMemoryChannel mem[GT_MAX_RANKS];
  mscclppPortChannel port[GT_MAX_RANKS];
  memset(mem, 0, sizeof(mem));
  memset(port, 0, sizeof(port));
  CHECK_OK(mscclppProxyServiceCreate(c->comm, 0, &b.proxy));
  for (int p = 0; p < c->nranks; p++) {
    if (p == c->rank) continue;
    CHECK_OK(mscclppMemoryChannelCreate(c->comm, c->conn[p], c->peer_scratch[p], c->src_reg, c->scratch, p, &mem[p]));
    int sem = -1;
    CHECK_OK(mscclppProxyServiceAddSemaphore(b.proxy, c->conn[p], &sem));
    CHECK_OK(mscclppPortChannelCreate(b.proxy, sem, c->peer_scratch[p], c->src_reg, p, &port[p]));
    CHECK_OK(mscclppRegMemInfo(c->peer_scratch[p], (void**)&b.peer_scratch[b.npeers], NULL, NULL));
    CHECK_MSG(b.peer_scratch[b.npeers] != NULL, "rank %d: rank %d's scratch is not mapped here", c->rank, p);
    CUDA_OK(cudaStreamCreateWithFlags(&b.get_stream[b.npeers], cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreateWithFlags(&b.get_done[b.npeers], cudaEventDisableTiming));
    b.peers[b.npeers++] = p;
  }
  b.d_mem = gt_to_device(mem, c->nranks);
  b.d_port = gt_to_device(port, c->nranks);
  b.d_peers = gt_to_device(b.peers, b.npeers);
  CUDA_OK(cudaMalloc((void**)&b.d_rc, sizeof(int)));
  CUDA_OK(cudaMemsetAsync(b.d_rc, 0, sizeof(int), gt_stream));
  CHECK_OK(mscclppProxyServiceStart(b.proxy));
  for (int mode = 0; mode < NMODES; mode++)
    for (int all = 0; all < 2; all++) {
      prepare(&b, mode);
      measure(&b, mode, all, max);
    }
  CHECK_OK(mscclppProxyServiceDestroy(b.proxy));
  for (int g = 0; g < b.npeers; g++) {
    CUDA_OK(cudaStreamDestroy(b.get_stream[g]));
    CUDA_OK(cudaEventDestroy(b.get_done[g]));
  }
  CUDA_OK(cudaFree(b.d_mem));
  CUDA_OK(cudaFree(b.d_port));
  CUDA_OK(cudaFree(b.d_peers));
  CUDA_OK(cudaFree(b.d_rc));
  gt_teardown(c);
  if (c->rank == 0) printf("gpu_bandwidth: %d ranks ok\n", c->nranks);
  return 0;
}
