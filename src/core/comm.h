/* comm.h - the communicator as the layers above the bootstrap see it. */
#ifndef MPP_CORE_COMM_H_
#define MPP_CORE_COMM_H_

#include <pthread.h>
#include <stdint.h>

#include <mscclpp/comm.h>

struct bootstrap;
struct transport_state;

/* What every rank tells the others at init (allgathered, fixed layout). */
struct peer_info {
  int32_t rank;
  int32_t kind;     /* mscclppRankKind_t: Cpu or Gpu */
  int32_t cuda_dev; /* -1 for CPU ranks */
  int32_t pid;
  uint64_t host_hash; /* equal for ranks of one host (host name + boot id) */
  uint64_t comm_id;   /* rank 0's value is the communicator's id */
  char bus_id[16];    /* PCI bus id of the GPU, "" for CPU ranks */
};

/* Upper layers keep their per-communicator state in these slots (core never looks inside). A slot
 * is made on first use and finalized when the communicator is torn down, in reverse slot order
 * (so a layer's fini runs before the fini of the layers it uses), before the transports. */
enum comm_ext_slot { COMM_EXT_CHANNELS = 0, COMM_EXT_PROXY, COMM_EXT_ALGO, COMM_EXT_EXEC, COMM_EXT_COUNT };
/* Releases a slot's state; abort != 0: the communicator is being aborted, do not wait for peers. */
typedef void (*comm_ext_fini_fn)(struct mscclppComm* comm, void* state, int abort);
/* Makes a slot's state (no communication with peers; those steps belong to the layer's calls). */
typedef mscclppResult_t (*comm_ext_make_fn)(struct mscclppComm* comm, void** state);
struct comm_ext {
  void* _Atomic state;
  comm_ext_fini_fn fini;
};

struct mscclppComm {
  int rank, nranks;
  int local_rank, local_size; /* among ranks with our host_hash */
  int kind;                   /* mscclppRankKind_t of this rank */
  int cuda_dev;
  uint64_t comm_id;           /* random, shared by all ranks: tags blobs of this communicator */
  int timeout_ms;             /* bootstrap bound */
  struct bootstrap* boot;
  struct peer_info* peers;    /* nranks entries */
  struct transport_state* tstate; /* owned by core/transports.c */
  pthread_mutex_t ext_lock;        /* guards making ext slots */
  struct comm_ext ext[COMM_EXT_COUNT];
  _Atomic int busy;     /* public calls inside this communicator now (comm_guard) */
  _Atomic int aborting; /* mscclppCommAbort has begun: new calls fail, blocking waits give up */
};

/* The state in slot, made by make (and registered with fini) on first use. Lock-free once made. */
mscclppResult_t comm_ext_get(struct mscclppComm* comm, enum comm_ext_slot slot, comm_ext_make_fn make,
                             comm_ext_fini_fn fini, void** state);
/* The state in slot, or NULL when none was made. */
void* comm_ext_peek(struct mscclppComm* comm, enum comm_ext_slot slot);
/* Finalizes slot's state now (if any); a later comm_ext_get makes a new one. */
void comm_ext_release(struct mscclppComm* comm, enum comm_ext_slot slot, int abort);

/* Starts and stops what the transports keep per communicator (services, listeners). Called at
 * the end of init and at the start of destroy/abort; abort != 0 must not wait for peers. */
mscclppResult_t transports_init(struct mscclppComm* comm);
void transports_fini(struct mscclppComm* comm, int abort);

/* 1 once mscclppCommAbort has begun on comm: blocking waits check it and return Aborted. */
static inline int comm_aborting(struct mscclppComm* comm) { return comm != NULL && comm->aborting; }

/* The busy count of a public call, so that mscclppCommAbort (another thread) frees nothing while a
 * call is inside. comm_guard_enter counts the call in and refuses it (NULL) when an abort has
 * begun; the guard variable's cleanup counts it out on every return path. */
struct mscclppComm* comm_guard_enter(struct mscclppComm* comm);
void comm_guard_leave(struct mscclppComm** held);

/* Validates a communicator handle at a public entry point and holds it for the rest of the
 * function (comm_guard_*): a call on a communicator being aborted fails with Aborted. */
#define COMM_CHECK(comm) COMM_HOLD(comm, __func__)
/* The same with the function name given (fn: a string). */
#define COMM_HOLD(comm, fn)                                                                         \
  MPP_CHECK_ARG((comm) != NULL, "%s: communicator is NULL", (fn));                                 \
  struct mscclppComm* comm_held_ __attribute__((cleanup(comm_guard_leave))) = comm_guard_enter(comm); \
  if (comm_held_ == NULL) return MPP_ERR(mscclppAborted, "%s: the communicator is being aborted", (fn))

#endif /* MPP_CORE_COMM_H_ */
