/* mscclppCommAbort from another thread while this rank is blocked inside the communicator: the
 * blocked call returns an error (not a hang, not a crash) well before any timeout, Abort succeeds,
 * and nothing is used after it is freed (the ASan run checks). Rank 1 never joins the blocked call;
 * it waits, then aborts its own communicator.
 *
 *   comm_abort barrier     rank 0 blocked in mscclppBootstrapBarrier (a bootstrap wait)
 *   comm_abort allreduce   rank 0 blocked in a CPU allreduce (host semaphore waits), after one
 *                          allreduce both ranks ran (so the collectives' setup is done) */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <string.h>
#include <time.h>

#include <mscclpp/mscclpp.h>

#include "helpers.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

struct blocked {
  mscclppComm_t comm;
  int allreduce;
  float buf[1024];
  mscclppResult_t res;
  double returned_at;
};

static void* blocked_call(void* arg) {
  struct blocked* b = arg;
  if (b->allreduce)
    b->res = mscclppAllReduce(b->buf, b->buf, 1024, mscclppFloat, mscclppSum, b->comm, NULL);
  else
    b->res = mscclppBootstrapBarrier(b->comm);
  b->returned_at = now_s();
  return NULL;
}

int main(int argc, char** argv) {
  CHECK_MSG(argc == 2 && (!strcmp(argv[1], "barrier") || !strcmp(argv[1], "allreduce")), "usage: comm_abort barrier|allreduce");
  static struct blocked b;
  b.allreduce = !strcmp(argv[1], "allreduce");
  mscclppConfig_t cfg = MSCCLPP_CONFIG_INITIALIZER;
  cfg.rankKind = mscclppRankCpu;
  CHECK_OK(mscclppCommInitFromEnv(&b.comm, &cfg));
  int rank = -1;
  CHECK_OK(mscclppCommRank(b.comm, &rank));
  if (b.allreduce) { /* both ranks: the collectives' setup (a bootstrap exchange) happens here */
    for (int i = 0; i < 1024; i++) b.buf[i] = 1.0f;
    CHECK_OK(mscclppAllReduce(b.buf, b.buf, 1024, mscclppFloat, mscclppSum, b.comm, NULL));
    CHECK_MSG(b.buf[7] == 2.0f, "warm-up allreduce gave %g", b.buf[7]);
  }
  CHECK_OK(mscclppBootstrapBarrier(b.comm));
  if (rank != 0) {
    sleep_ms(1500); /* rank 0 is blocked on us, then aborts; then we abort too */
    CHECK_OK(mscclppCommAbort(b.comm));
    return 0;
  }
  pthread_t t;
  CHECK(pthread_create(&t, NULL, blocked_call, &b) == 0);
  sleep_ms(300);
  CHECK_MSG(b.returned_at == 0, "the %s returned before the abort (%d)", argv[1], (int)b.res);
  double t0 = now_s();
  mscclppResult_t r = mscclppCommAbort(b.comm);
  double took = now_s() - t0;
  CHECK(pthread_join(t, NULL) == 0);
  CHECK_MSG(r == mscclppSuccess, "mscclppCommAbort returned %d: %s", (int)r, mscclppGetLastError());
  CHECK_MSG(b.res != mscclppSuccess, "the blocked %s succeeded without its peer", argv[1]);
  CHECK_MSG(took < 3.0 && b.returned_at - t0 < 3.0, "abort took %.2f s, the blocked call returned %.2f s after it", took,
            b.returned_at - t0);
  printf("comm_abort %s: blocked call returned %d %.0f ms after the abort began; abort took %.0f ms\n", argv[1],
         (int)b.res, (b.returned_at - t0) * 1e3, took * 1e3);
  return 0;
}
