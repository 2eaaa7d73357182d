/* Memory channels between two CPU ranks over shared memory, with host threads doing what GPU
 * threads do: semaphore ping-pong, many threads signalling one semaphore, poll and relaxed wait,
 * put/get of odd sizes and alignments split over several "threads", LL16 and LL8 packets over many
 * uses of one buffer with fresh flags (old packets never pass for new ones), a packet wait that
 * times out, and a relaxed semaphore wait that times out.
 *
 *   memchan_cpu ROUNDS */
#include <pthread.h>

#include <mscclpp/mscclpp.h>

#include "chan_mp.h"

#define BYTES (1u << 20)
#define SIGNALLERS 4
#define SIGNALS 500

struct ctx {
  mscclppComm_t comm;
  int rank, peer;
  unsigned char *src, *scratch;
  mscclppMemoryChannel ch;
};

static void test_ping_pong(struct ctx* c, int rounds) {
  double t0 = cm_now();
  for (int i = 0; i < rounds; i++) {
    if (c->rank == 0) mscclppMemoryChannelSignal(&c->ch);
    CHECK(mscclppMemoryChannelWait(&c->ch) == MSCCLPP_DEVICE_OK);
    if (c->rank == 1) mscclppMemoryChannelSignal(&c->ch);
  }
  if (c->rank == 0) printf("memchan_cpu: semaphore ping-pong %.2f us per round trip\n", (cm_now() - t0) / rounds * 1e6);
}

static void* signaller(void* arg) {
  struct ctx* c = arg;
  for (int i = 0; i < SIGNALS; i++) {
    if (i % 2)
      mscclppMemoryChannelSignal(&c->ch);
    else
      mscclppMemoryChannelRelaxedSignal(&c->ch);
  }
  return NULL;
}

/* Rank 0's threads signal concurrently; rank 1 waits for every one of them, never one more. */
static void test_many_signallers(struct ctx* c) {
  if (c->rank == 0) {
    pthread_t th[SIGNALLERS];
    for (int i = 0; i < SIGNALLERS; i++) CHECK(pthread_create(&th[i], NULL, signaller, c) == 0);
    for (int i = 0; i < SIGNALLERS; i++) pthread_join(th[i], NULL);
  } else {
    for (int i = 0; i < SIGNALLERS * SIGNALS; i++) CHECK(mscclppMemoryChannelWait(&c->ch) == MSCCLPP_DEVICE_OK);
    CHECK(mscclppMemoryChannelPoll(&c->ch) == 0);
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

/* Poll and relaxed wait, each direction in turn: a poll sees nothing while no signal is pending,
 * and after the peer's signal (ordered before it by a barrier) takes exactly that one step; a
 * relaxed wait blocks until the peer's relaxed signals come, one step per wait. */
static void test_poll_relaxed_wait(struct ctx* c) {
  for (int from = 0; from < 2; from++) {
    int receiver = c->rank != from;
    if (receiver) CHECK(mscclppMemoryChannelPoll(&c->ch) == 0);
    CHECK_OK(mscclppBootstrapBarrier(c->comm));
    if (!receiver) mscclppMemoryChannelSignal(&c->ch);
    CHECK_OK(mscclppBootstrapBarrier(c->comm));
    if (receiver) {
      CHECK(mscclppMemoryChannelPoll(&c->ch) == 1);
      CHECK(mscclppMemoryChannelPoll(&c->ch) == 0);
      for (int i = 0; i < 3; i++) CHECK(mscclppMemoryChannelRelaxedWait(&c->ch) == MSCCLPP_DEVICE_OK);
      CHECK(mscclppMemoryChannelPoll(&c->ch) == 0); /* three signals, three steps */
    } else {
      nanosleep(&(struct timespec){0, 20000000}, NULL); /* most likely the relaxed wait spins first */
      for (int i = 0; i < 3; i++) mscclppMemoryChannelRelaxedSignal(&c->ch);
    }
    CHECK_OK(mscclppBootstrapBarrier(c->comm));
  }
}

/* Rank 0 puts, rank 1 checks and gets it back; sizes and offsets of every alignment, split over 3
 * "threads" (each call one tid). */
static void test_put_get(struct ctx* c) {
  static const uint64_t sizes[] = {1, 7, 16, 17, 4095, 65536 + 3};
  static const uint64_t offs[] = {0, 1, 8, 13};
  int r = 0;
  for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
    for (size_t oi = 0; oi < sizeof(offs) / sizeof(offs[0]); oi++, r++) {
      uint64_t n = sizes[si], so = offs[oi], dof = offs[(oi + 1) % 4] + 64;
      if (c->rank == 0) {
        for (uint64_t i = 0; i < n; i++) c->src[so + i] = cm_byte(r, 0, i);
        for (uint32_t t = 0; t < 3; t++) mscclppMemoryChannelPut(&c->ch, dof, so, n, t, 3);
        mscclppMemoryChannelSignal(&c->ch);
        CHECK(mscclppMemoryChannelWait(&c->ch) == MSCCLPP_DEVICE_OK);
      } else {
        CHECK(mscclppMemoryChannelWait(&c->ch) == MSCCLPP_DEVICE_OK);
        for (uint64_t i = 0; i < n; i++)
          CHECK_MSG(c->scratch[dof + i] == cm_byte(r, 0, i), "put of %llu bytes at %llu: byte %llu wrong",
                    (unsigned long long)n, (unsigned long long)dof, (unsigned long long)i);
        mscclppMemoryChannelSignal(&c->ch);
      }
    }
  /* Rank 1 reads rank 0's scratch back with get, then single elements with read. */
  if (c->rank == 0) memset(c->scratch, 0xab, 4096);
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  if (c->rank == 1) {
    memset(c->src, 0, 4096);
    for (uint32_t t = 0; t < 2; t++) mscclppMemoryChannelGet(&c->ch, 5, 3, 4000, t, 2);
    for (int i = 0; i < 4000; i++) CHECK(c->src[5 + i] == 0xab);
    CHECK(mscclppMemoryChannelRead64(&c->ch, 8) == 0xababababababababull);
    mscclppMemoryChannelWrite32(&c->ch, 16, 0x12345678u);
    mscclppMemoryChannelSignal(&c->ch);
  } else {
    CHECK(mscclppMemoryChannelWait(&c->ch) == MSCCLPP_DEVICE_OK);
    CHECK(*(uint32_t*)(c->scratch + 16) == 0x12345678u);
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

/* Packets from rank 0 to rank 1 over `uses` uses of the two halves of one buffer. After each use
 * rank 1 acks with a signal, so that a half is rewritten only after it was read. */
static void test_packets(struct ctx* c, int ll16, int uses) {
  uint32_t counter = 0;
  const uint64_t n = 1000 + 5; /* not a multiple of the payload */
  uint64_t half = ll16 ? mscclppLL16Bytes(n) : mscclppLL8Bytes(n);
  memset(c->scratch, 0, 2 * half);
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  for (int u = 0; u < uses; u++) {
    uint32_t flag = mscclppPacketFlagNext(&counter);
    uint64_t at = (uint64_t)(u % 2) * half;
    if (c->rank == 0) {
      for (uint64_t i = 0; i < n; i++) c->src[3 + i] = cm_byte(u, ll16, i);
      if (ll16)
        mscclppMemoryChannelPutPacketsLL16(&c->ch, at, 3, n, flag, 0, 1);
      else
        mscclppMemoryChannelPutPacketsLL8(&c->ch, at, 3, n, flag, 0, 1);
      CHECK(mscclppMemoryChannelWait(&c->ch) == MSCCLPP_DEVICE_OK);
    } else {
      memset(c->src, 0, n + 16);
      int rc = ll16 ? mscclppMemoryChannelUnpackPacketsLL16(&c->ch, 1, at, n, flag, 0, 1)
                    : mscclppMemoryChannelUnpackPacketsLL8(&c->ch, 1, at, n, flag, 0, 1);
      CHECK(rc == MSCCLPP_DEVICE_OK);
      for (uint64_t i = 0; i < n; i++) CHECK_MSG(c->src[1 + i] == cm_byte(u, ll16, i), "use %d byte %llu", u, (unsigned long long)i);
      CHECK(c->src[0] == 0 && c->src[1 + n] == 0); /* nothing written around it */
      /* The other half holds the previous use's packets: they must not pass for the next flag. */
      uint64_t dummy;
      uint32_t d32;
      const unsigned char* other = c->scratch + (uint64_t)((u + 1) % 2) * half;
      CHECK(ll16 ? !mscclppLL16Try((const mscclppLL16Packet*)other, counter + 1, &dummy)
                 : !mscclppLL8Try((const mscclppLL8Packet*)other, counter + 1, &d32));
      mscclppMemoryChannelSignal(&c->ch);
    }
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

/* A packet that never comes: the wait reports a packet timeout with the channel id. */
static void test_packet_timeout(struct ctx* c) {
  if (c->rank == 1) {
    mscclppMemoryChannel ch = c->ch;
    ch.sem.wait.timeoutNs = 200000000ull;
    CHECK(mscclppMemoryChannelUnpackPacketsLL16(&ch, 0, 0, 64, 0x7777u, 0, 1) == MSCCLPP_DEVICE_TIMEOUT);
    mscclppDeviceError e;
    CHECK_OK(mscclppCommGetDeviceError(c->comm, &e));
    CHECK(e.flag == 1 && e.what == mscclppWaitPacket && e.channel == 5 && e.peer == 0 && e.expected == 0x7777u);
    CHECK_OK(mscclppCommClearDeviceError(c->comm));
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

/* A relaxed semaphore wait that is never signalled returns TIMEOUT after its bound and reports
 * the step it waited for and the token it saw. Last: the wait consumed its step, so the semaphore
 * is out of step afterwards (semaphore_device.h). */
static void test_relaxed_wait_timeout(struct ctx* c) {
  if (c->rank == 1) {
    mscclppMemoryChannel ch = c->ch;
    ch.sem.wait.timeoutNs = 100000000ull;
    uint64_t step = *ch.sem.expected + 1, token = *ch.sem.inbound;
    double t0 = cm_now();
    CHECK(mscclppMemoryChannelRelaxedWait(&ch) == MSCCLPP_DEVICE_TIMEOUT);
    CHECK_MSG(cm_now() - t0 >= 0.1, "timed out after %.3f s, before its 0.1 s bound", cm_now() - t0);
    mscclppDeviceError e;
    CHECK_OK(mscclppCommGetDeviceError(c->comm, &e));
    CHECK(e.flag == 1 && e.what == mscclppWaitSemaphore && e.rank == 1 && e.peer == 0 && e.channel == 5);
    CHECK_MSG(e.expected == step && e.observed == token, "record says step %llu, token %llu; expected %llu, %llu",
              (unsigned long long)e.expected, (unsigned long long)e.observed, (unsigned long long)step,
              (unsigned long long)token);
    CHECK_OK(mscclppCommClearDeviceError(c->comm));
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 1000, nranks = 0;
  struct ctx c;
  memset(&c, 0, sizeof(c));
  c.comm = cm_init(&c.rank, &nranks);
  CHECK_MSG(nranks == 2, "memchan_cpu runs on 2 ranks");
  c.peer = 1 - c.rank;
  CHECK_OK(mscclppMemAlloc((void**)&c.src, BYTES, mscclppMemHost));
  CHECK_OK(mscclppMemAlloc((void**)&c.scratch, BYTES, mscclppMemHost));
  mscclppRegMem_t src, scratch, remote;
  CHECK_OK(mscclppRegisterMemory(c.comm, c.src, BYTES, &src));
  CHECK_OK(mscclppRegisterMemory(c.comm, c.scratch, BYTES, &scratch));
  remote = cm_swap(c.comm, c.rank, c.peer, 1, scratch);
  mscclppConnection_t conn;
  CHECK_OK(mscclppConnectionCreate(c.comm, c.peer, 3, mscclppTransportSHM, &conn));
  CHECK_OK(mscclppMemoryChannelCreate(c.comm, conn, remote, src, c.scratch, 5, &c.ch));
  CHECK_RES(mscclppMemoryChannelMake(&c.ch.sem, scratch, src, NULL, &(mscclppMemoryChannel){0}), mscclppInvalidUsage);
  test_ping_pong(&c, rounds);
  test_many_signallers(&c);
  test_poll_relaxed_wait(&c);
  test_put_get(&c);
  test_packets(&c, 1, 200);
  test_packets(&c, 0, 200);
  test_packet_timeout(&c);
  test_relaxed_wait_timeout(&c);
  CHECK_OK(mscclppCommReleaseChannels(c.comm));
  CHECK_OK(mscclppRegMemRelease(remote));
  CHECK_OK(mscclppBootstrapBarrier(c.comm));
  CHECK_OK(mscclppRegMemRelease(src));
  CHECK_OK(mscclppRegMemRelease(scratch));
  CHECK_OK(mscclppConnectionDestroy(conn));
  CHECK_OK(mscclppMemFree(c.src));
  CHECK_OK(mscclppMemFree(c.scratch));
  CHECK_OK(mscclppCommDestroy(c.comm));
  if (c.rank == 0) printf("memchan_cpu: ok\n");
  return 0;
}
