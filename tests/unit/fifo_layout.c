/* The trigger layout and one thread's push/poll/pop: every field round-trips at its limits, a
 * zeroed slot is empty, a half-written slot is not taken, slots are reused across the lap boundary
 * and across the 2^64 wrap of the counters, the tail is stored where producers read it, and a stale
 * tail cache only makes a producer read the real tail. */
#include <string.h>

#include <mscclpp/fifo.h>

#include "helpers.h"
#include "proxy/fifo_host.h"

static void check_roundtrip(uint32_t type, uint32_t port, uint64_t dst, uint64_t src, uint64_t size) {
  mscclppTrigger t = mscclppTriggerMake(type, port, dst, src, size);
  CHECK(t.fst & MSCCLPP_TRIGGER_VALID);
  CHECK(t.snd & MSCCLPP_TRIGGER_VALID);
  CHECK_MSG(mscclppTriggerType(t) == type, "type %u -> %u", type, mscclppTriggerType(t));
  CHECK_MSG(mscclppTriggerPort(t) == port, "port %u -> %u", port, mscclppTriggerPort(t));
  CHECK_MSG(mscclppTriggerDstOffset(t) == dst, "dst %llu -> %llu", (unsigned long long)dst,
            (unsigned long long)mscclppTriggerDstOffset(t));
  CHECK_MSG(mscclppTriggerSrcOffset(t) == src, "src %llu -> %llu", (unsigned long long)src,
            (unsigned long long)mscclppTriggerSrcOffset(t));
  CHECK_MSG(mscclppTriggerSize(t) == size, "size %llu -> %llu", (unsigned long long)size,
            (unsigned long long)mscclppTriggerSize(t));
}

static void test_layout(void) {
  check_roundtrip(MSCCLPP_TRIGGER_DATA, 0, 0, 0, 0);
  check_roundtrip(7, MSCCLPP_TRIGGER_MAX_PORTS - 1, MSCCLPP_TRIGGER_MAX_OFFSET, MSCCLPP_TRIGGER_MAX_OFFSET,
                  MSCCLPP_TRIGGER_MAX_SIZE);
  check_roundtrip(MSCCLPP_TRIGGER_FLAG, 1, 1, 2, 3);
  check_roundtrip(MSCCLPP_TRIGGER_DATA | MSCCLPP_TRIGGER_SYNC, 12345, 0x2aaaaaaaaaull, 0x1555555555ull, (1ull << 22) - 1);
  check_roundtrip(MSCCLPP_TRIGGER_DATA, 77, 123, 456, 1ull << 22); /* the first size bit of snd */
  check_roundtrip(MSCCLPP_TRIGGER_DATA, 77, 123, 456, MSCCLPP_TRIGGER_CHUNK);
  /* Fields do not bleed into each other. */
  mscclppTrigger t = mscclppTriggerMake(0, 0, MSCCLPP_TRIGGER_MAX_OFFSET, 0, 0);
  CHECK(mscclppTriggerSize(t) == 0 && mscclppTriggerType(t) == 0 && mscclppTriggerSrcOffset(t) == 0);
  t = mscclppTriggerMake(0, 0, 0, 0, MSCCLPP_TRIGGER_MAX_SIZE);
  CHECK(mscclppTriggerDstOffset(t) == 0 && mscclppTriggerSrcOffset(t) == 0 && mscclppTriggerPort(t) == 0);
}

/* Single-threaded: 5 laps of a 4-slot FIFO whose counters start 6 short of 2^64. */
static void test_laps(void) {
  struct fifo_host f;
  uint64_t start = UINT64_MAX - 5;
  CHECK_OK(fifo_host_init(&f, 0, -1, 4, start));
  mscclppFifoDevice d;
  fifo_host_device(&f, &d);
  d.wait.timeoutNs = 1000000000ull;
  mscclppTrigger got;
  CHECK(!mscclppFifoPoll(&f.consumer, &got)); /* zeroed: empty */
  for (uint32_t i = 0; i < 20; i++) {
    uint64_t seq = 0;
    CHECK(mscclppFifoPush(&d, mscclppTriggerMake(MSCCLPP_TRIGGER_DATA, i, i, i * 2, i * 3), &seq) == MSCCLPP_DEVICE_OK);
    CHECK_MSG(seq == start + i, "push %u got slot %llu", i, (unsigned long long)seq);
    CHECK(mscclppFifoPoll(&f.consumer, &got));
    CHECK(mscclppTriggerPort(got) == i && mscclppTriggerSize(got) == i * 3ull);
    mscclppFifoPop(&f.consumer);
    CHECK(!mscclppFifoPoll(&f.consumer, &got));
    CHECK(f.triggers[seq & 3].fst == 0 && f.triggers[seq & 3].snd == 0);
    CHECK(mscclppFifoSync(&d, seq) == MSCCLPP_DEVICE_OK); /* the slot reads zero */
    CHECK(*f.tail == start + i + 1);
  }
  /* Fill all four slots without consuming: each push finds room (the tail is 4 behind at most). */
  uint64_t seqs[4];
  for (int i = 0; i < 4; i++) CHECK(mscclppFifoPush(&d, mscclppTriggerMake(1, (uint32_t)i, 0, 0, 0), &seqs[i]) == 0);
  /* A half-landed trigger is not taken: hide the second word of the first slot. */
  mscclppTrigger* slot = &f.triggers[f.consumer.tail & 3];
  uint64_t snd = slot->snd;
  slot->snd = 0;
  CHECK(!mscclppFifoPoll(&f.consumer, &got));
  slot->snd = snd;
  for (int i = 0; i < 4; i++) {
    CHECK(mscclppFifoPoll(&f.consumer, &got));
    CHECK(mscclppTriggerPort(got) == (uint32_t)i);
    mscclppFifoPop(&f.consumer);
  }
  /* Sync by tail: a slot that was reused still counts as done once the tail passed it. */
  CHECK(mscclppFifoSync(&d, seqs[0]) == MSCCLPP_DEVICE_OK);
  /* A stale cache (as on GPU ranks, where it is a separate word): the producer reads the real
   * tail, finds room, and refreshes the cache. */
  uint64_t cache = start; /* far behind */
  d.tailCache = &cache;
  uint64_t seq = 0;
  CHECK(mscclppFifoPush(&d, mscclppTriggerMake(1, 9, 0, 0, 0), &seq) == MSCCLPP_DEVICE_OK);
  CHECK_MSG(cache == *f.tail, "cache %llu, tail %llu", (unsigned long long)cache, (unsigned long long)*f.tail);
  CHECK(mscclppFifoPoll(&f.consumer, &got) && mscclppTriggerPort(got) == 9);
  mscclppFifoPop(&f.consumer);
  fifo_host_fini(&f);
}

int main(void) {
  test_layout();
  test_laps();
  CHECK_RES(fifo_host_init(&(struct fifo_host){0}, 0, -1, 6, 0), mscclppInvalidArgument);
  printf("fifo_layout: ok\n");
  return 0;
}
