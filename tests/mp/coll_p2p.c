/* Send/recv on CPU ranks: a ring with sends first, receives first, or each rank its own way; an
 * exchange between every pair (self included) with every rank's calls in its own random order and
 * message sizes from 1 byte to many chunks; two messages to the same peer in one group (matched in
 * order); ungrouped calls; nested groups; a collective queued in a group beside sends and receives.
 * Every byte is checked.
 *
 *   coll_p2p ROUNDS [HOSTS]   (HOSTS: rank r acts as host r % HOSTS, so pairs of "hosts" use tcp) */
#include "algo/algo.h"
#include "transport_mp.h"

static int rank, n;
static mscclppComm_t comm;

static void fill(unsigned char* buf, size_t len, int round, int from, int to) {
  for (size_t i = 0; i < len; i++) buf[i] = tmp_byte(round, from, to, i);
}

static void expect(const unsigned char* buf, size_t len, int round, int from, int to, const char* what) {
  for (size_t i = 0; i < len; i++)
    if (buf[i] != tmp_byte(round, from, to, i))
      TEST_FAIL("rank %d %s round %d: byte %zu of %zu from rank %d is 0x%02x, expected 0x%02x", rank, what, round, i, len,
                from, buf[i], tmp_byte(round, from, to, i));
}

/* Ring: every rank sends to rank+1 and receives from rank-1; order 0: send first, 1: receive first,
 * 2: even ranks send first, odd ranks receive first. */
static void ring(int round, int order, size_t len) {
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  unsigned char* out = malloc(len);
  unsigned char* in = malloc(len);
  fill(out, len, round, rank, next);
  int send_first = order == 0 || (order == 2 && rank % 2 == 0);
  CHECK_OK(mscclppGroupStart());
  if (send_first) CHECK_OK(mscclppSend(out, len, mscclppUint8, next, comm, NULL));
  CHECK_OK(mscclppRecv(in, len, mscclppUint8, prev, comm, NULL));
  if (!send_first) CHECK_OK(mscclppSend(out, len, mscclppUint8, next, comm, NULL));
  CHECK_OK(mscclppGroupEnd());
  expect(in, len, round, prev, rank, "ring");
  free(out);
  free(in);
}

static size_t pair_len(int from, int to, int round) { return 1 + (size_t)((from * 7 + to * 13 + round) % 5) * 3001; }

/* Every rank sends to and receives from every rank (itself too), the 2n calls shuffled per rank. */
static void all_pairs(int round) {
  unsigned char** out = calloc((size_t)n, sizeof(*out));
  unsigned char** in = calloc((size_t)n, sizeof(*in));
  int* order = malloc(2 * (size_t)n * sizeof(int));
  for (int q = 0; q < n; q++) {
    out[q] = malloc(pair_len(rank, q, round));
    in[q] = malloc(pair_len(q, rank, round));
    fill(out[q], pair_len(rank, q, round), round, rank, q);
    order[2 * q] = 2 * q, order[2 * q + 1] = 2 * q + 1;
  }
  uint64_t state = (uint64_t)round * 1000 + (uint64_t)rank;
  for (int i = 2 * n - 1; i > 0; i--) { /* Fisher-Yates */
    int j = (int)(tmp_rand(&state) % (uint64_t)(i + 1)), t = order[i];
    order[i] = order[j], order[j] = t;
  }
  CHECK_OK(mscclppGroupStart());
  for (int i = 0; i < 2 * n; i++) {
    int q = order[i] / 2;
    if (order[i] % 2 == 0) CHECK_OK(mscclppSend(out[q], pair_len(rank, q, round), mscclppUint8, q, comm, NULL));
    else CHECK_OK(mscclppRecv(in[q], pair_len(q, rank, round), mscclppUint8, q, comm, NULL));
  }
  CHECK_OK(mscclppGroupEnd());
  for (int q = 0; q < n; q++) {
    expect(in[q], pair_len(q, rank, round), round, q, rank, "all-pairs");
    free(out[q]);
    free(in[q]);
  }
  free(out), free(in), free(order);
}

/* Two messages of different sizes to the next rank in one group, received in the same order. */
static void two_messages(int round) {
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  size_t a = 5000, b = 77;
  unsigned char *oa = malloc(a), *ob = malloc(b), *ia = malloc(a), *ib = malloc(b);
  fill(oa, a, round, rank, next);
  fill(ob, b, round + 1, rank, next);
  CHECK_OK(mscclppGroupStart());
  CHECK_OK(mscclppRecv(ia, a / 4, mscclppInt32, prev, comm, NULL));
  CHECK_OK(mscclppSend(oa, a / 4, mscclppFloat, next, comm, NULL));
  CHECK_OK(mscclppSend(ob, b, mscclppInt8, next, comm, NULL));
  CHECK_OK(mscclppRecv(ib, b, mscclppUint8, prev, comm, NULL));
  CHECK_OK(mscclppGroupEnd());
  expect(ia, a, round, prev, rank, "first of two");
  expect(ib, b, round + 1, prev, rank, "second of two");
  free(oa), free(ob), free(ia), free(ib);
}

/* Ungrouped: even ranks send to the next rank, which receives (an odd last rank sits out). */
static void ungrouped(int round) {
  size_t len = 12345;
  unsigned char* buf = malloc(len);
  if (rank % 2 == 0 && rank + 1 < n) {
    fill(buf, len, round, rank, rank + 1);
    CHECK_OK(mscclppSend(buf, len, mscclppUint8, rank + 1, comm, NULL));
  } else if (rank % 2 == 1) {
    CHECK_OK(mscclppRecv(buf, len, mscclppUint8, rank - 1, comm, NULL));
    expect(buf, len, round, rank - 1, rank, "ungrouped");
  }
  free(buf);
}

/* Nested groups and an allreduce queued between the sends and receives. */
static void nested_with_collective(int round) {
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  size_t len = 3000;
  unsigned char *out = malloc(len), *in = malloc(len);
  fill(out, len, round, rank, next);
  int32_t v = rank + 1, sum = 0;
  CHECK_OK(mscclppGroupStart());
  CHECK_OK(mscclppGroupStart());
  CHECK_OK(mscclppSend(out, len, mscclppUint8, next, comm, NULL));
  CHECK_OK(mscclppGroupEnd()); /* inner: nothing runs yet */
  CHECK_OK(mscclppAllReduce(&v, &sum, 1, mscclppInt32, mscclppSum, comm, NULL));
  CHECK(sum == 0);
  CHECK_OK(mscclppRecv(in, len, mscclppUint8, prev, comm, NULL));
  CHECK_OK(mscclppGroupEnd());
  CHECK_MSG(sum == n * (n + 1) / 2, "rank %d: allreduce in a group gave %d", rank, sum);
  expect(in, len, round, prev, rank, "nested");
  free(out), free(in);
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3, hosts = argc > 2 ? atoi(argv[2]) : 0;
  if (hosts > 0) {
    char id[32];
    snprintf(id, sizeof(id), "p2p-host-%d", atoi(getenv("MSCCLPP_RANK") ? getenv("MSCCLPP_RANK") : "0") % hosts);
    setenv("MSCCLPP_HOST_ID", id, 1);
  }
  comm = tmp_init(&rank, &n);
  double t0 = tmp_now();
  for (int r = 0; r < rounds; r++) {
    for (int order = 0; order < 3; order++) ring(r * 10 + order, order, r == 0 ? 1 : 40000 + (size_t)r);
    all_pairs(r);
    two_messages(r * 7);
    ungrouped(r);
    nested_with_collective(r);
  }
  CHECK_RES(mscclppGroupEnd(), mscclppInvalidUsage);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  if (rank == 0) printf("coll_p2p: %d ranks, %d rounds OK in %.2f s\n", n, rounds, tmp_now() - t0);
  CHECK_OK(mscclppCommDestroy(comm));
  return 0;
}
