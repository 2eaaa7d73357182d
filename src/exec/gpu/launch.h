/* launch.h - the executor kernel as host C sees it (kernel.cu). Both return a cudaError_t value. */
#ifndef MPP_EXEC_GPU_LAUNCH_H_
#define MPP_EXEC_GPU_LAUNCH_H_

#include <stddef.h>

#include "exec/gpu/dev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The kernel comes in two forms: the full one, and a lean one for plans of copies, memory puts
 * and gets and packet ops only (xg_op_lean), whose op loop has no other op's code. `lean` picks. */

/* Launches the kernel on stream: grid blocks (one per threadblock of the plan's rank, at least
 * one) of `threads` threads with smem bytes of dynamic shared memory (the pointer array). */
int xg_launch(const struct xg_params* p, int lean, int grid, int threads, size_t smem, void* stream);
/* Lets the kernel take smem bytes of dynamic shared memory (needed above 48 KiB). */
int xg_smem_optin(int lean, size_t smem);
/* How many blocks of that shape one SM of the current device runs at once. */
int xg_occupancy(int lean, int threads, size_t smem, int* per_sm);

#ifdef __cplusplus
}
#endif

#endif /* MPP_EXEC_GPU_LAUNCH_H_ */
