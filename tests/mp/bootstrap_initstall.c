/* bootstrap_initstall.c - a rank that stops (SIGSTOP: stuck) or dies (SIGKILL) in any phase of
 * init or of connection setup is an error naming it on every survivor within seconds, not at the
 * bootstrap timeout (issue 22 item 6; "within 2 s during init and setup as well as while running").
 *
 *   bootstrap_initstall STAGE ACTION      (victim: rank 1; ACTION: stop or kill)
 * Before init returns, the victim plays its part by hand (the bootstrap's wire protocol, as
 * bootstrap_kill's fake joins do), so that it stops or dies at an exact point with no hook in the
 * library:
 *   table    joined the root and got the address table, no ring connection yet: rank 0's ring
 *            handshake with it gets no answer, rank 2 waits for its ring connection
 *   ring     also connected its ring to rank 2 (handshake done); rank 0's connection unanswered
 *   formed   also answered rank 0's ring connection: the ring exists; init's barrier waits on it
 *   checked  also took part in init's barrier: the others wait in mscclppCommInitRank's first
 *            allgather (peer information)
 * After init (the real library; stop only, bootstrap_kill setup-exit is the death):
 *   setup    while it is stopped rank 0 opens a connection to it (mscclppConnectionCreate: a p2p
 *            handshake it cannot answer), rank 2 waits for its part of that exchange, and rank 3
 *            sends it 64 MiB on a connection opened before (blocks on the full socket)
 * Every survivor's call must fail with RemoteError naming "rank 1 stopped responding" (stop) or
 * "rank 1 died" (kill), blaming no other rank, within BOUND_S (stop: the 1.5 s stall limit plus 3.5 s
 * of slack for a loaded 2-core CI machine under ASan) or KILL_BOUND_S (the 2 s target plus 2 s of
 * slack) of the moment the victim stopped or died: its CLOCK_MONOTONIC time, which it leaves in a
 * file. The bootstrap timeout is 60 s. A stopped victim is resumed (and exits) once every survivor
 * had its time, or by a watchdog child after 30 s whatever happens. */
#include <signal.h>
#include <sys/wait.h>

#include "bootstrap_mp.h"

#define TIMEOUT_S 60
#define BOUND_S 5.0
#define KILL_BOUND_S 4.0
#define VICTIM 1

static int rank, nranks, do_kill;
static const char* stage;

/* ---- the victim's stop/death time, in a file named by the run's port ---- */

static void stop_path(char* buf, size_t len) {
  snprintf(buf, len, "/tmp/mscclpp-test-initstall-%d-%d", (int)getuid(), mp_env_int("MSCCLPP_MASTER_PORT"));
}

static void write_stop_time(void) {
  char path[128], tmp[160];
  stop_path(path, sizeof(path));
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE* f = fopen(tmp, "w");
  CHECK(f && fprintf(f, "%d %.6f\n", (int)getpid(), mp_now()) > 0 && fclose(f) == 0);
  CHECK(rename(tmp, path) == 0);
}

static double read_stop_time(pid_t* pid) {
  char path[128];
  stop_path(path, sizeof(path));
  FILE* f = fopen(path, "r");
  CHECK_MSG(f, "rank %d: no stop time in %s (the victim never stopped?)", rank, path);
  int p = 0;
  double t = 0;
  CHECK(fscanf(f, "%d %lf", &p, &t) == 2);
  fclose(f);
  if (pid) *pid = (pid_t)p;
  return t;
}

/* ---- the victim ---- */

static pid_t watchdog;

/* A child that resumes its parent after 30 s, so a stopped victim never outlives a failed test. */
static void start_watchdog(void) {
  pid_t parent = getpid(), pid = fork();
  CHECK(pid >= 0);
  if (pid > 0) {
    watchdog = pid;
    return;
  }
  for (int fd = 3; fd < 1024; fd++) close(fd); /* not the victim's sockets */
  sleep(30);
  kill(parent, SIGCONT);
  _exit(0);
}

/* kill: a forked child plays the victim and is SIGKILLed; the launched process waits for it, keeps
 * the time file while the survivors read it, and exits cleanly. stop: the watchdog is started. */
static void victim_prepare(void) {
  if (!do_kill) {
    start_watchdog();
    return;
  }
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) return;
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "victim child ended with status 0x%x", st);
  double t = read_stop_time(NULL);
  while (mp_now() < t + KILL_BOUND_S + 1) usleep(100000); /* every survivor has read it by then */
  char path[128];
  stop_path(path, sizeof(path));
  unlink(path);
  exit(0);
}

/* The victim stops or dies here. A stopped one that is resumed just exits. */
static void victim_act(void) {
  write_stop_time();
  if (do_kill) kill(getpid(), SIGKILL);
  raise(SIGSTOP);
  kill(watchdog, SIGKILL); /* it holds our stdout: the test would last until it ends */
  waitpid(watchdog, NULL, 0);
  char path[128];
  stop_path(path, sizeof(path));
  unlink(path);
  printf("rank %d: resumed after stage %s; exiting\n", rank, stage);
  _exit(0);
}

/* The accepting side of a RING handshake by hand on rank 0's connection; returns that socket. */
static int accept_ring(int lfd, const uint8_t key[WIRE_KEY_BYTES], struct seal* rx) {
  struct pollfd p = {.fd = lfd, .events = POLLIN};
  CHECK_MSG(poll(&p, 1, 15000) == 1, "victim: no ring connection from rank 0 within 15 s");
  int fd = accept(lfd, NULL, NULL);
  CHECK(fd >= 0);
  uint8_t hello[WIRE_HELLO_BYTES], nonce[AUTH_NONCE_BYTES], chal[AUTH_CHALLENGE_BYTES], proof[AUTH_PROOF_BYTES];
  CHECK_OK(sock_recv_all(fd, hello, sizeof(hello), time_deadline_ms(15000)));
  CHECK_OK(auth_make_challenge(key, hello, sizeof(hello), nonce, chal));
  CHECK(send(fd, chal, sizeof(chal), MSG_NOSIGNAL) == (ssize_t)sizeof(chal));
  CHECK_OK(sock_recv_all(fd, proof, sizeof(proof), time_deadline_ms(15000)));
  CHECK_MSG(auth_check_proof(key, hello, sizeof(hello), nonce, proof), "victim: rank 0's ring proof is wrong");
  CHECK_OK(seal_derive(key, hello, sizeof(hello), nonce, sizeof(nonce), SEAL_SERVER, NULL, rx));
  return fd;
}

/* Init's barrier by hand: n-1 empty frames of operation 1 to rank 2, n-1 from rank 0 (heartbeats
 * skipped), each frame's empty body sealed (util/seal.h) under the connection's keys. */
static void ring_check(int next_fd, int prev_fd, struct seal* tx, struct seal* rx) {
  uint8_t hdr[WIRE_FRAME_BYTES], rec[WIRE_FRAME_BYTES + SEAL_OVERHEAD];
  struct wire_frame f = {.tag = 1, .length = 0};
  wire_encode_frame(&f, rec);
  for (int s = 0; s < nranks - 1; s++) {
    CHECK_OK(seal_record(tx, rec, WIRE_FRAME_BYTES, NULL, 0, rec + WIRE_FRAME_BYTES));
    CHECK(send(next_fd, rec, sizeof(rec), MSG_NOSIGNAL) == (ssize_t)sizeof(rec));
  }
  for (int got = 0; got < nranks - 1;) {
    CHECK_OK(sock_recv_all(prev_fd, hdr, sizeof(hdr), time_deadline_ms(15000)));
    CHECK_OK(wire_decode_frame(hdr, sizeof(hdr), &f));
    if (f.tag == INT32_MIN) continue; /* a notice: a heartbeat */
    CHECK_MSG(f.tag == 1 && f.length == 0, "victim: unexpected frame (tag %d, %llu bytes) in init's barrier", (int)f.tag,
              (unsigned long long)f.length);
    CHECK_OK(sock_recv_all(prev_fd, rec, SEAL_OVERHEAD, time_deadline_ms(15000)));
    CHECK_OK(seal_open(rx, hdr, sizeof(hdr), rec, 0, rec, "rank 0"));
    got++;
  }
}

/* The victim's init by hand, up to `stage`, then its stop or death. */
static void fake_victim(const char* root_text) {
  victim_prepare();
  uint8_t secret[WIRE_SECRET_BYTES], key[WIRE_KEY_BYTES], hello[WIRE_HELLO_BYTES];
  int lfd, port; /* the victim's listener: the kernel accepts on it */
  int fd = mp_join_root(root_text, rank, nranks, secret, &lfd, &port);
  CHECK_OK(wire_boot_key(secret, key));
  size_t len = wire_table_bytes(nranks);
  uint8_t* table = malloc(len);
  union sock_addr addrs[64];
  CHECK(table);
  CHECK_OK(sock_recv_all(fd, table, len, time_deadline_ms(30000)));
  CHECK_OK(wire_decode_table(table, len, nranks, addrs));
  free(table);
  if (strcmp(stage, "table") == 0) victim_act();
  int next_fd = mp_raw_connect(&addrs[(rank + 1) % nranks]);
  mp_hello_at(WIRE_KIND_RING, rank, nranks, port, hello);
  uint8_t nonce[WIRE_NONCE_BYTES];
  struct seal tx = {.counter = 0}, rx = {.counter = 0};
  CHECK_MSG(mp_handshake_kept(next_fd, secret, hello, nonce), "the next rank did not prove the job's secret");
  CHECK_OK(seal_derive(key, hello, sizeof(hello), nonce, sizeof(nonce), SEAL_CLIENT, &tx, NULL));
  if (strcmp(stage, "ring") == 0) victim_act();
  int prev_fd = accept_ring(lfd, key, &rx);
  if (strcmp(stage, "formed") == 0) victim_act();
  ring_check(next_fd, prev_fd, &tx, &rx);
  victim_act(); /* checked */
}

/* ---- the survivors ---- */

static pid_t victim_pid;
static int survivor_done; /* this survivor's checks passed */

static void resume_victim(void) {
  if (victim_pid > 0) kill(victim_pid, SIGCONT);
}

/* A survivor whose check failed resumes the victim as it exits (else rank 0 does, in finish). */
static void resume_on_failure(void) {
  if (!survivor_done) resume_victim();
}

/* A survivor's call failed with r: RemoteError naming the victim's stop or death, blaming no other
 * rank, within the bound of the victim's time. */
static void expect_named(mscclppResult_t r, const char* what) {
  double now = mp_now();
  char e[2048];
  snprintf(e, sizeof(e), "%s", mscclppGetLastError());
  CHECK_MSG(r != mscclppSuccess, "rank %d: %s succeeded although rank 1 %s", rank, what, do_kill ? "died" : "stopped");
  pid_t pid;
  double dt = now - read_stop_time(&pid);
  if (!do_kill) {
    victim_pid = pid;
    atexit(resume_on_failure);
  }
  CHECK_MSG(r == mscclppRemoteError, "rank %d: %s returned %d (%s): %s", rank, what, (int)r, mscclppGetErrorString(r), e);
  const char* want = do_kill ? "rank 1 died" : "rank 1 stopped responding";
  CHECK_MSG(strstr(e, want) != NULL, "rank %d: %s error does not say \"%s\": %s", rank, what, want, e);
  for (int other = 0; other < nranks; other++) {
    const char* verbs[] = {"died", "failed", "stopped responding", "left"};
    for (int v = 0; v < 4 && other != VICTIM; v++) {
      char blame[64];
      snprintf(blame, sizeof(blame), "rank %d %s", other, verbs[v]);
      CHECK_MSG(strstr(e, blame) == NULL, "rank %d: %s error blames rank %d: %s", rank, what, other, e);
    }
  }
  double bound = do_kill ? KILL_BOUND_S : BOUND_S;
  CHECK_MSG(dt < bound, "rank %d: %s failed %.2f s after rank 1 %s (bound %.1f s): %s", rank, what, dt,
            do_kill ? "died" : "stopped", bound, e);
  printf("rank %d: %s failed %.2f s after rank 1 %s: %s\n", rank, what, dt, do_kill ? "died" : "stopped", e);
  survivor_done = 1;
}

/* Rank 0 resumes a stopped victim once every survivor had its time (each must have failed within
 * the bound of the victim's stop), so the time file is still there for all of them. */
static void finish(void) {
  if (rank != 0 || do_kill) return;
  double t = read_stop_time(NULL);
  while (mp_now() < t + BOUND_S + 1) usleep(100000);
  resume_victim();
}

/* The setup stage: init succeeds, rank 3 opens its p2p connection to the victim, then the victim
 * stops while the others set up connections with it. */
static void setup_stage(mscclppComm_t comm) {
  int pids[64], v = 0;
  pids[rank] = (int)getpid();
  CHECK_OK(mscclppBootstrapAllGather(comm, pids, sizeof(int)));
  if (rank == 3) CHECK_OK(mscclppBootstrapSend(comm, VICTIM, 11, &rank, sizeof(rank)));
  if (rank == VICTIM && nranks > 3) CHECK_OK(mscclppBootstrapRecv(comm, 3, 11, &v, sizeof(v)));
  CHECK_OK(mscclppBootstrapBarrier(comm));
  if (rank == VICTIM) {
    victim_prepare();
    victim_act();
  }
  if (rank == 3) {
    usleep(500000); /* the victim has stopped by now: its progress thread can no longer take this */
    size_t big = 64u << 20;
    char* buf = calloc(1, big);
    CHECK(buf);
    expect_named(mscclppBootstrapSend(comm, VICTIM, 12, buf, big), "a 64 MiB send to it");
    free(buf);
  } else {
    mscclppConnection_t conn;
    expect_named(mscclppConnectionCreate(comm, VICTIM, 0, mscclppTransportTCP, &conn), "connection setup with it");
  }
  CHECK_OK(mscclppCommAbort(comm));
}

int main(int argc, char** argv) {
  CHECK_MSG(argc == 3, "usage: %s table|ring|formed|checked|setup stop|kill", argv[0]);
  stage = argv[1];
  do_kill = strcmp(argv[2], "kill") == 0;
  CHECK_MSG(do_kill || strcmp(argv[2], "stop") == 0, "action %s: expected stop or kill", argv[2]);
  rank = mp_env_int("MSCCLPP_RANK");
  nranks = mp_env_int("MSCCLPP_WORLD_SIZE");
  CHECK_MSG(nranks >= 2 && nranks <= 64, "needs 2 to 64 ranks");
  int setup = strcmp(stage, "setup") == 0;
  CHECK_MSG(!setup || (nranks >= 4 && !do_kill), "setup: stop only, with at least 4 ranks");
  char root[300];
  mp_root(root, sizeof(root));
  CHECK_OK(mscclppSetBootstrapConnTimeout(TIMEOUT_S));
  if (rank == VICTIM && !setup) fake_victim(root); /* never returns */
  mscclppComm_t comm = NULL;
  mscclppResult_t r = mscclppCommInitRank(&comm, nranks, root, rank);
  if (setup) {
    CHECK_OK(r);
    setup_stage(comm);
  } else {
    expect_named(r, "init");
    CHECK(comm == NULL);
  }
  finish();
  return 0;
}
