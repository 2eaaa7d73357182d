/* Misuse of communicator handles is an error naming what was wrong, never a crash (docs/errors.md).
 *
 *   comm_misuse handles   (1 rank) calls after mscclppCommDestroy, a double destroy, abort after
 *                         destroy, a garbage and a never-initialised handle (never dereferenced: the
 *                         garbage one points at unmapped memory), destroy with a call queued in a
 *                         group then GroupEnd; the next group on a live communicator runs
 *   comm_misuse threads   (2 ranks) rank 0's thread A blocks in mscclppBootstrapRecv; meanwhile
 *                         rank 0's main thread gets InvalidUsage naming the rule for exclusive
 *                         calls and for destroy, while queries succeed; then rank 1 sends, A's
 *                         receive succeeds and the main thread's calls succeed again
 *   comm_misuse objects   (2 ranks) rank 0's thread A blocks in mscclppHostSemaphoreWait; meanwhile
 *                         destroying that semaphore, and destroying its communicator, are refused
 *                         naming the semaphore in use (nothing is freed under A); rank 1 signals, A's
 *                         wait succeeds, then the destroy succeeds. Then A blocks again and
 *                         mscclppCommAbort ends A's wait (Aborted) and frees everything */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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

/* A 2-rank communicator; *pid0: rank 0's pid (names the flag files the two ranks share). */
static mscclppComm_t pair_init(int* rank, int* pid0) {
  int n;
  mscclppComm_t comm = tmp_init(rank, &n);
  CHECK(n == 2);
  int pids[2] = {0, 0};
  pids[*rank] = (int)getpid();
  CHECK_OK(mscclppBootstrapAllGather(comm, pids, sizeof(int)));
  *pid0 = pids[0];
  return comm;
}

static void threads(void) {
  int rank, pid0;
  mscclppComm_t comm = pair_init(&rank, &pid0);
  char flag[96];
  snprintf(flag, sizeof(flag), "/tmp/mpp_comm_misuse_%d", pid0);
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

struct waiter {
  mscclppHostSemaphore_t sem;
  int tid; /* set before the wait */
  mscclppResult_t res;
};

static void* semaphore_wait(void* arg) {
  struct waiter* w = arg;
  __atomic_store_n(&w->tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
  w->res = mscclppHostSemaphoreWait(w->sem, 20000);
  return NULL;
}

/* Starts thread A waiting on sem and returns once A sleeps: A sets its tid just before the call
 * and makes no system call before the wait's backoff, which sleeps (state S in /proc), so a
 * sleeping A is inside the call (bounded: 10 s). */
static pthread_t start_waiter(struct waiter* w) {
  pthread_t th;
  __atomic_store_n(&w->tid, 0, __ATOMIC_RELEASE);
  CHECK(pthread_create(&th, NULL, semaphore_wait, w) == 0);
  for (int i = 0; i < 10000; i++) {
    int tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE);
    char path[64], buf[256] = "";
    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
    FILE* f = tid ? fopen(path, "r") : NULL;
    if (f != NULL) {
      size_t n = fread(buf, 1, sizeof(buf) - 1, f);
      fclose(f);
      buf[n] = '\0';
      const char* st = strrchr(buf, ')'); /* "tid (name) S ..." */
      if (st != NULL && (st[2] == 'S' || st[2] == 'D')) return th;
    }
    sleep_ms(1);
  }
  TEST_FAIL("the waiting thread never slept in mscclppHostSemaphoreWait");
}

static void wait_flag(const char* path) {
  for (int i = 0; i < 4000 && access(path, F_OK) != 0; i++) sleep_ms(5);
  CHECK_MSG(access(path, F_OK) == 0, "%s never appeared", path);
}

static void make_flag(const char* path) {
  FILE* f = fopen(path, "w");
  CHECK(f != NULL);
  fclose(f);
}

static void objects(void) {
  int rank, pid0;
  mscclppComm_t comm = pair_init(&rank, &pid0);
  char signal_now[96], aborted[96];
  snprintf(signal_now, sizeof(signal_now), "/tmp/mpp_comm_misuse_obj_%d_signal", pid0);
  snprintf(aborted, sizeof(aborted), "/tmp/mpp_comm_misuse_obj_%d_aborted", pid0);
  mscclppConnection_t conn;
  mscclppHostSemaphore_t sem;
  CHECK_OK(mscclppConnectionCreate(comm, 1 - rank, 0, mscclppTransportTCP, &conn));
  CHECK_OK(mscclppHostSemaphoreCreate(comm, conn, &sem));
  if (rank == 1) {
    wait_flag(signal_now);
    CHECK_OK(mscclppHostSemaphoreSignal(sem));
    CHECK_OK(mscclppHostSemaphoreDestroy(sem));
    CHECK_OK(mscclppHostSemaphoreCreate(comm, conn, &sem)); /* with rank 0's second one (an exchange) */
    wait_flag(aborted); /* rank 0 aborted: this rank's communicator cannot finish with it */
    CHECK_OK(mscclppCommAbort(comm));
    return;
  }
  struct waiter w = {.sem = sem};
  pthread_t th = start_waiter(&w);
  EXPECT(mscclppHostSemaphoreDestroy(sem), mscclppInvalidUsage, "in use by another thread");
  EXPECT(mscclppCommDestroy(comm), mscclppInvalidUsage, "host semaphore");
  CHECK_ERR_MENTIONS("in use by another thread");
  int me = -1;
  CHECK_OK(mscclppCommRank(comm, &me)); /* the refused destroy changed nothing */
  make_flag(signal_now);
  CHECK(pthread_join(th, NULL) == 0);
  unlink(signal_now);
  CHECK_MSG(w.res == mscclppSuccess, "the wait returned %d: %s", (int)w.res, mscclppGetLastError());
  CHECK_OK(mscclppHostSemaphoreDestroy(sem));
  CHECK_OK(mscclppHostSemaphoreCreate(comm, conn, &sem));
  w.sem = sem;
  th = start_waiter(&w); /* nobody signals this time */
  CHECK_OK(mscclppCommAbort(comm)); /* ends A's wait, then frees the semaphore and the rest */
  CHECK(pthread_join(th, NULL) == 0);
  CHECK_MSG(w.res == mscclppAborted, "the wait under abort returned %d", (int)w.res);
  EXPECT(mscclppHostSemaphoreSignal(sem), mscclppInvalidUsage, "destroyed with its communicator");
  make_flag(aborted);
  sleep_ms(200); /* rank 1 sees the flag before it is removed (it polls every 5 ms) */
  unlink(aborted);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "handles";
  if (strcmp(mode, "handles") == 0) handles();
  else if (strcmp(mode, "threads") == 0) threads();
  else if (strcmp(mode, "objects") == 0) objects();
  else TEST_FAIL("unknown mode %s", mode);
  printf("comm_misuse %s: OK\n", mode);
  return 0;
}
