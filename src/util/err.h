/* err.h - setting and propagating errors. A failing function records a detailed message for
 * mscclppGetLastError (file:line, what and why) and returns the result code; callers pass the code
 * up with MPP_CHECK, which keeps the first, most specific message. */
#ifndef MPP_UTIL_ERR_H_
#define MPP_UTIL_ERR_H_

#include <stdint.h>

#include <mscclpp/core.h>

/* Records "file:line: <formatted message>" as this thread's last error, logs it at WARN level
 * and returns res, so that callers can write `return MPP_ERR(mscclppInvalidArgument, "...")`. */
mscclppResult_t err_set(mscclppResult_t res, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* As err_set, with ": <strerror(errnum)>" appended. */
mscclppResult_t err_set_errno(mscclppResult_t res, int errnum, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Clears this thread's last error (called at the start of each public entry point). */
void err_clear(void);

/* Whether this thread's recorded errors are also logged (on = 0, the default) or only recorded
 * (on = 1: decoding what a stranger sent, whose refusal the caller logs with a rate limit).
 * Returns the previous setting, for the caller to restore. */
int err_quiet(int on);

/* This thread's last error message (never NULL). */
const char* err_last(void);

/* A copy of this thread's last error, to quote in a new one (err_set writes the buffer that
 * err_last returns): MPP_ERR(res, "...: %s", err_copy().text). */
struct err_text {
  char text[512];
};
struct err_text err_copy(void);

/* How many errors of this process (any thread) reported running out of file descriptors or memory
 * (EMFILE, ENFILE, ENOMEM through err_set_errno) so far; *last_errno gets the latest one's errno.
 * The bootstrap tells the other ranks this as the cause of its failure. */
uint64_t err_shortages(int* last_errno);

/* Both evaluate to res itself (after recording the message), not to err_set's return value, so that
 * the compiler sees which code a failing path returns: a caller's `if (f(&x) != mscclppSuccess)
 * return` then proves x set on the other path (gcc's -Wmaybe-uninitialized at -O2 and -O3). res must
 * have no side effects (it is evaluated twice). */
#define MPP_ERR(res, ...) (err_set((res), __FILE__, __LINE__, __VA_ARGS__), (mscclppResult_t)(res))
#define MPP_ERRNO(res, errnum, ...) (err_set_errno((res), (errnum), __FILE__, __LINE__, __VA_ARGS__), (mscclppResult_t)(res))

/* Return on failure, keeping the callee's message. */
#define MPP_CHECK(call)                           \
  do {                                            \
    mscclppResult_t mpp_res_ = (call);            \
    if (mpp_res_ != mscclppSuccess) return mpp_res_; \
  } while (0)

/* Jump to a cleanup label on failure; `res` receives the code. */
#define MPP_CHECK_GOTO(call, res, label) \
  do {                                   \
    (res) = (call);                      \
    if ((res) != mscclppSuccess) goto label; \
  } while (0)

/* Argument checks at public entry points. */
#define MPP_CHECK_ARG(cond, ...)                                         \
  do {                                                                   \
    if (!(cond)) return MPP_ERR(mscclppInvalidArgument, __VA_ARGS__);    \
  } while (0)

#endif /* MPP_UTIL_ERR_H_ */
