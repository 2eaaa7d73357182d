/* mscclpp/executor.h - execution plans: JSON plans in the MSCCL++ executor's schema, loaded and
 * validated once, executed on a communicator. Compiles as C11 and as C++.
 *
 * A plan names a collective, a protocol (Simple or LL), per-rank threadblocks of ops and the
 * channels they use (docs/plans.md). Loading checks everything (ranks, channels, buffers, chunk
 * ranges, signal/wait balance, barriers, semaphores, op fields); a bad plan is InvalidArgument with
 * a message naming the file, the GPU, the threadblock, the op index and the field. */
#ifndef MSCCLPP_EXECUTOR_H_
#define MSCCLPP_EXECUTOR_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/collectives.h>
#include <mscclpp/comm.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mscclppPlan* mscclppPlan_t;

/* What a plan is for. Strings live as long as the plan. */
typedef struct {
  const char* name;
  const char* collective; /* "allreduce", "allgather", ... as in the plan */
  int nranks;
  int protocolLL;         /* 1: LL (packets), 0: Simple */
  int inplace;
  uint64_t minMessageSize, maxMessageSize;
  int maxBlocksPerRank;
} mscclppPlanInfo_t;

/* Loads and validates a plan file. */
mscclppResult_t mscclppPlanLoadFile(const char* path, mscclppPlan_t* plan);
/* Loads and validates a plan from len bytes of JSON text; name appears in error messages. */
mscclppResult_t mscclppPlanLoadString(const char* json, size_t len, const char* name, mscclppPlan_t* plan);
/* Frees a plan. Plans must not be destroyed while an execution with them runs. NULL is fine. */
mscclppResult_t mscclppPlanDestroy(mscclppPlan_t plan);
mscclppResult_t mscclppPlanInfo(mscclppPlan_t plan, mscclppPlanInfo_t* info);

/* Runs the plan on this rank (collective: every rank of comm calls it with the same plan and
 * sizes). sendBytes/recvBytes are the byte sizes of this rank's input and output; datatype decides
 * how reductions combine elements. CPU ranks run the plan on host threads and return when it is
 * done (stream is ignored); the first call with a plan connects and registers what it needs and
 * caches it on the communicator. GPU ranks: InvalidUsage until the GPU executor is built. */
mscclppResult_t mscclppExecutePlan(mscclppComm_t comm, mscclppPlan_t plan, const void* sendbuff, void* recvbuff,
                                   size_t sendBytes, size_t recvBytes, mscclppDataType_t datatype, void* stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSCCLPP_EXECUTOR_H_ */
