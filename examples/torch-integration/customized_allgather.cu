// customized_allgather.cu - a native allgather for GPU ranks of one host (seed 001's approach 3 in
// this library's C ABI, include/mscclpp/native_algorithm.h), built and loaded by
//
//   mod = mscclpp.compile_native(name="customized_allgather", file="customized_allgather.cu")
//   algo = mscclpp.Algorithm.create_from_native_capsule(mod.create_allgather_algorithm())
//   algo.execute(comm, x.data_ptr(), y.data_ptr(), x.nbytes, y.nbytes, dtype, stream=s.cuda_stream)
//
// (customized_allgather.py; python/tests/native/gpu_native_check.py checks it on GPUs).
//
// init: a cuda-ipc connection to every peer. A context serves every call of one output size (its
// key ignores the buffers, so every rank makes its contexts in the same calls whatever addresses its
// allocator returns): a scratch of the output's size in shareable GPU memory, registered with every
// peer, and kBlocksPerPeer memory channels per peer over it (each block its own semaphore). The
// kernel: one group of blocks per rank. The group of this rank copies the input into its slot of the
// output; the group of peer p (each block its chunk of the slot) first waits until p has entered
// this call (p's scratch is free again), writes the input into p's scratch at this rank's slot
// through NVLink, signals p, waits for p's signal and copies p's slot from this rank's scratch into
// the output. Memory channels, mscclppCopy and the semaphores are the library's device API
// (mscclpp/memory_channel.h).
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

#include <mscclpp/connection.h>
#include <mscclpp/memory.h>
#include <mscclpp/memory_channel.h>
#include <mscclpp/native_algorithm.h>

namespace {

constexpr int kBlocksPerPeer = 4;  // blocks (and semaphores) per peer
constexpr int kThreads = 512;      // threads per block unless the caller asks otherwise
constexpr int kTag = 19;           // the connections' tag

struct State {
  int rank = 0, nranks = 0, device = -1;
  mscclppConnection_t* conns = nullptr;  // per rank (own: null)
};

struct Context {
  char* scratch = nullptr;  // outputSize bytes of cuMem memory, registered
  mscclppRegisteredMemory reg{};
  mscclppMemoryChannel* channels = nullptr;  // device array: nranks x kBlocksPerPeer (own rank's unused)
};

// [begin, end) of block b's chunk of a bytes-long slot (16-byte aligned chunks).
__device__ __forceinline__ void chunkOf(uint64_t bytes, int b, uint64_t* begin, uint64_t* end) {
  uint64_t chunk = ((bytes + kBlocksPerPeer - 1) / kBlocksPerPeer + 15) & ~15ull;
  *begin = chunk * b < bytes ? chunk * b : bytes;
  *end = *begin + chunk < bytes ? *begin + chunk : bytes;
}

__global__ void allgatherKernel(const mscclppMemoryChannel* channels, int rank, const char* input, char* output,
                                char* scratch, uint64_t bytes) {
  const int peer = blockIdx.x / kBlocksPerPeer, b = blockIdx.x % kBlocksPerPeer;
  uint64_t begin, end;
  chunkOf(bytes, b, &begin, &end);
  const uint64_t mine = (uint64_t)rank * bytes, theirs = (uint64_t)peer * bytes;
  if (peer == rank) {  // the local slot (nothing to do in place)
    if (output + mine != input) mscclppCopy(output + mine + begin, input + begin, end - begin, threadIdx.x, blockDim.x);
    return;
  }
  const mscclppMemoryChannel* ch = &channels[peer * kBlocksPerPeer + b];
  if (threadIdx.x == 0) {  // the peer has entered this call: its scratch is free again
    mscclppMemoryChannelRelaxedSignal(ch);
    mscclppMemoryChannelRelaxedWait(ch);
  }
  __syncthreads();
  mscclppCopy((char*)ch->remote + mine + begin, input + begin, end - begin, threadIdx.x, blockDim.x);
  __syncthreads();
  if (threadIdx.x == 0) {  // our chunk is in the peer's scratch; the peer's chunk in ours
    mscclppMemoryChannelSignal(ch);
    mscclppMemoryChannelWait(ch);
  }
  __syncthreads();
  mscclppCopy(output + theirs + begin, scratch + theirs + begin, end - begin, threadIdx.x, blockDim.x);
}

void freeState(State* s) {
  for (int p = 0; s->conns && p < s->nranks; p++)
    if (s->conns[p]) (void)mscclppConnectionDestroy(s->conns[p]);
  std::free(s->conns);
  delete s;
}

mscclppResult_t connectAll(mscclppComm_t comm, State* s) {
  mscclppResult_t r = mscclppCommRank(comm, &s->rank);
  if (r == mscclppSuccess) r = mscclppCommSize(comm, &s->nranks);
  if (r != mscclppSuccess) return r;
  s->conns = static_cast<mscclppConnection_t*>(std::calloc(s->nranks, sizeof(mscclppConnection_t)));
  if (!s->conns) return MSCCLPP_NATIVE_ERROR(mscclppSystemError, "out of host memory");
  for (int p = 0; p < s->nranks; p++) {  // increasing peer order on every rank: no cycle of waits
    if (p == s->rank) continue;
    if ((r = mscclppConnectionCreate(comm, p, kTag, mscclppTransportAuto, &s->conns[p])) != mscclppSuccess) return r;
    mscclppTransport_t t;
    if ((r = mscclppConnectionTransport(s->conns[p], &t)) != mscclppSuccess) return r;
    if (t != mscclppTransportP2P)
      return MSCCLPP_NATIVE_ERROR(mscclppInvalidUsage, "rank %d reaches rank %d by transport %d, not cuda-ipc: this "
                                  "example runs on GPU ranks of one host", s->rank, p, (int)t);
  }
  return mscclppSuccess;
}

mscclppResult_t init(mscclppComm_t comm, void*, void** state) {
  int dev = -1;
  mscclppResult_t r = mscclppCommCudaDevice(comm, &dev);
  if (r != mscclppSuccess) return r;
  if (dev < 0) return MSCCLPP_NATIVE_ERROR(mscclppInvalidUsage, "customized_allgather runs on GPU ranks only");
  State* s = new State();
  s->device = dev;
  if ((r = connectAll(comm, s)) != mscclppSuccess) {
    freeState(s);
    return r;
  }
  *state = s;
  return mscclppSuccess;
}

void destroy(mscclppComm_t, void* state) { freeState(static_cast<State*>(state)); }

// Every call of one output size shares a context.
mscclppNativeContextKey contextKey(void*, const void*, void*, size_t inputSize, size_t outputSize, mscclppDataType_t) {
  return mscclppNativeContextKey{0, 0, inputSize, outputSize, 0};
}

void freeContext(Context* c) {
  if (c->channels) (void)cudaFree(c->channels);
  if (c->reg.local) (void)mscclppRegisteredMemoryRelease(&c->reg);
  if (c->scratch) (void)mscclppMemFree(c->scratch);
  delete c;
}

mscclppResult_t makeChannels(mscclppComm_t comm, const State* s, Context* c) {
  const int n = s->nranks * kBlocksPerPeer;
  mscclppMemoryChannel* host = static_cast<mscclppMemoryChannel*>(std::calloc(n, sizeof(mscclppMemoryChannel)));
  if (!host) return MSCCLPP_NATIVE_ERROR(mscclppSystemError, "out of host memory");
  mscclppResult_t r = mscclppSuccess;
  for (int p = 0; p < s->nranks && r == mscclppSuccess; p++)  // the same order on both sides of every pair
    for (int b = 0; b < kBlocksPerPeer && p != s->rank && r == mscclppSuccess; b++)
      r = mscclppMemoryChannelCreate(comm, s->conns[p], c->reg.remote[p], c->reg.local, nullptr, p * kBlocksPerPeer + b,
                                     &host[p * kBlocksPerPeer + b]);
  cudaError_t e = cudaSuccess;
  if (r == mscclppSuccess) e = cudaMalloc(&c->channels, n * sizeof(mscclppMemoryChannel));
  if (r == mscclppSuccess && e == cudaSuccess) e = cudaMemcpy(c->channels, host, n * sizeof(*host), cudaMemcpyHostToDevice);
  std::free(host);
  if (r == mscclppSuccess && e != cudaSuccess)
    r = MSCCLPP_NATIVE_ERROR(mscclppUnhandledCudaError, "channels to the GPU: %s", cudaGetErrorString(e));
  return r;
}

mscclppResult_t contextInit(mscclppComm_t comm, void* state, const void*, void*, size_t, size_t outputSize,
                            mscclppDataType_t, void** ctx) {
  State* s = static_cast<State*>(state);
  cudaError_t e = cudaSetDevice(s->device);  // the scratch and the channels on the communicator's GPU
  if (e != cudaSuccess) return MSCCLPP_NATIVE_ERROR(mscclppUnhandledCudaError, "cudaSetDevice: %s", cudaGetErrorString(e));
  Context* c = new Context();
  mscclppResult_t r = mscclppMemAlloc(reinterpret_cast<void**>(&c->scratch), outputSize ? outputSize : 1, mscclppMemCuda);
  if (r == mscclppSuccess) r = mscclppRegisterBuffer(comm, c->scratch, outputSize ? outputSize : 1, &c->reg);
  if (r == mscclppSuccess) r = makeChannels(comm, s, c);
  if (r != mscclppSuccess) {
    freeContext(c);
    return r;
  }
  *ctx = c;
  return mscclppSuccess;
}

void contextFree(mscclppComm_t, void*, void* ctx) { freeContext(static_cast<Context*>(ctx)); }

// nblocks is not used: the context fixes kBlocksPerPeer blocks per rank.
mscclppResult_t launch(mscclppComm_t, void* state, void* ctx, const void* input, void* output, size_t inputSize,
                       size_t, mscclppDataType_t, mscclppRedOp_t, void* stream, int, int nthreadsPerBlock,
                       const mscclppNativeExtra*, int) {
  const State* s = static_cast<const State*>(state);
  const Context* c = static_cast<const Context*>(ctx);
  if (inputSize == 0) return mscclppSuccess;
  int threads = nthreadsPerBlock > 0 ? (nthreadsPerBlock < 1024 ? nthreadsPerBlock : 1024) : kThreads;
  allgatherKernel<<<s->nranks * kBlocksPerPeer, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      c->channels, s->rank, static_cast<const char*>(input), static_cast<char*>(output), c->scratch, inputSize);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? mscclppSuccess
                          : MSCCLPP_NATIVE_ERROR(mscclppUnhandledCudaError, "kernel launch: %s", cudaGetErrorString(e));
}

}  // namespace

// The factory mscclpp.compile_native's module exposes (any number per file).
MSCCLPP_NATIVE_FACTORY(create_allgather_algorithm) {
  static mscclppNativeAlgorithmDef def;
  def.abiVersion = MSCCLPP_NATIVE_ALGORITHM_ABI_VERSION;
  def.name = "customized_allgather";
  def.collective = "allgather";
  def.init = init;
  def.contextKey = contextKey;
  def.contextInit = contextInit;
  def.launch = launch;
  def.contextFree = contextFree;
  def.destroy = destroy;
  return &def;
}
