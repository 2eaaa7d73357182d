/* regmem.h - registered memory handles inside the library (regmem.c): a transport_mem (what the
 * transports describe and map; transport/transport.h) with core's bookkeeping around it. */
#ifndef MPP_CORE_REGMEM_H_
#define MPP_CORE_REGMEM_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/memory.h>

#include "transport/transport.h"
#include "util/list.h"

struct mscclppComm;

struct mscclppRegMem {
  struct list_node link; /* in the communicator's list of open registrations (first member) */
  struct mscclppComm* comm;
  struct transport_mem t; /* description, address and mapping (t.tc is &comm->tc) */
};

/* Registers [ptr, ptr+size) of this rank with every transport that can reach it. */
mscclppResult_t regmem_register(struct mscclppComm* comm, void* ptr, uint64_t size, struct mscclppRegMem** out);
/* Validates a peer's blob (regblob_decode, then against what comm knows about the owner) and
 * imports it with every offered transport in `want` (TRANSPORT_BIT()s; REGMEM_ALL) that this rank
 * can use. */
#define REGMEM_ALL 0xffffffffu
mscclppResult_t regmem_import(struct mscclppComm* comm, const void* blob, size_t len, uint32_t want,
                              struct mscclppRegMem** out);
/* Releases a registration or import (unexports, unmaps) and frees it; NULL is ignored. */
void regmem_free(struct mscclppRegMem* mem);

#endif /* MPP_CORE_REGMEM_H_ */
