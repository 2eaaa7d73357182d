/* Misuse of communicator handles is an error naming what was wrong, never a crash (docs/errors.md).
 *
 *   comm_misuse handles   (1 rank) calls after mscclppCommDestroy, a double destroy, abort after
 *                         destroy, a garbage and a never-initialised handle (never dereferenced: the
 *                         garbage one points at unmapped memory), destroy with a call queued in a
 *                         group then GroupEnd; the next group on a live communicator runs
 *   comm_misuse threads   (2 ranks) rank 0's thread A blocks in mscclppBootstrapRecv; meanwhile
 *                         rank 0's main thread gets InvalidUsage naming the rule for exclusive
 *                         calls and for destroy, while queries succeed; then rank 1 sends, A's
 *                         receive succeeds and the main thread's calls succeed again */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "transport_mp.h"

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void handles(void) {
  int rank, n;
  float a[4] = {1, 2, 3, 4}, b[4];
  mscclppComm_t comm = tmp_init(&rank, &n);
  CHECK_OK(mscclppAllReduce(a, b, 4, mscclppFloat, mscclppSum, comm, NULL));
  CHECK_OK(mscclppCommDestroy(comm));
  const mscclppResult_t use = mscclppInvalidUsage;
  EXPECT(mscclppAllReduce(a, b, 4, mscclppFloat, mscclppSum, comm, NULL), use, "was destroyed");
  EXPECT(mscclppAllReduce(a, b, 0, mscclppFloat, mscclppSum, comm, NULL), use, "mscclppAllReduce: communicator");
  EXPECT(mscclppSend(a, 4, mscclppFloat, 0, comm, NULL), use, "was destroyed");
  EXPECT(mscclppCommRank(comm, &rank), use, "was destroyed");
  EXPECT(mscclppBootstrapBarrier(comm), use, "was destroyed");
  EXPECT(mscclppCommDestroy(comm), use, "mscclppCommDestroy: communicator");
  EXPECT(mscclppCommDestroy(comm), use, "was destroyed");
  EXPECT(mscclppCommAbort(comm), use, "was destroyed");

  /* never initialised: a page with no access (a dereference would crash), and heap garbage */
  void* page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(page != MAP_FAILED);
  mscclppComm_t bogus = (mscclppComm_t)page;
  EXPECT(mscclppAllReduce(a, b, 4, mscclppFloat, mscclppSum, bogus, NULL), use, "is not a communicator");
  EXPECT(mscclppCommSize(bogus, &n), use, "is not a communicator");
  EXPECT(mscclppCommDestroy(bogus), use, "is not a communicator");
  EXPECT(mscclppCommAbort(bogus), use, "is not a communicator");
  EXPECT(mscclppBroadcast(a, b, 4, mscclppFloat, 0, bogus, NULL), use, "is not a communicator");
  char* heap = malloc(4096);
  memset(heap, 0xa5, 4096);
  EXPECT(mscclppCommDestroy((mscclppComm_t)heap), use, "is not a communicator");
  free(heap);
  munmap(page, 4096);

  /* destroy with a call queued in this thread's group: GroupEnd names it and runs nothing */
  mscclppComm_t c2 = tmp_init(&rank, &n);
  CHECK(c2 != comm); /* the destroyed one's memory stays reserved */
  CHECK_OK(mscclppGroupStart());
  CHECK_OK(mscclppAllReduce(a, b, 4, mscclppFloat, mscclppSum, c2, NULL));
  CHECK_OK(mscclppCommDestroy(c2));
  EXPECT(mscclppGroupEnd(), use, "call 1 of the group (");
  CHECK_ERR_MENTIONS("none of the group's calls ran");
  CHECK_ERR_MENTIONS("was destroyed");
  EXPECT(mscclppGroupEnd(), use, "no group is open"); /* the failed group is closed */

  /* the queue was emptied: the next group, on a live communicator, runs */
  mscclppComm_t c3 = tmp_init(&rank, &n);
  b[0] = 0;
  CHECK_OK(mscclppGroupStart());
  CHECK_OK(mscclppAllReduce(a, b, 4, mscclppFloat, mscclppSum, c3, NULL));
  CHECK_OK(mscclppGroupEnd());
  CHECK(b[0] == 1.0f && b[3] == 4.0f);
  CHECK_OK(mscclppCommDestroy(c3));
}

struct blocked {
  mscclppComm_t comm;
  int entered;
  mscclppResult_t res;
  int got;
};

static void* blocked_recv(void* arg) {
  struct blocked* t = arg;
  __atomic_store_n(&t->entered, 1, __ATOMIC_RELEASE);
  t->res = mscclppBootstrapRecv(t->comm, 1, 7, &t->got, sizeof(t->got));
  return NULL;
}

static void threads(void) {
  int rank, n;
  mscclppComm_t comm = tmp_init(&rank, &n);
  CHECK(n == 2);
  int pids[2] = {0, 0};
  pids[rank] = (int)getpid();
  CHECK_OK(mscclppBootstrapAllGather(comm, pids, sizeof(int)));
  char flag[96];
  snprintf(flag, sizeof(flag), "/tmp/mpp_comm_misuse_%d", pids[0]);
  if (rank == 1) { /* sends once rank 0's main thread has made its checks (bounded wait) */
    for (int i = 0; i < 3000 && access(flag, F_OK) != 0; i++) sleep_ms(5);
    int v = 42;
    CHECK_OK(mscclppBootstrapSend(comm, 0, 7, &v, sizeof(v)));
  } else {
    static struct blocked t;
    t.comm = comm;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, blocked_recv, &t) == 0);
    while (!__atomic_load_n(&t.entered, __ATOMIC_ACQUIRE)) sleep_ms(1);
    /* A may not be inside yet: a local exclusive call that succeeds is undone and tried again
     * (bounded: 10 s, far above the few ms a thread start takes on a loaded machine) */
    mscclppRedOp_t op;
    float s = 2.0f;
    mscclppResult_t r = mscclppSuccess;
    for (int i = 0; i < 2000; i++) {
      r = mscclppRedOpCreatePreMulSum(&op, &s, mscclppFloat, mscclppScalarHostImmediate, comm);
      if (r != mscclppSuccess) break;
      CHECK_OK(mscclppRedOpDestroy(op, comm));
      sleep_ms(5);
    }
    CHECK_MSG(r == mscclppInvalidUsage, "a call beside a blocked one returned %d: %s", (int)r, mscclppGetLastError());
    CHECK_ERR_MENTIONS("in use by another thread (inside mscclppBootstrapRecv)");
    CHECK_ERR_MENTIONS("one thread at a time");
    float a[4] = {0}, b[4];
    EXPECT(mscclppAllReduce(a, b, 4, mscclppFloat, mscclppSum, comm, NULL), mscclppInvalidUsage, "in use by another thread");
    EXPECT(mscclppBootstrapSend(comm, 1, 9, a, 4), mscclppInvalidUsage, "in use by another thread");
    EXPECT(mscclppCommDestroy(comm), mscclppInvalidUsage, "in use by another thread");
    int me = -1, sz = -1;
    CHECK_OK(mscclppCommRank(comm, &me)); /* queries: any thread */
    CHECK_OK(mscclppCommSize(comm, &sz));
    CHECK(me == 0 && sz == 2);
    FILE* f = fopen(flag, "w");
    CHECK(f != NULL);
    fclose(f);
    CHECK(pthread_join(th, NULL) == 0);
    unlink(flag);
    CHECK_MSG(t.res == mscclppSuccess && t.got == 42, "the blocked receive returned %d, got %d", (int)t.res, t.got);
  }
  /* A has left: the communicator serves this thread again */
  float a[4] = {1, 1, 1, 1}, b[4];
  CHECK_OK(mscclppAllReduce(a, b, 4, mscclppFloat, mscclppSum, comm, NULL));
  CHECK(b[0] == 2.0f);
  CHECK_OK(mscclppCommDestroy(comm));
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "handles";
  if (strcmp(mode, "handles") == 0) handles();
  else if (strcmp(mode, "threads") == 0) threads();
  else TEST_FAIL("unknown mode %s", mode);
  printf("comm_misuse %s: OK\n", mode);
  return 0;
}
