/* mscclpp/native_algorithm.h - native algorithms: a collective written by the user in C, C++ or
 * CUDA C++ against the public API, built as a shared library of its own (mscclpp.compile_native in
 * Python, or any build) and run by this library on a communicator. Compiles as C11 and as C++.
 *
 * The user's file fills in a mscclppNativeAlgorithmDef (a versioned table of callbacks) and exports
 * a factory returning it; any number of factories per file:
 *
 *   static mscclppResult_t my_launch(mscclppComm_t comm, void* state, void* ctx, const void* in, void* out,
 *                                    size_t inSize, size_t outSize, mscclppDataType_t dtype, mscclppRedOp_t op,
 *                                    void* stream, int nblocks, int nthreads, const mscclppNativeExtra* extras,
 *                                    int nextras) { ... }
 *   MSCCLPP_NATIVE_FACTORY(create_my_allgather) {
 *     static const mscclppNativeAlgorithmDef def = {MSCCLPP_NATIVE_ALGORITHM_ABI_VERSION, 0, "my_allgather",
 *                                                   "allgather", NULL, NULL, NULL, NULL, my_launch};
 *     return &def;
 *   }
 *
 * The library wraps a def into a handle (mscclppNativeAlgorithmCreate: the ABI version and the
 * required fields are checked there) and runs it (mscclppNativeAlgorithmExecute): per communicator
 * it calls init once, then per call it asks contextKey for the call's key and calls contextInit once
 * per new key (the contexts are cached per communicator), then launch. When the communicator is
 * destroyed (or mscclppNativeAlgorithmRelease is called) it calls contextFree for every cached
 * context and destroy once. Every callback except launch is optional.
 *
 * Callbacks run on the thread that called mscclppNativeAlgorithmExecute (destroy and contextFree:
 * the one destroying the communicator); they may call any public function of the library on the
 * communicator they are given (registrations, connections, channels, the bootstrap), except the
 * mscclppNativeAlgorithm* functions on that same communicator. A callback reports failure by
 * returning a result other than mscclppSuccess; the library's error names the algorithm, the
 * callback and the result, and quotes the thread's last error: the message of the callback's own
 * library call that failed, or one it set (MSCCLPP_NATIVE_ERROR). On every rank the same algorithms must be executed in the same order with matching
 * sizes, as for the built-in collectives (init and contextInit usually talk to the peers). */
#ifndef MSCCLPP_NATIVE_ALGORITHM_H_
#define MSCCLPP_NATIVE_ALGORITHM_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/collectives.h>
#include <mscclpp/comm.h>
#include <mscclpp/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the def's layout and of the callbacks' signatures. The library refuses a def
 * whose abiVersion differs (rebuild the algorithm against this header). */
#define MSCCLPP_NATIVE_ALGORITHM_ABI_VERSION 1

/* The op a caller passes when the collective reduces nothing (Python's ReduceOp.NOP). */
#define MSCCLPP_NATIVE_OP_NONE ((mscclppRedOp_t)255)

/* Declares and exports a factory: `MSCCLPP_NATIVE_FACTORY(name) { ... return &def; }` defines
 * `const mscclppNativeAlgorithmDef* name(void)` with C linkage and default visibility, what
 * mscclpp.compile_native looks up by name. */
#ifdef __cplusplus
#define MSCCLPP_NATIVE_EXTERN extern "C"
#else
#define MSCCLPP_NATIVE_EXTERN
#endif
#define MSCCLPP_NATIVE_FACTORY(name) \
  MSCCLPP_NATIVE_EXTERN __attribute__((visibility("default"))) const mscclppNativeAlgorithmDef* name(void)

/* One named value of a call's extras (Python: extras={"name": int}); pointers travel as integers. */
typedef struct {
  const char* name;
  uintptr_t value;
} mscclppNativeExtra;

/* What identifies a call's context: calls with equal keys (every field equal) share one. */
typedef struct {
  uintptr_t input, output;
  uint64_t inputSize, outputSize;
  uint64_t tag; /* anything else the context depends on */
} mscclppNativeContextKey;

/* Once per communicator, before anything else of the algorithm runs on it: *state (NULL unless
 * set) is handed to every other callback on that communicator. user: the def's user field. When
 * init fails, destroy is not called (init frees what it made) and the next execute tries again. */
typedef mscclppResult_t (*mscclppNativeInitFn)(mscclppComm_t comm, void* user, void** state);

/* The key of a call. Without this callback the key is {input, output, inputSize, outputSize,
 * dtype}: a context per buffers, sizes and datatype. */
typedef mscclppNativeContextKey (*mscclppNativeContextKeyFn)(void* state, const void* input, void* output,
                                                            size_t inputSize, size_t outputSize,
                                                            mscclppDataType_t dtype);

/* Once per new key on a communicator: makes the context (*ctx, NULL unless set) that launch gets
 * for every call of that key. Without it, launch gets ctx NULL. When it fails, nothing is cached
 * (it frees what it made) and contextFree is not called. */
typedef mscclppResult_t (*mscclppNativeContextInitFn)(mscclppComm_t comm, void* state, const void* input,
                                                      void* output, size_t inputSize, size_t outputSize,
                                                      mscclppDataType_t dtype, void** ctx);

/* One call: runs the collective (GPU ranks: enqueues it on stream, a cudaStream_t; CPU ranks: the
 * stream is NULL and the call blocks until this rank's part is done). nblocks and nthreadsPerBlock
 * are the caller's (0: the algorithm chooses); op is the caller's reduction operator
 * (MSCCLPP_NATIVE_OP_NONE when it gave none); extras[0..nextras) the caller's named values. The
 * sizes have been checked against the collective (see mscclppNativeAlgorithmExecute). */
typedef mscclppResult_t (*mscclppNativeLaunchFn)(mscclppComm_t comm, void* state, void* ctx, const void* input,
                                                 void* output, size_t inputSize, size_t outputSize,
                                                 mscclppDataType_t dtype, mscclppRedOp_t op, void* stream,
                                                 int nblocks, int nthreadsPerBlock, const mscclppNativeExtra* extras,
                                                 int nextras);

/* Frees a context made by contextInit (called at teardown, for every cached context). */
typedef void (*mscclppNativeContextFreeFn)(mscclppComm_t comm, void* state, void* ctx);

/* The counterpart of init: once per communicator at teardown, after every contextFree. During
 * mscclppCommAbort the library's calls on comm fail with mscclppAborted; what they would release is
 * freed with the communicator anyway. */
typedef void (*mscclppNativeDestroyFn)(mscclppComm_t comm, void* state);

/* Once, when the library drops its last reference to the algorithm (the handle destroyed and every
 * communicator that ran it torn down): frees user. */
typedef void (*mscclppNativeReleaseFn)(void* user);

/* What a factory returns. The library copies it (and its strings) at mscclppNativeAlgorithmCreate;
 * the callbacks' code must stay loaded until the release callback would run. */
typedef struct {
  uint32_t abiVersion;     /* MSCCLPP_NATIVE_ALGORITHM_ABI_VERSION */
  uint32_t flags;          /* 0 (reserved) */
  const char* name;        /* the algorithm's name (non-empty) */
  const char* collective;  /* "allreduce", "allgather", "reducescatter", "broadcast", "reduce",
                              "alltoall" (sizes checked), or any other non-empty name (not checked) */
  void* user;              /* handed to init and release */
  mscclppNativeInitFn init;
  mscclppNativeContextKeyFn contextKey;
  mscclppNativeContextInitFn contextInit;
  mscclppNativeLaunchFn launch; /* required */
  mscclppNativeContextFreeFn contextFree;
  mscclppNativeDestroyFn destroy;
  mscclppNativeReleaseFn release;
} mscclppNativeAlgorithmDef;

/* The library's handle of a native algorithm. */
typedef struct mscclppNativeAlgorithm* mscclppNativeAlgorithm_t;

/* Checks def and makes a handle. InvalidArgument naming what is wrong: def NULL, an abiVersion
 * other than MSCCLPP_NATIVE_ALGORITHM_ABI_VERSION (the message names both), flags not 0, an
 * empty or missing name or collective, a missing launch. */
mscclppResult_t mscclppNativeAlgorithmCreate(const mscclppNativeAlgorithmDef* def, mscclppNativeAlgorithm_t* algo);

/* Drops the handle. Communicators that ran the algorithm keep what they need of it until they
 * are torn down. */
mscclppResult_t mscclppNativeAlgorithmDestroy(mscclppNativeAlgorithm_t algo);

/* The algorithm's name and collective (valid while the handle lives). Either output may be NULL. */
mscclppResult_t mscclppNativeAlgorithmInfo(mscclppNativeAlgorithm_t algo, const char** name, const char** collective);

/* Runs one call of algo on comm (init and contextInit first where needed; see the top of this
 * file). The sizes are checked against the collective on comm's n ranks, in bytes: allgather
 * outputSize == n * inputSize; reducescatter inputSize == n * outputSize; allreduce, broadcast,
 * reduce and alltoall inputSize == outputSize (alltoall: a multiple of n elements); both sizes a
 * multiple of dtype's size for every collective, named or not. InvalidArgument for those, an
 * unknown dtype, negative nblocks, nthreadsPerBlock or nextras, or extras NULL with nextras > 0.
 * A failing callback's result is returned with a message naming the algorithm and the callback. */
mscclppResult_t mscclppNativeAlgorithmExecute(mscclppComm_t comm, mscclppNativeAlgorithm_t algo, const void* input,
                                              void* output, size_t inputSize, size_t outputSize,
                                              mscclppDataType_t dtype, mscclppRedOp_t op, void* stream, int nblocks,
                                              int nthreadsPerBlock, const mscclppNativeExtra* extras, int nextras);

/* For callbacks: records "file:line: <message>" as the calling thread's last error (what the
 * library's error for the failed callback then quotes) and returns res, so that a callback can
 * `return MSCCLPP_NATIVE_ERROR(mscclppInvalidUsage, "rank %d: no GPU", rank);`. */
mscclppResult_t mscclppNativeAlgorithmSetError(mscclppResult_t res, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define MSCCLPP_NATIVE_ERROR(res, ...) mscclppNativeAlgorithmSetError((res), __FILE__, __LINE__, __VA_ARGS__)

/* Tears down algo's state on comm now (contextFree for every context, then destroy), as the
 * communicator's destruction would; the next execute on comm starts with init again. Nothing of
 * the algorithm may be running on comm. Success when algo never ran on comm. */
mscclppResult_t mscclppNativeAlgorithmRelease(mscclppComm_t comm, mscclppNativeAlgorithm_t algo);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSCCLPP_NATIVE_ALGORITHM_H_ */
