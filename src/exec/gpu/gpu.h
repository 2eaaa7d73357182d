/* gpu.h - the GPU executor as the rest of the library (exec/api.c), the tools and the tests see
 * it: plans on GPU ranks, one kernel launch per call on the caller's stream (src/exec/gpu/). */
#ifndef MPP_EXEC_GPU_GPU_H_
#define MPP_EXEC_GPU_GPU_H_

#include <stdint.h>

#include <mscclpp/core.h>

#define EXEC_GPU_LL16 16 /* packet formats of LL plans (mscclpp/packet.h) */
#define EXEC_GPU_LL8 8

struct mscclppComm;
struct mscclppPlan;

/* Enqueues one call of plan on stream (a cudaStream_t; NULL: the legacy default stream) and
 * returns without waiting for it. Connects, registers and allocates on first use (collective:
 * see docs/plans.md for what every rank must do alike), also while the stream is being captured
 * into a CUDA graph. packet: EXEC_GPU_LL16 or EXEC_GPU_LL8 for the packets of LL
 * plans (every rank must use the same). A failure of an earlier call found on the device is
 * returned here (and by every later call: the communicator cannot run plans after one). */
mscclppResult_t exec_gpu_run(struct mscclppComm* comm, struct mscclppPlan* plan, const void* send, void* recv,
                             uint64_t send_bytes, uint64_t recv_bytes, int dtype, void* stream, int packet);

/* Success, or the failure a call of this rank recorded on the device so far (a wait that hit its
 * bound, naming plan, block, op and peer) or that its proxy met. Does not wait for the device:
 * synchronize the stream first to learn about the calls enqueued so far. */
mscclppResult_t exec_gpu_check(struct mscclppComm* comm);

#endif /* MPP_EXEC_GPU_GPU_H_ */
