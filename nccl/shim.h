/* shim.h - what the NCCL library's files share: the communicator behind an ncclComm_t, the live-
 * handle table that tells a communicator from a destroyed or foreign pointer, result mapping and
 * the last-error text, the thread's group state, and the export macro that also makes the pnccl
 * name of every function.
 *
 * The library is a client of libmscclpp's public API only (include/mscclpp/): it translates
 * names, types, communicator life cycles and error reporting; the collectives themselves are the
 * library's. */
#ifndef MSCCLPP_NCCL_SHIM_H_
#define MSCCLPP_NCCL_SHIM_H_

#define MSCCLPP_NCCL_NO_CUDA_HEADERS 1
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>

#include <mscclpp/collectives.h>
#include <mscclpp/comm.h>
#include <mscclpp/core.h>

/* Defines ncclName (exported) and pncclName as an alias of it. Use at file scope:
 *   NCCL_API(ncclResult_t, CommCount, const ncclComm_t comm, int* count) { ... } */
#define NCCL_API(ret, name, ...)                                                                    \
  __attribute__((visibility("default"))) ret nccl##name(__VA_ARGS__);                               \
  extern __typeof__(nccl##name) pnccl##name __attribute__((alias("nccl" #name), visibility("default"))); \
  ret nccl##name(__VA_ARGS__)

/* Life of a communicator. */
enum shim_state {
  SHIM_PENDING = 0, /* made inside a group: initialised at the outermost ncclGroupEnd */
  SHIM_INITING = 1, /* a nonblocking init runs on its own thread */
  SHIM_READY = 2,
  SHIM_FAILED = 3,  /* init failed: only destroy/abort and error queries are valid */
  SHIM_FINALIZED = 4
};

struct ncclComm {
  mscclppComm_t c;
  int rank, nranks, device;
  int blocking;
  _Atomic int state;           /* enum shim_state */
  /* What ncclCommGetAsyncError reports once the init is done: the init's result, then the first
   * failure of the communicator itself (a peer lost or silent: shim_fail_lib). Atomic: a watchdog
   * thread polls it while the calling thread's failing call sets it. */
  _Atomic ncclResult_t async;
  pthread_t init_thread;       /* SHIM_INITING: joined before the communicator is used */
  int has_init_thread;
  ncclUniqueId id;             /* for a pending or nonblocking init */
  mscclppConfig_t cfg;
  uint32_t splits;             /* splits made from this communicator (tags their messages) */
  pthread_mutex_t lock;
  char last[1024];             /* its last error's text */
  void** regs;                 /* its live registrations and windows (mem.c), under lock */
  size_t nregs, capregs;
  struct shim_worker* worker;  /* its thread for groups of several communicators (worker.c), or NULL */
  void* real;                  /* its twin in the real NCCL (fallback.c), made on first use, or NULL */
};

/* The library's result in NCCL's terms (timeouts and aborts have no NCCL code of their own). */
ncclResult_t shim_result(mscclppResult_t r);
/* Records the failure of a call (on comm when not NULL, and as the thread's last error) with the
 * library's detail, and returns r mapped. For success, returns ncclSuccess. */
ncclResult_t shim_fail_lib(ncclComm_t comm, mscclppResult_t r, const char* call);
/* Records a failure found by the shim itself (printf-style text) and returns res. */
ncclResult_t shim_fail(ncclComm_t comm, ncclResult_t res, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
/* The thread's last error text ("" when none). */
const char* shim_thread_last(void);

/* Live communicators: a handle is valid between shim_live_add and shim_live_remove. */
int shim_live_add(ncclComm_t comm);
void shim_live_remove(ncclComm_t comm);
int shim_live(ncclComm_t comm);
/* comm, checked to be live and initialised (a nonblocking init is waited for); InvalidArgument
 * (recorded, naming call) otherwise. */
ncclResult_t shim_ready(ncclComm_t comm, const char* call);

/* One collective or point-to-point call, as made: run at once, or queued in a group. */
enum shim_kind {
  SHIM_ALLREDUCE,
  SHIM_ALLGATHER,
  SHIM_REDUCESCATTER,
  SHIM_BROADCAST,
  SHIM_REDUCE,
  SHIM_ALLTOALL,
  SHIM_SEND,
  SHIM_RECV,
  SHIM_WINDOW /* a symmetric window's registration: send the buffer, count its bytes, recv the mscclppWindow_t* to set */
};
struct shim_op {
  enum shim_kind kind;
  const char* call; /* its NCCL name, for errors */
  const void* send;
  void* recv;
  size_t count;
  int dtype, redop, peer; /* peer: the root of broadcast and reduce, the peer of send and recv */
  ncclComm_t comm;
  cudaStream_t stream;
};

/* Runs op now (outside a group) or queues it for the outermost ncclGroupEnd (group.c). */
ncclResult_t shim_submit(const struct shim_op* op);

/* A thread that runs one job at a time (worker.c): start (NULL when no thread can be made), post
 * fn(arg), wait for it, stop (joins; NULL is fine). */
struct shim_worker* shim_worker_start(void);
void shim_worker_post(struct shim_worker* w, void (*fn)(void*), void* arg);
void shim_worker_wait(struct shim_worker* w);
void shim_worker_stop(struct shim_worker* w);

/* The real NCCL (fallback.c): whether calls of kind go there (MSCCLPP_NCCL_FALLBACK); one such
 * call on the communicator's real twin (made on first use); real group brackets (start 1 / 0;
 * Success without a real NCCL); the device API there; the twin's teardown. */
int shim_fallback_forced(enum shim_kind kind);
/* Makes comm's real twin now if it has none (outside a real group: NCCL defers an init made
 * inside one to its group's end, and a call on it there would find it unmade). */
ncclResult_t shim_fallback_prepare(ncclComm_t comm, const char* call);
ncclResult_t shim_fallback_run(const struct shim_op* op);
ncclResult_t shim_fallback_group(int start);
ncclResult_t shim_fallback_devcomm(ncclComm_t comm, const void* reqs, void* out, int create);
void shim_fallback_free(ncclComm_t comm, int abort);

/* 1 when real is the real twin of a live communicator (live.c). */
int shim_live_is_twin(const void* real);
/* The real NCCL calling its own exported functions on its own communicators: where those calls
 * bound to this library's names (the real library was loaded into the global scope before us,
 * e.g. by torch's preloading, so RTLD_DEEPBIND could not apply), they are sent back to it. Each
 * returns 1 and sets *res when comm is a live communicator's twin (fallback.c). */
int shim_fallback_async_error(const void* comm, ncclResult_t* asyncError, ncclResult_t* res);
int shim_fallback_register(const void* comm, void* buff, size_t size, void** handle, ncclResult_t* res);
int shim_fallback_deregister(const void* comm, void* handle, int window, ncclResult_t* res);

/* Groups of this thread (group.c). */
int shim_group_depth(void);
/* Queues comm's initialisation for the outermost ncclGroupEnd; InternalError when out of memory. */
ncclResult_t shim_group_defer_init(ncclComm_t comm);

/* Runs comm's initialisation (its id, rank, nranks and cfg are set) on this thread; sets its
 * state and async result. */
ncclResult_t shim_init_now(ncclComm_t comm);
/* Initialises comms[0..n) at once, a thread each (every rank's init waits for the others);
 * returns the first failure (a failed communicator stays, in state FAILED). */
ncclResult_t shim_init_together(ncclComm_t* comms, size_t n);
/* A communicator object (not yet initialised) for rank of nranks with id and an NCCL config (may
 * be NULL); InvalidArgument for a config of a wrong magic, or bad sizes. */
ncclResult_t shim_comm_new(int nranks, ncclUniqueId id, int rank, const ncclConfig_t* config, ncclComm_t* out);
void shim_comm_free(ncclComm_t comm);
/* Frees the registrations comm still holds (mem.c; at teardown). */
void shim_regs_free(ncclComm_t comm);

#endif /* MSCCLPP_NCCL_SHIM_H_ */
