/* api.c - mscclppExecutePlan: argument checks, then the interpreter for this rank's kind: the CPU
 * executor (exec/cpu/) runs the call before returning, the GPU executor (exec/gpu/) enqueues one
 * kernel on the stream (LL plans use LL16 packets, or LL8 through mscclppExecutePlanPacket). */
#include <mscclpp/executor.h>

#include "plan/plan.h"

#include "core/comm.h"
#include "exec/cpu/cpu.h"
#include "exec/gpu/gpu.h"
#include "exec/supports.h"
#include "core/handle_reg.h"
#include "util/err.h"

mscclppResult_t mscclppExecutePlan(mscclppComm_t comm, mscclppPlan_t plan, const void* sendbuff, void* recvbuff,
                                   size_t sendBytes, size_t recvBytes, mscclppDataType_t datatype, void* stream) {
  return mscclppExecutePlanPacket(comm, plan, sendbuff, recvbuff, sendBytes, recvBytes, datatype, mscclppPacketLL16,
                                  stream);
}

mscclppResult_t mscclppExecutePlanPacket(mscclppComm_t comm, mscclppPlan_t plan, const void* sendbuff, void* recvbuff,
                                         size_t sendBytes, size_t recvBytes, mscclppDataType_t datatype,
                                         mscclppPacketType_t packet, void* stream) {
  err_clear();
  COMM_CHECK(comm);
  HANDLE_CHECK(HANDLE_PLAN, plan);
  return exec_plan(comm, plan, sendbuff, recvbuff, sendBytes, recvBytes, datatype, packet, stream);
}

mscclppResult_t exec_plan(struct mscclppComm* comm, struct mscclppPlan* plan, const void* sendbuff, void* recvbuff,
                          size_t sendBytes, size_t recvBytes, mscclppDataType_t datatype, mscclppPacketType_t packet,
                          void* stream) {
  const char* fn = "mscclppExecutePlanPacket";
  COMM_HOLD(comm, fn);
  MPP_CHECK_ARG(plan != NULL, "%s: plan is NULL", fn);
  MPP_CHECK_ARG(sendBytes == 0 || sendbuff != NULL, "%s: sendbuff is NULL for %zu bytes", fn, sendBytes);
  MPP_CHECK_ARG(recvBytes == 0 || recvbuff != NULL, "%s: recvbuff is NULL for %zu bytes", fn, recvBytes);
  uint64_t size = sendBytes > recvBytes ? sendBytes : recvBytes;
  if (size < plan->min_size || size > plan->max_size)
    return MPP_ERR(mscclppInvalidArgument, "%s: %s serves %llu to %llu bytes, the call has %llu", fn, plan->file,
                   (unsigned long long)plan->min_size, (unsigned long long)plan->max_size, (unsigned long long)size);
  const char *s = sendbuff, *r = recvbuff;
  int overlap = sendBytes && recvBytes && s < r + recvBytes && r < s + sendBytes;
  if (plan->inplace && !overlap && sendBytes && recvBytes)
    return MPP_ERR(mscclppInvalidUsage, "%s: %s is an in-place plan; the call's input and output do not overlap",
                   fn, plan->file);
  MPP_CHECK_ARG(packet == mscclppPacketLL16 || packet == mscclppPacketLL8,
                "%s: packet format %d; mscclppPacketLL16 (0) or mscclppPacketLL8 (1)", fn, (int)packet);
  char why[400];
  if (exec_plan_unfit(comm, plan, why, sizeof(why)))
    return MPP_ERR(mscclppInvalidUsage, "%s: %s: the ranks of this communicator are on several hosts and the plan's %s",
                   fn, plan->file, why);
  if (comm->kind == mscclppRankGpu)
    return exec_gpu_run(comm, plan, sendbuff, recvbuff, sendBytes, recvBytes, (int)datatype, stream,
                        packet == mscclppPacketLL8 ? EXEC_GPU_LL8 : EXEC_GPU_LL16);
  return exec_cpu_run(comm, plan, sendbuff, recvbuff, sendBytes, recvBytes, (int)datatype);
}
