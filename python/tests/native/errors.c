/* errors.c - native algorithms that are wrong in one way each, for test_native.py's error cases:
 * a def of another ABI version, one without launch, a factory that returns NULL, and a launch
 * that fails on a library call of its own (its message must reach Python). */
#include <stddef.h>

#include <mscclpp/comm.h>
#include <mscclpp/native_algorithm.h>

static mscclppResult_t launch_ok(mscclppComm_t comm, void* state, void* ctx, const void* input, void* output,
                                 size_t in, size_t out, mscclppDataType_t dtype, mscclppRedOp_t op, void* stream,
                                 int nblocks, int nthreads, const mscclppNativeExtra* extras, int nextras) {
  (void)comm, (void)state, (void)ctx, (void)input, (void)output, (void)in, (void)out, (void)dtype, (void)op;
  (void)stream, (void)nblocks, (void)nthreads, (void)extras, (void)nextras;
  return mscclppSuccess;
}

/* Sends to rank -5: the library refuses it (InvalidArgument with its message); launch passes that on. */
static mscclppResult_t launch_fails(mscclppComm_t comm, void* state, void* ctx, const void* input, void* output,
                                    size_t in, size_t out, mscclppDataType_t dtype, mscclppRedOp_t op, void* stream,
                                    int nblocks, int nthreads, const mscclppNativeExtra* extras, int nextras) {
  (void)launch_ok(comm, state, ctx, input, output, in, out, dtype, op, stream, nblocks, nthreads, extras, nextras);
  char byte = 0;
  return mscclppBootstrapSend(comm, -5, 0, &byte, 1);
}

MSCCLPP_NATIVE_FACTORY(create_wrong_abi) {
  static const mscclppNativeAlgorithmDef def = {MSCCLPP_NATIVE_ALGORITHM_ABI_VERSION + 41, 0, "wrong_abi", "allgather",
                                                NULL, NULL, NULL, NULL, launch_ok, NULL, NULL, NULL};
  return &def;
}

MSCCLPP_NATIVE_FACTORY(create_no_launch) {
  static const mscclppNativeAlgorithmDef def = {MSCCLPP_NATIVE_ALGORITHM_ABI_VERSION, 0, "no_launch", "allgather",
                                                NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  return &def;
}

MSCCLPP_NATIVE_FACTORY(create_nothing) { return NULL; }

MSCCLPP_NATIVE_FACTORY(create_failing_launch) {
  static const mscclppNativeAlgorithmDef def = {MSCCLPP_NATIVE_ALGORITHM_ABI_VERSION, 0, "failing_launch",
                                                "allreduce", NULL, NULL, NULL, NULL, launch_fails, NULL, NULL, NULL};
  return &def;
}
