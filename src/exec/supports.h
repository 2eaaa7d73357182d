/* supports.h - what the plan executor can run (mscclppExecutePlan), asked before a registered plan
 * is handed a collective call. */
#ifndef MPP_EXEC_SUPPORTS_H_
#define MPP_EXEC_SUPPORTS_H_

#include <mscclpp/executor.h>

struct mscclppComm;

struct mscclppPlan;

/* Nonzero when mscclppExecutePlan runs plans on this communicator's rank kind: CPU ranks (peers of
 * other hosts over tcp or net); GPU ranks in CUDA builds (peers of other hosts through port
 * channels only: exec_plan_unfit). Otherwise the collectives use the built-in algorithms. */
int exec_supports_kind(const struct mscclppComm* comm);

/* GPU ranks on several hosts: nonzero, with why (the gpu, threadblock, op or channel), when plan
 * would have one rank load or store another host's memory (a memory or switch channel across
 * hosts, or a remote reference that is not a port put's destination). Every rank decides the same
 * (it reads every rank's part of the plan). 0 for CPU ranks and for GPU ranks of one host. */
int exec_plan_unfit(const struct mscclppComm* comm, const struct mscclppPlan* plan, char* why, size_t len);

/* mscclppExecutePlanPacket without the plan-handle lookup, for the library's own plans (the plan
 * registry's, which are no user's handles). */
mscclppResult_t exec_plan(struct mscclppComm* comm, struct mscclppPlan* plan, const void* sendbuff, void* recvbuff,
                          size_t sendBytes, size_t recvBytes, mscclppDataType_t datatype, mscclppPacketType_t packet,
                          void* stream);

#endif /* MPP_EXEC_SUPPORTS_H_ */
