/* cpu_allgather.c - a native allgather for CPU ranks (include/mscclpp/native_algorithm.h), built by
 * mscclpp.compile_native in test_native.py. Only the public API: init connects to every peer (a
 * connection and a host semaphore each); a context (one per output size, through contextKey) is a
 * shared-memory scratch of the output's size registered with every peer; a call copies this rank's
 * input into its slot of the scratch, writes that slot into every peer's scratch, signals, waits for
 * every peer's slot, copies the scratch out and then waits until every peer has copied its own out
 * (so the next call may write into them). cpu_allgather_stats() counts the callbacks for the test. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mscclpp/connection.h>
#include <mscclpp/memory.h>
#include <mscclpp/native_algorithm.h>

enum { S_INIT, S_CONTEXT, S_LAUNCH, S_CONTEXT_FREE, S_DESTROY, S_RELEASE, S_COUNT };
static int64_t stats[S_COUNT];

/* The callbacks' counts so far: out[S_COUNT] (init, contextInit, launch, contextFree, destroy, release). */
__attribute__((visibility("default"))) void cpu_allgather_stats(int64_t* out) { memcpy(out, stats, sizeof(stats)); }

struct state {
  int rank, nranks;
  mscclppConnection_t* conn;  /* per peer */
  mscclppHostSemaphore_t* sem; /* per peer */
};

struct ctx {
  char* scratch; /* shared host memory, outputSize bytes */
  size_t bytes;
  mscclppRegisteredMemory reg; /* ours and every peer's scratch */
};

#define TRY(call)                                 \
  do {                                            \
    mscclppResult_t r_ = (call);                  \
    if (r_ != mscclppSuccess) return r_;          \
  } while (0)

static void free_state(struct state* s) {
  for (int q = 0; s->conn && q < s->nranks; q++) {
    if (s->sem && s->sem[q]) (void)mscclppHostSemaphoreDestroy(s->sem[q]);
    if (s->conn[q]) (void)mscclppConnectionDestroy(s->conn[q]);
  }
  free(s->conn), free(s->sem), free(s);
}

static void destroy(mscclppComm_t comm, void* state) {
  (void)comm;
  free_state(state);
  stats[S_DESTROY]++;
}

/* Connections and semaphores to every peer, in increasing peer order on every rank. */
static mscclppResult_t connect_all(mscclppComm_t comm, struct state* s) {
  TRY(mscclppCommRank(comm, &s->rank));
  TRY(mscclppCommSize(comm, &s->nranks));
  s->conn = calloc((size_t)s->nranks, sizeof(*s->conn));
  s->sem = calloc((size_t)s->nranks, sizeof(*s->sem));
  if (!s->conn || !s->sem) return mscclppSystemError;
  for (int q = 0; q < s->nranks; q++) {
    if (q == s->rank) continue;
    TRY(mscclppConnectionCreate(comm, q, 7, mscclppTransportAuto, &s->conn[q]));
    TRY(mscclppHostSemaphoreCreate(comm, s->conn[q], &s->sem[q]));
  }
  return mscclppSuccess;
}

/* destroy is not called after a failed init: it frees what it made itself. */
static mscclppResult_t init(mscclppComm_t comm, void* user, void** out) {
  (void)user;
  struct state* s = calloc(1, sizeof(*s));
  if (!s) return mscclppSystemError;
  mscclppResult_t r = connect_all(comm, s);
  if (r != mscclppSuccess) return free_state(s), r;
  *out = s;
  stats[S_INIT]++;
  return mscclppSuccess;
}

/* A context serves every call of one output size, whatever the buffers. */
static mscclppNativeContextKey context_key(void* state, const void* input, void* output, size_t in, size_t out,
                                           mscclppDataType_t dtype) {
  (void)state, (void)input, (void)output, (void)dtype;
  mscclppNativeContextKey k = {0, 0, in, out, 0};
  return k;
}

static mscclppResult_t context_init(mscclppComm_t comm, void* state, const void* input, void* output, size_t in,
                                    size_t out, mscclppDataType_t dtype, void** ctxp) {
  (void)state, (void)input, (void)output, (void)in, (void)dtype;
  struct ctx* c = calloc(1, sizeof(*c));
  if (!c) return mscclppSystemError;
  c->bytes = out;
  mscclppResult_t r = mscclppMemAlloc((void**)&c->scratch, out ? out : 1, mscclppMemHost);
  if (r == mscclppSuccess) r = mscclppRegisterBuffer(comm, c->scratch, out ? out : 1, &c->reg);
  if (r != mscclppSuccess) {
    if (c->scratch) (void)mscclppMemFree(c->scratch);
    free(c);
    return r;
  }
  *ctxp = c;
  stats[S_CONTEXT]++;
  return mscclppSuccess;
}

static void context_free(mscclppComm_t comm, void* state, void* p) {
  (void)comm, (void)state;
  struct ctx* c = p;
  (void)mscclppRegisteredMemoryRelease(&c->reg);
  (void)mscclppMemFree(c->scratch);
  free(c);
  stats[S_CONTEXT_FREE]++;
}

/* Signals every peer, then waits for every peer's signal. */
static mscclppResult_t exchange_steps(struct state* s) {
  for (int q = 0; q < s->nranks; q++)
    if (q != s->rank) TRY(mscclppHostSemaphoreSignal(s->sem[q]));
  for (int q = 0; q < s->nranks; q++)
    if (q != s->rank) TRY(mscclppHostSemaphoreWait(s->sem[q], -1));
  return mscclppSuccess;
}

static mscclppResult_t launch(mscclppComm_t comm, void* state, void* ctxp, const void* input, void* output, size_t in,
                              size_t out, mscclppDataType_t dtype, mscclppRedOp_t op, void* stream, int nblocks,
                              int nthreads, const mscclppNativeExtra* extras, int nextras) {
  (void)comm, (void)dtype, (void)op, (void)stream, (void)nblocks, (void)nthreads;
  struct state* s = state;
  struct ctx* c = ctxp;
  uint64_t mine = (uint64_t)s->rank * in;
  memmove(c->scratch + mine, input, in);
  for (int q = 0; q < s->nranks; q++)
    if (q != s->rank) TRY(mscclppConnectionWrite(s->conn[q], c->reg.remote[q], mine, c->reg.local, mine, in));
  TRY(exchange_steps(s)); /* every peer's slot has landed in our scratch */
  memcpy(output, c->scratch, out);
  TRY(exchange_steps(s)); /* every peer has copied its scratch out */
  stats[S_LAUNCH]++;
  for (int i = 0; i < nextras; i++) /* "stats": where to copy the counts (an int64 array's address) */
    if (strcmp(extras[i].name, "stats") == 0) cpu_allgather_stats((int64_t*)extras[i].value);
  return mscclppSuccess;
}

static void release(void* user) {
  (void)user;
  stats[S_RELEASE]++;
}

MSCCLPP_NATIVE_FACTORY(create_allgather_algorithm) {
  static const mscclppNativeAlgorithmDef def = {
      MSCCLPP_NATIVE_ALGORITHM_ABI_VERSION, 0, "cpu_allgather", "allgather", NULL, init, context_key, context_init,
      launch, context_free, destroy, release};
  return &def;
}

/* A second factory of the same file: the same algorithm without contextKey (a context per
 * buffers and sizes) and named apart. */
MSCCLPP_NATIVE_FACTORY(create_allgather_keyed_by_buffers) {
  static const mscclppNativeAlgorithmDef def = {
      MSCCLPP_NATIVE_ALGORITHM_ABI_VERSION, 0, "cpu_allgather_by_buffers", "allgather", NULL, init, NULL,
      context_init, launch, context_free, destroy, release};
  return &def;
}
