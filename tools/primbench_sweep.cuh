/* primbench_sweep.cuh - mscclpp-primbench --sweep: put and get bandwidth of the channels from 4 KiB
 * to --bytes, by SM (memory channels) and by copy engine (puts: port channels through the proxy;
 * gets: copies this rank enqueues from the peer's scratch mapped here, one stream per peer), one
 * peer (rank 0 -> 1, or rank 0 getting from 1; the others idle) and all peers at once (every rank
 * to / from every other rank at the same time; the figure is rank 0's bytes moved over its time).
 * Medians of --runs runs. Ends by checking that an all-peers SM put delivered every rank's bytes (a
 * wrong byte fails the tool); the data of the gets is checked by the gpu_bandwidth test.
 *
 * Layout: rank r's all-peers puts land in peer q's scratch at r * bytes; gets write into the
 * getter's own src at (1 + slot) * bytes (src [0, bytes) keeps the pattern the puts send). Both
 * buffers are nranks * bytes (mscclpp-primbench sizes them so with --sweep). */
#ifndef MPP_TOOLS_PRIMBENCH_SWEEP_CUH_
#define MPP_TOOLS_PRIMBENCH_SWEEP_CUH_

/* Channels of one rank to each of its peers, in slot order (peers ascending, self skipped), and
 * what its copy-engine gets use. */
struct sweep {
  int npeers, peers[GT_MAX_RANKS];
  mscclppMemoryChannel* d_mem;           /* [slot] */
  mscclppPortChannel* d_port;            /* [slot] */
  const char* peer_scratch[GT_MAX_RANKS]; /* [slot]: the peer's scratch, mapped here */
  cudaStream_t get_stream[GT_MAX_RANKS];  /* [slot]: this rank's copy-engine gets from the peer */
  cudaEvent_t get_done[GT_MAX_RANKS];     /* [slot]: recorded on get_stream after its get */
};

/* SM put (get = 0) or get to/from every listed peer at once: the grid's blocks are dealt to the
 * peers in turn. One peer: slots = 1. Puts land at put_off in the peer's scratch; what is got from
 * slot s lands at (1 + s) * stride in the own src (stride: the sweep's largest size, so no get
 * overwrites the pattern the puts send). */
__global__ void __launch_bounds__(THREADS) k_sm_all(const mscclppMemoryChannel* ch, int slots, int get, uint64_t put_off,
                                                    uint64_t stride, uint64_t n) {
  int s = (int)blockIdx.x % slots;
  uint32_t nblk = gridDim.x / (uint32_t)slots, blk = blockIdx.x / (uint32_t)slots;
  if (blk >= nblk) return;
  uint32_t tid = blk * blockDim.x + threadIdx.x, nt = nblk * blockDim.x;
  if (get) mscclppMemoryChannelGet(&ch[s], (uint64_t)(1 + s) * stride, 0, n, tid, nt);
  else mscclppMemoryChannelPut(&ch[s], put_off, 0, n, tid, nt);
}

/* Copy-engine put to every listed peer: one thread per port channel pushes the put, then waits
 * for its flush. */
__global__ void k_ce_all(const mscclppPortChannel* ch, int slots, uint64_t put_off, uint64_t n, int* rc) {
  int s = (int)threadIdx.x;
  if (s >= slots) return;
  int r = mscclppPortChannelPut(&ch[s], put_off, 0, n);
  if (r == MSCCLPP_DEVICE_OK) r = mscclppPortChannelFlush(&ch[s]);
  if (r != MSCCLPP_DEVICE_OK) *rc = r;
}

/* Copy-engine get from every listed peer at once, the counterpart of k_sm_all's get: the peer's
 * scratch [0, n) -> (1 + slot) * stride in the own src, each slot on its own stream (as CE puts
 * have one proxy lane per connection). All copies are enqueued first, then the joins: every get
 * stream waits for `start` (recorded on gt_stream) and gt_stream for every get_done, so what
 * gt_stream records next completes after all the gets. As for SM gets, whatever the peer wrote
 * there was done before it entered the barrier that every run starts with. */
static void sweep_ce_get(struct pb* b, const struct sweep* w, int slots, uint64_t stride, uint64_t n,
                         cudaEvent_t start) {
  for (int s = 0; s < slots; s++) {
    CUDA_OK(cudaStreamWaitEvent(w->get_stream[s], start, 0));
    CUDA_OK(gt_copy_ce(b->c.src + (uint64_t)(1 + s) * stride, w->peer_scratch[s], n, w->get_stream[s]));
  }
  for (int s = 0; s < slots; s++) {
    CUDA_OK(cudaEventRecord(w->get_done[s], w->get_stream[s]));
    CUDA_OK(cudaStreamWaitEvent(gt_stream, w->get_done[s], 0));
  }
}

/* Memory and port channels to every peer (both sides make them in the same order per pair), the
 * peers' scratch as mapped here, and a stream and event per peer for copy-engine gets. */
static void sweep_setup(struct pb* b, struct sweep* w) {
  struct gt_ctx* c = &b->c;
  mscclppMemoryChannel mem[GT_MAX_RANKS];
  mscclppPortChannel port[GT_MAX_RANKS];
  w->npeers = 0;
  for (int q = 0; q < c->nranks; q++) {
    if (q == c->rank) continue;
    int s = w->npeers++, sem = -1;
    w->peers[s] = q;
    CHECK_OK(mscclppMemoryChannelCreate(c->comm, c->conn[q], c->peer_scratch[q], c->src_reg, c->scratch, 100 + q,
                                        &mem[s]));
    CHECK_OK(mscclppProxyServiceAddSemaphore(b->proxy, c->conn[q], &sem));
    CHECK_OK(mscclppPortChannelCreate(b->proxy, sem, c->peer_scratch[q], c->src_reg, 100 + q, &port[s]));
    void* mapped = NULL;
    CHECK_OK(mscclppRegMemInfo(c->peer_scratch[q], &mapped, NULL, NULL));
    CHECK_MSG(mapped != NULL, "rank %d: rank %d's scratch is not mapped here", c->rank, q);
    w->peer_scratch[s] = (const char*)mapped;
    CUDA_OK(cudaStreamCreateWithFlags(&w->get_stream[s], cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreateWithFlags(&w->get_done[s], cudaEventDisableTiming));
  }
  w->d_mem = gt_to_device(mem, w->npeers);
  w->d_port = gt_to_device(port, w->npeers);
}

/* Median GB/s of rank 0 for one kind (0 SM put, 1 SM get, 2 copy-engine put, 3 copy-engine get) at
 * n bytes per peer; all: every rank to / from every peer, else rank 0 to / from rank 1 alone (slot 0
 * of rank 0 is rank 1). */
static double sweep_one(struct pb* b, const struct sweep* w, int kind, int all, uint64_t n) {
  double v[64];
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  int slots = all ? w->npeers : 1, active = all || b->c.rank == 0;
  uint64_t put_off = (uint64_t)b->c.rank * b->bytes;
  for (int run = -1; run < b->runs; run++) { /* run -1 warms up */
    CHECK_OK(mscclppBootstrapBarrier(b->c.comm));
    if (!active) continue;
    CUDA_OK(cudaEventRecord(e0, gt_stream));
    if (kind == 2) k_ce_all<<<1, 32, 0, gt_stream>>>(w->d_port, slots, put_off, n, b->d_rc);
    else if (kind == 3) sweep_ce_get(b, w, slots, b->bytes, n, e0);
    else k_sm_all<<<BLOCKS / slots * slots, THREADS, 0, gt_stream>>>(w->d_mem, slots, kind, put_off, b->bytes, n);
    CUDA_OK(cudaEventRecord(e1, gt_stream));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    if (run >= 0) v[run] = (double)n * slots / (ms * 1e6);
  }
  gt_check_rc(&b->c, b->d_rc, 1, "bandwidth sweep");
  CUDA_OK(cudaEventDestroy(e0));
  CUDA_OK(cudaEventDestroy(e1));
  return active ? gt_median(v, b->runs) : 0;
}

/* Prints the first wrong bytes of peer q's put (where, what, what was expected). */
static void sweep_show_bad(struct pb* b, const char* at, int q) {
  unsigned char* h = (unsigned char*)malloc(b->bytes);
  CHECK(h != NULL);
  CUDA_OK(gt_memcpy(h, at, b->bytes, cudaMemcpyDeviceToHost));
  for (uint64_t i = 0, shown = 0; i < b->bytes && shown < 4; i++)
    if (h[i] != gt_byte(1, q, i))
      printf("rank %d: byte %llu of rank %d's put is %u, not %u\n", b->c.rank, (unsigned long long)i, q, h[i],
             gt_byte(1, q, i)), shown++;
  free(h);
}

/* Every peer's all-peers put must have landed in this rank's scratch. */
static void sweep_verify(struct pb* b, const struct sweep* w) {
  (void)sweep_one(b, w, 0, 1, b->bytes);
  CHECK_OK(mscclppBootstrapBarrier(b->c.comm));
  for (int s = 0; s < w->npeers; s++) {
    int q = w->peers[s];
    const char* at = b->c.scratch + (uint64_t)q * b->bytes;
    unsigned long long bad = gt_count_bad(at, b->bytes, 0, 1, q);
    if (bad) sweep_show_bad(b, at, q);
    CHECK_MSG(bad == 0, "rank %d: %llu wrong bytes of rank %d's all-peers SM put", b->c.rank, bad, q);
  }
  CHECK_OK(mscclppBootstrapBarrier(b->c.comm));
}

static void sweep_report(struct pb* b) {
  struct sweep w;
  sweep_setup(b, &w);
  /* The pattern again: the latency rows before unpack packets into src. */
  gt_fill<<<528, 512, 0, gt_stream>>>(b->c.src, b->c.bytes, 1, b->c.rank);
  CUDA_OK(gt_sync());
  CHECK_OK(mscclppBootstrapBarrier(b->c.comm));
  if (b->c.rank == 0) {
    printf("\nbandwidth sweep, GB/s (median of %d runs): one peer = rank 0 to/from 1 alone; all = rank 0's share\n"
           "while every one of %d ranks moves the same bytes to (put) or from (get) each of its %d peers at once\n",
           b->runs, b->c.nranks, w.npeers);
    printf("%12s %10s %10s %10s %10s %10s %10s %10s %10s\n", "bytes/peer", "SM put", "SM get", "CE put", "CE get",
           "SM put all", "SM get all", "CE put all", "CE get all");
  }
  /* Columns: the 4 kinds to one peer, then the same 4 with all peers. */
  for (uint64_t n = 4096; n <= b->bytes; n = n * 4 > b->bytes && n < b->bytes ? b->bytes : n * 4) {
    double r[8];
    for (int k = 0; k < 8; k++) r[k] = sweep_one(b, &w, k % 4, k / 4, n);
    if (b->c.rank == 0)
      printf("%12llu %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f\n", (unsigned long long)n, r[0], r[1],
             r[2], r[3], r[4], r[5], r[6], r[7]);
  }
  sweep_verify(b, &w);
  for (int s = 0; s < w.npeers; s++) {
    CUDA_OK(cudaStreamDestroy(w.get_stream[s]));
    CUDA_OK(cudaEventDestroy(w.get_done[s]));
  }
  CUDA_OK(cudaFree(w.d_mem));
  CUDA_OK(cudaFree(w.d_port));
}

#endif /* MPP_TOOLS_PRIMBENCH_SWEEP_CUH_ */
