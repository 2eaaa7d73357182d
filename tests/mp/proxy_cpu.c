/* Port channels between two CPU ranks: host threads stand in for GPU threads and push puts,
 * signals and flushes into the rank's proxy FIFO; the proxy serves them over the connection (shm or
 * tcp); the peer waits on its semaphore and checks every byte. Rounds alternate direction. Then:
 * flush and put-with-signal-and-flush, a proxy round trip figure, polls of the channel and of its
 * semaphore, a bad put reported by the proxy (and its signal withheld), and a wait that times out
 * reporting rank, peer and channel.
 *
 *   proxy_cpu TRANSPORT ROUNDS */
#include <pthread.h>

#include <mscclpp/mscclpp.h>

#include "chan_mp.h"

#define THREADS 4
#define BYTES (1u << 20)
#define REGION (BYTES / THREADS)

struct ctx {
  mscclppComm_t comm;
  int rank, peer;
  unsigned char *src, *dst;
  mscclppPortChannel ch[THREADS]; /* one port per thread, all on one semaphore */
};

struct worker {
  struct ctx* c;
  int t, round;
};

/* One pushing thread: fills its region, put-with-signal, then flush (its src is reusable after). */
static void* push_region(void* arg) {
  struct worker* w = arg;
  struct ctx* c = w->c;
  unsigned char* s = c->src + (size_t)w->t * REGION;
  uint64_t len = REGION - (uint64_t)w->t * 3; /* uneven sizes */
  for (uint64_t i = 0; i < len; i++) s[i] = cm_byte(w->round, c->rank, (uint64_t)w->t * REGION + i);
  uint64_t off = (uint64_t)w->t * REGION;
  CHECK(mscclppPortChannelPutWithSignal(&c->ch[w->t], off, off, len) == MSCCLPP_DEVICE_OK);
  CHECK(mscclppPortChannelFlush(&c->ch[w->t]) == MSCCLPP_DEVICE_OK);
  return NULL;
}

static void send_round(struct ctx* c, int round) {
  pthread_t th[THREADS];
  struct worker w[THREADS];
  for (int t = 0; t < THREADS; t++) {
    w[t] = (struct worker){c, t, round};
    CHECK(pthread_create(&th[t], NULL, push_region, &w[t]) == 0);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  CHECK(mscclppPortChannelWait(&c->ch[0]) == MSCCLPP_DEVICE_OK); /* the receiver's ack */
}

static void recv_round(struct ctx* c, int round) {
  for (int t = 0; t < THREADS; t++) CHECK(mscclppPortChannelWait(&c->ch[0]) == MSCCLPP_DEVICE_OK);
  for (int t = 0; t < THREADS; t++) {
    uint64_t len = REGION - (uint64_t)t * 3;
    for (uint64_t i = 0; i < len; i++) {
      uint64_t at = (uint64_t)t * REGION + i;
      CHECK_MSG(c->dst[at] == cm_byte(round, c->peer, at), "round %d: byte %llu from rank %d is %u, expected %u", round,
                (unsigned long long)at, c->peer, c->dst[at], cm_byte(round, c->peer, at));
    }
  }
  CHECK(mscclppPortChannelSignal(&c->ch[0]) == MSCCLPP_DEVICE_OK);
}

/* One thread: put-with-signal-and-flush both ways, then the time of a bare flush round trip. */
static void test_flush_paths(struct ctx* c) {
  memset(c->src, 0x5a, 4096);
  CHECK(mscclppPortChannelPutWithSignalAndFlush(&c->ch[0], BYTES - 4096, 0, 4096) == MSCCLPP_DEVICE_OK);
  CHECK(mscclppPortChannelWait(&c->ch[0]) == MSCCLPP_DEVICE_OK);
  for (int i = 0; i < 4096; i++) CHECK(c->dst[BYTES - 4096 + i] == 0x5a);
  const int n = 2000;
  double t0 = cm_now();
  for (int i = 0; i < n; i++) CHECK(mscclppPortChannelFlush(&c->ch[1]) == MSCCLPP_DEVICE_OK);
  if (c->rank == 0) printf("proxy_cpu: proxy round trip (push flush -> observed) %.2f us\n", (cm_now() - t0) / n * 1e6);
}

/* Polls, each direction in turn: 0 while no signal is pending; once the peer's put-with-signal has
 * been flushed (landed here) and a barrier passed, 1 with the data there, taking that one step,
 * then 0 again. Rank 1 polls through the channel, rank 0 through its semaphore (another port's
 * handle: the ports share it). */
static void test_poll(struct ctx* c) {
  for (int from = 0; from < 2; from++) {
    int receiver = c->rank != from;
    const mscclppPortChannel* ch = &c->ch[receiver ? 1 : 0];
    if (receiver) {
      CHECK(mscclppPortChannelPoll(ch) == 0 && mscclppHostDevSemaphorePoll(&ch->sem) == 0);
      c->dst[8] = 0;
    }
    CHECK_OK(mscclppBootstrapBarrier(c->comm));
    if (!receiver) {
      c->src[0] = (unsigned char)(0x30 + from);
      CHECK(mscclppPortChannelPutWithSignalAndFlush(ch, 8, 0, 1) == MSCCLPP_DEVICE_OK);
    }
    CHECK_OK(mscclppBootstrapBarrier(c->comm));
    if (receiver) {
      int got = c->rank == 1 ? mscclppPortChannelPoll(ch) : mscclppHostDevSemaphorePoll(&ch->sem);
      CHECK_MSG(got == 1, "rank %d: poll after the flushed signal gave %d", c->rank, got);
      CHECK(c->dst[8] == 0x30 + from);
      CHECK(mscclppPortChannelPoll(ch) == 0 && mscclppHostDevSemaphorePoll(&ch->sem) == 0);
    }
  }
}

/* A put past the peer's buffer: the proxy reports it, withholds the signal, still retires it. */
static void test_bad_put(struct ctx* c, mscclppProxyService_t proxy) {
  if (c->rank == 0) {
    CHECK(mscclppPortChannelPutWithSignalAndFlush(&c->ch[0], BYTES - 8, 0, 16) == MSCCLPP_DEVICE_OK);
    CHECK_RES(mscclppProxyServiceCheck(proxy), mscclppInvalidArgument);
    CHECK_MSG(strstr(mscclppGetLastError(), "exceed") != NULL, "%s", mscclppGetLastError());
    CHECK_OK(mscclppProxyServiceCheck(proxy)); /* reported once */
  } else {
    c->ch[0].sem.wait.timeoutNs = 300000000ull; /* no signal may arrive */
    CHECK(mscclppPortChannelWait(&c->ch[0]) == MSCCLPP_DEVICE_TIMEOUT);
    mscclppDeviceError e;
    CHECK_OK(mscclppCommGetDeviceError(c->comm, &e));
    CHECK(e.flag == 1 && e.rank == 1 && e.peer == 0 && e.channel == 0 && e.what == mscclppWaitSemaphore);
    char text[256];
    CHECK_OK(mscclppDeviceErrorString(&e, text, sizeof(text)));
    printf("proxy_cpu: expected timeout: %s\n", text);
    CHECK_OK(mscclppCommClearDeviceError(c->comm));
    CHECK_OK(mscclppCommGetDeviceError(c->comm, &e));
    CHECK(e.flag == 0);
  }
}

int main(int argc, char** argv) {
  if (argc < 3) TEST_FAIL("usage: proxy_cpu TRANSPORT ROUNDS");
  struct ctx c;
  memset(&c, 0, sizeof(c));
  int nranks = 0, rounds = atoi(argv[2]);
  c.comm = cm_init(&c.rank, &nranks);
  CHECK_MSG(nranks == 2, "proxy_cpu runs on 2 ranks");
  c.peer = 1 - c.rank;
  CHECK_OK(mscclppMemAlloc((void**)&c.src, BYTES, mscclppMemHost));
  CHECK_OK(mscclppMemAlloc((void**)&c.dst, BYTES, mscclppMemHost));
  mscclppRegMem_t src, dst, remote;
  CHECK_OK(mscclppRegisterMemory(c.comm, c.src, BYTES, &src));
  CHECK_OK(mscclppRegisterMemory(c.comm, c.dst, BYTES, &dst));
  remote = cm_swap(c.comm, c.rank, c.peer, 1, dst);
  mscclppConnection_t conn;
  CHECK_OK(mscclppConnectionCreate(c.comm, c.peer, 7, cm_transport(argv[1]), &conn));
  mscclppProxyService_t proxy;
  CHECK_OK(mscclppProxyServiceCreate(c.comm, 8, &proxy));
  int sem = -1;
  CHECK_OK(mscclppProxyServiceAddSemaphore(proxy, conn, &sem));
  CHECK_RES(mscclppPortChannelCreate(proxy, sem, dst, src, 0, &c.ch[0]), mscclppInvalidUsage); /* dst must be the peer's */
  for (int t = 0; t < THREADS; t++) CHECK_OK(mscclppPortChannelCreate(proxy, sem, remote, src, t, &c.ch[t]));
  CHECK_OK(mscclppProxyServiceStart(proxy));
  for (int r = 0; r < rounds; r++) {
    if (r % 2 == c.rank)
      send_round(&c, r);
    else
      recv_round(&c, r);
  }
  test_flush_paths(&c);
  CHECK_OK(mscclppBootstrapBarrier(c.comm));
  test_poll(&c);
  CHECK_OK(mscclppBootstrapBarrier(c.comm));
  test_bad_put(&c, proxy);
  CHECK_OK(mscclppBootstrapBarrier(c.comm));
  CHECK_OK(mscclppProxyServiceStop(proxy));
  CHECK_OK(mscclppProxyServiceDestroy(proxy));
  CHECK_OK(mscclppCommReleaseChannels(c.comm));
  CHECK_OK(mscclppRegMemRelease(remote));
  CHECK_OK(mscclppBootstrapBarrier(c.comm));
  CHECK_OK(mscclppRegMemRelease(src));
  CHECK_OK(mscclppRegMemRelease(dst));
  CHECK_OK(mscclppConnectionDestroy(conn));
  CHECK_OK(mscclppMemFree(c.src));
  CHECK_OK(mscclppMemFree(c.dst));
  CHECK_OK(mscclppCommDestroy(c.comm));
  if (c.rank == 0) printf("proxy_cpu %s: %d rounds ok\n", argv[1], rounds);
  return 0;
}
