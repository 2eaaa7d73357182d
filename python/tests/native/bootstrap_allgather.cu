// bootstrap_allgather.cu - a native allgather in CUDA C++ whose host code does the work (no GPU
// needed): the bootstrap's own allgather, for CPU ranks. test_native.py builds it with nvcc through
// mscclpp.compile_native, which shows the .cu path (flags, C++ linkage of the factory, linking
// against libmscclpp) in CI.
#include <cstring>

#include <mscclpp/comm.h>
#include <mscclpp/native_algorithm.h>

namespace {

// output holds every rank's slot of inputSize bytes; the bootstrap fills the others' slots.
mscclppResult_t launch(mscclppComm_t comm, void*, void*, const void* input, void* output, size_t inputSize, size_t,
                       mscclppDataType_t, mscclppRedOp_t, void* stream, int, int, const mscclppNativeExtra*, int) {
  if (stream != nullptr) return mscclppInvalidUsage;  // CPU ranks only
  int rank = 0;
  mscclppResult_t r = mscclppCommRank(comm, &rank);
  if (r != mscclppSuccess) return r;
  if (inputSize > 0x7fffffff) return mscclppInvalidArgument;
  char* mine = static_cast<char*>(output) + static_cast<size_t>(rank) * inputSize;
  if (mine != input) std::memmove(mine, input, inputSize);
  return mscclppBootstrapAllGather(comm, output, static_cast<int>(inputSize));
}

}  // namespace

MSCCLPP_NATIVE_FACTORY(create_bootstrap_allgather) {
  static mscclppNativeAlgorithmDef def;
  def.abiVersion = MSCCLPP_NATIVE_ALGORITHM_ABI_VERSION;
  def.name = "bootstrap_allgather";
  def.collective = "allgather";
  def.launch = launch;
  return &def;
}
