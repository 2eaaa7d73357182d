/* errors.c - results, error strings, the last error's text (per communicator and per thread),
 * versions. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"

static _Thread_local char thread_last[1024];

ncclResult_t shim_result(mscclppResult_t r) {
  switch (r) {
    case mscclppSuccess: return ncclSuccess;
    case mscclppUnhandledCudaError: return ncclUnhandledCudaError;
    case mscclppSystemError: return ncclSystemError;
    case mscclppInternalError: return ncclInternalError;
    case mscclppInvalidArgument: return ncclInvalidArgument;
    case mscclppInvalidUsage: return ncclInvalidUsage;
    case mscclppRemoteError: return ncclRemoteError;
    case mscclppInProgress: return ncclInProgress;
    case mscclppTimeout: return ncclRemoteError;   /* a peer did not answer in time */
    case mscclppAborted: return ncclInvalidUsage;  /* the communicator was aborted */
    case mscclppNumResults: break;
  }
  return ncclInternalError;
}

static void record(ncclComm_t comm, const char* text) {
  snprintf(thread_last, sizeof(thread_last), "%s", text);
  if (comm && shim_live(comm)) {
    pthread_mutex_lock(&comm->lock);
    snprintf(comm->last, sizeof(comm->last), "%s", text);
    pthread_mutex_unlock(&comm->lock);
  }
}

ncclResult_t shim_fail_lib(ncclComm_t comm, mscclppResult_t r, const char* call) {
  if (r == mscclppSuccess) return ncclSuccess;
  char text[1024];
  snprintf(text, sizeof(text), "%s: %s", call, mscclppGetLastError());
  record(comm, text);
  ncclResult_t res = shim_result(r);
  /* A peer that failed or went silent breaks the communicator, as NCCL's proxy marks it: later
   * ncclCommGetAsyncError calls report it (PyTorch's watchdog polls it to abort). Argument and
   * usage errors leave the communicator usable and are not asynchronous errors. */
  if (comm && (r == mscclppRemoteError || r == mscclppTimeout) && shim_live(comm)) {
    ncclResult_t ok = ncclSuccess;
    /* the first failure stays; seq_cst: a thread polling ncclCommGetAsyncError sees it once this
     * call has returned it */
    atomic_compare_exchange_strong(&comm->async, &ok, res);
  }
  return res;
}

ncclResult_t shim_fail(ncclComm_t comm, ncclResult_t res, const char* fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  record(comm, text);
  return res;
}

const char* shim_thread_last(void) { return thread_last; }

NCCL_API(const char*, GetErrorString, ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "success";
    case ncclUnhandledCudaError: return "a CUDA call failed (ncclGetLastError has the detail)";
    case ncclSystemError: return "a system call failed (ncclGetLastError has the detail)";
    case ncclInternalError: return "internal error in the communication library";
    case ncclInvalidArgument: return "invalid argument (ncclGetLastError names it)";
    case ncclInvalidUsage: return "invalid usage (ncclGetLastError says why)";
    case ncclRemoteError: return "a peer failed, exited or did not answer";
    case ncclInProgress: return "operation in progress";
    case ncclNumResults: break;
  }
  return "unknown result code";
}

/* The detailed text of the last failure: comm's when comm is a live communicator that recorded
 * one, else the calling thread's (NCCL allows NULL). */
NCCL_API(const char*, GetLastError, ncclComm_t comm) {
  if (comm && shim_live(comm) && comm->last[0]) return comm->last;
  return thread_last;
}

NCCL_API(ncclResult_t, GetVersion, int* version) {
  if (!version) return shim_fail(NULL, ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

/* NCCL re-reads its debug settings; this library reads MSCCLPP_LOG_* when each log line is made. */
NCCL_API(void, ResetDebugInit, void) {}
