/* bootstrap_hostile.c - what a hostile local process did to an unauthenticated job (issue 22,
 * items 1, 2 and 5) no longer works. Run under mscclpp-run (which gives the job a random secret)
 * with 4 ranks; the last rank also plays the neighbour, who knows everything but the secret:
 *   join     before the real rank 3 joins, it connects to the root as rank 3 with the public
 *            default secret: the root's challenge must not verify, and after its forged proof the
 *            root closes the connection without sending the address table; a second fake rank 3
 *            that says hello and then stays silent must not keep the real rank 3 out;
 *   inject   it opens a point-to-point connection to rank 0 claiming to be rank 1 and writes a
 *            frame after its forged proof: rank 0's next recv from rank 1 on that tag must return
 *            rank 1's real message;
 *   hang up  it connects to rank 1 claiming to be rank 0 and hangs up mid-handshake: rank 1's recv
 *            from rank 0 must still succeed;
 *   flood    it opens and closes FLOOD_CONNS connections to rank 0's listener as fast as it can:
 *            rank 0 must log at most LOG_RATE_BURST lines per window (plus one summary per window,
 *            and slack for the windows the flood straddles), and say how many it did not show. */
#include <stdatomic.h>

#include "bootstrap_mp.h"
#include "core/comm.h"

#define FLOOD_CONNS 2000
#define TAG_INJECT 7
#define TAG_HANGUP 8

static atomic_int flood_lines, summary_lines;
static atomic_int counting;

static void log_hook(const char* line) {
  if (atomic_load(&counting)) {
    atomic_fetch_add(&flood_lines, 1);
    if (strstr(line, "more refused connections to bootstrap rank 0 not shown")) atomic_fetch_add(&summary_lines, 1);
  }
  mscclppDefaultLogHandler(line);
}

/* The fake rank 3: the public secret, a forged proof, and no table in return. */
static void fake_join(const union sock_addr* root, int nranks) {
  uint8_t pub[WIRE_SECRET_BYTES], hello[WIRE_HELLO_BYTES];
  CHECK_OK(wire_secret_from_text(WIRE_DEFAULT_SECRET_TEXT, pub));
  mp_hello(WIRE_KIND_ROOT, nranks - 1, nranks, hello);
  int fd = mp_raw_connect(root);
  CHECK_MSG(!mp_handshake(fd, pub, hello), "the root's challenge verified under the public secret");
  mp_expect_closed(fd, "root, fake rank 3 with the public secret"); /* nothing, the table least of all */
}

/* A point-to-point connection to `victim` claiming to be `claimed`, with a forged proof and a frame
 * written right behind it. */
static void inject(const union sock_addr* victim, int claimed, int nranks) {
  uint8_t pub[WIRE_SECRET_BYTES], hello[WIRE_HELLO_BYTES], frame[WIRE_FRAME_BYTES + 4];
  CHECK_OK(wire_secret_from_text(WIRE_DEFAULT_SECRET_TEXT, pub));
  mp_hello(WIRE_KIND_P2P, claimed, nranks, hello);
  int fd = mp_raw_connect(victim);
  CHECK(!mp_handshake(fd, pub, hello));
  struct wire_frame f = {.tag = TAG_INJECT, .length = 4};
  wire_encode_frame(&f, frame);
  memcpy(frame + WIRE_FRAME_BYTES, "EVIL", 4);
  (void)!send(fd, frame, sizeof(frame), MSG_NOSIGNAL); /* may already fail: the victim hung up */
  mp_expect_closed(fd, "rank 0, injected frame");
}

/* Connects to `victim` claiming to be `claimed`, reads the challenge and hangs up. */
static void hang_up(const union sock_addr* victim, int claimed, int nranks) {
  uint8_t hello[WIRE_HELLO_BYTES], chal[AUTH_CHALLENGE_BYTES];
  mp_hello(WIRE_KIND_P2P, claimed, nranks, hello);
  int fd = mp_raw_connect(victim);
  CHECK(send(fd, hello, sizeof(hello), MSG_NOSIGNAL) == (ssize_t)sizeof(hello));
  CHECK_OK(sock_recv_all(fd, chal, sizeof(chal), time_deadline_ms(15000)));
  close(fd);
}

static void flood(const union sock_addr* victim) {
  for (int i = 0; i < FLOOD_CONNS; i++) close(mp_raw_connect(victim));
}

int main(void) {
  int rank = mp_env_int("MSCCLPP_RANK"), nranks = mp_env_int("MSCCLPP_WORLD_SIZE");
  CHECK_MSG(nranks == 4, "run with 4 ranks");
  const char* s = getenv("MSCCLPP_BOOTSTRAP_SECRET");
  CHECK_MSG(s && *s, "mscclpp-run did not give the job a secret");
  char root_text[300];
  mp_root(root_text, sizeof(root_text));
  union sock_addr root;
  CHECK_OK(sock_parse_addr(root_text, &root));
  if (rank == 0) CHECK_OK(mscclppSetLogHandler(log_hook));
  int silent = -1;
  if (rank == nranks - 1) {
    fake_join(&root, nranks);
    uint8_t hello[WIRE_HELLO_BYTES];
    mp_hello(WIRE_KIND_ROOT, nranks - 1, nranks, hello);
    silent = mp_raw_connect(&root);
    CHECK(send(silent, hello, sizeof(hello), MSG_NOSIGNAL) == (ssize_t)sizeof(hello));
  }
  mscclppComm_t comm;
  CHECK_OK(mscclppCommInitRank(&comm, nranks, root_text, rank));
  if (silent >= 0) close(silent);
  struct bootstrap* b = comm->boot;

  /* inject: the stranger's frame must not be what rank 0 receives from rank 1. */
  if (rank == nranks - 1) inject(&b->addrs[0], 1, nranks);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  int v = 111, got = 0;
  if (rank == 1) CHECK_OK(mscclppBootstrapSend(comm, 0, TAG_INJECT, &v, sizeof(v)));
  if (rank == 0) {
    CHECK_OK(mscclppBootstrapRecv(comm, 1, TAG_INJECT, &got, sizeof(got)));
    CHECK_MSG(got == 111, "rank 0 received %d from \"rank 1\", not rank 1's 111", got);
  }

  /* hang up: a stranger posing as rank 0 must not fail rank 1's receive from rank 0. */
  if (rank == nranks - 1) hang_up(&b->addrs[1], 0, nranks);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  if (rank == 0) CHECK_OK(mscclppBootstrapSend(comm, 1, TAG_HANGUP, &v, sizeof(v)));
  if (rank == 1) {
    CHECK_OK(mscclppBootstrapRecv(comm, 0, TAG_HANGUP, &got, sizeof(got)));
    CHECK(got == 111);
  }

  /* flood: bounded logging. */
  CHECK_OK(mscclppBootstrapBarrier(comm));
  double t0 = mp_now();
  if (rank == 0) atomic_store(&counting, 1);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  if (rank == nranks - 1) flood(&b->addrs[0]);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  if (rank == 0) {
    /* The summary comes once the flood's last window is over: wait for it (bounded). */
    for (int i = 0; i < 40 && atomic_load(&summary_lines) == 0; i++) usleep(100000);
    atomic_store(&counting, 0);
    double secs = mp_now() - t0;
    int lines = atomic_load(&flood_lines);
    /* Per window: LOG_RATE_BURST lines and one summary; +2 windows for those the flood straddles. */
    int bound = (LOG_RATE_BURST + 1) * ((int)(secs * 1000 / LOG_RATE_WINDOW_MS) + 2);
    printf("flood: %d connections in %.2f s gave %d log lines (bound %d), %d summaries\n", FLOOD_CONNS, secs, lines,
           bound, atomic_load(&summary_lines));
    CHECK_MSG(lines <= bound, "rank 0 logged %d lines under a flood of %d connections in %.2f s (bound %d)", lines,
              FLOOD_CONNS, secs, bound);
    CHECK_MSG(atomic_load(&summary_lines) >= 1, "no \"N more refused connections\" summary");
  }
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppCommDestroy(comm));
  return 0;
}
