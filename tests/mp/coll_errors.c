/* Errors of the collectives, each a clear message naming what was wrong, never a crash or a hang.
 *
 *   coll_errors args          every bad argument (comm, datatype, op, root, peer, NULL buffers,
 *                             overlap, count, premulsum misuse, group misuse), then a correct call
 *   coll_errors mismatch WHAT ranks disagree (WHAT: count coll dtype op root): both fail naming it
 *   coll_errors peerdeath     rank 1 exits; rank 0's allreduce and receive fail naming rank 1
 *   coll_errors badalgo       MSCCLPP_ALGO names an unknown algorithm (set by the test)
 *   coll_errors badtable      MSCCLPP_ALGO_TABLE cannot be read (set by the test)
 *   coll_errors scratch       rank 1 sets another MSCCLPP_ALGO_CPU_SCRATCH than rank 0
 *   coll_errors windows       window registration: sizes that differ, NULL, overlap, a bad handle;
 *                             then collectives on windows (CPU ranks: recorded, results unchanged);
 *                             local buffer registrations and their errors */
#include "transport_mp.h"

static int rank, n;
static mscclppComm_t comm;

static void bad_arguments(void) {
  float a[64] = {0}, b[64] = {0};
  const mscclppResult_t inv = mscclppInvalidArgument;
  EXPECT(mscclppAllReduce(a, b, 4, mscclppFloat, mscclppSum, NULL, NULL), inv, "mscclppAllReduce: comm is NULL");
  EXPECT(mscclppAllReduce(a, b, 4, (mscclppDataType_t)12, mscclppSum, comm, NULL), inv, "datatype 12");
  EXPECT(mscclppAllGather(a, b, 4, (mscclppDataType_t)-1, comm, NULL), inv, "mscclppAllGather: datatype -1");
  EXPECT(mscclppAllReduce(a, b, 4, mscclppFloat, (mscclppRedOp_t)5, comm, NULL), inv, "op 5");
  EXPECT(mscclppReduceScatter(a, b, 4, mscclppFloat, (mscclppRedOp_t)-3, comm, NULL), inv, "op -3");
  EXPECT(mscclppAllReduce(NULL, b, 4, mscclppFloat, mscclppSum, comm, NULL), inv, "sendbuff is NULL");
  EXPECT(mscclppAllReduce(a, NULL, 4, mscclppFloat, mscclppSum, comm, NULL), inv, "recvbuff is NULL");
  EXPECT(mscclppAllToAll(a, NULL, 4, mscclppFloat, comm, NULL), inv, "recvbuff is NULL");
  EXPECT(mscclppAllReduce(a, a + 1, 4, mscclppFloat, mscclppSum, comm, NULL), inv, "overlap");
  EXPECT(mscclppAllGather(a + 1, a, 2, mscclppFloat, comm, NULL), inv, "in place: sendbuff ==");
  EXPECT(mscclppReduceScatter(a, a + 1, 2, mscclppFloat, mscclppSum, comm, NULL), inv, "overlap");
  EXPECT(mscclppAllReduce(a, b, (size_t)-1 / 2, mscclppDouble, mscclppSum, comm, NULL), inv, "count");
  EXPECT(mscclppAllGather(a, b, (size_t)-1 / 4, mscclppInt8, comm, NULL), inv, "too large");
  EXPECT(mscclppBroadcast(a, b, 4, mscclppFloat, -1, comm, NULL), inv, "root -1");
  EXPECT(mscclppReduce(a, b, 4, mscclppFloat, mscclppMax, n, comm, NULL), inv, "mscclppReduce: root");
  EXPECT(mscclppSend(a, 4, mscclppFloat, n, comm, NULL), inv, "mscclppSend: peer");
  EXPECT(mscclppRecv(a, 4, mscclppFloat, -1, comm, NULL), inv, "mscclppRecv: peer -1");
  EXPECT(mscclppRecv(NULL, 4, mscclppFloat, 0, comm, NULL), inv, "recvbuff is NULL");
  /* pre-multiplied sums */
  mscclppRedOp_t op;
  float s = 2.0f;
  EXPECT(mscclppRedOpCreatePreMulSum(&op, NULL, mscclppFloat, mscclppScalarHostImmediate, comm), inv, "scalar is NULL");
  EXPECT(mscclppRedOpCreatePreMulSum(&op, &s, (mscclppDataType_t)40, mscclppScalarHostImmediate, comm), inv, "datatype 40");
  EXPECT(mscclppRedOpCreatePreMulSum(&op, &s, mscclppFloat, (mscclppScalarResidence_t)7, comm), inv, "residence 7");
  CHECK_OK(mscclppRedOpCreatePreMulSum(&op, &s, mscclppFloat, mscclppScalarHostImmediate, comm));
  CHECK((int)op >= (int)mscclppNumOps);
  EXPECT(mscclppAllReduce(a, b, 4, mscclppHalf, op, comm, NULL), inv, "created for datatype float, the call uses half");
  CHECK_OK(mscclppRedOpDestroy(op, comm));
  EXPECT(mscclppAllReduce(a, b, 4, mscclppFloat, op, comm, NULL), inv, "live mscclppRedOpCreatePreMulSum");
  EXPECT(mscclppRedOpDestroy(op, comm), inv, "not created on this communicator");
  EXPECT(mscclppRedOpDestroy(mscclppMax, comm), inv, "built-in");
  /* groups */
  EXPECT(mscclppGroupEnd(), mscclppInvalidUsage, "no group is open");
  CHECK_OK(mscclppGroupStart());
  EXPECT(mscclppSend(a, 4, (mscclppDataType_t)99, 0, comm, NULL), inv, "datatype 99"); /* checked when called */
  CHECK_OK(mscclppGroupEnd()); /* nothing was queued */
  CHECK_OK(mscclppGroupStart());
  CHECK_OK(mscclppSend(a, 4, mscclppFloat, rank, comm, NULL)); /* to itself, without a receive */
  EXPECT(mscclppGroupEnd(), mscclppInvalidUsage, "without a matching receive from itself");
  /* count 0 is a no-op, even with NULL buffers */
  CHECK_OK(mscclppAllReduce(NULL, NULL, 0, mscclppFloat, mscclppSum, comm, NULL));
  CHECK_OK(mscclppSend(NULL, 0, mscclppFloat, 0, comm, NULL));
  /* still usable: a correct call after all that */
  for (int i = 0; i < 4; i++) a[i] = (float)(rank + i);
  CHECK_OK(mscclppAllReduce(a, b, 4, mscclppFloat, mscclppSum, comm, NULL));
  for (int i = 0; i < 4; i++) CHECK(b[i] == (float)(n * (n - 1) / 2 + n * i));
}

/* Rank 1 calls something else than rank 0; both must fail and say what differs. */
static void mismatch(const char* what) {
  float a[64] = {0}, b[64];
  int r1 = rank == 1;
  mscclppResult_t res;
  const char* says;
  if (strcmp(what, "count") == 0) {
    res = mscclppAllReduce(a, b, r1 ? 20 : 10, mscclppFloat, mscclppSum, comm, NULL), says = "count or datatype differ";
  } else if (strcmp(what, "coll") == 0) {
    res = r1 ? mscclppAllGather(a, b, 4, mscclppFloat, comm, NULL) : mscclppAllReduce(a, b, 8, mscclppFloat, mscclppSum, comm, NULL);
    says = "every rank must call the same collectives";
  } else if (strcmp(what, "dtype") == 0) {
    res = mscclppAllReduce(a, b, 8, r1 ? mscclppInt32 : mscclppFloat, mscclppSum, comm, NULL), says = "datatype";
  } else if (strcmp(what, "op") == 0) {
    res = mscclppAllReduce(a, b, 8, mscclppFloat, r1 ? mscclppMax : mscclppSum, comm, NULL), says = "reduces with";
  } else { /* (a broadcast where two ranks both think they are the root cannot notice: neither receives) */
    res = mscclppReduce(a, b, 8, mscclppFloat, mscclppSum, r1 ? 1 : 0, comm, NULL), says = "root";
  }
  CHECK_MSG(res == mscclppInvalidUsage, "rank %d: mismatched %s returned %d: %s", rank, what, (int)res, mscclppGetLastError());
  CHECK_ERR_MENTIONS(says);
  CHECK_ERR_MENTIONS(rank == 0 ? "rank 1" : "rank 0");
  /* The pipes hold chunks of the failed call: a correct call now fails at once, saying why and
   * naming the original error (docs/errors.md), instead of reading the stale chunk. */
  for (int i = 0; i < 8; i++) a[i] = 1.0f;
  CHECK_RES(mscclppAllReduce(a, b, 8, mscclppFloat, mscclppSum, comm, NULL), mscclppInvalidUsage);
  CHECK_ERR_MENTIONS("cannot run after an earlier one failed");
  CHECK_ERR_MENTIONS(says);
  CHECK_RES(mscclppSend(a, 8, mscclppFloat, 1 - rank, comm, NULL), mscclppInvalidUsage);
  CHECK_ERR_MENTIONS("cannot run after an earlier one failed");
  /* what does not use the pipes still works: a bootstrap exchange (main's barrier follows) */
  int v[2] = {0, 0};
  v[rank] = rank + 10;
  CHECK_OK(mscclppBootstrapAllGather(comm, v, sizeof(int)));
  CHECK(v[0] == 10 && v[1] == 11);
}

static void peer_death(void) {
  float a[16] = {0}, b[16];
  CHECK_OK(mscclppAllReduce(a, b, 16, mscclppFloat, mscclppSum, comm, NULL)); /* pipes connected */
  if (rank == 1) exit(0);
  double t0 = tmp_now();
  CHECK_RES(mscclppAllReduce(a, b, 16, mscclppFloat, mscclppSum, comm, NULL), mscclppRemoteError);
  CHECK_ERR_MENTIONS("rank 1");
  /* the failed allreduce left the pipes mid-call: later calls fail with its error (docs/errors.md) */
  CHECK_RES(mscclppRecv(b, 16, mscclppFloat, 1, comm, NULL), mscclppRemoteError);
  CHECK_ERR_MENTIONS("cannot run after an earlier one failed");
  CHECK_ERR_MENTIONS("rank 1");
  CHECK_MSG(tmp_now() - t0 < 5.0, "noticing the dead peer took %.1f s", tmp_now() - t0);
  exit(0); /* the communicator's peer is gone: skip the orderly teardown */
}

/* Registration is collective: every rank fails alike when one rank's argument is bad. */
static void windows(void) {
  static float w[2][64], other[64];
  mscclppWindow_t win = NULL, win2 = NULL;
  EXPECT(mscclppCommWindowRegister(NULL, w[0], sizeof(w[0]), &win), mscclppInvalidArgument, "comm is NULL");
  EXPECT(mscclppCommWindowRegister(comm, w[0], sizeof(w[0]), NULL), mscclppInvalidArgument, "win is NULL");
  CHECK_RES(mscclppCommWindowRegister(comm, w[0], rank == 1 ? 128 : 256, &win), mscclppInvalidArgument);
  CHECK_ERR_MENTIONS("rank 1 registers 128 bytes");
  CHECK(win == NULL);
  CHECK_RES(mscclppCommWindowRegister(comm, rank == 0 ? NULL : w[0], 256, &win), rank == 0 ? mscclppInvalidArgument : mscclppRemoteError);
  CHECK_ERR_MENTIONS(rank == 0 ? "buff is NULL" : "rank 0 refused its buffer");
  CHECK_OK(mscclppCommWindowRegister(comm, w[0], sizeof(w[0]), &win));
  CHECK_OK(mscclppCommWindowRegister(comm, w[1], sizeof(w[1]), &win2));
  mscclppWindow_t bad = win;
  CHECK_RES(mscclppCommWindowRegister(comm, (char*)w[0] + 16, 64, &bad), mscclppInvalidArgument);
  CHECK_ERR_MENTIONS("overlaps the window");
  CHECK(bad == NULL);
  for (int i = 0; i < 64; i++) w[0][i] = (float)(rank + i);
  CHECK_OK(mscclppAllReduce(w[0], w[1], 64, mscclppFloat, mscclppSum, comm, NULL));
  for (int i = 0; i < 64; i++) CHECK_MSG(w[1][i] == (float)(n * i + n * (n - 1) / 2), "element %d: %g", i, w[1][i]);
  CHECK_OK(mscclppCommWindowDeregister(comm, win));
  EXPECT(mscclppCommWindowDeregister(comm, win), mscclppInvalidUsage, "window"); /* docs/errors.md "Handles" */
  EXPECT(mscclppCommWindowDeregister(comm, (mscclppWindow_t)other), mscclppInvalidUsage, "is not a window handle");
  CHECK_OK(mscclppCommWindowDeregister(comm, win2));
  /* local registrations: no agreement, overlaps allowed */
  mscclppBufferReg_t r1 = NULL, r2 = NULL;
  EXPECT(mscclppCommBufferRegister(comm, NULL, 16, &r1), mscclppInvalidArgument, "buff is NULL");
  EXPECT(mscclppCommBufferRegister(comm, w[0], 0, &r1), mscclppInvalidArgument, "size is 0");
  EXPECT(mscclppCommBufferRegister(comm, w[0], 16, NULL), mscclppInvalidArgument, "handle is NULL");
  CHECK_OK(mscclppCommBufferRegister(comm, w[0], sizeof(w[0]), &r1));
  CHECK_OK(mscclppCommBufferRegister(comm, (char*)w[0] + 16, rank == 0 ? 32 : 64, &r2));
  CHECK_OK(mscclppAllReduce(w[0], w[0], 64, mscclppFloat, mscclppSum, comm, NULL));
  CHECK_OK(mscclppCommBufferDeregister(comm, r2));
  EXPECT(mscclppCommBufferDeregister(comm, r2), mscclppInvalidUsage, "buffer registration"); /* docs/errors.md */
  CHECK_OK(mscclppCommBufferDeregister(comm, r1));
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "args";
  if (strcmp(mode, "scratch") == 0 && getenv("MSCCLPP_RANK") && atoi(getenv("MSCCLPP_RANK")) == 1)
    setenv("MSCCLPP_ALGO_CPU_SCRATCH", "65536", 1);
  comm = tmp_init(&rank, &n);
  float a[4] = {1, 2, 3, 4}, b[4];
  if (strcmp(mode, "args") == 0) bad_arguments();
  else if (strcmp(mode, "mismatch") == 0) mismatch(argc > 2 ? argv[2] : "count");
  else if (strcmp(mode, "peerdeath") == 0) peer_death();
  else if (strcmp(mode, "windows") == 0) windows();
  else if (strcmp(mode, "badalgo") == 0) {
    CHECK_RES(mscclppAllReduce(a, b, 4, mscclppFloat, mscclppSum, comm, NULL), mscclppInvalidArgument);
    CHECK_ERR_MENTIONS("unknown algorithm 'cpu_bogus'; valid names: cpu_allreduce_rsag");
  } else if (strcmp(mode, "badtable") == 0) {
    CHECK_RES(mscclppAllGather(a, b, 1, mscclppFloat, comm, NULL), mscclppInvalidArgument);
    CHECK_ERR_MENTIONS("MSCCLPP_ALGO_TABLE=/nonexistent/algo.tsv cannot be read");
  } else if (strcmp(mode, "scratch") == 0) {
    CHECK_RES(mscclppAllReduce(a, b, 4, mscclppFloat, mscclppSum, comm, NULL), mscclppInvalidUsage);
    CHECK_ERR_MENTIONS("every rank must set the same MSCCLPP_ALGO_CPU_SCRATCH");
  } else {
    TEST_FAIL("unknown mode %s", mode);
  }
  CHECK_OK(mscclppBootstrapBarrier(comm));
  if (rank == 0) printf("coll_errors %s: OK\n", mode);
  CHECK_OK(mscclppCommDestroy(comm));
  return 0;
}
