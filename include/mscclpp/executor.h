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
  int doubleScratch;        /* 1: scratch in two halves that alternate per call */
  int doubleScratchByCheck; /* 1: turned on at load by the order check (MSCCLPP_PLAN_ORDER_CHECK=fix) */
} mscclppPlanInfo_t;

/* Loads and validates a plan file. */
mscclppResult_t mscclppPlanLoadFile(const char* path, mscclppPlan_t* plan);
/* Loads and validates a plan from len bytes of JSON text; name appears in error messages. */
mscclppResult_t mscclppPlanLoadString(const char* json, size_t len, const char* name, mscclppPlan_t* plan);
/* Frees a plan. Plans must not be destroyed while an execution with them runs. NULL is fine. */
mscclppResult_t mscclppPlanDestroy(mscclppPlan_t plan);
mscclppResult_t mscclppPlanInfo(mscclppPlan_t plan, mscclppPlanInfo_t* info);
/* The order check (docs/plans.md): finds the accesses of the plan's ranks to each other's buffers
 * that its signals, waits, barriers and packets leave unordered when calls run back to back with
 * nothing between them (as on GPU ranks; the CPU executor meets every rank around each call, so
 * there they do no harm), and waits that can never be satisfied. *findings gets their number,
 * text (textLen bytes; may be NULL) one line per finding. mscclppInvalidUsage, naming why, when
 * the plan uses synchronization the check does not model (a channel or semaphore shared by
 * threadblocks) or is too large for it. */
mscclppResult_t mscclppPlanCheckOrder(mscclppPlan_t plan, int* findings, char* text, size_t textLen);

/* Runs the plan on this rank (collective: every rank of comm calls it with the same plan and
 * sizes). sendBytes/recvBytes are the byte sizes of this rank's input and output; datatype decides
 * how reductions combine elements. CPU ranks run the plan on host threads and return when it is
 * done (stream is ignored); their peers may be on other hosts (reached over tcp). GPU ranks (all
 * on one host) enqueue one kernel on stream (LL plans use LL16 packets); the plan reads and writes
 * peers' buffers directly, so every rank's buffers are registered and exchanged the first time a
 * buffer pair is used (a collective step, which may be captured into a CUDA graph like any call:
 * it enqueues nothing but the kernel), then cached on the communicator with the channels and
 * scratch, so later calls do no setup. Ranks must call with the same plans, sizes and
 * buffers-in-the-same-calls.
 * mscclppExecutePlanPacket below picks LL8 instead. */
mscclppResult_t mscclppExecutePlan(mscclppComm_t comm, mscclppPlan_t plan, const void* sendbuff, void* recvbuff,
                                   size_t sendBytes, size_t recvBytes, mscclppDataType_t datatype, void* stream);

/* The packet formats of LL plans (mscclpp/packet.h): LL16 carries 8 data bytes and two 4-byte flags
 * in 16 bytes, LL8 4 data bytes and one flag in 8 (half the stores per byte, one 8-byte store each). */
typedef enum { mscclppPacketLL16 = 0, mscclppPacketLL8 = 1 } mscclppPacketType_t;

/* mscclppExecutePlan with the packet format of LL plans on GPU ranks (every rank must use the same
 * one with a plan; Simple plans ignore it). CPU ranks keep their packets inside the host
 * interpreter (LL16): the format changes nothing there. Another value is InvalidArgument. */
mscclppResult_t mscclppExecutePlanPacket(mscclppComm_t comm, mscclppPlan_t plan, const void* sendbuff, void* recvbuff,
                                         size_t sendBytes, size_t recvBytes, mscclppDataType_t datatype,
                                         mscclppPacketType_t packet, void* stream);

/* ---- Plan registry: plans the collectives of collectives.h run instead of the built-in algorithms.
 *
 * One registry per process. Every collective call (mscclppAllReduce, AllGather, ReduceScatter,
 * AllToAll, Broadcast; Reduce has no plan form) first asks it for a plan: the registered plans that
 * serve the call are the candidates, in priority order (higher first; equal priorities: earlier
 * registration first); the first one runs (mscclppExecutePlan), or the one a selector callback
 * picks; no candidate means the built-in algorithms. A JSON plan serves a call when its collective,
 * nranks (== world size), inplace flag, min/max_message_size (inclusive, against the larger of the
 * call's input and output bytes), ranks per node and reduce operator match (docs/plans.md). MSCCL
 * XML algorithms (mscclppPlanRegisterMscclXml, MSCCL_XML_FILES) serve by MSCCL's rule instead.
 * Plans from the environment: MSCCLPP_PLAN_DIR (every *.json in the directory) and MSCCL_XML_FILES,
 * loaded once per process at the first collective (or mscclppPlanRegistryLoadEnv).
 *
 * Every rank must register the same plans in the same order and make the same calls (the same
 * in-place-ness included), so that every rank picks the same plan. Registering may run beside
 * collectives; unregistering or clearing must not run while a collective that may use the removed
 * plans runs (as for mscclppPlanDestroy). */

/* Initialize with MSCCLPP_PLAN_REG_OPTIONS_INITIALIZER; NULL options mean the initializer. */
typedef struct {
  int priority;     /* candidates are tried in decreasing priority; default 0 */
  int ranksPerNode; /* serve only communicators with this many ranks per node; 0: the plan file's
                       "ranks_per_node" field when it has one, else any */
  int root;         /* broadcast plans: the root they serve; -1: the plan file's "root" field, else 0 */
} mscclppPlanRegOptions_t;
#define MSCCLPP_PLAN_REG_OPTIONS_INITIALIZER { 0, 0, -1 }

/* Registers a loaded plan; on success the registry owns it (mscclppPlanUnregister or
 * mscclppPlanRegistryClear destroy it) and *id (may be NULL) is its registration id (> 0). */
mscclppResult_t mscclppPlanRegister(mscclppPlan_t plan, const mscclppPlanRegOptions_t* options, int* id);
/* Loads, validates and registers a JSON plan file (its optional top-level "ranks_per_node" and
 * "root" fields are read here; the loader ignores them). */
mscclppResult_t mscclppPlanRegisterFile(const char* path, const mscclppPlanRegOptions_t* options, int* id);
/* Registers every "*.json" file of dir (not hidden files, not subdirectories), in name order. All or
 * nothing: a bad file fails the call naming it, and none of the directory's plans stay registered.
 * *count (may be NULL) gets how many were registered. */
mscclppResult_t mscclppPlanRegisterDirectory(const char* dir, const mscclppPlanRegOptions_t* options, int* count);
/* Reads, checks and converts an MSCCL XML algorithm (msccl_xml.h) and registers it; it serves calls
 * by MSCCL's rule (docs/msccl-xml.md). Only options->priority is used. */
mscclppResult_t mscclppPlanRegisterMscclXml(const char* path, const mscclppPlanRegOptions_t* options, int* id);
/* Removes registration id and destroys its plan. */
mscclppResult_t mscclppPlanUnregister(int id);
/* Back to an empty registry: removes and destroys every registered plan (those from the
 * environment too; the environment is not read again), restores the default selector and forgets a
 * failed environment load. No collective may run meanwhile. */
mscclppResult_t mscclppPlanRegistryClear(void);
/* Loads MSCCLPP_PLAN_DIR (priority MSCCLPP_PLAN_DIR_PRIORITY), then MSCCL_XML_FILES (priority
 * MSCCLPP_MSCCL_XML_PRIORITY) now, if not done yet. Done once per process: later calls, and every
 * collective, return the first call's result; when it failed (a bad file, named in the message),
 * nothing from the environment is registered and every collective fails with that error.
 * *count (may be NULL) gets how many plans the environment registered. */
mscclppResult_t mscclppPlanRegistryLoadEnv(int* count);

/* What a registration holds. Strings live until the registration is removed. */
typedef struct {
  int id;
  const char* name;       /* the plan's (or MSCCL algorithm's) name */
  const char* source;     /* the file it came from (mscclppPlanRegister: the name the plan was loaded
                             under) */
  const char* collective; /* as the plan (or the MSCCL file) names it */
  int msccl;              /* 1: an MSCCL XML algorithm, selected by MSCCL's rule */
  int priority;
  int ranksPerNode;       /* 0: any */
  int root;               /* the root a broadcast plan serves */
  uint64_t uses;          /* collective calls of this process it served */
  mscclppPlan_t plan;     /* MSCCL algorithms: the plan of its sum variant */
} mscclppPlanEntryInfo_t;

/* The ids of the registrations in selection order (priority, then registration order): up to maxIds
 * into ids; *count gets how many there are. */
mscclppResult_t mscclppPlanRegistryList(int* ids, int maxIds, int* count);
mscclppResult_t mscclppPlanRegistryQuery(int id, mscclppPlanEntryInfo_t* info);

/* What a selector sees of a call. */
typedef struct {
  const char* collective;     /* "allreduce", "allgather", "reducescatter", "alltoall", "broadcast" */
  size_t count;               /* the call's count */
  size_t bytes;               /* the larger of this rank's input and output bytes */
  mscclppDataType_t datatype;
  int op;                     /* mscclppRedOp_t of reductions, -1 otherwise */
  int root;                   /* broadcast, else -1 */
  int worldSize, ranksPerNode, rank;
  int inplace;
} mscclppPlanQuery_t;

typedef struct {
  mscclppPlan_t plan; /* what would run */
  int id, priority, msccl;
} mscclppPlanCandidate_t;

/* A selector returns the index of the candidate to run, or one of these. */
#define MSCCLPP_PLAN_SELECT_DEFAULT (-1) /* the first candidate */
#define MSCCLPP_PLAN_SELECT_BUILTIN (-2) /* no plan: the built-in algorithms */

/* Called (on the calling thread, possibly by several threads at once) for every collective call
 * that has at least one candidate; candidates[0..n) in priority order. It must choose alike on
 * every rank. Any other return value fails the call with InvalidUsage. */
typedef int (*mscclppPlanSelector_t)(const mscclppPlanQuery_t* query, const mscclppPlanCandidate_t* candidates, int n,
                                     void* userData);
/* Installs the process's selector (NULL: the default, the first candidate). */
mscclppResult_t mscclppPlanSelectorSet(mscclppPlanSelector_t selector, void* userData);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSCCLPP_EXECUTOR_H_ */
