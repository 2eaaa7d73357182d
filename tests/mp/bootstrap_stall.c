/* bootstrap_stall.c - a rank that is alive but stuck is an error naming it on every survivor,
 * promptly; a rank that is merely idle or busy is not (issue 22: "a dead or stuck rank is an
 * error naming it on every survivor"; the bootstrap's heartbeats, src/bootstrap/heartbeat.c).
 * Default parameters: heartbeats every 250 ms, stuck after 1500 ms of silence; bootstrap timeout
 * 60 s, so a failure within seconds comes from the heartbeats, not the timeout.
 *
 *   bootstrap_stall stop    the victim (rank 1) stops its whole process (SIGSTOP) while every
 *                           other rank waits: in a recv from a live rank (ranks 0 and 2, with the
 *                           ring idle: the progress thread's check) or in a barrier (the others:
 *                           the ring code's check). Each wait must fail with RemoteError naming
 *                           "rank 1 stopped responding" within STALL_S: the 1.5 s stall limit, plus
 *                           3 s of slack for a loaded 2-core CI machine (ticks of 125 ms, the
 *                           notice's hops, and threads that an ASan build's load deschedules).
 *                           Rank 0 then resumes the victim (SIGCONT), whose next barrier must fail
 *                           cleanly (an error, within STALL_S, no crash). A watchdog child resumes
 *                           the victim after 30 s in any case, so a failed check never hangs the
 *                           test; survivors also resume it when they exit.
 *   bootstrap_stall idle    nothing happens for 5 s, then a barrier; then rank 1 is busy in its own
 *                           code for 5 s while the others wait in a barrier, and rank 0 waits 3 s
 *                           for a message: all succeed (no false positive). */
#include <signal.h>
#include <sys/wait.h>

#include "bootstrap_mp.h"

#define TIMEOUT_S 60
#define STALL_S 5.0
#define VICTIM 1

static int rank, nranks;
static pid_t victim_pid;

/* Survivors resume the victim whatever happens to them (a failed CHECK exits). */
static void resume_victim(void) {
  if (victim_pid > 0) kill(victim_pid, SIGCONT);
}

/* A child that resumes its parent after 30 s, so a stopped victim never outlives a failed test. */
static pid_t start_watchdog(void) {
  pid_t parent = getpid(), pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    for (int fd = 3; fd < 1024; fd++) close(fd); /* not the bootstrap's sockets: they are the victim's */
    sleep(30);
    kill(parent, SIGCONT);
    _exit(0);
  }
  return pid;
}

static void expect_stuck(mscclppResult_t r, double t0, const char* what) {
  double dt = mp_now() - t0;
  const char* e = mscclppGetLastError();
  CHECK_MSG(r == mscclppRemoteError, "rank %d: %s returned %d (%s): %s", rank, what, (int)r, mscclppGetErrorString(r), e);
  CHECK_MSG(strstr(e, "rank 1 stopped responding") != NULL, "rank %d: %s error does not name the stuck rank: %s", rank,
            what, e);
  CHECK_MSG(dt < STALL_S, "rank %d: %s took %.2f s to fail", rank, what, dt);
  printf("rank %d: %s failed after %.2f s: %s\n", rank, what, dt, e);
}

static void victim(mscclppComm_t comm) {
  pid_t dog = start_watchdog();
  usleep(300000); /* the others are waiting by now */
  raise(SIGSTOP);
  /* Resumed (by rank 0 after every survivor saw the failure, or by the watchdog). */
  kill(dog, SIGKILL);
  waitpid(dog, NULL, 0);
  double t0 = mp_now();
  mscclppResult_t r = mscclppBootstrapBarrier(comm);
  double dt = mp_now() - t0;
  CHECK_MSG(r != mscclppSuccess, "rank 1: a barrier after being declared stuck succeeded");
  CHECK_MSG(dt < STALL_S, "rank 1: the barrier after resuming took %.2f s to fail", dt);
  printf("rank 1: resumed; its barrier failed after %.2f s: %s\n", dt, mscclppGetLastError());
  CHECK_OK(mscclppCommAbort(comm));
}

static void stop_mode(mscclppComm_t comm) {
  if (rank == VICTIM) {
    victim(comm);
    return;
  }
  atexit(resume_victim);
  double t0 = mp_now();
  int v;
  if (nranks > 2 && (rank == 0 || rank == 2))
    expect_stuck(mscclppBootstrapRecv(comm, rank == 0 ? 2 : 0, 9, &v, sizeof(v)), t0, "a recv from a live rank");
  else
    expect_stuck(mscclppBootstrapBarrier(comm), t0, "a barrier");
  CHECK_OK(mscclppCommAbort(comm));
  if (rank == 0) {
    usleep(500000); /* the others have checked by now (each within STALL_S of the same start) */
    resume_victim();
  }
}

static void idle_mode(mscclppComm_t comm) {
  sleep(5);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  double t0 = mp_now();
  if (rank == VICTIM) sleep(5); /* busy in its own code: its progress thread still beats */
  if (rank == 2) {
    sleep(3);
    CHECK_OK(mscclppBootstrapSend(comm, 0, 11, &rank, sizeof(rank)));
  }
  if (rank == 0) {
    int v = -1;
    CHECK_OK(mscclppBootstrapRecv(comm, 2, 11, &v, sizeof(v)));
    CHECK(v == 2);
  }
  CHECK_OK(mscclppBootstrapBarrier(comm));
  int all[64];
  all[rank] = rank * 7;
  CHECK_OK(mscclppBootstrapAllGather(comm, all, sizeof(int)));
  for (int p = 0; p < nranks; p++) CHECK(all[p] == p * 7);
  printf("rank %d: idle 5 s and a 5 s wait in a barrier: no false positive (%.2f s)\n", rank, mp_now() - t0);
  CHECK_OK(mscclppCommDestroy(comm));
}

int main(int argc, char** argv) {
  CHECK_MSG(argc == 2, "usage: %s stop|idle", argv[0]);
  rank = mp_env_int("MSCCLPP_RANK");
  nranks = mp_env_int("MSCCLPP_WORLD_SIZE");
  CHECK_MSG(nranks >= 2 && nranks <= 64, "needs 2 to 64 ranks");
  CHECK_MSG(strcmp(argv[1], "idle") != 0 || nranks >= 3, "idle needs at least 3 ranks");
  char root[300];
  mp_root(root, sizeof(root));
  CHECK_OK(mscclppSetBootstrapConnTimeout(TIMEOUT_S));
  mscclppComm_t comm;
  CHECK_OK(mscclppCommInitRank(&comm, nranks, root, rank));
  int pids[64];
  pids[rank] = (int)getpid();
  CHECK_OK(mscclppBootstrapAllGather(comm, pids, sizeof(int)));
  if (strcmp(argv[1], "stop") == 0) {
    victim_pid = rank == VICTIM ? 0 : (pid_t)pids[VICTIM];
    stop_mode(comm);
  } else {
    idle_mode(comm);
  }
  return 0;
}
