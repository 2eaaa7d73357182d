/* supports.h - what the plan executor can run (mscclppExecutePlan), asked before a registered plan
 * is handed a collective call. */
#ifndef MPP_EXEC_SUPPORTS_H_
#define MPP_EXEC_SUPPORTS_H_

#include <mscclpp/executor.h>

struct mscclppComm;

/* Nonzero when mscclppExecutePlan runs plans on this communicator: CPU ranks (peers of other hosts
 * over tcp); GPU ranks in CUDA builds when every rank is on this host. Otherwise the collectives
 * leave registered plans aside and use the built-in algorithms. */
int exec_supports_kind(const struct mscclppComm* comm);

/* mscclppExecutePlanPacket without the plan-handle lookup, for the library's own plans (the plan
 * registry's, which are no user's handles). */
mscclppResult_t exec_plan(struct mscclppComm* comm, struct mscclppPlan* plan, const void* sendbuff, void* recvbuff,
                          size_t sendBytes, size_t recvBytes, mscclppDataType_t datatype, mscclppPacketType_t packet,
                          void* stream);

#endif /* MPP_EXEC_SUPPORTS_H_ */
