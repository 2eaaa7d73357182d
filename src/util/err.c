/* err.c - result strings and the per-thread last-error message. */
#include "util/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"

#define ERR_MSG_BYTES 1024

static _Thread_local char last_error[ERR_MSG_BYTES];

const char* mscclppGetErrorString(mscclppResult_t result) {
  switch (result) {
    case mscclppSuccess: return "no error";
    case mscclppUnhandledCudaError: return "unhandled cuda error";
    case mscclppSystemError: return "unhandled system error";
    case mscclppInternalError: return "internal error";
    case mscclppInvalidArgument: return "invalid argument";
    case mscclppInvalidUsage: return "invalid usage";
    case mscclppRemoteError: return "remote process exited or there was a network error";
    case mscclppInProgress: return "operation in progress";
    case mscclppTimeout: return "timeout";
    case mscclppAborted: return "aborted";
    default: return "unknown result code";
  }
}

const char* mscclppGetLastError(void) { return last_error; }

const char* err_last(void) { return last_error; }

void err_clear(void) { last_error[0] = '\0'; }

static const char* base_name(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

struct err_text err_copy(void) {
  struct err_text t;
  snprintf(t.text, sizeof(t.text), "%s", err_last());
  return t;
}

static _Thread_local int err_quiet_on; /* see err_quiet */

/* Formats "file:line: message[: strerror]" into last_error and logs it (unless quiet). */
static void err_vrecord(mscclppResult_t res, int errnum, const char* file, int line, const char* fmt, va_list ap) {
  int n = snprintf(last_error, sizeof(last_error), "%s:%d: ", base_name(file), line);
  if (n < 0 || n >= (int)sizeof(last_error)) n = 0;
  int m = vsnprintf(last_error + n, sizeof(last_error) - (size_t)n, fmt, ap);
  if (m > 0) n += m;
  if (errnum != 0 && n < (int)sizeof(last_error)) {
    char buf[128];
    const char* text = strerror_r(errnum, buf, sizeof(buf));
    snprintf(last_error + n, sizeof(last_error) - (size_t)n, ": %s", text);
  }
  if (!err_quiet_on) log_msg(LOG_WARN, LOG_SUB_ALL, "%s (%s)", last_error, mscclppGetErrorString(res));
}

int err_quiet(int on) {
  int was = err_quiet_on;
  err_quiet_on = on;
  return was;
}

mscclppResult_t err_set(mscclppResult_t res, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  err_vrecord(res, 0, file, line, fmt, ap);
  va_end(ap);
  return res;
}

/* Resource shortages recorded by any thread (see err_shortages). Relaxed: these are a hint for
 * error messages; nothing else is published through them. */
static _Atomic uint64_t shortage_count;
static _Atomic int shortage_errno;

uint64_t err_shortages(int* last_errno) {
  uint64_t n = atomic_load_explicit(&shortage_count, memory_order_relaxed);
  *last_errno = atomic_load_explicit(&shortage_errno, memory_order_relaxed);
  return n;
}

mscclppResult_t err_set_errno(mscclppResult_t res, int errnum, const char* file, int line, const char* fmt, ...) {
  if (errnum == EMFILE || errnum == ENFILE || errnum == ENOMEM) {
    atomic_store_explicit(&shortage_errno, errnum, memory_order_relaxed);
    atomic_fetch_add_explicit(&shortage_count, 1, memory_order_relaxed);
  }
  va_list ap;
  va_start(ap, fmt);
  err_vrecord(res, errnum, file, line, fmt, ap);
  va_end(ap);
  return res;
}

mscclppResult_t mscclppGetVersion(int* version) {
  err_clear();
  MPP_CHECK_ARG(version != NULL, "mscclppGetVersion: version is NULL");
  *version = MSCCLPP_VERSION;
  return mscclppSuccess;
}
