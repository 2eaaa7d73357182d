/* bootstrap_secret.c - strangers are refused. Before joining, the last rank connects to the root
 * (started by rank 0 from "host:port") with a handshake under a wrong secret (whose challenge
 * must not verify, and whose forged proof is refused), with garbage, with half a hello, and with
 * idle connections it keeps open; after init it runs a handshake with rank 0's listener under a
 * wrong secret, a proved ring handshake rank 0 did not expect, a hello for another nranks, and
 * garbage, and floods it with idle connections. Each bad connection must be closed by the other
 * side, rank 0 must log each refusal naming the remote address, and the real ranks must still
 * work. With MSCCLPP_BOOTSTRAP_SECRET set, the fixed default secret is one more wrong one.
 * (Reaches into the communicator for rank 0's listen address and the secret.) */
#include <stdatomic.h>

#include "bootstrap/internal.h"
#include "bootstrap_mp.h"
#include "core/comm.h"

static atomic_int root_refusals, rank_refusals;

static void log_hook(const char* line) {
  if (strstr(line, "bootstrap root: refused a connection from 127.0.0.1:")) atomic_fetch_add(&root_refusals, 1);
  if (strstr(line, "bootstrap rank 0: refused a connection from 127.0.0.1:")) atomic_fetch_add(&rank_refusals, 1);
  mscclppDefaultLogHandler(line);
}

static int env_secret_set(void) {
  const char* s = getenv("MSCCLPP_BOOTSTRAP_SECRET");
  return s && *s;
}

/* Idle connections. At the root, fewer than it keeps without a hello (the real ranks connect at
 * the same time, and a flood beyond the limit could push one of them out); at rank 0's listener,
 * more than it keeps, to see the oldest silent ones make way for this rank's real connection. */
#define ROOT_FLOOD 40
#define RANK_FLOOD 100
static int flood_fds[RANK_FLOOD], nflood;

static void flood(const union sock_addr* addr, int n) {
  for (nflood = 0; nflood < n; nflood++) flood_fds[nflood] = mp_raw_connect(addr);
}

static void unflood(void) {
  for (int i = 0; i < nflood; i++) close(flood_fds[i]);
  nflood = 0;
}

/* Returns the idle connection, to be closed after init. */
static int intrude_root(const union sock_addr* root, int nranks) {
  int idle = mp_raw_connect(root);
  flood(root, ROOT_FLOOD);
  uint8_t secret[WIRE_SECRET_BYTES], hello[WIRE_HELLO_BYTES];
  CHECK_OK(wire_random_secret(secret));
  mp_hello(WIRE_KIND_ROOT, 0, nranks, hello);
  int fd = mp_raw_connect(root);
  CHECK_MSG(!mp_handshake(fd, secret, hello), "the root's challenge verified under a random secret");
  mp_expect_closed(fd, "root, random secret");
  uint8_t junk[WIRE_HELLO_BYTES];
  for (size_t i = 0; i < sizeof(junk); i++) junk[i] = (uint8_t)(i * 37 + 1);
  mp_expect_refused(mp_raw_connect(root), junk, sizeof(junk), "root, garbage");
  int half = mp_raw_connect(root);
  CHECK(send(half, hello, 10, MSG_NOSIGNAL) == 10);
  close(half);
  if (env_secret_set()) {
    CHECK_OK(wire_secret_from_text(WIRE_DEFAULT_SECRET_TEXT, secret));
    mp_hello(WIRE_KIND_ROOT, 0, nranks, hello);
    mp_expect_refused_handshake(mp_raw_connect(root), secret, hello, "root, default secret");
  }
  return idle;
}

static void intrude_listener(struct bootstrap* b) {
  const union sock_addr* rank0 = &b->addrs[0];
  flood(rank0, RANK_FLOOD); /* held until the end: rank 0 must still take this rank's first p2p connection */
  uint8_t bad[WIRE_SECRET_BYTES], hello[WIRE_HELLO_BYTES];
  memcpy(bad, b->secret, sizeof(bad));
  bad[7] ^= 0x40;
  mp_hello(WIRE_KIND_P2P, b->rank, b->nranks, hello);
  mp_expect_refused_handshake(mp_raw_connect(rank0), bad, hello, "rank 0, wrong secret");
  mp_hello(WIRE_KIND_RING, b->rank, b->nranks, hello); /* rank 0's ring is already connected */
  mp_expect_refused_handshake(mp_raw_connect(rank0), b->secret, hello, "rank 0, second ring connection");
  mp_hello(WIRE_KIND_P2P, b->rank, b->nranks + 1, hello);
  mp_expect_refused(mp_raw_connect(rank0), hello, sizeof(hello), "rank 0, other nranks");
  memset(hello, 0xff, sizeof(hello));
  mp_expect_refused(mp_raw_connect(rank0), hello, sizeof(hello), "rank 0, garbage");
}

/* The real ranks still work: an allgather and a ring of messages. */
static void check_healthy(mscclppComm_t comm, int rank, int nranks) {
  int* all = calloc((size_t)nranks, sizeof(int));
  CHECK(all);
  all[rank] = rank * 3 + 1;
  CHECK_OK(mscclppBootstrapAllGather(comm, all, sizeof(int)));
  for (int r = 0; r < nranks; r++) CHECK(all[r] == r * 3 + 1);
  free(all);
  int v = rank, got = -1;
  CHECK_OK(mscclppBootstrapSend(comm, (rank + 1) % nranks, 4, &v, sizeof(v)));
  CHECK_OK(mscclppBootstrapRecv(comm, (rank + nranks - 1) % nranks, 4, &got, sizeof(got)));
  CHECK(got == (rank + nranks - 1) % nranks);
}

int main(void) {
  int rank = mp_env_int("MSCCLPP_RANK"), nranks = mp_env_int("MSCCLPP_WORLD_SIZE");
  CHECK_MSG(nranks >= 2, "needs 2 ranks or more");
  const char* want = getenv("MSCCLPP_TEST_EXPECT_SECRET"); /* mscclpp-run keeps a secret the user set */
  if (want) CHECK_MSG(env_secret_set() && strcmp(getenv("MSCCLPP_BOOTSTRAP_SECRET"), want) == 0, "secret replaced");
  char root_text[300];
  mp_root(root_text, sizeof(root_text));
  union sock_addr root;
  CHECK_OK(sock_parse_addr(root_text, &root));
  if (rank == 0) CHECK_OK(mscclppSetLogHandler(log_hook));
  int idle = rank == nranks - 1 ? intrude_root(&root, nranks) : -1;
  mscclppComm_t comm;
  CHECK_OK(mscclppCommInitRank(&comm, nranks, root_text, rank));
  if (idle >= 0) close(idle), unflood();
  CHECK_OK(mscclppBootstrapBarrier(comm));
  if (rank == nranks - 1) intrude_listener(comm->boot);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  if (rank == 0) {
    int want_root = 2 + env_secret_set();
    CHECK_MSG(atomic_load(&root_refusals) >= want_root, "root logged %d refusals, expected %d",
              atomic_load(&root_refusals), want_root);
    CHECK_MSG(atomic_load(&rank_refusals) >= 4, "rank 0 logged %d refusals, expected 4", atomic_load(&rank_refusals));
  }
  check_healthy(comm, rank, nranks);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  if (rank == nranks - 1) unflood();
  CHECK_OK(mscclppCommDestroy(comm));
  return 0;
}
