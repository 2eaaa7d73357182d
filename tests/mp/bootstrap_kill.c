/* bootstrap_kill.c - a rank that dies makes every survivor fail promptly, not at the timeout.
 * The bootstrap timeout is 60 s; every survivor must see its failing call return an error within
 * 10 s, and later calls (including a recv from the dead rank) fail at once.
 *
 *   bootstrap_kill MODE      (victim: rank 1)
 *     barrier-exit    the victim _exits in the middle of a loop of barriers
 *     barrier-kill    the victim is SIGKILLed there (a forked child plays the rank, so that
 *                     mscclpp-run sees the parent's clean exit)
 *     allgather-exit  the victim _exits in the middle of a loop of 64 KiB allgathers
 *     hello-exit      the victim says hello to the root by hand, then exits while the root
 *                     still waits for the last rank (which arrives after the failure)
 *     table-exit      the victim gets the address table by hand, then exits before its ring
 *   Issue 22 item 6 (every survivor fails within 5 s naming the rank: the target is 2 s, the rest
 *   is slack for a loaded 2-core CI machine):
 *     setup-exit      the victim _exits right after init, before its first point-to-point message;
 *                     every survivor's mscclppConnectionCreate with it fails naming it
 *     idle-kill       the victim is SIGKILLed while every survivor waits in a recv from rank 0
 *                     (rank 0 from rank 2): nobody talks to the victim, yet every wait fails
 *                     naming it (the ring tells of the death)
 *     setup-abort     ranks 0 and 1 fail setup (they abort, as a failed init does, and stay
 *                     alive): the others' connection setup with rank 0 fails naming it instead of
 *                     hanging until the timeout */
#include <signal.h>
#include <sys/wait.h>

#include "bootstrap_mp.h"

#define TIMEOUT_S 60
#define PROMPT_S 10.0
#define VICTIM 1
#define SLOT (64 * 1024)

static int rank, nranks;

/* The victim's fake join: a hello with the real secret, maybe the table, then death. */
static void fake_join(const char* root_text, int wait_table) {
  uint8_t secret[WIRE_SECRET_BYTES];
  int lfd, port; /* a listener that dies with us */
  int fd = mp_join_root(root_text, rank, nranks, secret, &lfd, &port);
  if (wait_table) {
    char c;
    CHECK(recv(fd, &c, 1, MSG_WAITALL) == 1);
  } else {
    usleep(300000); /* joined early (the last rank comes later); dies while the root still collects */
  }
  _exit(0);
}

/* In barrier-kill mode the launched process forks: the child is the rank, the parent waits. */
static void fork_victim(void) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) return;
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "victim child ended with status 0x%x", st);
  exit(0);
}

static void die(const char* mode) {
  if (strcmp(mode, "barrier-kill") == 0) kill(getpid(), SIGKILL);
  _exit(0);
}

/* Loops over barriers or allgathers until one fails; returns how long that one took. */
static double run_until_failure(mscclppComm_t comm, const char* mode) {
  int allgather = strncmp(mode, "allgather", 9) == 0;
  uint8_t* buf = calloc((size_t)nranks, SLOT);
  CHECK(buf);
  for (int i = 0;; i++) {
    if (rank == VICTIM && i == 20) die(mode);
    double t0 = mp_now();
    mscclppResult_t r = allgather ? mscclppBootstrapAllGather(comm, buf, SLOT) : mscclppBootstrapBarrier(comm);
    if (r != mscclppSuccess) {
      double dt = mp_now() - t0;
      CHECK_MSG(r == mscclppRemoteError, "rank %d: iteration %d failed with %d (%s), expected a remote error: %s", rank,
                i, (int)r, mscclppGetErrorString(r), mscclppGetLastError());
      free(buf);
      return dt;
    }
    CHECK_MSG(i < 100000, "rank %d: the victim's death was never noticed", rank);
  }
}

static void survive(mscclppComm_t comm, const char* mode) {
  double dt = run_until_failure(comm, mode);
  CHECK_MSG(dt < PROMPT_S, "rank %d: the failing call took %.1f s", rank, dt);
  double t0 = mp_now();
  int v;
  CHECK_RES(mscclppBootstrapRecv(comm, VICTIM, 77, &v, sizeof(v)), mscclppRemoteError); /* its connection ended */
  CHECK_MSG(strstr(mscclppGetLastError(), "rank 1") != NULL, "recv error does not name the peer: %s",
            mscclppGetLastError());
  CHECK(mscclppBootstrapBarrier(comm) != mscclppSuccess);
  CHECK_MSG(mp_now() - t0 < PROMPT_S, "rank %d: later calls took %.1f s to fail", rank, mp_now() - t0);
  CHECK_OK(mscclppCommAbort(comm));
}

#define SETUP_PROMPT_S 5.0

/* A survivor's call failed: RemoteError naming `who`, within SETUP_PROMPT_S of t0. */
static void expect_named(mscclppResult_t r, double t0, const char* who, const char* what) {
  double dt = mp_now() - t0;
  CHECK_MSG(r == mscclppRemoteError, "rank %d: %s returned %d (%s): %s", rank, what, (int)r, mscclppGetErrorString(r),
            mscclppGetLastError());
  CHECK_MSG(strstr(mscclppGetLastError(), who) != NULL, "rank %d: %s error does not name %s: %s", rank, what, who,
            mscclppGetLastError());
  CHECK_MSG(dt < SETUP_PROMPT_S, "rank %d: %s took %.2f s to fail", rank, what, dt);
  printf("rank %d: %s failed after %.2f s: %s\n", rank, what, dt, mscclppGetLastError());
}

/* The setup-phase modes, after a successful init. */
static void setup_phase(mscclppComm_t comm, const char* mode) {
  mscclppConnection_t conn;
  if (strcmp(mode, "setup-exit") == 0) {
    if (rank == VICTIM) _exit(0);
    double t0 = mp_now();
    expect_named(mscclppConnectionCreate(comm, VICTIM, 0, mscclppTransportTCP, &conn), t0, "rank 1", "connection setup");
  } else if (strcmp(mode, "idle-kill") == 0) {
    if (rank == VICTIM) {
      usleep(300000); /* the others are waiting by now */
      kill(getpid(), SIGKILL);
    }
    double t0 = mp_now();
    int v, from = rank == 0 ? 2 : 0;
    expect_named(mscclppBootstrapRecv(comm, from, 9, &v, sizeof(v)), t0, "rank 1", "a recv from a live rank");
  } else { /* setup-abort */
    if (rank <= 1) {
      CHECK_OK(mscclppCommAbort(comm));
      usleep(3000000); /* alive: the others must learn of the failure, not of an exit */
      exit(0);
    }
    double t0 = mp_now();
    mscclppResult_t r = mscclppConnectionCreate(comm, 0, 0, mscclppTransportTCP, &conn);
    const char* e = mscclppGetLastError();
    expect_named(r, t0, strstr(e, "rank 0") ? "rank 0" : "rank 1", "connection setup with a failed rank");
  }
  CHECK_OK(mscclppCommAbort(comm));
  exit(0);
}

int main(int argc, char** argv) {
  CHECK_MSG(argc == 2, "usage: %s barrier-exit|barrier-kill|allgather-exit|hello-exit|table-exit|setup-exit|idle-kill|setup-abort", argv[0]);
  const char* mode = argv[1];
  rank = mp_env_int("MSCCLPP_RANK");
  nranks = mp_env_int("MSCCLPP_WORLD_SIZE");
  CHECK_MSG(nranks >= 3, "needs at least 3 ranks");
  char root[300];
  mp_root(root, sizeof(root));
  CHECK_OK(mscclppSetBootstrapConnTimeout(TIMEOUT_S));
  int init_death = strcmp(mode, "hello-exit") == 0 || strcmp(mode, "table-exit") == 0;
  if (rank == VICTIM && init_death) fake_join(root, strcmp(mode, "table-exit") == 0);
  if (rank == VICTIM && (strcmp(mode, "barrier-kill") == 0 || strcmp(mode, "idle-kill") == 0)) fork_victim();
  int hello_exit = strcmp(mode, "hello-exit") == 0;
  if (hello_exit && rank == nranks - 1) usleep(1000000); /* arrives after the rendezvous failed */
  mscclppComm_t comm;
  double t0 = mp_now();
  mscclppResult_t r = mscclppCommInitRank(&comm, nranks, root, rank);
  if (init_death) {
    CHECK_MSG(r != mscclppSuccess, "rank %d: init succeeded without rank %d", rank, VICTIM);
    CHECK_MSG(r == mscclppRemoteError, "rank %d: init failed with %d (%s): %s", rank, (int)r, mscclppGetErrorString(r),
              mscclppGetLastError());
    CHECK_MSG(mp_now() - t0 < PROMPT_S, "rank %d: init took %.1f s to fail", rank, mp_now() - t0);
    if (hello_exit && rank == 0) usleep(2000000); /* the root (our thread) turns the late rank away */
    return 0;
  }
  int setup = strncmp(mode, "setup-", 6) == 0;
  if (setup && r != mscclppSuccess) { /* the victim went while this rank still finished its init: fine if named */
    const char* e = mscclppGetLastError();
    expect_named(r, t0, strstr(e, "rank 0") && strcmp(mode, "setup-abort") == 0 ? "rank 0" : "rank 1",
                 "init");
    return 0;
  }
  CHECK_OK(r);
  if (setup || strcmp(mode, "idle-kill") == 0) setup_phase(comm, mode);
  for (int p = 0; p < nranks; p++) /* opens every p2p connection, so the victim's death is seen there too */
    if (p != rank) CHECK_OK(mscclppBootstrapSend(comm, p, 5, &rank, sizeof(rank)));
  for (int p = 0; p < nranks; p++) {
    int v = -1;
    if (p != rank) CHECK_OK(mscclppBootstrapRecv(comm, p, 5, &v, sizeof(v)));
    CHECK(p == rank || v == p);
  }
  survive(comm, mode);
  return 0;
}
