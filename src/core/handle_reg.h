/* handle_reg.h - the registry of live library objects other than communicators (handle_reg.c):
 * connections, host semaphores, registered memory, plans, windows, buffer registrations, proxy
 * services and native algorithms. A public call that takes such a handle looks it up here before
 * reading anything behind it, so a destroyed, never-made or garbage handle is an InvalidUsage error
 * naming the kind, never a dereference. Host code only (never included by CUDA code). */
#ifndef MPP_CORE_HANDLE_REG_H_
#define MPP_CORE_HANDLE_REG_H_

#include <mscclpp/core.h>

struct mscclppComm;

enum handle_kind {
  HANDLE_CONNECTION = 0,
  HANDLE_HOST_SEMAPHORE,
  HANDLE_REGMEM,
  HANDLE_PLAN,
  HANDLE_WINDOW,
  HANDLE_BUFFER_REG,
  HANDLE_PROXY_SERVICE,
  HANDLE_NATIVE_ALGORITHM,
  HANDLE_KINDS
};

/* The kind's name in messages ("connection", "host semaphore", ...). */
const char* handle_kind_name(enum handle_kind kind);

/* Registers p as a live handle of kind; owner: its communicator, or NULL for objects that belong to
 * none (plans, native algorithms). SystemError when out of memory (then p is not registered). */
mscclppResult_t handle_add(enum handle_kind kind, const void* p, const struct mscclppComm* owner);

/* Unregisters p (its object is being freed): a later lookup says it was destroyed. Nothing when p is
 * not a live handle of kind (already marked dead by handle_comm_gone, or never registered). */
void handle_remove(enum handle_kind kind, const void* p);
/* The same for an object freed by its communicator's teardown: a later lookup says so. */
void handle_remove_with_comm(enum handle_kind kind, const void* p);

/* Success when p is a live handle of kind. Otherwise InvalidArgument for NULL, InvalidUsage for a
 * destroyed handle (saying whether by its own destroy call or with its communicator), for a live
 * handle of another kind, or for an address the registry never saw (or forgot: it remembers the
 * last HANDLE_GRAVES destroyed ones). fn names the public call in the message. One mutex and a
 * hash lookup: well under a microsecond. */
mscclppResult_t handle_check(enum handle_kind kind, const void* p, const char* fn);

/* handle_check for a destroy call: also accepts an object whose communicator was destroyed without
 * freeing it (a proxy service). */
mscclppResult_t handle_check_destroy(enum handle_kind kind, const void* p, const char* fn);

/* The same as handle_check, then also that p belongs to comm (InvalidUsage naming both otherwise). */
mscclppResult_t handle_check_owned(enum handle_kind kind, const void* p, const struct mscclppComm* comm, const char* fn);

/* Records that p (a live handle of kind) is kept by another part of the library, which destroys it:
 * keeper (a string constant) says which, for the refusal of the user's destroy call. */
void handle_set_keeper(enum handle_kind kind, const void* p, const char* keeper);
/* p's keeper, or NULL when none (or p is not a live handle of kind). */
const char* handle_keeper(enum handle_kind kind, const void* p);

/* Marks every live handle owned by comm as destroyed with its communicator (called in
 * mscclppCommDestroy/Abort's teardown, which then frees those objects); a proxy service, which the
 * communicator does not free, is left to its destroy call alone. */
void handle_comm_gone(const struct mscclppComm* comm);

/* A public call's hold on an object: counted in until handle_release, so that destroying the object
 * (or its communicator) meanwhile is refused. */
struct handle_hold {
  _Atomic int* slot_busy; /* a fast hold: the count it is in */
  const void* p;          /* a locked hold: the object (its entry counts it) */
  unsigned char kind;
};
/* handle_check, then counts the call in (h). No lock when the object has its own fast slot. */
mscclppResult_t handle_hold(enum handle_kind kind, const void* p, const char* fn, struct handle_hold* h);
/* Ends a hold (nothing when none is held). */
void handle_release(struct handle_hold* h);

/* For a destroy call, instead of handle_check_destroy + handle_remove: unregisters p (a live or
 * orphaned handle of kind) unless a call holds it, which is refused (InvalidUsage, nothing changed).
 * On success the caller frees the object. */
mscclppResult_t handle_retire(enum handle_kind kind, const void* p, const char* fn);

/* Communicator teardown. close: the objects comm owns (proxy services aside) stop being held by new
 * calls of other threads (they say the communicator is being destroyed); the calling thread may still
 * use them (the teardown releases its internal objects through the public calls). holds: calls still
 * inside those objects (with one of them named in *kind / *p when kind is not NULL). reopen: undoes
 * close (a destroy refused because of such calls). */
void handle_comm_close(const struct mscclppComm* comm);
int handle_comm_holds(const struct mscclppComm* comm, const char** kind, const void** p);
void handle_comm_reopen(const struct mscclppComm* comm);

#define HANDLE_CAT2_(a, b) a##b
#define HANDLE_CAT_(a, b) HANDLE_CAT2_(a, b)
/* At a public entry point: holds p (a kind handle) for the rest of the calling function (released
 * on every return path), returning handle_hold's error from it. */
#define HANDLE_CHECK(kind, p) HANDLE_HOLD_IF_((kind), (p), 1, HANDLE_CAT_(handle_held_, __LINE__))
/* The same for an optional handle: nothing when p is NULL. */
#define HANDLE_CHECK_OPT(kind, p) HANDLE_HOLD_IF_((kind), (p), (p) != NULL, HANDLE_CAT_(handle_held_, __LINE__))
#define HANDLE_HOLD_IF_(kind, p, cond, var)                                             \
  struct handle_hold var __attribute__((cleanup(handle_release))) = {NULL, NULL, 0};  \
  if (cond) MPP_CHECK(handle_hold((kind), (p), __func__, &var))

#endif /* MPP_CORE_HANDLE_REG_H_ */
