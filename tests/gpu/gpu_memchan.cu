/* Memory channels between GPU ranks, every pair at once: signal/wait ping-pong (correctness and
 * round-trip time), many blocks signalling and waiting on one semaphore, put and get of odd sizes and
 * alignments from many blocks to all peers at once, element read/write, LL16 and LL8 packets over
 * 100 launches of one double-buffered scratch with fresh flags, and a wait that times out and names
 * rank, peer and channel. 77 without enough GPUs.
 *
 *   gpu_memchan [PINGPONG_ITERS] */
#include "gpu_common.h"

#define SLOT (4u << 20) /* each peer's part of a scratch buffer */

__global__ void k_pingpong(const mscclppMemoryChannel* ch, int first, int iters, int* rc, unsigned long long* ns) {
  uint64_t t0 = gt_ns();
  for (int i = 0; i < iters; i++) {
    if (first) mscclppMemoryChannelSignal(ch);
    int r = mscclppMemoryChannelWait(ch);
    if (r != MSCCLPP_DEVICE_OK) {
      *rc = r;
      return;
    }
    if (!first) mscclppMemoryChannelSignal(ch);
  }
  *ns = gt_ns() - t0;
  *rc = MSCCLPP_DEVICE_OK;
}

__global__ void k_signal_blocks(const mscclppMemoryChannel* ch, int per_block) {
  if (threadIdx.x != 0) return;
  for (int i = 0; i < per_block; i++) {
    if (i & 1)
      mscclppMemoryChannelRelaxedSignal(ch);
    else
      mscclppMemoryChannelSignal(ch);
  }
}

/* Every block's thread 0 waits per_block times; rc[block]. */
__global__ void k_wait_blocks(const mscclppMemoryChannel* ch, int per_block, int* rc) {
  if (threadIdx.x != 0) return;
  int r = MSCCLPP_DEVICE_OK;
  for (int i = 0; i < per_block && r == MSCCLPP_DEVICE_OK; i++) r = mscclppMemoryChannelWait(ch);
  rc[blockIdx.x] = r;
}

__global__ void k_poll(const mscclppMemoryChannel* ch, int* out) { *out = mscclppMemoryChannelPoll(ch); }

/* Blocks are split evenly among the peers; each group puts into its peer, then every block
 * signals once. chans[p] for peer p; peers[] lists the peers. */
__global__ void k_put_all(const mscclppMemoryChannel* chans, const int* peers, int npeers, uint64_t dst_off,
                          uint64_t src_off, uint64_t n, int get) {
  int g = blockIdx.x % npeers, groups = gridDim.x / npeers;
  const mscclppMemoryChannel* ch = &chans[peers[g]];
  uint32_t tid = (blockIdx.x / npeers) * blockDim.x + threadIdx.x, nt = groups * blockDim.x;
  if (get)
    mscclppMemoryChannelGet(ch, src_off, dst_off, n, tid, nt);
  else
    mscclppMemoryChannelPut(ch, dst_off, src_off, n, tid, nt);
  __syncthreads();
  if (threadIdx.x == 0 && !get) mscclppMemoryChannelSignal(ch);
}

/* Block g waits `count` times on peer peers[g]'s channel. */
__global__ void k_wait_peers(const mscclppMemoryChannel* chans, const int* peers, int count, int* rc) {
  if (threadIdx.x != 0) return;
  int r = MSCCLPP_DEVICE_OK;
  for (int i = 0; i < count && r == MSCCLPP_DEVICE_OK; i++) r = mscclppMemoryChannelWait(&chans[peers[blockIdx.x]]);
  rc[blockIdx.x] = r;
}

/* Block g sends n bytes of src as packets into peer g's scratch at pkt_off(rank) and unpacks the
 * peer's packets from our scratch at pkt_off(peer) into src + out_off + g * n. */
__global__ void k_ll(const mscclppMemoryChannel* chans, const int* peers, int rank, int ll16, uint32_t flag,
                     uint64_t half_off, uint64_t per_rank, uint64_t n, uint64_t out_off, int* rc) {
  int p = peers[blockIdx.x];
  const mscclppMemoryChannel* ch = &chans[p];
  if (ll16)
    mscclppMemoryChannelPutPacketsLL16(ch, half_off + rank * per_rank, 0, n, flag, threadIdx.x, blockDim.x);
  else
    mscclppMemoryChannelPutPacketsLL8(ch, half_off + rank * per_rank, 0, n, flag, threadIdx.x, blockDim.x);
  int r = ll16 ? mscclppMemoryChannelUnpackPacketsLL16(ch, out_off + blockIdx.x * n, half_off + p * per_rank, n, flag,
                                                       threadIdx.x, blockDim.x)
               : mscclppMemoryChannelUnpackPacketsLL8(ch, out_off + blockIdx.x * n, half_off + p * per_rank, n, flag,
                                                      threadIdx.x, blockDim.x);
  if (r != MSCCLPP_DEVICE_OK) rc[blockIdx.x] = r;
}

__global__ void k_rw(const mscclppMemoryChannel* ch, int rank, uint64_t off) {
  mscclppMemoryChannelWrite64(ch, off, 0x1111111111111111ull * (rank + 1));
  mscclppMemoryChannelWrite128(ch, off + 16, make_uint4(rank, rank + 1, rank + 2, rank + 3));
  mscclppMemoryChannelFlush(ch);
  mscclppMemoryChannelSignal(ch);
}
__global__ void k_rw_check(const mscclppMemoryChannel* ch, int peer, uint64_t off, int* ok) {
  int r = mscclppMemoryChannelWait(ch);
  /* Our own scratch, read through the peer's view of it is not possible: read ours directly. */
  const char* mine = (const char*)ch->packetBuffer;
  uint64_t v = *(const uint64_t*)(mine + off);
  uint4 w = *(const uint4*)(mine + off + 16);
  *ok = r == MSCCLPP_DEVICE_OK && v == 0x1111111111111111ull * (peer + 1) && w.x == (unsigned)peer && w.w == (unsigned)peer + 3;
}

struct env {
  struct gt_ctx c;
  mscclppMemoryChannel* d_chans;
  int *d_peers, npeers, *d_rc;
};

static void test_pingpong(struct env* e, int iters) {
  struct gt_ctx* c = &e->c;
  if (c->rank > 1) return;
  int peer = 1 - c->rank;
  unsigned long long* d_ns;
  CUDA_OK(cudaMalloc((void**)&d_ns, sizeof(*d_ns)));
  k_pingpong<<<1, 1, 0, gt_stream>>>(&e->d_chans[peer], c->rank == 0, iters, e->d_rc, d_ns);
  CUDA_OK(gt_sync());
  gt_check_rc(c, e->d_rc, 1, "ping-pong");
  unsigned long long ns = 0;
  CUDA_OK(gt_memcpy(&ns, d_ns, sizeof(ns), cudaMemcpyDeviceToHost));
  if (c->rank == 0) printf("gpu_memchan: signal+wait round trip %.3f us (%d iterations)\n", ns / 1e3 / iters, iters);
  CUDA_OK(cudaFree(d_ns));
}

/* Rank 0: 64 blocks x 100 signals to rank 1; rank 1: 16 blocks x 400 waits, then poll finds none. */
static void test_many_blocks(struct env* e) {
  struct gt_ctx* c = &e->c;
  if (c->rank == 0) k_signal_blocks<<<64, 32, 0, gt_stream>>>(&e->d_chans[1], 100);
  if (c->rank == 1) {
    k_wait_blocks<<<16, 32, 0, gt_stream>>>(&e->d_chans[0], 400, e->d_rc);
    CUDA_OK(gt_sync());
    gt_check_rc(c, e->d_rc, 16, "many-block waits");
    k_poll<<<1, 1, 0, gt_stream>>>(&e->d_chans[0], e->d_rc);
    int polled = -1;
    CUDA_OK(gt_memcpy(&polled, e->d_rc, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_MSG(polled == 0, "poll found a signal beyond the 6400 sent");
  }
  CUDA_OK(gt_sync());
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

/* Every rank puts into every peer's scratch slot (its rank's) with 8 blocks per peer, then checks
 * what the peers put into its own scratch; then gets its data back from every peer. */
static void test_put_get(struct env* e) {
  struct gt_ctx* c = &e->c;
  static const uint64_t cases[][3] = {{1, 0, 0},    {15, 1, 3},      {4096, 0, 0},        {4103, 8, 0},
                                      {65536, 4, 12}, {1 << 20, 16, 16}, {(1 << 20) + 3, 5, 9}, {3 << 20, 0, 0}};
  int blocks = 8 * e->npeers;
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    uint64_t n = cases[k][0], src_off = cases[k][1], dst_mis = cases[k][2];
    int tag = (int)k + 1;
    gt_fill<<<264, 256, 0, gt_stream>>>(c->src, c->bytes, tag, c->rank);
    CUDA_OK(cudaMemsetAsync(c->scratch, 0, c->bytes, gt_stream));
    CUDA_OK(gt_sync());
    CHECK_OK(mscclppBootstrapBarrier(c->comm));
    k_put_all<<<blocks, 256, 0, gt_stream>>>(e->d_chans, e->d_peers, e->npeers, (uint64_t)c->rank * SLOT + dst_mis, src_off, n, 0);
    k_wait_peers<<<e->npeers, 32, 0, gt_stream>>>(e->d_chans, e->d_peers, 8, e->d_rc);
    CUDA_OK(gt_sync());
    gt_check_rc(c, e->d_rc, e->npeers, "put waits");
    for (int p = 0; p < c->nranks; p++) {
      if (p == c->rank) continue;
      char* at = c->scratch + (uint64_t)p * SLOT + dst_mis;
      unsigned long long bad = gt_count_bad(at, n, src_off, tag, p);
      CHECK_MSG(bad == 0, "put of %llu bytes (src +%llu, dst +%llu) from rank %d: %llu bytes wrong", (unsigned long long)n,
                (unsigned long long)src_off, (unsigned long long)dst_mis, p, bad);
      char edge[2] = {0, 0}; /* the bytes around the range (the one before it when inside the buffer) */
      if (at > c->scratch) CUDA_OK(gt_memcpy(&edge[0], at - 1, 1, cudaMemcpyDeviceToHost));
      CUDA_OK(gt_memcpy(&edge[1], at + n, 1, cudaMemcpyDeviceToHost));
      CHECK_MSG(edge[0] == 0 && edge[1] == 0, "put of %llu bytes from rank %d wrote outside its range", (unsigned long long)n, p);
    }
    CHECK_OK(mscclppBootstrapBarrier(c->comm)); /* every peer has checked before anyone reads back */
    /* get: every peer's copy of our data -> src + bytes/2 (block groups per peer, disjoint) */
    if (n <= (1 << 20) + 3) {
      for (int g = 0; g < e->npeers; g++) {
        int p;
        CUDA_OK(gt_memcpy(&p, &e->d_peers[g], sizeof(int), cudaMemcpyDeviceToHost));
        uint64_t local = c->bytes / 2 + (uint64_t)g * ((2u << 20) + 64) + src_off;
        k_put_all<<<8, 256, 0, gt_stream>>>(e->d_chans, &e->d_peers[g], 1, (uint64_t)c->rank * SLOT + dst_mis, local, n, 1);
        CUDA_OK(gt_sync());
        unsigned long long bad = gt_count_bad(c->src + local, n, src_off, tag, c->rank);
        CHECK_MSG(bad == 0, "get of %llu bytes from rank %d: %llu bytes wrong", (unsigned long long)n, p, bad);
      }
    }
    CHECK_OK(mscclppBootstrapBarrier(c->comm));
  }
}

static void test_read_write(struct env* e) {
  struct gt_ctx* c = &e->c;
  if (c->rank > 1) return;
  int peer = 1 - c->rank;
  k_rw<<<1, 1, 0, gt_stream>>>(&e->d_chans[peer], c->rank, 64);
  k_rw_check<<<1, 1, 0, gt_stream>>>(&e->d_chans[peer], peer, 64, e->d_rc);
  int ok = 0;
  CUDA_OK(gt_memcpy(&ok, e->d_rc, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_MSG(ok == 1, "element write from rank %d not seen", peer);
}

/* 100 launches, each exchanging packets with every peer through one half of the scratch. */
static void test_packets(struct env* e, int ll16) {
  struct gt_ctx* c = &e->c;
  const uint64_t n = 10000 + 3;
  uint64_t per_rank = ll16 ? mscclppLL16Bytes(n) : mscclppLL8Bytes(n);
  uint64_t half = per_rank * (uint64_t)c->nranks;
  uint32_t counter = 0;
  CUDA_OK(cudaMemsetAsync(c->scratch, 0, 2 * half, gt_stream));
  CUDA_OK(cudaMemsetAsync(e->d_rc, 0, sizeof(int) * 16, gt_stream));
  CUDA_OK(gt_sync());
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  for (int launch = 0; launch < 100; launch++) {
    uint32_t flag = mscclppPacketFlagNext(&counter);
    gt_fill<<<16, 256, 0, gt_stream>>>(c->src, n, 1000 + launch, c->rank);
    k_ll<<<e->npeers, 512, 0, gt_stream>>>(e->d_chans, e->d_peers, c->rank, ll16, flag, (uint64_t)(launch % 2) * half, per_rank, n,
                             c->bytes / 2, e->d_rc);
    CUDA_OK(gt_sync());
    gt_check_rc(c, e->d_rc, e->npeers, ll16 ? "LL16 unpack" : "LL8 unpack");
    for (int g = 0; g < e->npeers; g++) {
      int p;
      CUDA_OK(gt_memcpy(&p, &e->d_peers[g], sizeof(int), cudaMemcpyDeviceToHost));
      unsigned long long bad = gt_count_bad(c->src + c->bytes / 2 + (uint64_t)g * n, n, 0, 1000 + launch, p);
      CHECK_MSG(bad == 0, "%s launch %d from rank %d: %llu bytes wrong", ll16 ? "LL16" : "LL8", launch, p, bad);
    }
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

/* Rank 1 waits for a signal rank 0 never sends: a bounded wait, reported with rank, peer, channel. */
static void test_timeout(struct env* e) {
  struct gt_ctx* c = &e->c;
  if (c->rank == 1) {
    mscclppMemoryChannel ch;
    CUDA_OK(gt_memcpy(&ch, &e->d_chans[0], sizeof(ch), cudaMemcpyDeviceToHost));
    ch.sem.wait.timeoutNs = 200000000ull;
    mscclppMemoryChannel* d = gt_to_device(&ch, 1);
    k_wait_blocks<<<1, 1, 0, gt_stream>>>(d, 1, e->d_rc);
    CUDA_OK(gt_sync());
    int rc = -1;
    CUDA_OK(gt_memcpy(&rc, e->d_rc, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_MSG(rc == MSCCLPP_DEVICE_TIMEOUT, "wait returned %d, expected a timeout", rc);
    mscclppDeviceError err;
    CHECK_OK(mscclppCommGetDeviceError(c->comm, &err));
    CHECK(err.flag == 1 && err.rank == 1 && err.peer == 0 && err.channel == 0 && err.what == mscclppWaitSemaphore);
    char text[256];
    CHECK_OK(mscclppDeviceErrorString(&err, text, sizeof(text)));
    printf("gpu_memchan: expected timeout: %s\n", text);
    CHECK_OK(mscclppCommClearDeviceError(c->comm));
    CUDA_OK(cudaFree(d));
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 10000;
  struct env e;
  memset(&e, 0, sizeof(e));
  gt_init(&e.c);
  struct gt_ctx* c = &e.c;
  gt_setup(c, (size_t)c->nranks * SLOT < (64u << 20) ? (64u << 20) : (size_t)c->nranks * SLOT);
  mscclppMemoryChannel chans[GT_MAX_RANKS];
  int peers[GT_MAX_RANKS];
  memset(chans, 0, sizeof(chans));
  for (int p = 0; p < c->nranks; p++) {
    if (p == c->rank) continue;
    /* channel id = the peer's rank; packets from the peer land in our scratch */
    CHECK_OK(mscclppMemoryChannelCreate(c->comm, c->conn[p], c->peer_scratch[p], c->src_reg, c->scratch, p, &chans[p]));
    peers[e.npeers++] = p;
  }
  e.d_chans = gt_to_device(chans, c->nranks);
  e.d_peers = gt_to_device(peers, e.npeers);
  CUDA_OK(cudaMalloc((void**)&e.d_rc, sizeof(int) * 256));
  test_pingpong(&e, iters);
  test_many_blocks(&e);
  test_put_get(&e);
  test_read_write(&e);
  test_packets(&e, 1);
  test_packets(&e, 0);
  test_timeout(&e);
  CUDA_OK(cudaFree(e.d_chans));
  CUDA_OK(cudaFree(e.d_peers));
  CUDA_OK(cudaFree(e.d_rc));
  gt_teardown(c);
  if (c->rank == 0) printf("gpu_memchan: %d ranks ok\n", c->nranks);
  return 0;
}
