/* coll.h - the collectives layer: the public collective calls (api.c) meet the one dispatch point
 * (dispatch.c), which asks the plan registry (registry/) first and the built-in algorithms (algo/)
 * second; groups (group.c) queue calls until the outermost mscclppGroupEnd.
 *
 * Layering: coll/ is the top of the library. It uses the built-in algorithms and the plan executor
 * below it; neither of them reaches up here. */
#ifndef MPP_COLL_COLL_H_
#define MPP_COLL_COLL_H_

#include <stddef.h>

#include "algo/algo.h"

/* ---- dispatch (dispatch.c) -------------------------------------------------------------------- */

/* Runs one checked collective now: a registered plan that serves it, else a built-in algorithm. */
mscclppResult_t coll_dispatch(struct algo_comm* ac, const struct algo_args* a);
/* Runs a group's sends and receives now. */
mscclppResult_t coll_dispatch_p2p(struct p2p_op* ops, int nops);

/* ---- groups (group.c) ------------------------------------------------------------------------- */

/* True when the calling thread is inside mscclppGroupStart/End. */
int coll_in_group(void);
/* Queues a checked collective (inside a group) for GroupEnd. */
mscclppResult_t coll_group_add(struct algo_comm* ac, const struct algo_args* a);
/* Queues (inside a group) or runs (outside) a checked send (is_send) or receive. */
mscclppResult_t coll_group_add_p2p(struct algo_comm* ac, int is_send, void* buf, size_t bytes, int peer, void* stream);

#endif /* MPP_COLL_COLL_H_ */
