/* native.c - native algorithms (include/mscclpp/native_algorithm.h): a user's def checked and
 * copied into a counted handle, and run on a communicator whose COMM_EXT_NATIVE slot keeps, per
 * algorithm, init's state and the contexts cached by key; the slot's teardown (communicator
 * destruction or abort) frees the contexts and calls destroy. */
#include "algo/native.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/handle_reg.h"
#include "util/err.h"

#define NATIVE_MAGIC 0x6e617476u /* "natv": a live handle (guards a destroyed one a little) */

/* The collectives whose sizes are checked, in the order of size_rule's switch. */
enum { K_ALLREDUCE, K_ALLGATHER, K_REDUCESCATTER, K_BROADCAST, K_REDUCE, K_ALLTOALL, K_COUNT };
static const char* const known_coll[K_COUNT] = {"allreduce", "allgather", "reducescatter",
                                                "broadcast", "reduce",    "alltoall"};

/* What the slot holds: every algorithm that ran on the communicator. lock guards the list and
 * serializes init and contextInit (which talk to the peers). */
struct native_comm {
  pthread_mutex_t lock;
  struct native_inst* insts;
};

/* ---- handles ------------------------------------------------------------------------------------ */

static int coll_index(const char* name) {
  for (int k = 0; k < K_COUNT; k++)
    if (strcmp(name, known_coll[k]) == 0) return k;
  return -1;
}

static void algo_unref(struct mscclppNativeAlgorithm* a) {
  if (atomic_fetch_sub(&a->refs, 1) != 1) return;
  if (a->def.release) a->def.release(a->def.user);
  a->magic = 0; /* a stale handle then fails algo_check more often (no promise: it is freed memory) */
  free(a->name);
  free(a->collective);
  free(a);
}

/* The def's fields that must be right before anything else is read. */
static mscclppResult_t def_check(const mscclppNativeAlgorithmDef* def) {
  MPP_CHECK_ARG(def != NULL, "mscclppNativeAlgorithmCreate: def is NULL (did the factory fail?)");
  MPP_CHECK_ARG(def->abiVersion == MSCCLPP_NATIVE_ALGORITHM_ABI_VERSION,
                "native algorithm: ABI version %u, this library expects %u (rebuild the algorithm against this "
                "library's mscclpp/native_algorithm.h)", (unsigned)def->abiVersion,
                (unsigned)MSCCLPP_NATIVE_ALGORITHM_ABI_VERSION);
  MPP_CHECK_ARG(def->name != NULL && def->name[0] != '\0', "native algorithm: name is NULL or empty");
  MPP_CHECK_ARG(def->collective != NULL && def->collective[0] != '\0',
                "native algorithm '%s': collective is NULL or empty", def->name);
  MPP_CHECK_ARG(def->flags == 0, "native algorithm '%s': flags 0x%x, must be 0", def->name, (unsigned)def->flags);
  MPP_CHECK_ARG(def->launch != NULL, "native algorithm '%s': launch is NULL (the one callback every algorithm needs)",
                def->name);
  return mscclppSuccess;
}

mscclppResult_t mscclppNativeAlgorithmCreate(const mscclppNativeAlgorithmDef* def, mscclppNativeAlgorithm_t* algo) {
  err_clear();
  MPP_CHECK_ARG(algo != NULL, "mscclppNativeAlgorithmCreate: algo is NULL");
  *algo = NULL;
  MPP_CHECK(def_check(def));
  struct mscclppNativeAlgorithm* a = calloc(1, sizeof(*a));
  char* name = strdup(def->name);
  char* coll = strdup(def->collective);
  if (a == NULL || name == NULL || coll == NULL) {
    free(a), free(name), free(coll);
    return MPP_ERR(mscclppSystemError, "native algorithm '%s': out of host memory", def->name);
  }
  atomic_init(&a->refs, 1);
  a->def = *def;
  a->magic = NATIVE_MAGIC;
  a->def.name = a->name = name;
  a->def.collective = a->collective = coll;
  a->coll = coll_index(coll);
  mscclppResult_t res = handle_add(HANDLE_NATIVE_ALGORITHM, a, NULL);
  if (res != mscclppSuccess) {
    free(a), free(name), free(coll);
    return res;
  }
  *algo = a;
  return mscclppSuccess;
}

/* InvalidUsage unless algo (found live in the handle registry already, fn names the caller) still
 * has its magic and a reference. */
static mscclppResult_t algo_alive(const char* fn, mscclppNativeAlgorithm_t algo) {
  MPP_CHECK_ARG(algo->magic == NATIVE_MAGIC && atomic_load(&algo->refs) > 0,
                "%s: algo is not a live native algorithm (destroyed already?)", fn);
  return mscclppSuccess;
}

/* At a public entry point: holds algo for the rest of the function (a concurrent destroy is refused)
 * and checks it, before anything behind it is read. */
#define ALGO_HOLD(algo)                          \
  HANDLE_CHECK(HANDLE_NATIVE_ALGORITHM, (algo)); \
  MPP_CHECK(algo_alive(__func__, (algo)))

mscclppResult_t mscclppNativeAlgorithmDestroy(mscclppNativeAlgorithm_t algo) {
  err_clear();
  MPP_CHECK(handle_check(HANDLE_NATIVE_ALGORITHM, algo, __func__));
  MPP_CHECK(algo_alive(__func__, algo));
  /* the user's handle ends here (refused while another thread's call holds it); communicators may
   * keep the algorithm longer through their references */
  MPP_CHECK(handle_retire(HANDLE_NATIVE_ALGORITHM, algo, __func__));
  algo_unref(algo);
  return mscclppSuccess;
}

mscclppResult_t mscclppNativeAlgorithmInfo(mscclppNativeAlgorithm_t algo, const char** name, const char** collective) {
  err_clear();
  ALGO_HOLD(algo);
  if (name) *name = algo->name;
  if (collective) *collective = algo->collective;
  return mscclppSuccess;
}

/* ---- the communicator's slot -------------------------------------------------------------------- */

/* Frees inst's contexts (contextFree each), calls destroy when init had succeeded, drops the
 * algorithm. comm is still whole (the slot is torn down before the layers below). */
static void inst_teardown(struct mscclppComm* comm, struct native_inst* in) {
  const mscclppNativeAlgorithmDef* d = &in->algo->def;
  while (in->ctxs) {
    struct native_ctx* c = in->ctxs;
    in->ctxs = c->next;
    if (d->contextFree) d->contextFree(comm, in->state, c->ctx);
    free(c);
  }
  if (in->ready && d->destroy) d->destroy(comm, in->state);
  algo_unref(in->algo);
  free(in);
}

static void slot_fini(struct mscclppComm* comm, void* state, int abort) {
  (void)abort; /* the callbacks' library calls fail fast on an aborting communicator */
  struct native_comm* nc = state;
  pthread_mutex_lock(&nc->lock);
  struct native_inst* list = nc->insts;
  nc->insts = NULL;
  pthread_mutex_unlock(&nc->lock);
  while (list) {
    struct native_inst* in = list;
    list = in->next;
    inst_teardown(comm, in);
  }
  pthread_mutex_destroy(&nc->lock);
  free(nc);
}

static mscclppResult_t slot_make(struct mscclppComm* comm, void** state) {
  (void)comm;
  struct native_comm* nc = calloc(1, sizeof(*nc));
  if (nc == NULL) return MPP_ERR(mscclppSystemError, "native algorithms: out of host memory for the communicator");
  pthread_mutex_init(&nc->lock, NULL);
  *state = nc;
  return mscclppSuccess;
}

/* Under nc->lock: algo's entry on this communicator, made (not yet initialized) when missing. */
static struct native_inst* inst_find(struct native_comm* nc, struct mscclppNativeAlgorithm* algo) {
  for (struct native_inst* in = nc->insts; in; in = in->next)
    if (in->algo == algo) return in;
  struct native_inst* in = calloc(1, sizeof(*in));
  if (in == NULL) return NULL;
  atomic_fetch_add(&algo->refs, 1);
  in->algo = algo;
  in->next = nc->insts;
  nc->insts = in;
  return in;
}

/* ---- one call ----------------------------------------------------------------------------------- */

/* The message of a callback that returned rc: the callback's own library error, when it left one,
 * is kept in the message. Returns rc when it is a result code, else InternalError. */
static mscclppResult_t callback_failed(const struct mscclppNativeAlgorithm* a, const char* cb, int rank,
                                       mscclppResult_t rc) {
  char why[512];
  snprintf(why, sizeof(why), "%s", err_last());
  mscclppResult_t res = rc > mscclppSuccess && rc < mscclppNumResults ? rc : mscclppInternalError;
  return MPP_ERR(res, "native algorithm '%s': %s failed on rank %d with result %d (%s)%s%s", a->name, cb, rank,
                 (int)rc, mscclppGetErrorString(rc), why[0] ? "; the callback's error: " : "", why);
}

mscclppResult_t mscclppNativeAlgorithmSetError(mscclppResult_t res, const char* file, int line, const char* fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt ? fmt : "(no message)", ap);
  va_end(ap);
  return err_set(res, file ? file : "native algorithm", line, "%s", msg);
}

/* InvalidArgument unless the sizes fit the collective on n ranks (see the public header). */
static mscclppResult_t size_check(const struct mscclppNativeAlgorithm* a, int n, size_t in, size_t out, size_t es) {
  const char* fn = "mscclppNativeAlgorithmExecute";
  MPP_CHECK_ARG(in % es == 0 && out % es == 0, "%s: '%s': sizes %zu and %zu are not multiples of the %zu-byte element",
                fn, a->name, in, out, es);
  size_t un = (size_t)n;
  MPP_CHECK_ARG(a->coll != K_ALLTOALL || in % (un * es) == 0, "%s: '%s' (alltoall) on %d ranks needs input_size "
                "(%zu) to be a multiple of %d elements", fn, a->name, n, in, n);
  switch (a->coll) {
    case K_ALLGATHER:
      MPP_CHECK_ARG(out % un == 0 && out / un == in, "%s: '%s' (allgather) on %d ranks needs output_size = %d x "
                    "input_size (%zu), got %zu", fn, a->name, n, n, in, out);
      return mscclppSuccess;
    case K_REDUCESCATTER:
      MPP_CHECK_ARG(in % un == 0 && in / un == out, "%s: '%s' (reducescatter) on %d ranks needs input_size = %d x "
                    "output_size (%zu), got %zu", fn, a->name, n, n, out, in);
      return mscclppSuccess;
    case K_ALLTOALL:
    case K_ALLREDUCE:
    case K_BROADCAST:
    case K_REDUCE:
      MPP_CHECK_ARG(in == out, "%s: '%s' (%s) needs input_size == output_size, got %zu and %zu", fn, a->name,
                    a->collective, in, out);
      return mscclppSuccess;
    default: return mscclppSuccess; /* a collective of the user's own: its sizes are its business */
  }
}

static mscclppNativeContextKey default_key(const void* input, void* output, size_t in, size_t out,
                                           mscclppDataType_t dtype) {
  mscclppNativeContextKey k = {(uintptr_t)input, (uintptr_t)output, in, out, (uint64_t)dtype};
  return k;
}

static int key_equal(const mscclppNativeContextKey* x, const mscclppNativeContextKey* y) {
  return x->input == y->input && x->output == y->output && x->inputSize == y->inputSize &&
         x->outputSize == y->outputSize && x->tag == y->tag;
}

/* The call's buffers, sizes and datatype (what contextKey and contextInit see). */
struct call {
  const void* input;
  void* output;
  size_t in, out;
  mscclppDataType_t dtype;
};

/* Under nc->lock: init once, then the context of c's key (made by contextInit when new). */
static mscclppResult_t inst_prepare(struct mscclppComm* comm, struct native_inst* in, const struct call* c,
                                    void** ctx) {
  const mscclppNativeAlgorithmDef* d = &in->algo->def;
  if (!in->ready) {
    err_clear();
    mscclppResult_t rc = d->init ? d->init(comm, d->user, &in->state) : mscclppSuccess;
    if (rc != mscclppSuccess) return in->state = NULL, callback_failed(in->algo, "init", comm->rank, rc);
    in->ready = 1;
  }
  *ctx = NULL;
  if (d->contextInit == NULL) return mscclppSuccess;
  mscclppNativeContextKey key = d->contextKey ? d->contextKey(in->state, c->input, c->output, c->in, c->out, c->dtype)
                                              : default_key(c->input, c->output, c->in, c->out, c->dtype);
  for (struct native_ctx* x = in->ctxs; x; x = x->next)
    if (key_equal(&x->key, &key)) return *ctx = x->ctx, mscclppSuccess;
  struct native_ctx* x = calloc(1, sizeof(*x));
  if (x == NULL) return MPP_ERR(mscclppSystemError, "native algorithm '%s': out of host memory", in->algo->name);
  err_clear();
  mscclppResult_t rc = d->contextInit(comm, in->state, c->input, c->output, c->in, c->out, c->dtype, &x->ctx);
  if (rc != mscclppSuccess) return free(x), callback_failed(in->algo, "contextInit", comm->rank, rc);
  x->key = key;
  x->next = in->ctxs;
  in->ctxs = x;
  *ctx = x->ctx;
  return mscclppSuccess;
}

/* The algorithm's entry on comm, initialized, and the call's context. */
static mscclppResult_t prepare(struct mscclppComm* comm, struct mscclppNativeAlgorithm* algo, const struct call* c,
                               struct native_inst** inst, void** ctx) {
  void* s = NULL;
  MPP_CHECK(comm_ext_get(comm, COMM_EXT_NATIVE, slot_make, slot_fini, &s));
  struct native_comm* nc = s;
  pthread_mutex_lock(&nc->lock);
  struct native_inst* in = inst_find(nc, algo);
  mscclppResult_t res = in ? inst_prepare(comm, in, c, ctx)
                           : MPP_ERR(mscclppSystemError, "native algorithm '%s': out of host memory", algo->name);
  pthread_mutex_unlock(&nc->lock);
  *inst = in;
  return res;
}

mscclppResult_t mscclppNativeAlgorithmExecute(mscclppComm_t comm, mscclppNativeAlgorithm_t algo, const void* input,
                                              void* output, size_t inputSize, size_t outputSize,
                                              mscclppDataType_t dtype, mscclppRedOp_t op, void* stream, int nblocks,
                                              int nthreadsPerBlock, const mscclppNativeExtra* extras, int nextras) {
  err_clear();
  COMM_CHECK(comm);
  ALGO_HOLD(algo);
  size_t es = mscclppDataTypeSize(dtype);
  MPP_CHECK_ARG(es != 0, "%s: '%s': dtype %d is not a datatype", __func__, algo->name, (int)dtype);
  MPP_CHECK_ARG(nblocks >= 0 && nthreadsPerBlock >= 0, "%s: '%s': nblocks %d and nthreads_per_block %d must not be "
                "negative", __func__, algo->name, nblocks, nthreadsPerBlock);
  MPP_CHECK_ARG(nextras >= 0 && (nextras == 0 || extras != NULL), "%s: '%s': %d extras at %p", __func__, algo->name,
                nextras, (const void*)extras);
  MPP_CHECK(size_check(algo, comm->nranks, inputSize, outputSize, es));
  struct call c = {input, output, inputSize, outputSize, dtype};
  struct native_inst* in = NULL;
  void* ctx = NULL;
  MPP_CHECK(prepare(comm, algo, &c, &in, &ctx));
  err_clear();
  mscclppResult_t rc = algo->def.launch(comm, in->state, ctx, input, output, inputSize, outputSize, dtype, op, stream,
                                        nblocks, nthreadsPerBlock, extras, nextras);
  return rc == mscclppSuccess ? mscclppSuccess : callback_failed(algo, "launch", comm->rank, rc);
}

mscclppResult_t mscclppNativeAlgorithmRelease(mscclppComm_t comm, mscclppNativeAlgorithm_t algo) {
  err_clear();
  COMM_CHECK(comm);
  ALGO_HOLD(algo);
  struct native_comm* nc = comm_ext_peek(comm, COMM_EXT_NATIVE);
  if (nc == NULL) return mscclppSuccess;
  pthread_mutex_lock(&nc->lock);
  struct native_inst** p = &nc->insts;
  while (*p && (*p)->algo != algo) p = &(*p)->next;
  struct native_inst* in = *p;
  if (in) *p = in->next;
  pthread_mutex_unlock(&nc->lock);
  if (in) inst_teardown(comm, in);
  return mscclppSuccess;
}
