/* native.h - native algorithms inside the library (native.c): the handle a user's
 * mscclppNativeAlgorithmDef becomes, and the per-communicator state that runs it (the
 * communicator's COMM_EXT_NATIVE slot: every algorithm's init state and its cache of contexts by
 * key, torn down with the communicator). The public side is include/mscclpp/native_algorithm.h.
 *
 * Layering: algo/ (beside the built-in collectives, which it does not use); only core/comm.h and
 * the public API below it. */
#ifndef MPP_ALGO_NATIVE_H_
#define MPP_ALGO_NATIVE_H_

#include <stdint.h>

#include <mscclpp/native_algorithm.h>

/* The handle: a checked copy of the def, shared (counted) by the user's handle and by every
 * communicator that ran it; the last reference calls def.release(def.user) and frees it. */
struct mscclppNativeAlgorithm {
  uint32_t magic; /* native.c's mark of a live handle */
  _Atomic int refs;
  mscclppNativeAlgorithmDef def; /* name and collective point at the copies below */
  char* name;
  char* collective;
  int coll; /* index of a known collective (native.c), or -1: sizes not checked */
};

/* A cached context of one algorithm on one communicator. */
struct native_ctx {
  struct native_ctx* next;
  mscclppNativeContextKey key;
  void* ctx;
};

/* One algorithm on one communicator: init's state and the contexts made so far. */
struct native_inst {
  struct native_inst* next;
  struct mscclppNativeAlgorithm* algo; /* holds a reference */
  void* state;
  int ready; /* init returned success */
  struct native_ctx* ctxs;
};

#endif /* MPP_ALGO_NATIVE_H_ */
