/* comm.h - the communicator as the layers above the bootstrap see it. */
#ifndef MPP_CORE_COMM_H_
#define MPP_CORE_COMM_H_

#include <pthread.h>
#include <stdint.h>

#include <mscclpp/comm.h>

#include "transport/transport.h"
#include "util/list.h"

struct comm_objects;

/* Upper layers keep their per-communicator state in these slots (core never looks inside). A slot
 * is made on first use and finalized when the communicator is torn down, in reverse slot order
 * (so a layer's fini runs before the fini of the layers it uses), before the transports. */
/* COMM_EXT_NATIVE: users' native algorithms (algo/native.c), last so that it goes first. */
enum comm_ext_slot { COMM_EXT_CHANNELS = 0, COMM_EXT_PROXY, COMM_EXT_ALGO, COMM_EXT_EXEC, COMM_EXT_NATIVE, COMM_EXT_COUNT };
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
  struct transport_comm tc;   /* the communicator as the transports see it (objects.c fills it) */
  struct comm_objects* objs;  /* open registrations, connections, semaphores (objects.c) */
  pthread_mutex_t ext_lock;        /* guards making ext slots */
  struct comm_ext ext[COMM_EXT_COUNT];
  /* The registry's (core/handles.c): */
  _Atomic int busy;     /* public calls inside this communicator now (comm_hold) */
  _Atomic int aborting; /* mscclppCommAbort has begun: new calls fail, blocking waits give up */
  uint64_t serial;      /* unique in the process, never reused; set before the handle is published */
  int abort_running;    /* an mscclppCommAbort call is inside (under the registry's lock) */
  _Atomic uintptr_t owner;        /* the thread inside an exclusive call (its token), 0 when none */
  int owner_depth;                /* that thread's exclusive calls inside (only it reads or writes) */
  _Atomic(const char*) owner_fn;  /* the owner's outermost call, for messages */
};

/* The state in slot, made by make (and registered with fini) on first use. Lock-free once made. */
mscclppResult_t comm_ext_get(struct mscclppComm* comm, enum comm_ext_slot slot, comm_ext_make_fn make,
                             comm_ext_fini_fn fini, void** state);
/* The state in slot, or NULL when none was made. */
void* comm_ext_peek(struct mscclppComm* comm, enum comm_ext_slot slot);
/* Finalizes slot's state now (if any); a later comm_ext_get makes a new one. */
void comm_ext_release(struct mscclppComm* comm, enum comm_ext_slot slot, int abort);

/* objects.c: starts the transports and the lists of open objects (at the end of init), and frees
 * what the user left open, then stops the transports (at the start of destroy or abort; abort != 0
 * must not wait for peers). */
mscclppResult_t comm_objects_init(struct mscclppComm* comm);
void comm_objects_fini(struct mscclppComm* comm, int abort);
/* Adds or removes an object of one of the communicator's lists (under their lock). */
enum comm_object_list { COMM_OBJ_MEMS = 0, COMM_OBJ_CONNS, COMM_OBJ_SEMS, COMM_OBJ_LISTS };
void comm_objects_track(struct mscclppComm* comm, enum comm_object_list list, struct list_node* node);
void comm_objects_untrack(struct mscclppComm* comm, struct list_node* node);

/* 1 once mscclppCommAbort has begun on comm: blocking waits check it and return Aborted. */
static inline int comm_aborting(struct mscclppComm* comm) { return comm != NULL && comm->aborting; }

/* A public call's hold on a communicator (core/handles.c): the handle was found in the registry of
 * live communicators (so nothing behind a destroyed or garbage handle is read), the call is counted
 * in (mscclppCommDestroy refuses and mscclppCommAbort waits while a call is inside), and an
 * exclusive hold claims the communicator for the calling thread (another thread's exclusive call
 * fails with InvalidUsage; nested calls of the same thread are fine). */
struct comm_hold {
  struct mscclppComm* comm; /* NULL: nothing held */
  int exclusive;
};
/* Holds comm for fn. serial != 0: only the communicator of that serial number (a queued group call).
 * Errors: InvalidUsage (destroyed, not a communicator, in use by another thread), Aborted. */
mscclppResult_t comm_hold(struct mscclppComm* comm, uint64_t serial, int exclusive, const char* fn, struct comm_hold* h);
/* Ends a hold (nothing when none is held). */
void comm_release(struct comm_hold* h);

/* Validates a communicator handle at a public entry point and holds it exclusively for the rest of
 * the function (released on every return path). */
#define COMM_CHECK(comm) COMM_HOLD(comm, __func__)
/* The same with the function name given (fn: a string). */
#define COMM_HOLD(comm, fn) COMM_HOLD_MODE(comm, fn, 1)
/* A shared hold, for calls that only read what never changes (rank, size, ...): any thread. */
#define COMM_CHECK_SHARED(comm) COMM_HOLD_MODE(comm, __func__, 0)
#define COMM_HOLD_MODE(comm, fn, excl)                                                   \
  MPP_CHECK_ARG((comm) != NULL, "%s: communicator is NULL", (fn));                      \
  struct comm_hold comm_held_ __attribute__((cleanup(comm_release))) = {NULL, 0};       \
  MPP_CHECK(comm_hold((comm), 0, (excl), (fn), &comm_held_))

#endif /* MPP_CORE_COMM_H_ */
