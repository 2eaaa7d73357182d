/* Switch channels between CPU ranks of one host (shm mappings) with the host functions: a channel
 * over all ranks and one over a subgroup in another order ({last, 0}); reduce (sum, min, max) for
 * every datatype at an unaligned offset, split over 3 "threads" (each call one tid) and over real
 * threads; in-place reduce-broadcast, each member one slice; broadcast from each member in turn,
 * from a separate buffer and from its own range; bad arguments. Every element is checked exactly:
 * member r's element i is a small integer that every type holds exactly, and so do the results.
 *
 *   switchchan_cpu        (on 2 to 8 ranks: beyond, the sums leave the small types' exact range) */
#include <pthread.h>
#include <stdint.h>

#include <mscclpp/mscclpp.h>

#include "chan_mp.h"

#define BYTES (1u << 20)
#define COUNT 1003u   /* elements reduced: several of the reduction's 256-element blocks and a tail */
#define FIRST 5u      /* at an unaligned element offset */

struct ctx {
  mscclppComm_t comm;
  int rank, nranks;
  unsigned char* buf; /* registered; every channel maps it */
  unsigned char* out; /* plain local memory */
};

/* Member m's value at element i: in [-30, 30], in [-2, 2] for fp8 (sums over 8 members stay exact). */
static int val(int dtype, int m, uint64_t i) {
  uint64_t x = i * 7919u + (uint64_t)m * 104729u;
  return dtype >= mscclppFloat8e4m3 ? (int)(x % 5u) - 2 : (int)(x % 61u) - 30;
}

/* Bits of the small integer v in a binary float format with mbits mantissa bits, the given bias
 * and sign bit; v must be exact in it (|v| < 2^(mbits+1)). */
static uint64_t minifloat(int v, int mbits, int bias, int signbit) {
  if (v == 0) return 0;
  uint64_t a = (uint64_t)(v < 0 ? -v : v), e = 0;
  while ((a >> (e + 1)) != 0) e++;
  uint64_t man = ((a << mbits) >> e) & ((1ull << mbits) - 1);
  return (v < 0 ? 1ull << signbit : 0) | ((e + (uint64_t)bias) << mbits) | man;
}

/* Writes the value v (an integer, wrapped for unsigned types) as dtype at p. */
static void put(int dtype, void* p, int64_t v) {
  float f = (float)v;
  double d = (double)v;
  uint64_t u = (uint64_t)v;
  uint16_t h;
  uint8_t b;
  switch (dtype) {
    case mscclppInt8: case mscclppUint8: b = (uint8_t)u; memcpy(p, &b, 1); break;
    case mscclppInt32: case mscclppUint32: { uint32_t w = (uint32_t)u; memcpy(p, &w, 4); } break;
    case mscclppInt64: case mscclppUint64: memcpy(p, &u, 8); break;
    case mscclppFloat16: h = (uint16_t)minifloat((int)v, 10, 15, 15); memcpy(p, &h, 2); break;
    case mscclppFloat32: memcpy(p, &f, 4); break;
    case mscclppFloat64: memcpy(p, &d, 8); break;
    case mscclppBfloat16: h = (uint16_t)minifloat((int)v, 7, 127, 15); memcpy(p, &h, 2); break;
    case mscclppFloat8e4m3: b = (uint8_t)minifloat((int)v, 3, 7, 7); memcpy(p, &b, 1); break;
    default: b = (uint8_t)minifloat((int)v, 2, 15, 7); memcpy(p, &b, 1); break;
  }
}

static size_t dsize(int dtype) {
  static const size_t s[mscclppNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return s[dtype];
}

static int is_unsigned(int dtype) {
  return dtype == mscclppUint8 || dtype == mscclppUint32 || dtype == mscclppUint64;
}

/* The expected result at element i over the members' values: wrapped sums and unsigned order for
 * unsigned types (the values' bit patterns compared as the type). */
static int64_t expect(int dtype, int op, const int* members, int n, uint64_t i) {
  uint64_t mask = dsize(dtype) == 8 ? ~0ull : (1ull << (8 * dsize(dtype))) - 1;
  int64_t acc = val(dtype, members[0], i);
  for (int k = 1; k < n; k++) {
    int64_t v = val(dtype, members[k], i);
    int less = is_unsigned(dtype) ? ((uint64_t)v & mask) < ((uint64_t)acc & mask) : v < acc;
    if (op == mscclppSwitchSum) acc += v;
    else if (op == mscclppSwitchMin) acc = less ? v : acc;
    else acc = less ? acc : v;
  }
  return acc;
}

/* Element i of count elements of dtype at p against the expected value; fails naming the case. */
static void check_elems(const char* what, int dtype, int op, const unsigned char* p, const int* members, int n,
                        uint64_t first, uint64_t count) {
  size_t es = dsize(dtype);
  unsigned char want[8];
  for (uint64_t i = 0; i < count; i++) {
    put(dtype, want, expect(dtype, op, members, n, first + i));
    CHECK_MSG(memcmp(p + i * es, want, es) == 0, "%s: dtype %d op %d, %d members: element %llu is wrong", what, dtype,
              op, n, (unsigned long long)(first + i));
  }
}

/* Members write their values for elements [0, FIRST + count + 8) of dtype into buf. */
static void fill(struct ctx* c, const mscclppSwitchChannel* ch, const int* members, int dtype, uint64_t count) {
  for (uint64_t i = 0; i < FIRST + count + 8; i++) put(dtype, c->buf + i * dsize(dtype), val(dtype, members[ch->rank], i));
}

/* Every datatype and operator: members fill, then each reduces [FIRST, FIRST + COUNT) into out with
 * 3 cooperating calls and checks it. Non-members only take part in the barriers. */
static void test_reduce(struct ctx* c, const mscclppSwitchChannel* ch, const int* members, int n, int member) {
  for (int dtype = 0; dtype < mscclppNumTypes; dtype++) {
    if (member) fill(c, ch, members, dtype, COUNT);
    CHECK_OK(mscclppBootstrapBarrier(c->comm)); /* every member's values are in place */
    for (int op = 0; op < 3 && member; op++) {
      memset(c->out, 0xee, BYTES);
      for (uint32_t t = 0; t < 3; t++)
        CHECK_OK(mscclppSwitchChannelReduceHost(ch, c->out, FIRST * dsize(dtype), COUNT, (mscclppDataType_t)dtype,
                                                (mscclppSwitchOp_t)op, t, 3));
      check_elems("reduce", dtype, op, c->out, members, n, FIRST, COUNT);
      CHECK_MSG(c->out[COUNT * dsize(dtype)] == 0xee, "reduce wrote past count");
    }
    CHECK_OK(mscclppBootstrapBarrier(c->comm)); /* nobody refills while others still read */
  }
}

struct thr {
  const mscclppSwitchChannel* ch;
  float* out;
  uint32_t tid, nthreads;
  mscclppResult_t res;
};

static void* reduce_thread(void* arg) {
  struct thr* t = arg;
  t->res = mscclppSwitchChannelReduceHost(t->ch, t->out, 0, BYTES / sizeof(float), mscclppFloat32, mscclppSwitchMax,
                                          t->tid, t->nthreads);
  return NULL;
}

/* The whole buffer as floats, max-reduced by 4 real threads at once. */
static void test_threads(struct ctx* c, const mscclppSwitchChannel* ch, const int* members, int n) {
  fill(c, ch, members, mscclppFloat32, BYTES / sizeof(float) - FIRST - 8);
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  pthread_t th[4];
  struct thr t[4];
  for (uint32_t k = 0; k < 4; k++) {
    t[k] = (struct thr){ch, (float*)c->out, k, 4, mscclppInternalError};
    CHECK(pthread_create(&th[k], NULL, reduce_thread, &t[k]) == 0);
  }
  for (int k = 0; k < 4; k++) {
    pthread_join(th[k], NULL);
    CHECK_OK(t[k].res);
  }
  check_elems("threaded reduce", mscclppFloat32, mscclppSwitchMax, c->out, members, n, 0, BYTES / sizeof(float));
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

/* In place: members fill, each reduce-broadcasts its slice of [FIRST, FIRST + count) with 2 calls,
 * then every member checks the whole range in its own buffer. */
static void test_reduce_broadcast(struct ctx* c, const mscclppSwitchChannel* ch, const int* members, int n, int member,
                                  int dtype, int op, uint64_t count) {
  size_t es = dsize(dtype);
  if (member) fill(c, ch, members, dtype, count);
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  if (member) {
    uint64_t per = (count + n - 1) / n, lo = per * ch->rank, mine = lo >= count ? 0 : (count - lo < per ? count - lo : per);
    for (uint32_t t = 0; t < 2; t++)
      CHECK_OK(mscclppSwitchChannelReduceBroadcastHost(ch, (FIRST + lo) * es, mine, (mscclppDataType_t)dtype,
                                                       (mscclppSwitchOp_t)op, t, 2));
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm)); /* every slice is stored everywhere */
  if (member) {
    check_elems("reduce-broadcast", dtype, op, c->buf + FIRST * es, members, n, FIRST, count);
    unsigned char want[8]; /* the elements around the range keep this member's own values */
    put(dtype, want, val(dtype, members[ch->rank], FIRST - 1));
    CHECK_MSG(memcmp(c->buf + (FIRST - 1) * es, want, es) == 0, "reduce-broadcast wrote before its range");
    put(dtype, want, val(dtype, members[ch->rank], FIRST + count));
    CHECK_MSG(memcmp(c->buf + (FIRST + count) * es, want, es) == 0, "reduce-broadcast wrote past its range");
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

/* Member `root` broadcasts 70001 bytes to offset 13 of every member: from out, or (own) from its
 * own range of buf. Everyone checks the range and the guard bytes around it. */
static void test_broadcast(struct ctx* c, const mscclppSwitchChannel* ch, int member, int root, int own) {
  const uint64_t off = 13, bytes = 70001;
  if (member) memset(c->buf, 0x5a, off + bytes + 64);
  unsigned char* src = own ? c->buf + off : c->out;
  if (member && ch->rank == root)
    for (uint64_t i = 0; i < bytes; i++) src[i] = cm_byte(root, own, i);
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  if (member && ch->rank == root)
    for (uint32_t t = 0; t < 3; t++) CHECK_OK(mscclppSwitchChannelBroadcastHost(ch, src, off, bytes, t, 3));
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  if (member) {
    for (uint64_t i = 0; i < bytes; i++)
      CHECK_MSG(c->buf[off + i] == cm_byte(root, own, i), "broadcast from member %d: byte %llu wrong on rank %d", root,
                (unsigned long long)i, c->rank);
    CHECK_MSG(c->buf[off - 1] == 0x5a && c->buf[off + bytes] == 0x5a, "broadcast wrote outside its range");
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
}

/* A call that must fail with InvalidArgument and a message containing `what`. */
#define CHECK_BAD(call, what)                                                                               \
  do {                                                                                                      \
    CHECK_RES(call, mscclppInvalidArgument);                                                                \
    CHECK_MSG(strstr(mscclppGetLastError(), what) != NULL, "%s: message \"%s\" does not say \"%s\"", #call, \
              mscclppGetLastError(), what);                                                                 \
  } while (0)

/* Bad arguments, locally on every rank; nothing is written by a failing call. */
static void test_bad_args(struct ctx* c, const mscclppSwitchChannel* ch) {
  const mscclppDataType_t f32 = mscclppFloat32;
  const mscclppSwitchOp_t sum = mscclppSwitchSum;
  memset(c->out, 0xee, 64);
  CHECK_BAD(mscclppSwitchChannelReduceHost(NULL, c->out, 0, 4, f32, sum, 0, 1), "channel is NULL");
  CHECK_BAD(mscclppSwitchChannelReduceHost(ch, NULL, 0, 4, f32, sum, 0, 1), "dst is NULL");
  CHECK_BAD(mscclppSwitchChannelReduceHost(ch, c->out, 0, 4, mscclppNumTypes, sum, 0, 1), "dtype 12");
  CHECK_BAD(mscclppSwitchChannelReduceHost(ch, c->out, 0, 4, (mscclppDataType_t)-1, sum, 0, 1), "dtype -1");
  CHECK_BAD(mscclppSwitchChannelReduceHost(ch, c->out, 0, 4, f32, (mscclppSwitchOp_t)3, 0, 1), "op 3");
  CHECK_BAD(mscclppSwitchChannelReduceHost(ch, c->out, 0, UINT64_MAX / 4 + 1, f32, sum, 0, 1), "overflows a 64-bit");
  CHECK_BAD(mscclppSwitchChannelReduceHost(ch, c->out, UINT64_MAX - 8, 4, f32, sum, 0, 1), "overflows");
  CHECK_BAD(mscclppSwitchChannelReduceHost(ch, c->out, UINT64_MAX - 100, 4, f32, sum, 0, 1), "address space");
  CHECK_BAD(mscclppSwitchChannelReduceHost(ch, c->out, 0, 4, f32, sum, 3, 3), "tid 3 is not below nthreads 3");
  CHECK_BAD(mscclppSwitchChannelReduceHost(ch, c->out, 0, 4, f32, sum, 0, 0), "nthreads 0");
  CHECK_BAD(mscclppSwitchChannelReduceHost(ch, c->buf + 8, 0, 4, f32, sum, 0, 1), "dst partly overlaps member");
  mscclppSwitchChannel bad = *ch;
  bad.nranks = 0;
  CHECK_BAD(mscclppSwitchChannelReduceHost(&bad, c->out, 0, 4, f32, sum, 0, 1), "0 members");
  bad.nranks = MSCCLPP_SWITCH_MAX_RANKS + 1;
  CHECK_BAD(mscclppSwitchChannelReduceHost(&bad, c->out, 0, 4, f32, sum, 0, 1), "17 members");
  bad = *ch;
  bad.peers[1] = NULL;
  CHECK_BAD(mscclppSwitchChannelReduceHost(&bad, c->out, 0, 4, f32, sum, 0, 1), "member 1's buffer is NULL");
  for (int i = 0; i < 64; i++) CHECK_MSG(c->out[i] == 0xee, "a failed reduce wrote dst");

  CHECK_BAD(mscclppSwitchChannelBroadcastHost(NULL, c->out, 0, 4, 0, 1), "channel is NULL");
  CHECK_BAD(mscclppSwitchChannelBroadcastHost(ch, NULL, 0, 4, 0, 1), "src is NULL");
  CHECK_BAD(mscclppSwitchChannelBroadcastHost(ch, c->buf + 1, 0, 4, 0, 1), "src partly overlaps member");
  CHECK_BAD(mscclppSwitchChannelBroadcastHost(ch, c->out, 0, 4, 1, 1), "tid 1");
  CHECK_BAD(mscclppSwitchChannelBroadcastHost(ch, c->out, 8, UINT64_MAX - 7, 0, 1), "overflows");
  CHECK_BAD(mscclppSwitchChannelReduceBroadcastHost(NULL, 0, 4, f32, sum, 0, 1), "channel is NULL");
  CHECK_BAD(mscclppSwitchChannelReduceBroadcastHost(ch, 0, 4, (mscclppDataType_t)99, sum, 0, 1), "dtype 99");
  CHECK_BAD(mscclppSwitchChannelReduceBroadcastHost(ch, 0, 4, f32, (mscclppSwitchOp_t)-1, 0, 1), "op -1");
  CHECK_BAD(mscclppSwitchChannelReduceBroadcastHost(ch, 0, 4, f32, sum, 2, 1), "tid 2");
  CHECK_BAD(mscclppSwitchChannelReduceBroadcastHost(ch, 0, UINT64_MAX / 2, mscclppInt64, sum, 0, 1), "overflows");

  /* Nothing to do is fine, also for a thread with no share of a short range. */
  CHECK_OK(mscclppSwitchChannelReduceHost(ch, c->out, 0, 0, f32, sum, 0, 1));
  CHECK_OK(mscclppSwitchChannelReduceHost(ch, c->out, 0, 2, f32, sum, 2, 3));
  CHECK_OK(mscclppSwitchChannelBroadcastHost(ch, c->out, 0, 0, 0, 1));
  CHECK_OK(mscclppSwitchChannelReduceBroadcastHost(ch, 0, 0, f32, sum, 0, 1));
  for (int i = 0; i < 64; i++) CHECK_MSG(c->out[i] == 0xee, "a reduce with no share wrote dst");
}

/* All of it on one channel; member: whether this rank is in it. */
static void test_channel(struct ctx* c, const mscclppSwitchChannel* ch, const int* members, int n, int member) {
  test_reduce(c, ch, members, n, member);
  test_reduce_broadcast(c, ch, members, n, member, mscclppFloat32, mscclppSwitchSum, COUNT);
  test_reduce_broadcast(c, ch, members, n, member, mscclppInt8, mscclppSwitchMax, COUNT);
  test_reduce_broadcast(c, ch, members, n, member, mscclppBfloat16, mscclppSwitchMin, COUNT);
  /* Slices of several of the function's 64 KiB chunks per call. */
  test_reduce_broadcast(c, ch, members, n, member, mscclppInt32, mscclppSwitchSum, BYTES / 4 - FIRST - 8);
  for (int root = 0; root < n; root++) test_broadcast(c, ch, member, root, root % 2);
}

int main(void) {
  struct ctx c;
  memset(&c, 0, sizeof(c));
  c.comm = cm_init(&c.rank, &c.nranks);
  CHECK_MSG(c.nranks >= 2 && c.nranks <= 8, "switchchan_cpu runs on 2..8 ranks");
  double t0 = cm_now();
  CHECK_OK(mscclppMemAlloc((void**)&c.buf, BYTES, mscclppMemHost));
  c.out = (unsigned char*)malloc(BYTES);
  CHECK(c.out != NULL);
  mscclppRegMem_t reg;
  CHECK_OK(mscclppRegisterMemory(c.comm, c.buf, BYTES, &reg));

  int all[MSCCLPP_SWITCH_MAX_RANKS];
  for (int r = 0; r < c.nranks; r++) all[r] = r;
  mscclppSwitchChannel ch;
  CHECK_OK(mscclppSwitchChannelCreate(c.comm, all, c.nranks, reg, &ch));
  CHECK(ch.nranks == c.nranks && ch.rank == c.rank && ch.peers[c.rank] == c.buf && ch.multicast == NULL);
  for (int r = 0; r < c.nranks; r++) CHECK(ch.peers[r] != NULL && (r == c.rank || ch.peers[r] != c.buf));
  test_bad_args(&c, &ch);
  test_channel(&c, &ch, all, c.nranks, 1);
  test_threads(&c, &ch, all, c.nranks);

  /* The subgroup {last, 0}: on 2 ranks both, in reverse order; on more, two of them. */
  int sub[2] = {c.nranks - 1, 0}, me = c.rank == sub[0] ? 0 : c.rank == sub[1] ? 1 : -1;
  mscclppSwitchChannel sc;
  memset(&sc, 0, sizeof(sc));
  if (me >= 0) {
    CHECK_OK(mscclppSwitchChannelCreate(c.comm, sub, 2, reg, &sc));
    CHECK(sc.nranks == 2 && sc.rank == me && sc.peers[me] == c.buf);
  }
  test_channel(&c, &sc, sub, 2, me >= 0);

  CHECK_OK(mscclppCommReleaseChannels(c.comm));
  CHECK_OK(mscclppBootstrapBarrier(c.comm));
  CHECK_OK(mscclppRegMemRelease(reg));
  CHECK_OK(mscclppMemFree(c.buf));
  free(c.out);
  CHECK_OK(mscclppCommDestroy(c.comm));
  if (c.rank == 0) printf("switchchan_cpu: %d ranks ok in %.2f s\n", c.nranks, cm_now() - t0);
  return 0;
}
