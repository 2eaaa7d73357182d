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

/* At a public entry point: returns the error of handle_check from the calling function. */
#define HANDLE_CHECK(kind, p) MPP_CHECK(handle_check((kind), (p), __func__))

#endif /* MPP_CORE_HANDLE_REG_H_ */
