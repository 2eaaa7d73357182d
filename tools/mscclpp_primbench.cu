/* mscclpp-primbench - measures the channel primitives between ranks 0 and 1 against raw hardware
 * baselines measured in the same run, and prints a table: each figure the median of RUNS runs,
 * beside the raw figure, the reference of shared/reference/hardware.md and the target. --sweep adds
 * put/get bandwidth from 4 KiB to B, one peer and all peers at once (primbench_sweep.cuh).
 *
 *   mscclpp-run -n N mscclpp-primbench [--runs R] [--iters I] [--bytes B] [--sweep]
 *
 * On one rank it measures what one GPU can: the ping-pongs between two blocks of the GPU (raw
 * flags, semaphores with and without release/acquire) and the system-scope fence a release costs.
 * Exit 0 (whatever the targets say; the table says PASS/MISS), 77 without a GPU per rank. */
#include "gpu_common.h"

#define BLOCKS 528
#define THREADS 512

/* ---- kernels --------------------------------------------------------------------------------- */

/* Raw ping-pong: volatile stores into the peer's flag, volatile loads of ours. */
__global__ void k_raw_pingpong(volatile uint64_t* mine, volatile uint64_t* theirs, int first, int iters, uint64_t base,
                               unsigned long long* ns) {
  uint64_t t0 = gt_ns();
  for (int i = 1; i <= iters; i++) {
    uint64_t v = base + (uint64_t)i;
    if (first) *theirs = v;
    while (*mine != v) {
    }
    if (!first) *theirs = v;
  }
  *ns = gt_ns() - t0;
}

/* relaxed: relaxedSignal/relaxedWait (counting only, no data ordered). */
__global__ void k_mem_pingpong(const mscclppMemoryChannel* ch, int first, int relaxed, int iters, int* rc,
                               unsigned long long* ns) {
  uint64_t t0 = gt_ns();
  int r = MSCCLPP_DEVICE_OK;
  for (int i = 0; i < iters && r == MSCCLPP_DEVICE_OK; i++) {
    if (first) relaxed ? mscclppMemoryChannelRelaxedSignal(ch) : mscclppMemoryChannelSignal(ch);
    r = relaxed ? mscclppMemoryChannelRelaxedWait(ch) : mscclppMemoryChannelWait(ch);
    if (!first) relaxed ? mscclppMemoryChannelRelaxedSignal(ch) : mscclppMemoryChannelSignal(ch);
  }
  *ns = gt_ns() - t0;
  if (r != MSCCLPP_DEVICE_OK) *rc = r;
}

/* One packet each way per iteration (LL16: 8 payload bytes, LL8: 4); flags never repeat. */
__global__ void k_ll_pingpong(const mscclppMemoryChannel* ch, int first, int ll16, int iters, uint32_t base, int* rc,
                              unsigned long long* ns) {
  uint64_t t0 = gt_ns();
  int r = MSCCLPP_DEVICE_OK;
  for (int i = 1; i <= iters && r == MSCCLPP_DEVICE_OK; i++) {
    uint32_t flag = base + (uint32_t)i;
    if (first) {
      if (ll16)
        mscclppMemoryChannelPutPacketsLL16(ch, 0, 0, 8, flag, 0, 1);
      else
        mscclppMemoryChannelPutPacketsLL8(ch, 0, 0, 4, flag, 0, 1);
    }
    r = ll16 ? mscclppMemoryChannelUnpackPacketsLL16(ch, 64, 0, 8, flag, 0, 1)
             : mscclppMemoryChannelUnpackPacketsLL8(ch, 64, 0, 4, flag, 0, 1);
    if (!first) {
      if (ll16)
        mscclppMemoryChannelPutPacketsLL16(ch, 0, 64, 8, flag, 0, 1);
      else
        mscclppMemoryChannelPutPacketsLL8(ch, 0, 64, 4, flag, 0, 1);
    }
  }
  *ns = gt_ns() - t0;
  if (r != MSCCLPP_DEVICE_OK) *rc = r;
}

__global__ void k_port_pingpong(const mscclppPortChannel* ch, int first, int iters, int* rc, unsigned long long* ns) {
  uint64_t t0 = gt_ns();
  int r = MSCCLPP_DEVICE_OK;
  for (int i = 0; i < iters && r == MSCCLPP_DEVICE_OK; i++) {
    if (first) r = mscclppPortChannelSignal(ch);
    if (r == MSCCLPP_DEVICE_OK) r = mscclppPortChannelWait(ch);
    if (!first && r == MSCCLPP_DEVICE_OK) r = mscclppPortChannelSignal(ch);
  }
  *ns = gt_ns() - t0;
  if (r != MSCCLPP_DEVICE_OK) *rc = r;
}

__global__ void k_proxy_rt(const mscclppPortChannel* ch, int iters, int* rc, unsigned long long* ns) {
  uint64_t t0 = gt_ns();
  int r = MSCCLPP_DEVICE_OK;
  for (int i = 0; i < iters && r == MSCCLPP_DEVICE_OK; i++) r = mscclppPortChannelFlush(ch);
  *ns = gt_ns() - t0;
  if (r != MSCCLPP_DEVICE_OK) *rc = r;
}

/* The release a signal pays: a system-scope fence, iters times, nothing else. */
__global__ void k_fence(int iters, unsigned long long* ns) {
  uint64_t t0 = gt_ns();
  for (int i = 0; i < iters; i++) mscclppFenceSys();
  *ns = gt_ns() - t0;
}

/* One GPU: blocks 0 and 1 ping-pong through sems[0] and sems[1] (each other's tokens). kind 0: raw
 * volatile flags (words of their own, values base + i), 1: signal/wait, 2: relaxed. Block 0 times. */
__global__ void k_local_pingpong(const mscclppMemoryDevSemaphore* sems, volatile uint64_t* raw, int kind, int iters,
                                 uint64_t base, int* rc, unsigned long long* ns) {
  const mscclppMemoryDevSemaphore* s = &sems[blockIdx.x];
  int first = blockIdx.x == 0, r = MSCCLPP_DEVICE_OK;
  volatile uint64_t* mine = raw + 16 * blockIdx.x;
  volatile uint64_t* theirs = raw + 16 * (1 - blockIdx.x);
  uint64_t t0 = gt_ns();
  for (int i = 1; i <= iters && r == MSCCLPP_DEVICE_OK; i++) {
    if (kind == 0) {
      if (first) *theirs = base + (uint64_t)i;
      while (*mine != base + (uint64_t)i) {
      }
      if (!first) *theirs = base + (uint64_t)i;
      continue;
    }
    if (first) kind == 1 ? mscclppMemoryDevSemaphoreSignal(s) : mscclppMemoryDevSemaphoreRelaxedSignal(s);
    r = kind == 1 ? mscclppMemoryDevSemaphoreWait(s) : mscclppMemoryDevSemaphoreRelaxedWait(s);
    if (!first) kind == 1 ? mscclppMemoryDevSemaphoreSignal(s) : mscclppMemoryDevSemaphoreRelaxedSignal(s);
  }
  if (first) *ns = gt_ns() - t0;
  if (r != MSCCLPP_DEVICE_OK) *rc = r;
}

/* Raw SM stores: a plain grid-stride 16-byte copy into peer memory. */
__global__ void __launch_bounds__(THREADS) k_raw_sm(uint4* dst, const uint4* src, uint64_t n16) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n16; i += (uint64_t)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

__global__ void __launch_bounds__(THREADS) k_sm_put(const mscclppMemoryChannel* ch, uint64_t n) {
  mscclppMemoryChannelPut(ch, 0, 0, n, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

__global__ void k_ce_put(const mscclppPortChannel* ch, uint64_t n, int* rc) {
  int r = mscclppPortChannelPut(ch, 0, 0, n);
  if (r == MSCCLPP_DEVICE_OK) r = mscclppPortChannelFlush(ch);
  if (r != MSCCLPP_DEVICE_OK) *rc = r;
}

/* ---- harness --------------------------------------------------------------------------------- */

struct pb {
  struct gt_ctx c;
  int runs, iters, sweep;
  uint64_t bytes;
  int peer, active, *d_rc;
  unsigned long long* d_ns;
  mscclppMemoryChannel* d_mem;
  mscclppPortChannel* d_port;
  mscclppProxyService_t proxy;
  char* peer_scratch; /* the peer's scratch mapped here */
};

static unsigned long long take_ns(struct pb* b, const char* what) {
  CUDA_OK(gt_sync());
  gt_check_rc(&b->c, b->d_rc, 1, what);
  unsigned long long ns = 0;
  CUDA_OK(gt_memcpy(&ns, b->d_ns, sizeof(ns), cudaMemcpyDeviceToHost));
  return ns;
}

/* Median over runs of a latency kernel's ns per iteration (both active ranks run it; rank 0's
 * figure is reported). kind: 0 raw, 1 memory channel, 2 LL16, 3 LL8, 4 port ping-pong, 5 proxy,
 * 6 memory channel relaxed, 7 the system-scope fence alone. */
static double latency(struct pb* b, int kind) {
  double v[64];
  int first = b->c.rank == 0;
  uint64_t* mine = (uint64_t*)(b->c.scratch + (2u << 20));
  uint64_t* theirs = (uint64_t*)(b->peer_scratch + (2u << 20));
  for (int run = 0; run < b->runs; run++) {
    CHECK_OK(mscclppBootstrapBarrier(b->c.comm));
    if (!b->active) continue;
    uint64_t base = (uint64_t)(run + 1) * (uint64_t)(b->iters + 1) * 8u;
    switch (kind) {
      case 0: k_raw_pingpong<<<1, 1, 0, gt_stream>>>(mine, theirs, first, b->iters, base, b->d_ns); break;
      case 1: k_mem_pingpong<<<1, 1, 0, gt_stream>>>(b->d_mem, first, 0, b->iters, b->d_rc, b->d_ns); break;
      case 6: k_mem_pingpong<<<1, 1, 0, gt_stream>>>(b->d_mem, first, 1, b->iters, b->d_rc, b->d_ns); break;
      case 2: k_ll_pingpong<<<1, 1, 0, gt_stream>>>(b->d_mem, first, 1, b->iters, (uint32_t)base, b->d_rc, b->d_ns); break;
      case 3: k_ll_pingpong<<<1, 1, 0, gt_stream>>>(b->d_mem, first, 0, b->iters, (uint32_t)base, b->d_rc, b->d_ns); break;
      case 4: k_port_pingpong<<<1, 1, 0, gt_stream>>>(b->d_port, first, b->iters, b->d_rc, b->d_ns); break;
      case 5: k_proxy_rt<<<1, 1, 0, gt_stream>>>(b->d_port, b->iters, b->d_rc, b->d_ns); break;
      case 7: k_fence<<<1, 1, 0, gt_stream>>>(b->iters, b->d_ns); break;
    }
    v[run] = (double)take_ns(b, "latency") / b->iters / 1e3;
  }
  return b->active ? gt_median(v, b->runs) : 0;
}

/* Median over runs of GB/s for bytes from rank 0 to rank 1 (rank 0 moves the data). kind: 0 raw
 * copy engine (cudaMemcpyAsync into peer memory), 1 port-channel put + flush, 2 raw SM stores,
 * 3 memory-channel put. */
static double bandwidth(struct pb* b, int kind) {
  double v[64];
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  for (int run = -1; run < b->runs; run++) { /* run -1 warms up */
    CHECK_OK(mscclppBootstrapBarrier(b->c.comm));
    if (b->c.rank != 0) continue;
    CUDA_OK(cudaEventRecord(e0, gt_stream));
    switch (kind) {
      case 0: CUDA_OK(cudaMemcpyAsync(b->peer_scratch, b->c.src, b->bytes, cudaMemcpyDeviceToDevice, gt_stream)); break;
      case 1: k_ce_put<<<1, 1, 0, gt_stream>>>(b->d_port, b->bytes, b->d_rc); break;
      case 2: k_raw_sm<<<BLOCKS, THREADS, 0, gt_stream>>>((uint4*)b->peer_scratch, (const uint4*)b->c.src, b->bytes / 16); break;
      default: k_sm_put<<<BLOCKS, THREADS, 0, gt_stream>>>(b->d_mem, b->bytes); break;
    }
    CUDA_OK(cudaEventRecord(e1, gt_stream));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    if (run >= 0) v[run] = (double)b->bytes / (ms * 1e6);
  }
  gt_check_rc(&b->c, b->d_rc, 1, "bandwidth");
  CUDA_OK(cudaEventDestroy(e0));
  CUDA_OK(cudaEventDestroy(e1));
  return b->c.rank == 0 ? gt_median(v, b->runs) : 0;
}

static void row(const char* what, double value, const char* unit, const char* ref, const char* target, const char* status) {
  printf("%-42s %9.2f %-5s  %-34s %-16s %s\n", what, value, unit, ref, target, status);
}

static void report(struct pb* b) {
  double raw = latency(b, 0), mem = latency(b, 1), ll16 = latency(b, 2), ll8 = latency(b, 3), port = latency(b, 4);
  double proxy = latency(b, 5), relaxed = latency(b, 6), fence = latency(b, 7);
  double ce_raw = bandwidth(b, 0), ce_put = bandwidth(b, 1), sm_raw = bandwidth(b, 2), sm_put = bandwidth(b, 3);
  if (b->c.rank != 0) return;
  char ref[96], st[64];
  printf("\nmscclpp-primbench: ranks 0 <-> 1, median of %d runs (%d iterations each; %llu bytes for bandwidth)\n",
         b->runs, b->iters, (unsigned long long)b->bytes);
  printf("%-42s %15s  %-34s %-16s %s\n", "primitive", "measured", "reference", "target", "status");
  row("raw flag one-way latency (ping-pong / 2)", raw / 2, "us", "hardware.md: 0.73 us (NVLink, 0<->1)", "-", "");
  snprintf(ref, sizeof(ref), "raw ping-pong round trip %.2f us", raw);
  row("system-scope fence alone (each release)", fence, "us", "-", "-", "");
  snprintf(st, sizeof(st), "%s (%.2fx raw)", mem <= 1.5 * raw ? "PASS" : "MISS", mem / raw);
  char floor_ref[160];
  snprintf(floor_ref, sizeof(floor_ref), "%s; + 2 fences %.2f", ref, raw + 2 * fence);
  row("memory-channel signal+wait round trip", mem, "us", floor_ref, "<= 1.5x raw", st);
  snprintf(st, sizeof(st), "%s (%.2fx raw)", relaxed <= 1.5 * raw ? "PASS" : "MISS", relaxed / raw);
  row("memory-channel relaxed signal+wait round trip", relaxed, "us", ref, "<= 1.5x raw", st);
  snprintf(ref, sizeof(ref), "raw one-way %.2f us", raw / 2);
  row("LL16 one-way latency (ping-pong / 2)", ll16 / 2, "us", ref, "< 2 us", ll16 / 2 < 2 ? "PASS" : "MISS");
  row("LL8 one-way latency (ping-pong / 2)", ll8 / 2, "us", ref, "-", "");
  row("port-channel signal+wait round trip", port, "us", "-", "-", "");
  snprintf(ref, sizeof(ref), "raw copy engine %.1f GB/s (hw 397)", ce_raw);
  snprintf(st, sizeof(st), "%s (%.1f%%)", ce_put >= 0.95 * ce_raw ? "PASS" : "MISS", 100 * ce_put / ce_raw);
  row("port-channel put bandwidth", ce_put, "GB/s", ref, ">= 95% of raw", st);
  snprintf(ref, sizeof(ref), "raw SM stores %.1f GB/s (hw 369)", sm_raw);
  snprintf(st, sizeof(st), "%s (%.1f%%)", sm_put >= 0.95 * sm_raw ? "PASS" : "MISS", 100 * sm_put / sm_raw);
  row("SM (memory-channel) put bandwidth", sm_put, "GB/s", ref, ">= 95% of raw", st);
  row("proxy round trip (flush pushed -> observed)", proxy, "us", "-", "< 5 us", proxy < 5 ? "PASS" : "MISS");
}

#include "primbench_sweep.cuh"

/* One rank: the two-block ping-pongs of one GPU and the fence, median of runs. */
static double local_latency(struct pb* b, const mscclppMemoryDevSemaphore* sems, uint64_t* raw, int kind) {
  double v[64];
  for (int run = 0; run < b->runs; run++) {
    uint64_t base = (uint64_t)(run + 1) * (uint64_t)(b->iters + 1);
    if (kind == 7) k_fence<<<1, 1, 0, gt_stream>>>(b->iters, b->d_ns);
    else k_local_pingpong<<<2, 1, 0, gt_stream>>>(sems, raw, kind, b->iters, base, b->d_rc, b->d_ns);
    v[run] = (double)take_ns(b, "local latency") / b->iters / 1e3;
  }
  return gt_median(v, b->runs);
}

/* Semaphores between two blocks of this GPU: each block's token, expected count and the other's
 * token in one zeroed device buffer (waits bounded by 10 s, reported nowhere), raw flags beside. */
static void local_report(struct pb* b) {
  uint64_t* w = NULL;
  mscclppMemoryDevSemaphore h[2], *d_sems = NULL;
  CUDA_OK(cudaMalloc((void**)&w, 4096));
  CUDA_OK(cudaMemset(w, 0, 4096));
  memset(h, 0, sizeof(h));
  for (int i = 0; i < 2; i++) {
    h[i].inbound = w + 32 * i;
    h[i].expected = w + 32 * i + 16;
    h[i].remoteInbound = w + 32 * (1 - i);
    h[i].wait.timeoutNs = 10000000000ull;
    h[i].wait.peer = 1 - i;
  }
  d_sems = gt_to_device(h, 2);
  double raw = local_latency(b, d_sems, w + 128, 0), mem = local_latency(b, d_sems, NULL, 1);
  double relaxed = local_latency(b, d_sems, NULL, 2), fence = local_latency(b, d_sems, NULL, 7);
  printf("\nmscclpp-primbench: one rank, two blocks of one GPU, median of %d runs (%d iterations each)\n", b->runs, b->iters);
  printf("%-42s %15s  %s\n", "primitive", "measured", "note");
  printf("%-42s %9.2f us     %s\n", "raw flag round trip", raw, "volatile stores and loads");
  printf("%-42s %9.2f us     %.2fx raw\n", "semaphore signal+wait round trip", mem, mem / raw);
  printf("%-42s %9.2f us     %.2fx raw\n", "semaphore relaxed signal+wait round trip", relaxed, relaxed / raw);
  printf("%-42s %9.2f us     %s\n", "system-scope fence alone", fence, "a release signal pays one");
  CUDA_OK(cudaFree(d_sems));
  CUDA_OK(cudaFree(w));
}

int main(int argc, char** argv) {
  struct pb b;
  memset(&b, 0, sizeof(b));
  b.runs = 9;
  b.iters = 2000;
  b.bytes = 1ull << 30;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--sweep") == 0) b.sweep = 1;
    else if (i + 1 < argc && strcmp(argv[i], "--runs") == 0) b.runs = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--iters") == 0) b.iters = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--bytes") == 0) b.bytes = strtoull(argv[++i], NULL, 0) / 16 * 16;
    else TEST_FAIL("usage: mscclpp-primbench [--runs R] [--iters I] [--bytes B] [--sweep]");
  }
  CHECK(b.runs >= 1 && b.runs <= 64 && b.iters >= 1 && b.bytes >= 4096);
  gt_init(&b.c);
  struct gt_ctx* c = &b.c;
  if (c->nranks < 2) {
    CUDA_OK(cudaMalloc((void**)&b.d_rc, sizeof(int)));
    CUDA_OK(cudaMemset(b.d_rc, 0, sizeof(int)));
    CUDA_OK(cudaMalloc((void**)&b.d_ns, sizeof(*b.d_ns)));
    local_report(&b);
    CUDA_OK(cudaFree(b.d_rc));
    CUDA_OK(cudaFree(b.d_ns));
    CHECK_OK(mscclppCommDestroy(c->comm)); /* nothing was set up beyond the communicator */
    return 0;
  }
  /* --sweep: every rank's puts land in each peer's scratch at rank * B, its gets in its src */
  uint64_t need = b.sweep ? (uint64_t)c->nranks * b.bytes : b.bytes;
  gt_setup(c, need < (4u << 20) ? (4u << 20) : need);
  b.active = c->rank < 2;
  b.peer = c->rank == 0 ? 1 : 0;
  CHECK_OK(mscclppProxyServiceCreate(c->comm, 0, &b.proxy));
  mscclppMemoryChannel mem;
  mscclppPortChannel port;
  memset(&mem, 0, sizeof(mem));
  memset(&port, 0, sizeof(port));
  /* Ranks 0 and 1 make one memory and one port channel with each other; other ranks idle. */
  if (b.active) {
    int sem = -1;
    CHECK_OK(mscclppMemoryChannelCreate(c->comm, c->conn[b.peer], c->peer_scratch[b.peer], c->src_reg, c->scratch,
                                        b.peer, &mem));
    CHECK_OK(mscclppProxyServiceAddSemaphore(b.proxy, c->conn[b.peer], &sem));
    CHECK_OK(mscclppPortChannelCreate(b.proxy, sem, c->peer_scratch[b.peer], c->src_reg, b.peer, &port));
  }
  CHECK_OK(mscclppRegMemInfo(c->peer_scratch[b.peer], (void**)&b.peer_scratch, NULL, NULL));
  b.d_mem = gt_to_device(&mem, 1);
  b.d_port = gt_to_device(&port, 1);
  CUDA_OK(cudaMalloc((void**)&b.d_rc, sizeof(int)));
  CUDA_OK(cudaMemsetAsync(b.d_rc, 0, sizeof(int), gt_stream));
  CUDA_OK(cudaMalloc((void**)&b.d_ns, sizeof(*b.d_ns)));
  CUDA_OK(cudaMemsetAsync(c->scratch, 0, c->bytes, gt_stream));
  gt_fill<<<528, 512, 0, gt_stream>>>(c->src, c->bytes, 1, c->rank);
  CUDA_OK(gt_sync());
  CHECK_OK(mscclppProxyServiceStart(b.proxy));
  report(&b);
  if (b.sweep) sweep_report(&b);
  CHECK_OK(mscclppProxyServiceStop(b.proxy));
  CHECK_OK(mscclppProxyServiceDestroy(b.proxy));
  CUDA_OK(cudaFree(b.d_mem));
  CUDA_OK(cudaFree(b.d_port));
  CUDA_OK(cudaFree(b.d_rc));
  CUDA_OK(cudaFree(b.d_ns));
  gt_teardown(c);
  return 0;
}
