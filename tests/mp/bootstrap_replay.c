/* bootstrap_replay.c - bytes recorded from a real handshake are worth nothing to whoever recorded
 * them (issue 22, items 1 and 2: the nonces make every handshake's MACs its own). 3 ranks under
 * mscclpp-run (the root in rank 0's process, the job's secret from mscclpp-run):
 *
 *   capture  rank 2 inits through a TCP relay (a thread of its own process between it and the
 *            root) that records every byte each way: rank 2's hello and proof, the root's
 *            challenge and the table;
 *   replay   while the root still waits for rank 1 (which starts only after this), the relay
 *            opens new connections to the root and sends the recorded hello and proof verbatim,
 *            once step by step (hello, the root's new challenge, then the recorded proof) and once
 *            all at once. The root must answer each with a challenge of a new nonce and then close
 *            the connection: no byte of the table (nor anything else) comes back, and rank 0 logs
 *            both refusals as "no proof". A replay taken as rank 2 would also have failed the
 *            rendezvous (a rank joining twice): the job must then complete (barrier, allgather);
 *   squat    afterwards rank 2 plays the root for a new init of its own (a listener of its own)
 *            and answers that init's hello with the recorded challenge of the root: the init must
 *            fail at once (5 s at most, its timeout being 10 s) saying the root did not prove the
 *            secret, after sending its hello and nothing else (no proof to a root that did not
 *            prove itself).
 * Bounded: every wait is 20 s at most; it takes about a second. */
#include <pthread.h>
#include <stdatomic.h>

#include "bootstrap_mp.h"

#define NR 3
#define CAP 4096

static atomic_int root_replays_refused;

static void log_hook(const char* line) {
  if (strstr(line, "bootstrap root: refused a connection from 127.0.0.1:") && strstr(line, "no proof of the job's secret"))
    atomic_fetch_add(&root_replays_refused, 1);
  mscclppDefaultLogHandler(line);
}

struct relay {
  int listen_fd;
  union sock_addr root;
  char signal_path[128];
  uint8_t up[CAP], down[CAP]; /* rank -> root and root -> rank, as relayed */
  size_t nup, ndown;
  int replayed;
};

/* Forwards what is readable on `from` to `to`, recording it; 0 once `from` has ended. */
static int pump(int from, int to, uint8_t* rec, size_t* nrec) {
  uint8_t buf[CAP];
  ssize_t n = recv(from, buf, sizeof(buf), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 1;
  if (n <= 0) return 0;
  size_t keep = *nrec + (size_t)n <= CAP ? (size_t)n : CAP - *nrec;
  memcpy(rec + *nrec, buf, keep);
  *nrec += keep;
  CHECK_OK(sock_send_all(to, buf, (size_t)n, time_deadline_ms(20000)));
  return 1;
}

/* One replay of the recorded hello and proof on a new connection to the root; all at once, or
 * waiting for the root's challenge in between. Nothing but a fresh challenge may come back. */
static void replay(const struct relay* x, int at_once) {
  const uint8_t* hello = x->up;
  const uint8_t* proof = x->up + WIRE_HELLO_BYTES;
  int fd = mp_raw_connect(&x->root);
  uint8_t chal[AUTH_CHALLENGE_BYTES];
  if (at_once) {
    CHECK(send(fd, x->up, WIRE_HELLO_BYTES + AUTH_PROOF_BYTES, MSG_NOSIGNAL) == WIRE_HELLO_BYTES + AUTH_PROOF_BYTES);
    CHECK_OK(sock_recv_all(fd, chal, sizeof(chal), time_deadline_ms(20000)));
  } else {
    CHECK(send(fd, hello, WIRE_HELLO_BYTES, MSG_NOSIGNAL) == WIRE_HELLO_BYTES);
    CHECK_OK(sock_recv_all(fd, chal, sizeof(chal), time_deadline_ms(20000)));
    CHECK(send(fd, proof, AUTH_PROOF_BYTES, MSG_NOSIGNAL) == AUTH_PROOF_BYTES);
  }
  CHECK_MSG(memcmp(chal, "MPAC", 4) == 0, "the root answered a replayed hello with something else than a challenge");
  CHECK_MSG(memcmp(chal + 8, x->down + 8, AUTH_NONCE_BYTES) != 0, "the root's challenge repeated a nonce");
  mp_expect_closed(fd, at_once ? "root, replayed hello and proof at once" : "root, replayed hello then proof");
}

/* Checks that what was recorded is rank 2's hello for the root and a proof. */
static void check_recorded(const struct relay* x) {
  struct wire_hello h;
  CHECK_OK(wire_decode_hello(x->up, WIRE_HELLO_BYTES, &h));
  CHECK(h.kind == WIRE_KIND_ROOT && h.rank == 2 && h.nranks == NR);
  CHECK(memcmp(x->up + WIRE_HELLO_BYTES, "MPAP", 4) == 0);
  CHECK(memcmp(x->down, "MPAC", 4) == 0);
}

/* The relay: one connection from rank 2 to the root. Once rank 2's proof has gone through, it
 * replays it twice and tells rank 1 to start; then relays the table and the close. */
static void* relay_main(void* arg) {
  struct relay* x = arg;
  int in = -1, out = -1;
  CHECK_OK(sock_accept(x->listen_fd, time_deadline_ms(20000), &in));
  CHECK_OK(sock_connect(&x->root, time_deadline_ms(20000), &out));
  uint64_t end = time_deadline_ms(20000);
  for (int open_in = 1, open_out = 1; open_in && open_out;) {
    CHECK_MSG(time_left_ms(end) > 0, "the relayed rendezvous did not end within 20 s");
    struct pollfd p[2] = {{.fd = in, .events = POLLIN}, {.fd = out, .events = POLLIN}};
    CHECK(poll(p, 2, 100) >= 0);
    if (p[0].revents) open_in = pump(in, out, x->up, &x->nup);
    if (p[1].revents) open_out = pump(out, in, x->down, &x->ndown);
    if (!x->replayed && x->nup == WIRE_HELLO_BYTES + AUTH_PROOF_BYTES && x->ndown >= AUTH_CHALLENGE_BYTES) {
      check_recorded(x);
      replay(x, 0);
      replay(x, 1);
      x->replayed = 1;
      FILE* f = fopen(x->signal_path, "w");
      CHECK(f && fclose(f) == 0);
    }
  }
  CHECK_MSG(x->replayed, "the relay saw %zu bytes from rank 2, not a hello and a proof", x->nup);
  CHECK_MSG(x->ndown > AUTH_CHALLENGE_BYTES, "no table came through the relay");
  close(in);
  close(out);
  return NULL;
}

/* A squatter's answer to one hello: the recorded challenge of the root; returns how many bytes
 * the rank sent in all before hanging up. */
struct squat {
  int listen_fd;
  const uint8_t* chal;
  size_t got;
};

static void* squat_main(void* arg) {
  struct squat* s = arg;
  int fd = -1;
  CHECK_OK(sock_accept(s->listen_fd, time_deadline_ms(20000), &fd));
  uint8_t buf[256];
  CHECK_OK(sock_recv_all(fd, buf, WIRE_HELLO_BYTES, time_deadline_ms(20000)));
  s->got = WIRE_HELLO_BYTES;
  CHECK_OK(sock_send_all(fd, s->chal, AUTH_CHALLENGE_BYTES, time_deadline_ms(20000)));
  uint64_t end = time_deadline_ms(20000);
  for (;;) {
    CHECK_MSG(time_left_ms(end) > 0, "the rank kept the squatter's connection open for 20 s");
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    s->got += (size_t)n;
  }
  close(fd);
  return NULL;
}

/* Rank 2's own init against a squatter that answers with the root's recorded challenge. */
static void squat_with(const uint8_t* chal) {
  union sock_addr lo = {.sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)}}, bound;
  struct squat s = {.chal = chal};
  CHECK_OK(sock_listen(&lo, &s.listen_fd, &bound));
  pthread_t t;
  CHECK(pthread_create(&t, NULL, squat_main, &s) == 0);
  char where[64];
  snprintf(where, sizeof(where), "127.0.0.1:%d", ntohs(bound.sin.sin_port));
  CHECK_OK(mscclppSetBootstrapConnTimeout(10));
  mscclppComm_t comm = NULL;
  double t0 = mp_now();
  mscclppResult_t r = mscclppCommInitRank(&comm, NR, where, 1); /* rank 1: starts no root of its own */
  double dt = mp_now() - t0;
  char e[1024];
  snprintf(e, sizeof(e), "%s", mscclppGetLastError());
  CHECK(pthread_join(t, NULL) == 0);
  close(s.listen_fd);
  printf("squat: init failed after %.2f s having sent %zu bytes: %s\n", dt, s.got, e);
  CHECK_MSG(r != mscclppSuccess, "an init accepted the root's recorded challenge");
  CHECK_MSG(strstr(e, "did not prove that it knows the job's secret"), "unexpected error: %s", e);
  CHECK_MSG(dt < 5, "the init took %.1f s to refuse a replayed challenge", dt); /* at once; slack for CI */
  CHECK_MSG(s.got == WIRE_HELLO_BYTES, "the rank sent %zu bytes to a root that did not prove itself (its hello: %d)",
            s.got, WIRE_HELLO_BYTES);
}

/* Rank 2: init through the relay; returns the relay's recording. */
static mscclppComm_t rank2_init(const char* root_text, struct relay* x, const char* signal_path) {
  CHECK_OK(sock_parse_addr(root_text, &x->root));
  snprintf(x->signal_path, sizeof(x->signal_path), "%s", signal_path);
  union sock_addr lo = {.sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)}}, bound;
  CHECK_OK(sock_listen(&lo, &x->listen_fd, &bound));
  pthread_t t;
  CHECK(pthread_create(&t, NULL, relay_main, x) == 0);
  char via[64];
  snprintf(via, sizeof(via), "127.0.0.1:%d", ntohs(bound.sin.sin_port));
  mscclppComm_t comm;
  CHECK_OK(mscclppCommInitRank(&comm, NR, via, 2));
  CHECK(pthread_join(t, NULL) == 0);
  close(x->listen_fd);
  return comm;
}

static void wait_file(const char* path) {
  double t0 = mp_now();
  while (access(path, F_OK) != 0) {
    CHECK_MSG(mp_now() - t0 < 20, "%s did not appear within 20 s", path);
    usleep(5000);
  }
}

int main(void) {
  int rank = mp_env_int("MSCCLPP_RANK");
  CHECK_MSG(mp_env_int("MSCCLPP_WORLD_SIZE") == NR, "run with %d ranks", NR);
  char root[300], signal_path[128];
  mp_root(root, sizeof(root));
  snprintf(signal_path, sizeof(signal_path), "/tmp/mscclpp-replay-%d-%d", (int)getuid(), mp_env_int("MSCCLPP_MASTER_PORT"));
  CHECK_OK(mscclppSetBootstrapConnTimeout(30));
  if (rank == 0) CHECK_OK(mscclppSetLogHandler(log_hook));
  static struct relay x;
  mscclppComm_t comm;
  if (rank == 2) {
    comm = rank2_init(root, &x, signal_path);
  } else {
    if (rank == 1) wait_file(signal_path); /* the root still waits for rank 1 during the replays */
    CHECK_OK(mscclppCommInitRank(&comm, NR, root, rank));
  }
  int all[NR] = {0};
  all[rank] = 100 + rank;
  CHECK_OK(mscclppBootstrapAllGather(comm, all, sizeof(int)));
  for (int r = 0; r < NR; r++) CHECK(all[r] == 100 + r);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  if (rank == 0) {
    unlink(signal_path);
    CHECK_MSG(atomic_load(&root_replays_refused) == 2, "the root logged %d refusals of a replay, expected 2",
              atomic_load(&root_replays_refused));
  }
  CHECK_OK(mscclppCommDestroy(comm));
  if (rank == 2) squat_with(x.down); /* the root's recorded challenge, towards a rank */
  printf("bootstrap_replay rank %d: ok\n", rank);
  return 0;
}
