/* Many producer threads (standing in for GPU threads) push into one small FIFO served by the proxy
 * thread: every trigger arrives exactly once, each producer's in its order, with its fields intact,
 * across thousands of laps and the 2^64 wrap of the counters; flushes (SYNC) return only after the
 * handler ran for them.
 *
 *   fifo_threads [PRODUCERS] [PUSHES] [FIFO_SIZE] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <mscclpp/fifo.h>

#include "helpers.h"
#include "proxy/service.h"

#define MAX_PRODUCERS 64

struct shared {
  struct proxy_core core;
  mscclppFifoDevice dev;
  int producers, pushes;
  uint64_t next[MAX_PRODUCERS];     /* handler: the sequence number expected next per producer */
  atomic_ullong handled_syncs[MAX_PRODUCERS];
  uint64_t total;
  int bad;
  char why[256];
};

/* The handler runs on the proxy thread only: plain fields are its own. */
static void handle(void* arg, mscclppTrigger t) {
  struct shared* s = arg;
  uint32_t p = mscclppTriggerPort(t);
  uint64_t seq = mscclppTriggerDstOffset(t);
  s->total++;
  if (p >= (uint32_t)s->producers || seq != s->next[p] || mscclppTriggerSrcOffset(t) != seq * 7 + p ||
      mscclppTriggerSize(t) != (seq % 5) * 1000003ull) {
    if (!s->bad)
      snprintf(s->why, sizeof(s->why), "producer %u: got seq %llu, expected %llu", p, (unsigned long long)seq,
               (unsigned long long)(p < MAX_PRODUCERS ? s->next[p] : 0));
    s->bad = 1;
    return;
  }
  s->next[p]++;
  if (mscclppTriggerType(t) & MSCCLPP_TRIGGER_SYNC) atomic_store(&s->handled_syncs[p], seq + 1);
}

struct producer {
  struct shared* s;
  uint32_t id;
};

static void* produce(void* arg) {
  struct producer* pr = arg;
  struct shared* s = pr->s;
  for (uint64_t i = 0; i < (uint64_t)s->pushes; i++) {
    int sync = (i % 97) == 96 || i + 1 == (uint64_t)s->pushes; /* the last one too: see main */
    uint32_t type = MSCCLPP_TRIGGER_DATA | (sync ? MSCCLPP_TRIGGER_SYNC : 0);
    uint64_t slot = 0;
    mscclppTrigger t = mscclppTriggerMake(type, pr->id, i, i * 7 + pr->id, (i % 5) * 1000003ull);
    if (mscclppFifoPush(&s->dev, t, &slot) != MSCCLPP_DEVICE_OK) TEST_FAIL("producer %u: push %llu failed", pr->id, (unsigned long long)i);
    if (sync) {
      if (mscclppFifoSync(&s->dev, slot) != MSCCLPP_DEVICE_OK) TEST_FAIL("producer %u: sync failed", pr->id);
      /* The handler ran for it before the slot was retired. */
      CHECK_MSG(atomic_load(&s->handled_syncs[pr->id]) >= i + 1, "producer %u: sync of %llu returned early", pr->id,
                (unsigned long long)i);
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  struct shared* s = calloc(1, sizeof(*s));
  CHECK(s != NULL);
  s->producers = argc > 1 ? atoi(argv[1]) : 8;
  s->pushes = argc > 2 ? atoi(argv[2]) : 20000;
  uint32_t size = argc > 3 ? (uint32_t)atoi(argv[3]) : 16;
  CHECK(s->producers > 0 && s->producers <= MAX_PRODUCERS && s->pushes > 0);
  CHECK_OK(fifo_host_init(&s->core.fifo, 0, -1, size, UINT64_MAX - 1000));
  s->core.handle = handle;
  s->core.arg = s;
  s->core.dev = -1;
  fifo_host_device(&s->core.fifo, &s->dev);
  s->dev.wait.timeoutNs = 60ull * 1000000000ull;
  CHECK_OK(proxy_core_start(&s->core));
  CHECK_RES(proxy_core_start(&s->core), mscclppInvalidUsage);
  pthread_t th[MAX_PRODUCERS];
  struct producer pr[MAX_PRODUCERS];
  for (int i = 0; i < s->producers; i++) {
    pr[i] = (struct producer){s, (uint32_t)i};
    CHECK(pthread_create(&th[i], NULL, produce, &pr[i]) == 0);
  }
  for (int i = 0; i < s->producers; i++) pthread_join(th[i], NULL);
  /* Each producer's last push was a sync that returned: every trigger was handled. */
  uint64_t want = (uint64_t)s->producers * (uint64_t)s->pushes;
  CHECK_OK(proxy_core_stop(&s->core));
  CHECK_MSG(!s->bad, "%s", s->why);
  CHECK_MSG(s->total == want, "handled %llu of %llu triggers", (unsigned long long)s->total, (unsigned long long)want);
  for (int i = 0; i < s->producers; i++) CHECK(s->next[i] == (uint64_t)s->pushes);
  CHECK(s->core.fifo.consumer.tail == UINT64_MAX - 1000 + want); /* wrapped past 2^64 */
  CHECK(*s->core.fifo.tail == s->core.fifo.consumer.tail);
  fifo_host_fini(&s->core.fifo);
  printf("fifo_threads: %d producers x %d pushes through %u slots: ok\n", s->producers, s->pushes, size);
  free(s);
  return 0;
}
