/* image.h - building a plan's device image (image.c): what route.c works out on the host first. */
#ifndef MPP_EXEC_GPU_IMAGE_H_
#define MPP_EXEC_GPU_IMAGE_H_

#include <stddef.h>
#include <stdint.h>

#include "exec/gpu/state.h"

/* Sizes of one rank's part of a plan. */
struct xg_counts {
  int nblocks, nswitch, nbarriers, nsems;
  size_t ops, refs, chans, sw_members;
  uint32_t maxptrs; /* the most buffer pointers one op needs (switch refs count their members) */
};

/* What the host resolves for the kernel, flat over the rank's blocks (image.c uploads it). */
struct xg_routes {
  int32_t* slot;      /* [chan ref]: memory-semaphore or port-channel slot, -1 for others */
  int32_t* route;     /* [ref]: pch * 9 + dst type * 3 + src type for port puts, else -1 */
  uint8_t* op_flags;  /* [op]: XG_OP_* (kept in plan_op.pad on the device) */
  int32_t* pch_slot;  /* [plan-local port channel]: its port-channel slot */
  uint16_t* pch_need; /* [plan-local port channel]: bit dst type * 3 + src type: a port is needed */
  int npch;
};

/* Counts rank's part of plan; InvalidUsage when an op needs more than XG_MAX_PTRS pointers. */
mscclppResult_t xg_count(const struct mscclppPlan* plan, int rank, struct xg_counts* n);
/* Resolves slots and routes (the channels exist: xg_chans_ensure ran). InvalidUsage names an op
 * whose port put has no listed channel to the destination's rank. */
mscclppResult_t xg_routes_make(const struct xg_state* st, const struct mscclppPlan* plan, const struct xg_counts* n,
                               struct xg_routes* rt);

#endif /* MPP_EXEC_GPU_IMAGE_H_ */
