/* helpers.h - tiny assertion helpers shared by the test programs. A failed check prints where
 * and why (with the library's last error) and exits 1; TEST_SKIP exits 77. */
#ifndef MPP_TESTS_HELPERS_H_
#define MPP_TESTS_HELPERS_H_

#include <stdio.h>
#include <stdlib.h>

#include <mscclpp/mscclpp.h>

#define TEST_FAIL(...)                                          \
  do {                                                          \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);         \
    fprintf(stderr, __VA_ARGS__);                               \
    fprintf(stderr, "\n");                                      \
    exit(1);                                                    \
  } while (0)

#define CHECK(cond)                                             \
  do {                                                          \
    if (!(cond)) TEST_FAIL("check failed: %s", #cond);          \
  } while (0)

#define CHECK_MSG(cond, ...)                                    \
  do {                                                          \
    if (!(cond)) TEST_FAIL(__VA_ARGS__);                        \
  } while (0)

/* A library call that must succeed. */
#define CHECK_OK(call)                                                                         \
  do {                                                                                         \
    mscclppResult_t r_ = (call);                                                               \
    if (r_ != mscclppSuccess)                                                                  \
      TEST_FAIL("%s returned %d (%s): %s", #call, (int)r_, mscclppGetErrorString(r_), mscclppGetLastError()); \
  } while (0)

/* A library call that must fail with exactly `expected`. */
#define CHECK_RES(call, expected)                                                               \
  do {                                                                                          \
    mscclppResult_t r_ = (call);                                                                \
    if (r_ != (expected))                                                                       \
      TEST_FAIL("%s returned %d (%s), expected %d: %s", #call, (int)r_, mscclppGetErrorString(r_), \
                (int)(expected), mscclppGetLastError());                                        \
  } while (0)

#define TEST_SKIP(...)                                          \
  do {                                                          \
    fprintf(stderr, "SKIP: ");                                  \
    fprintf(stderr, __VA_ARGS__);                               \
    fprintf(stderr, "\n");                                      \
    exit(77);                                                   \
  } while (0)

#endif /* MPP_TESTS_HELPERS_H_ */
