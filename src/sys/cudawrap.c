/* cudawrap.c - loads the driver entry points listed in cudawrap.h. */
#include "sys/cudawrap.h"

#include "util/err.h"
#include "util/log.h"

#if MSCCLPP_HAVE_CUDA
#include <pthread.h>

struct cu_table cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static int cu_ok;

/* Fetches every entry point; any missing one leaves the driver unusable (cu_ok = 0). */
static void cu_load(void) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count <= 0) {
    (void)cudaGetLastError();
    LOG_INFO_(LOG_SUB_INIT, "no usable CUDA device (%s)", cudaGetErrorString(err));
    return;
  }
  enum cudaDriverEntryPointQueryResult status;
#define MPP_CU_LOAD(name, abi)                                                                        \
  if (cudaGetDriverEntryPointByVersion(#name, (void**)&cu.name, 12000, cudaEnableDefault, &status) != \
          cudaSuccess ||                                                                           \
      status != cudaDriverEntryPointSuccess || cu.name == NULL) {                                  \
    log_msg(LOG_WARN, LOG_SUB_INIT, "CUDA driver entry point %s not found", #name);                \
    return;                                                                                        \
  }
  MPP_CU_FUNCTIONS(MPP_CU_LOAD)
#undef MPP_CU_LOAD
  cu_ok = 1;
}

int cu_available(void) {
  pthread_once(&cu_once, cu_load);
  return cu_ok;
}

mscclppResult_t cu_error(CUresult r, const char* what, const char* file, int line) {
  const char* text = NULL;
  if (cu.cuGetErrorString == NULL || cu.cuGetErrorString(r, &text) != CUDA_SUCCESS || text == NULL)
    text = "unknown CUDA driver error";
  return err_set(mscclppUnhandledCudaError, file, line, "%s failed: CUDA driver error %d (%s)", what, (int)r, text);
}

mscclppResult_t cuda_error(cudaError_t r, const char* what, const char* file, int line) {
  (void)cudaGetLastError();
  return err_set(mscclppUnhandledCudaError, file, line, "%s failed: CUDA error %d (%s)", what, (int)r,
                 cudaGetErrorString(r));
}

#else

int cu_available(void) { return 0; }

#endif
