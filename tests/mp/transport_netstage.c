/* The net transport's staged path (net_stage.c) on CPU ranks: MSCCLPP_NET_STAGE_HOST=1 (set by
 * ctest) makes it carry host memory, so every write below crosses the rings of pinned slots, their
 * STAGE/CREDIT messages and credits, as GPU memory does without FI_HMEM.
 *   bounds (n = 2) the owner's checks: a STAGE message whose piece leaves its region (a sealed
 *          message from the real peer, sent by a test hook without data) and a staged write into a
 *          region the owner released both make the writer's next flush fail with RemoteError
 *          naming rank 1 and "could not place"; a STAGE naming a slot past the ring is dropped; the
 *          connection then still carries a 3 MiB write + signal that rank 1 finds byte for byte.
 *   kill   (n = 2) rank 1 exits while rank 0 streams 48 MiB through the 4 MiB ring (its writes
 *          wait for credits that never come): rank 0's write or flush fails with RemoteError
 *          naming rank 1 within 2 s, not at the flush timeout.
 * Skips (77) where the net transport cannot work, or unless MSCCLPP_NET_STAGE_HOST=1.
 *
 *   transport_netstage bounds|kill */
#include <unistd.h>

#include "core/comm.h"
#include "core/connection.h"
#include "core/regmem.h"
#include "transport_mp.h"

#define BUF (4u << 20)
#define MSG ((3u << 20) + 5)
#define TAG_DONE 51

struct ctx {
  mscclppComm_t comm;
  int rank;
  unsigned char* buf;
  mscclppRegisteredMemory reg;
  mscclppConnection_t conn;
  mscclppHostSemaphore_t sem;
};

static void need_staging(void) {
  const char* v = getenv("MSCCLPP_NET_STAGE_HOST");
  if (v == NULL || strcmp(v, "1") != 0) TEST_SKIP("needs MSCCLPP_NET_STAGE_HOST=1 (ctest sets it)");
}

static void setup(struct ctx* c, size_t bytes) {
  int n;
  c->comm = tmp_init(&c->rank, &n);
  if (n != 2) TEST_FAIL("needs exactly 2 ranks");
  mscclppTransport_t t = tmp_transport("net");
  CHECK((c->buf = calloc(1, bytes)) != NULL);
  CHECK_OK(mscclppRegisterBuffer(c->comm, c->buf, bytes, &c->reg));
  CHECK_OK(mscclppConnectionCreate(c->comm, 1 - c->rank, 0, t, &c->conn));
  CHECK_OK(mscclppHostSemaphoreCreate(c->comm, c->conn, &c->sem));
}

static void teardown(struct ctx* c) {
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  CHECK_OK(mscclppHostSemaphoreDestroy(c->sem));
  CHECK_OK(mscclppConnectionDestroy(c->conn));
  CHECK_OK(mscclppRegisteredMemoryRelease(&c->reg));
  CHECK_OK(mscclppCommDestroy(c->comm));
  free(c->buf);
}

/* Rank 0's side of bounds: every refusal, then a good write. */
static void bounds_writer(struct ctx* c, mscclppRegMem_t gone) {
  struct transport_conn* tc = &c->conn->t;
  struct transport_mem* peer = &c->reg.remote[1]->t;
  CHECK_MSG(net_test_stage_raw(tc, peer, BUF - 100, 200, 0), "the STAGE message could not be sent");
  EXPECT(mscclppConnectionFlush(c->conn, 10000), mscclppRemoteError, "could not place");
  CHECK_ERR_MENTIONS("rank 1");
  CHECK_MSG(net_test_stage_raw(tc, peer, 0, 64, 999), "the STAGE message could not be sent");
  CHECK_OK(mscclppConnectionFlush(c->conn, 10000)); /* dropped: no slot of ours was taken */
  CHECK_OK(mscclppConnectionWrite(c->conn, gone, 8, c->reg.local, 0, 100));
  EXPECT(mscclppConnectionFlush(c->conn, 10000), mscclppRemoteError, "could not place");
  CHECK_ERR_MENTIONS("rank 1");
  for (uint32_t i = 0; i < MSG; i++) c->buf[7 + i] = tmp_byte(0, 1, 3, i);
  CHECK_OK(mscclppConnectionWrite(c->conn, c->reg.remote[1], 11, c->reg.local, 7, MSG));
  CHECK_OK(mscclppHostSemaphoreSignal(c->sem));
  CHECK_OK(mscclppConnectionFlush(c->conn, 10000));
}

static int run_bounds(void) {
  struct ctx c;
  memset(&c, 0, sizeof(c));
  setup(&c, BUF);
  mscclppRegMem_t gone = tmp_released_reg(c.comm, c.rank, 42);
  if (c.rank == 0) {
    bounds_writer(&c, gone);
    CHECK_OK(mscclppRegMemRelease(gone));
  } else {
    CHECK_OK(mscclppHostSemaphoreWait(c.sem, 20000));
    for (uint32_t i = 0; i < MSG; i++)
      if (c.buf[11 + i] != tmp_byte(0, 1, 3, i))
        TEST_FAIL("rank 1: byte %u of the staged write after the refusals is 0x%02x, expected 0x%02x", i, c.buf[11 + i],
                  tmp_byte(0, 1, 3, i));
    CHECK_MSG(c.buf[10] == 0 && c.buf[11 + MSG] == 0, "rank 1: the bytes around the write changed");
  }
  printf("transport_netstage bounds: rank %d passed\n", c.rank);
  teardown(&c);
  return 0;
}

static int run_kill(void) {
  struct ctx c;
  memset(&c, 0, sizeof(c));
  setup(&c, 16u << 20);
  /* A staged round trip first: the provider's connection and both rings are in use. */
  CHECK_OK(mscclppConnectionWrite(c.conn, c.reg.remote[1 - c.rank], 0, c.reg.local, 0, 1u << 20));
  CHECK_OK(mscclppHostSemaphoreSignal(c.sem));
  CHECK_OK(mscclppHostSemaphoreWait(c.sem, 10000));
  CHECK_OK(mscclppConnectionFlush(c.conn, 10000));
  int v = 1;
  if (c.rank == 1) {
    CHECK_OK(mscclppBootstrapRecv(c.comm, 0, TAG_DONE, &v, sizeof(v)));
    _exit(0); /* as if it crashed, with its ring's credits owed */
  }
  CHECK_OK(mscclppBootstrapSend(c.comm, 1, TAG_DONE, &v, sizeof(v)));
  double t0 = tmp_now();
  mscclppResult_t r = mscclppSuccess;
  for (int i = 0; i < 3 && r == mscclppSuccess; i++) /* 48 MiB: 12 rings' worth */
    r = mscclppConnectionWrite(c.conn, c.reg.remote[1], 0, c.reg.local, 0, 16u << 20);
  const char* failed = "write";
  if (r == mscclppSuccess) {
    failed = "flush";
    r = mscclppConnectionFlush(c.conn, 30000);
  }
  double dt = tmp_now() - t0;
  CHECK_MSG(r == mscclppRemoteError, "the %s returned %d, expected RemoteError: %s", failed, (int)r,
            mscclppGetLastError());
  CHECK_ERR_MENTIONS("rank 1");
  printf("transport_netstage kill: the %s failed after %.3f s: %s\n", failed, dt, mscclppGetLastError());
  CHECK_MSG(dt < 2.0, "noticing the dead peer took %.2f s", dt);
  CHECK_OK(mscclppHostSemaphoreDestroy(c.sem));
  CHECK_OK(mscclppConnectionDestroy(c.conn));
  CHECK_OK(mscclppRegisteredMemoryRelease(&c.reg));
  CHECK_OK(mscclppCommAbort(c.comm));
  free(c.buf);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) TEST_FAIL("usage: %s bounds|kill", argv[0]);
  need_staging();
  if (strcmp(argv[1], "bounds") == 0) return run_bounds();
  if (strcmp(argv[1], "kill") == 0) return run_kill();
  TEST_FAIL("unknown mode '%s'", argv[1]);
}
