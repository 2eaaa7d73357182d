/* mscclpp/core.h - results, errors, logging and versions: the part of the C API every other
 * header builds on. Compiles as C11 and as C++. */
#ifndef MSCCLPP_CORE_H_
#define MSCCLPP_CORE_H_

#include <stddef.h>
#include <stdint.h>

#define MSCCLPP_MAJOR 0
#define MSCCLPP_MINOR 1
#define MSCCLPP_PATCH 0
#define MSCCLPP_VERSION (MSCCLPP_MAJOR * 10000 + MSCCLPP_MINOR * 100 + MSCCLPP_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* One result enum for the whole library. The first eight values are the seed API's (and NCCL's),
 * in the same order; later values only ever get appended. */
typedef enum {
  mscclppSuccess = 0,
  mscclppUnhandledCudaError = 1,
  mscclppSystemError = 2,
  mscclppInternalError = 3,
  mscclppInvalidArgument = 4,
  mscclppInvalidUsage = 5,
  mscclppRemoteError = 6,
  mscclppInProgress = 7,
  mscclppTimeout = 8,
  mscclppAborted = 9,
  mscclppNumResults = 10
} mscclppResult_t;

/* A short fixed description of a result code ("remote error", ...). Never NULL. */
const char* mscclppGetErrorString(mscclppResult_t result);

/* The detailed message of the last failed call on this thread: what failed and why, naming the
 * peer, size, file or errno text involved. Empty string when nothing failed yet. The pointer stays
 * valid until the next library call on this thread. */
const char* mscclppGetLastError(void);

/* Library version as MSCCLPP_VERSION computes it. */
mscclppResult_t mscclppGetVersion(int* version);

/* Log messages go to stderr (or MSCCLPP_LOG_FILE) unless a handler is set. The handler gets one
 * complete line (without the trailing newline) per call and may be called from any thread. */
typedef void (*mscclppLogHandler_t)(const char* msg);

/* Writes msg and a newline to the default log destination. */
void mscclppDefaultLogHandler(const char* msg);

/* Installs a log handler; NULL restores the default. */
mscclppResult_t mscclppSetLogHandler(mscclppLogHandler_t handler);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSCCLPP_CORE_H_ */
