/* comm_internal.h - helpers shared by the communicator's own files. */
#ifndef MPP_CORE_COMM_INTERNAL_H_
#define MPP_CORE_COMM_INTERNAL_H_

#include <stdint.h>

#include "core/comm.h"

/* Identity of this host: a hash of host name and boot id (or MSCCLPP_HOSTID when set) and of the
 * network namespace; logged at INFO. */
uint64_t comm_host_hash(void);
/* Fills this rank's entry (kind, device, pid, host, a random id candidate, bus id). */
mscclppResult_t comm_fill_peer_info(const struct mscclppComm* comm, struct peer_info* info);
/* Validates the allgathered table; sets comm_id, local_rank and local_size. */
mscclppResult_t comm_adopt_peer_info(struct mscclppComm* comm);

/* Finalizes every upper layer's slot, highest slot first (teardown, before the transports). */
void comm_ext_fini_all(struct mscclppComm* comm, int abort);

/* ---- the registry of live communicators (handles.c) ---- */
/* Registers an initialised communicator (gives it its serial number). */
mscclppResult_t comm_handle_add(struct mscclppComm* c);
/* Unregisters c for mscclppCommDestroy: refused (InvalidUsage) when c is not live, being aborted or
 * has a call inside. */
mscclppResult_t comm_handle_retire(struct mscclppComm* c, const char* fn);
/* Keeps the struct of a retired communicator (resources freed) allocated in the quarantine of
 * recently destroyed ones, freeing the oldest. */
void comm_handle_bury(struct mscclppComm* c);
/* mscclppCommAbort: checks c is live and not being aborted by another call, then sets its aborting
 * flag (new calls are refused from here on). */
mscclppResult_t comm_handle_abort_begin(struct mscclppComm* c, const char* fn);
/* After the drain: unregisters c and returns 1 when no call is inside c and object_calls (calls
 * inside its objects) is 0, else 0 (c stays registered and aborting; another abort may try again). */
int comm_handle_abort_end(struct mscclppComm* c, int object_calls);

#endif /* MPP_CORE_COMM_INTERNAL_H_ */
