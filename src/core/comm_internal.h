/* comm_internal.h - helpers shared by the communicator's own files. */
#ifndef MPP_CORE_COMM_INTERNAL_H_
#define MPP_CORE_COMM_INTERNAL_H_

#include <stdint.h>

#include "core/comm.h"

/* Identity of this host: a hash of host name and boot id, or of MSCCLPP_HOST_ID when set. */
uint64_t comm_host_hash(void);
/* Fills this rank's entry (kind, device, pid, host, a random id candidate, bus id). */
mscclppResult_t comm_fill_peer_info(const struct mscclppComm* comm, struct peer_info* info);
/* Validates the allgathered table; sets comm_id, local_rank and local_size. */
mscclppResult_t comm_adopt_peer_info(struct mscclppComm* comm);

/* Finalizes every upper layer's slot, highest slot first (teardown, before the transports). */
void comm_ext_fini_all(struct mscclppComm* comm, int abort);

#endif /* MPP_CORE_COMM_INTERNAL_H_ */
