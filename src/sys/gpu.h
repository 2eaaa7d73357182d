/* gpu.h - the few facts about this process's GPU that the communicator needs, answered without
 * CUDA in CPU-only builds. */
#ifndef MPP_SYS_GPU_H_
#define MPP_SYS_GPU_H_

#include <stddef.h>

#include <mscclpp/core.h>

/* Number of visible CUDA devices (0 without CUDA, driver or devices). */
int gpu_count(void);
/* The calling thread's current device; fails when there is none. */
mscclppResult_t gpu_current_device(int* dev);
/* Makes dev current for the calling thread. */
mscclppResult_t gpu_set_device(int dev);
/* Writes dev's PCI bus id ("0000:3b:00.0") into buf. */
mscclppResult_t gpu_bus_id(int dev, char* buf, size_t len);
/* Writes dev's model name ("NVIDIA H100 80GB HBM3") into buf. */
mscclppResult_t gpu_name(int dev, char* buf, size_t len);

/* setup_stream.c: zeroes bytes at ptr / copies bytes (any direction) on the current device's
 * setup stream, a non-blocking stream of the library's own, and returns once done. Setup uses
 * these instead of cudaMemset / cudaMemcpy / cudaDeviceSynchronize so that it can run while the
 * application captures one of its streams into a CUDA graph. */
mscclppResult_t gpu_zero_sync(void* ptr, size_t bytes);
mscclppResult_t gpu_copy_sync(void* dst, const void* src, size_t bytes);

#endif /* MPP_SYS_GPU_H_ */
