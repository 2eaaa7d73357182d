/* Switch channels over peer memory (the emulation; no multicast object is ever made): reduce from
 * all members (fp32 sum, int32 max, fp16 sum, bf16 min) at aligned and unaligned offsets, broadcast
 * to all, and in-place reduce-broadcast split among the members. 77 without enough GPUs. */
#include "gpu_common.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

/* The value member r holds at element i: small integers, so every reduction is exact. */
__host__ __device__ static inline int val(int r, uint64_t i) { return (int)((i * 7919u + (uint64_t)r * 104729u) % 61u) - 30; }

template <typename T>
__device__ static inline T to_t(int v) { return (T)v; }
template <>
__device__ inline __half to_t<__half>(int v) { return __int2half_rn(v); }
template <>
__device__ inline __nv_bfloat16 to_t<__nv_bfloat16>(int v) { return __int2bfloat16_rn(v); }
template <typename T>
__device__ static inline float to_f(T v) { return (float)v; }
template <>
__device__ inline float to_f<__half>(__half v) { return __half2float(v); }
template <>
__device__ inline float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__global__ void k_fill(T* p, uint64_t n, int r) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = to_t<T>(val(r, i));
}

/* Counts elements of p that differ from op over members 0..n-1 of val(r, first + i). */
template <typename T>
__global__ void k_check(const T* p, uint64_t n, uint64_t first, int members, int op, unsigned long long* bad) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    int acc = val(0, first + i);
    for (int r = 1; r < members; r++) {
      int v = val(r, first + i);
      acc = op == mscclppSwitchSum ? acc + v : op == mscclppSwitchMin ? (v < acc ? v : acc) : (v > acc ? v : acc);
    }
    if (to_f<T>(p[i]) != (float)acc) atomicAdd(bad, 1ull);
  }
}

template <typename T, int Op>
__global__ void k_reduce(const mscclppSwitchChannel* ch, T* out, uint64_t offset, uint64_t count) {
  mscclppSwitchChannelReduce<T, Op>(ch, out, offset, count, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

template <typename T, int Op>
__global__ void k_reduce_bcast(const mscclppSwitchChannel* ch, uint64_t offset, uint64_t count) {
  mscclppSwitchChannelReduceBroadcast<T, Op>(ch, offset, count, blockIdx.x * blockDim.x + threadIdx.x,
                                             gridDim.x * blockDim.x);
}

__global__ void k_bcast(const mscclppSwitchChannel* ch, const void* src, uint64_t offset, uint64_t bytes) {
  mscclppSwitchChannelBroadcast(ch, src, offset, bytes, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

static unsigned long long* d_bad;

template <typename T>
static unsigned long long count_bad(const T* p, uint64_t n, uint64_t first, int members, int op) {
  CUDA_OK(cudaMemsetAsync(d_bad, 0, sizeof(*d_bad), gt_stream));
  k_check<T><<<264, 256, 0, gt_stream>>>(p, n, first, members, op, d_bad);
  unsigned long long h = 0;
  CUDA_OK(gt_memcpy(&h, d_bad, sizeof(h), cudaMemcpyDeviceToHost));
  return h;
}

/* Every member fills its buffer, then reduces [first, first + count) into out and checks it. */
template <typename T, int Op>
static void test_reduce(struct gt_ctx* c, const mscclppSwitchChannel* d_ch, T* out, uint64_t first, uint64_t count,
                        const char* name) {
  k_fill<T><<<264, 256, 0, gt_stream>>>((T*)c->src, c->bytes / sizeof(T), c->rank);
  CUDA_OK(gt_sync());
  CHECK_OK(mscclppBootstrapBarrier(c->comm)); /* every member's values are in place */
  k_reduce<T, Op><<<132, 512, 0, gt_stream>>>(d_ch, out, first * sizeof(T), count);
  CUDA_OK(gt_sync());
  unsigned long long bad = count_bad<T>(out, count, first, c->nranks, Op);
  CHECK_MSG(bad == 0, "%s reduce of %llu elements from %llu: %llu wrong", name, (unsigned long long)count,
            (unsigned long long)first, bad);
  CHECK_OK(mscclppBootstrapBarrier(c->comm)); /* nobody refills while others still read */
}

int main(void) {
  struct gt_ctx c;
  gt_init(&c);
  gt_setup(&c, 64u << 20);
  CUDA_OK(cudaMalloc((void**)&d_bad, sizeof(*d_bad)));
  int ranks[GT_MAX_RANKS];
  for (int r = 0; r < c.nranks; r++) ranks[r] = r;
  mscclppSwitchChannel ch;
  CHECK_OK(mscclppSwitchChannelCreate(c.comm, ranks, c.nranks, c.src_reg, &ch));
  CHECK(ch.nranks == c.nranks && ch.rank == c.rank && ch.peers[c.rank] == c.src && ch.multicast == NULL);
  mscclppSwitchChannel* d_ch = gt_to_device(&ch, 1);
  char* out = NULL;
  CUDA_OK(cudaMalloc((void**)&out, 32u << 20));

  test_reduce<float, mscclppSwitchSum>(&c, d_ch, (float*)out, 0, 4u << 20, "fp32 sum");
  test_reduce<float, mscclppSwitchSum>(&c, d_ch, (float*)out, 1, 1000003, "fp32 sum (unaligned)");
  test_reduce<int, mscclppSwitchMax>(&c, d_ch, (int*)out, 0, (1u << 20) + 1, "int32 max");
  test_reduce<__half, mscclppSwitchSum>(&c, d_ch, (__half*)out, 8, 3u << 20, "fp16 sum");
  test_reduce<__nv_bfloat16, mscclppSwitchMin>(&c, d_ch, (__nv_bfloat16*)out, 3, 777777, "bf16 min");

  /* Broadcast: member r writes its slice of `out` (its values) into slice r of everyone's buffer. */
  const uint64_t slice = (1u << 20) + 4; /* ints */
  k_fill<int><<<264, 256, 0, gt_stream>>>((int*)out, slice, c.rank);
  CUDA_OK(cudaMemsetAsync(c.src, 0, c.bytes, gt_stream));
  CUDA_OK(gt_sync());
  CHECK_OK(mscclppBootstrapBarrier(c.comm));
  k_bcast<<<132, 512, 0, gt_stream>>>(d_ch, out, (uint64_t)c.rank * slice * sizeof(int), slice * sizeof(int));
  CUDA_OK(gt_sync());
  CHECK_OK(mscclppBootstrapBarrier(c.comm));
  { /* every slice holds its broadcaster's values */
    int* h = (int*)malloc(slice * sizeof(int));
    CHECK(h != NULL);
    for (int r = 0; r < c.nranks; r++) {
      CUDA_OK(gt_memcpy(h, (int*)c.src + (uint64_t)r * slice, slice * sizeof(int), cudaMemcpyDeviceToHost));
      for (uint64_t i = 0; i < slice; i++)
        CHECK_MSG(h[i] == val(r, i), "broadcast from rank %d: element %llu is %d, expected %d", r, (unsigned long long)i,
                  h[i], val(r, i));
    }
    free(h);
  }
  CHECK_OK(mscclppBootstrapBarrier(c.comm));

  /* In-place reduce-broadcast, each member one slice of the range. */
  const uint64_t count = (3u << 20) + 7, per = (count + c.nranks - 1) / c.nranks;
  k_fill<float><<<264, 256, 0, gt_stream>>>((float*)c.src, count, c.rank);
  CUDA_OK(gt_sync());
  CHECK_OK(mscclppBootstrapBarrier(c.comm));
  uint64_t first = per * (uint64_t)c.rank, mine = first >= count ? 0 : (count - first < per ? count - first : per);
  k_reduce_bcast<float, mscclppSwitchSum><<<132, 512, 0, gt_stream>>>(d_ch, first * sizeof(float), mine);
  CUDA_OK(gt_sync());
  CHECK_OK(mscclppBootstrapBarrier(c.comm));
  unsigned long long bad = count_bad<float>((float*)c.src, count, 0, c.nranks, mscclppSwitchSum);
  CHECK_MSG(bad == 0, "reduce-broadcast: %llu of %llu elements wrong on rank %d", bad, (unsigned long long)count, c.rank);

  CUDA_OK(cudaFree(out));
  CUDA_OK(cudaFree(d_ch));
  CUDA_OK(cudaFree(d_bad));
  gt_teardown(&c);
  if (c.rank == 0) printf("gpu_switchchan: %d members ok (emulated over peer memory)\n", c.nranks);
  return 0;
}
