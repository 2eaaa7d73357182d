/* cudawrap.h - the CUDA driver API without linking libcuda: entry points are fetched once through
 * the (statically linked) runtime's cudaGetDriverEntryPointByVersion. With no CUDA in the build,
 * or no driver on the machine, cu_available() is 0 and nothing else may be called. */
#ifndef MPP_SYS_CUDAWRAP_H_
#define MPP_SYS_CUDAWRAP_H_

#include <mscclpp/core.h>

#if MSCCLPP_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

/* X(name, abi): every driver function the library uses, with the ABI version of its typedef. */
#define MPP_CU_FUNCTIONS(X)            \
  X(cuGetErrorString, 6000)                  \
  X(cuDeviceGet, 2000)                       \
  X(cuDeviceGetAttribute, 2000)              \
  X(cuMemCreate, 10020)                       \
  X(cuMemRelease, 10020)                      \
  X(cuMemMap, 10020)                          \
  X(cuMemUnmap, 10020)                        \
  X(cuMemAddressReserve, 10020)               \
  X(cuMemAddressFree, 10020)                  \
  X(cuMemSetAccess, 10020)                    \
  X(cuMemGetAllocationGranularity, 10020)     \
  X(cuMemExportToShareableHandle, 10020)      \
  X(cuMemImportFromShareableHandle, 10020)    \
  X(cuMemRetainAllocationHandle, 11000)       \
  X(cuMemGetAllocationPropertiesFromHandle, 10020) \
  X(cuMemGetAddressRange, 3020)              \
  X(cuPointerGetAttribute, 4000)

struct cu_table {
#define MPP_CU_FIELD(name, abi) PFN_##name##_v##abi name;
  MPP_CU_FUNCTIONS(MPP_CU_FIELD)
#undef MPP_CU_FIELD
};

/* The table, filled on first use; valid only when cu_available(). */
extern struct cu_table cu;

/* Records a CUresult failure of `what` as UnhandledCudaError with the driver's text. */
mscclppResult_t cu_error(CUresult r, const char* what, const char* file, int line);
/* Records a cudaError_t failure of `what`, likewise. */
mscclppResult_t cuda_error(cudaError_t r, const char* what, const char* file, int line);

/* Return UnhandledCudaError (a code the compiler sees, as MPP_ERR does) when call fails. */
#define CU_CHECK(call)                                                                                  \
  do {                                                                                                  \
    CUresult cu_r_ = (call);                                                                            \
    if (cu_r_ != CUDA_SUCCESS) return (cu_error(cu_r_, #call, __FILE__, __LINE__), mscclppUnhandledCudaError); \
  } while (0)
#define CUDA_CHECK(call)                                                                                        \
  do {                                                                                                          \
    cudaError_t cuda_r_ = (call);                                                                               \
    if (cuda_r_ != cudaSuccess) return (cuda_error(cuda_r_, #call, __FILE__, __LINE__), mscclppUnhandledCudaError); \
  } while (0)
#endif /* MSCCLPP_HAVE_CUDA */

/* 1 when the build has CUDA, a driver is loaded and at least one device is visible. Thread-safe;
 * the first call loads the driver entry points. */
int cu_available(void);

#endif /* MPP_SYS_CUDAWRAP_H_ */
