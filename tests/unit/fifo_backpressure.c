/* A full FIFO holds its producers back (exactly `size` pushes complete while nobody consumes); the
 * proxy thread stops promptly while producers keep pushing, nothing is lost or reordered after a
 * restart; a push that finds no room within its bound, or a flush nobody serves, reports who waited
 * for what in the device-error record and returns instead of spinning forever. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mscclpp/fifo.h>

#include "helpers.h"
#include "proxy/service.h"

#define PRODUCERS 4

struct shared {
  struct proxy_core core;
  mscclppFifoDevice dev;
  int pushes;
  int delay_us;               /* the handler's pretend work */
  uint64_t next[PRODUCERS];   /* proxy thread only */
  atomic_ullong handled;
  atomic_int pushed, bad;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void handle(void* arg, mscclppTrigger t) {
  struct shared* s = arg;
  uint32_t p = mscclppTriggerPort(t);
  if (p >= PRODUCERS || mscclppTriggerDstOffset(t) != s->next[p]) atomic_store(&s->bad, 1);
  if (p < PRODUCERS) s->next[p]++;
  if (s->delay_us) usleep((useconds_t)s->delay_us);
  atomic_fetch_add(&s->handled, 1);
}

struct producer {
  struct shared* s;
  uint32_t id;
};

static void* produce(void* arg) {
  struct producer* pr = arg;
  for (int i = 0; i < pr->s->pushes; i++) {
    uint64_t slot;
    mscclppTrigger t = mscclppTriggerMake(MSCCLPP_TRIGGER_DATA, pr->id, (uint64_t)i, 0, 8);
    if (mscclppFifoPush(&pr->s->dev, t, &slot) != MSCCLPP_DEVICE_OK) TEST_FAIL("producer %u: push %d timed out", pr->id, i);
    atomic_fetch_add(&pr->s->pushed, 1);
  }
  return NULL;
}

static struct shared* setup(uint32_t size, int pushes, int delay_us) {
  struct shared* s = calloc(1, sizeof(*s));
  CHECK(s != NULL);
  CHECK_OK(fifo_host_init(&s->core.fifo, 0, -1, size, 0));
  s->core.handle = handle;
  s->core.arg = s;
  s->core.dev = -1;
  fifo_host_device(&s->core.fifo, &s->dev);
  s->dev.wait.timeoutNs = 60ull * 1000000000ull;
  s->pushes = pushes;
  s->delay_us = delay_us;
  return s;
}

static void start_producers(struct shared* s, pthread_t* th, struct producer* pr) {
  for (int i = 0; i < PRODUCERS; i++) {
    pr[i] = (struct producer){s, (uint32_t)i};
    CHECK(pthread_create(&th[i], NULL, produce, &pr[i]) == 0);
  }
}

static void finish(struct shared* s, pthread_t* th) {
  for (int i = 0; i < PRODUCERS; i++) pthread_join(th[i], NULL);
  /* Every push is in a slot; the proxy drains them within the bound. */
  double t0 = now_s();
  while (atomic_load(&s->handled) < (uint64_t)PRODUCERS * (uint64_t)s->pushes && now_s() - t0 < 60) usleep(1000);
  CHECK_OK(proxy_core_stop(&s->core));
  CHECK_MSG(atomic_load(&s->handled) == (uint64_t)PRODUCERS * (uint64_t)s->pushes, "handled %llu of %d",
            (unsigned long long)atomic_load(&s->handled), PRODUCERS * s->pushes);
  CHECK_MSG(!atomic_load(&s->bad), "a producer's triggers arrived out of order");
  fifo_host_fini(&s->core.fifo);
  free(s);
}

static void test_backpressure(void) {
  struct shared* s = setup(8, 100, 0);
  pthread_t th[PRODUCERS];
  struct producer pr[PRODUCERS];
  start_producers(s, th, pr);
  usleep(300000);
  CHECK_MSG(atomic_load(&s->pushed) == 8, "%d pushes completed into an 8-slot FIFO nobody consumes", atomic_load(&s->pushed));
  CHECK_OK(proxy_core_start(&s->core));
  finish(s, th);
}

static void test_stop_while_busy(void) {
  struct shared* s = setup(16, 400, 50);
  pthread_t th[PRODUCERS];
  struct producer pr[PRODUCERS];
  CHECK_OK(proxy_core_start(&s->core));
  start_producers(s, th, pr);
  usleep(100000);
  double t0 = now_s();
  CHECK_OK(proxy_core_stop(&s->core));
  double took = now_s() - t0;
  CHECK_MSG(took < 1.0, "stopping a busy proxy took %.3f s", took);
  uint64_t h = atomic_load(&s->handled);
  CHECK_MSG(h > 0 && h < (uint64_t)PRODUCERS * 400, "handled %llu before the stop", (unsigned long long)h);
  usleep(100000);
  CHECK(atomic_load(&s->handled) == h); /* really stopped */
  CHECK_MSG((uint64_t)atomic_load(&s->pushed) <= h + 16, "%d pushes but only %llu handled and 16 slots",
            atomic_load(&s->pushed), (unsigned long long)h);
  s->delay_us = 0;
  CHECK_OK(proxy_core_start(&s->core)); /* resumes where it stopped */
  finish(s, th);
}

static void test_timeouts(void) {
  struct shared* s = setup(2, 0, 0);
  mscclppDeviceError rec;
  uint32_t claim = 0;
  memset(&rec, 0, sizeof(rec));
  s->dev.wait = (mscclppWaitInfo){.record = &rec, .claim = &claim, .timeoutNs = 100000000ull, .rank = 3, .peer = 5, .channel = 9};
  uint64_t slot[4];
  for (int i = 0; i < 2; i++) CHECK(mscclppFifoPush(&s->dev, mscclppTriggerMake(1, 0, 0, 0, 0), &slot[i]) == 0);
  double t0 = now_s();
  CHECK(mscclppFifoPush(&s->dev, mscclppTriggerMake(1, 0, 0, 0, 0), &slot[2]) == MSCCLPP_DEVICE_TIMEOUT);
  double took = now_s() - t0;
  CHECK_MSG(took >= 0.09 && took < 5, "a 100 ms bound took %.3f s", took);
  CHECK(rec.flag == 1 && rec.rank == 3 && rec.peer == 5 && rec.channel == 9 && rec.what == mscclppWaitFifoFull);
  CHECK_MSG(rec.expected == 1 && rec.observed == 0, "expected tail %llu, saw %llu", (unsigned long long)rec.expected,
            (unsigned long long)rec.observed);
  /* The first timeout took the record: later waits give up at once and leave it alone. */
  t0 = now_s();
  CHECK(mscclppFifoPush(&s->dev, mscclppTriggerMake(1, 0, 0, 0, 0), &slot[3]) == MSCCLPP_DEVICE_ABORTED);
  CHECK(mscclppFifoSync(&s->dev, slot[0]) == MSCCLPP_DEVICE_ABORTED);
  CHECK(now_s() - t0 < 1.0 && rec.what == mscclppWaitFifoFull);
  char text[256];
  CHECK_OK(mscclppDeviceErrorString(&rec, text, sizeof(text)));
  CHECK_MSG(strstr(text, "rank 3") && strstr(text, "rank 5") && strstr(text, "channel 9"), "%s", text);
  /* Cleared, a flush nobody serves reports itself as such. */
  memset(&rec, 0, sizeof(rec));
  claim = 0;
  CHECK(mscclppFifoSync(&s->dev, slot[1]) == MSCCLPP_DEVICE_TIMEOUT);
  CHECK(rec.flag == 1 && rec.what == mscclppWaitFifoSync && rec.expected == slot[1] + 1);
  fifo_host_fini(&s->core.fifo);
  free(s);
}

int main(void) {
  test_backpressure();
  test_stop_while_busy();
  test_timeouts();
  printf("fifo_backpressure: ok\n");
  return 0;
}
