/* nccl_common.h - what the NCCL-API test programs share. They are clients of nccl.h only (linked
 * to libmscclpp_nccl.so, as a program built for NCCL would be): checks that print the library's
 * last error, the unique id passed between processes through a file, and fill / verify helpers
 * for the host buffers of CPU ranks. */
#ifndef MPP_TESTS_NCCL_COMMON_H_
#define MPP_TESTS_NCCL_COMMON_H_

#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NFAIL(...)                                         \
  do {                                                     \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);    \
    fprintf(stderr, __VA_ARGS__);                          \
    fprintf(stderr, "\n");                                 \
    exit(1);                                               \
  } while (0)

#define NCHECK(cond)                                              \
  do {                                                            \
    if (!(cond)) NFAIL("check failed: %s", #cond);                \
  } while (0)

/* An NCCL call that must succeed. */
#define NOK(call)                                                                                       \
  do {                                                                                                  \
    ncclResult_t r_ = (call);                                                                           \
    if (r_ != ncclSuccess) NFAIL("%s returned %d (%s): %s", #call, (int)r_, ncclGetErrorString(r_),   \
                                 ncclGetLastError(NULL));                                               \
  } while (0)

/* An NCCL call that must fail with want, its last error containing text. */
#define NERR(call, want, text)                                                                          \
  do {                                                                                                  \
    ncclResult_t r_ = (call);                                                                           \
    if (r_ != (want)) NFAIL("%s returned %d, wanted %d (%s)", #call, (int)r_, (int)(want), ncclGetLastError(NULL)); \
    if (!strstr(ncclGetLastError(NULL), (text)))                                                        \
      NFAIL("%s: last error '%s' lacks '%s'", #call, ncclGetLastError(NULL), (text));                  \
  } while (0)

static inline int env_int(const char* name, int def) {
  const char* v = getenv(name);
  return v ? atoi(v) : def;
}

/* Rank 0 makes the id and writes it to path (whole, then renamed into place); the others wait for
 * it (at most 60 s), as programs pass ids through MPI or a store. */
static inline ncclUniqueId share_id(int rank, const char* path) {
  ncclUniqueId id;
  if (rank == 0) {
    char tmp[8192];
    NOK(ncclGetUniqueId(&id));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    NCHECK(f && fwrite(&id, sizeof(id), 1, f) == 1 && fclose(f) == 0);
    NCHECK(rename(tmp, path) == 0);
    return id;
  }
  for (int i = 0; i < 6000; i++) {
    FILE* f = fopen(path, "rb");
    if (f) {
      size_t got = fread(&id, sizeof(id), 1, f);
      fclose(f);
      if (got == 1) return id;
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  NFAIL("no unique id at %s after 60 s", path);
}

/* The value rank r contributes at element i (small integers: every reduction is exact). */
static inline double val(int r, size_t i) { return (double)((r + 1) * 3 + (int)(i % 7)); }

#endif /* MPP_TESTS_NCCL_COMMON_H_ */
