/* fuzz_wire.c - fuzz target for every decoder of the bootstrap's wire format (wire.h). Any input
 * must be either refused or decoded into values that pass the decoder's own checks and re-encode
 * to exactly the input bytes (the layouts are canonical); a sealed frame (header + record, util/seal.h)
 * opens only when it is exactly what the sealer makes. A violation aborts, which libFuzzer and
 * fuzz_driver.c report as a crash. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/wire.h"
#include "util/seal.h"

#define REQUIRE(cond) \
  do {                \
    if (!(cond)) abort(); \
  } while (0)

/* Decoder failures log at WARN; a fuzzer makes millions of them. */
int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc, (void)argv;
  setenv("MSCCLPP_LOG_LEVEL", "none", 0);
  return 0;
}

static void fuzz_addr(const uint8_t* d, size_t n) {
  union sock_addr a;
  if (wire_decode_addr(d, n, &a) != mscclppSuccess) return;
  REQUIRE(a.sa.sa_family == AF_INET || a.sa.sa_family == AF_INET6);
  uint8_t again[WIRE_ADDR_BYTES];
  REQUIRE(wire_encode_addr(&a, again) == mscclppSuccess && n == WIRE_ADDR_BYTES && memcmp(again, d, n) == 0);
}

static void fuzz_id(const uint8_t* d, size_t n) {
  struct wire_id w;
  if (wire_decode_id(d, n, &w) != mscclppSuccess) return;
  mscclppUniqueId again;
  REQUIRE(wire_encode_id(&w, &again) == mscclppSuccess && n == sizeof(again) && memcmp(again.internal, d, n) == 0);
}

static void fuzz_hello(const uint8_t* d, size_t n) {
  struct wire_hello h;
  if (wire_decode_hello(d, n, &h) != mscclppSuccess) return;
  REQUIRE(h.nranks >= 1 && h.nranks <= WIRE_MAX_RANKS && h.rank >= 0 && h.rank < h.nranks);
  REQUIRE(h.kind == WIRE_KIND_ROOT || h.kind == WIRE_KIND_RING || h.kind == WIRE_KIND_P2P);
  uint8_t again[WIRE_HELLO_BYTES];
  wire_encode_hello(&h, again);
  REQUIRE(n == WIRE_HELLO_BYTES && memcmp(again, d, n) == 0);
}

/* Tries the table decoder with the count the input claims, the count its length implies, and a
 * few arbitrary ones (including out-of-range counts). */
static void fuzz_table(const uint8_t* d, size_t n) {
  size_t cap = n / WIRE_ADDR_BYTES + 1;
  union sock_addr* addrs = malloc(cap * sizeof(*addrs));
  if (!addrs) return;
  int claimed = n >= 8 ? (int)((uint32_t)d[4] | (uint32_t)d[5] << 8 | (uint32_t)d[6] << 16 | (uint32_t)d[7] << 24) : 1;
  int counts[] = {claimed, (int)((n >= 8 ? n - 8 : 0) / WIRE_ADDR_BYTES), 1, 0, -1, WIRE_MAX_RANKS + 1};
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
    int c = counts[i];
    if (wire_decode_table(d, n, c, addrs) != mscclppSuccess) continue;
    REQUIRE(c >= 1 && (size_t)c <= cap && wire_table_bytes(c) == n);
    uint8_t* again = malloc(n);
    REQUIRE(again && wire_encode_table(addrs, c, again, n) == mscclppSuccess && memcmp(again, d, n) == 0);
    free(again);
  }
  free(addrs);
}

static void fuzz_frame(const uint8_t* d, size_t n) {
  struct wire_frame f;
  if (wire_decode_frame(d, n, &f) != mscclppSuccess) return;
  REQUIRE(f.length <= WIRE_MAX_PAYLOAD);
  uint8_t again[WIRE_FRAME_BYTES];
  wire_encode_frame(&f, again);
  REQUIRE(n == WIRE_FRAME_BYTES && memcmp(again, d, n) == 0);
}

/* Failure replies under a fixed handshake (key, hello, nonce all zero): the seeds carry valid MACs,
 * so mutations explore the checks behind the MAC as well as the MAC itself. */
static const uint8_t fail_key[WIRE_KEY_BYTES], fail_hello[WIRE_HELLO_BYTES], fail_nonce[WIRE_NONCE_BYTES];

static void fuzz_fail(const uint8_t* d, size_t n) {
  struct wire_fail f;
  if (wire_decode_fail(d, n, fail_key, fail_hello, fail_nonce, &f) != mscclppSuccess) return;
  REQUIRE(f.cause >= WIRE_FAIL_FDS && f.cause <= WIRE_FAIL_INTERNAL);
  REQUIRE(f.rank >= -1 && f.rank < WIRE_MAX_RANKS && f.other_rank >= -1 && f.other_rank < WIRE_MAX_RANKS);
  uint8_t again[WIRE_FAIL_BYTES];
  wire_encode_fail(&f, fail_key, fail_hello, fail_nonce, again);
  REQUIRE(n == WIRE_FAIL_BYTES && memcmp(again, d, n) == 0);
}

/* Sealed frames under a fixed connection (the key, hello and nonce above; the first record):
 * whatever opens must be what the sealer makes of the plaintext it opened to, byte for byte, so no
 * mutation of a genuine record opens. */
static void seal_pair(struct seal* tx, struct seal* rx) {
  REQUIRE(seal_derive(fail_key, fail_hello, WIRE_HELLO_BYTES, fail_nonce, WIRE_NONCE_BYTES, SEAL_CLIENT, tx, NULL) ==
          mscclppSuccess);
  REQUIRE(seal_derive(fail_key, fail_hello, WIRE_HELLO_BYTES, fail_nonce, WIRE_NONCE_BYTES, SEAL_SERVER, NULL, rx) ==
          mscclppSuccess);
}

static void fuzz_sealed(const uint8_t* d, size_t n) {
  struct wire_frame f;
  if (n < WIRE_FRAME_BYTES + SEAL_OVERHEAD || wire_decode_frame(d, WIRE_FRAME_BYTES, &f) != mscclppSuccess) return;
  if (f.length != n - WIRE_FRAME_BYTES - SEAL_OVERHEAD) return;
  struct seal tx = {.counter = 0}, rx = {.counter = 0};
  seal_pair(&tx, &rx);
  size_t len = (size_t)f.length;
  uint8_t* plain = malloc(len + 1);
  uint8_t* again = malloc(n);
  REQUIRE(plain && again);
  if (seal_open(&rx, d, WIRE_FRAME_BYTES, d + WIRE_FRAME_BYTES, len, plain, "fuzz") == mscclppSuccess) {
    memcpy(again, d, WIRE_FRAME_BYTES);
    REQUIRE(seal_record(&tx, d, WIRE_FRAME_BYTES, plain, len, again + WIRE_FRAME_BYTES) == mscclppSuccess);
    REQUIRE(memcmp(again, d, n) == 0);
  }
  free(plain);
  free(again);
  seal_clear(&tx);
  seal_clear(&rx);
}

static void seed_sealed(void (*add)(const void* data, size_t size), int32_t tag, const char* text) {
  uint8_t buf[WIRE_FRAME_BYTES + 64 + SEAL_OVERHEAD];
  size_t len = strlen(text);
  struct wire_frame f = {.tag = tag, .length = len};
  wire_encode_frame(&f, buf);
  struct seal tx = {.counter = 0}, rx = {.counter = 0};
  seal_pair(&tx, &rx);
  REQUIRE(seal_record(&tx, buf, WIRE_FRAME_BYTES, text, len, buf + WIRE_FRAME_BYTES) == mscclppSuccess);
  add(buf, WIRE_FRAME_BYTES + len + SEAL_OVERHEAD);
  seal_clear(&tx);
  seal_clear(&rx);
}

/* Valid encodings of every message kind, for fuzz_driver.c to start from. */
void fuzz_target_seeds(void (*add)(const void* data, size_t size)) {
  union sock_addr a4 = {.sin = {.sin_family = AF_INET, .sin_port = htons(29500), .sin_addr.s_addr = htonl(0x7f000001)}};
  union sock_addr a6 = {.sin6 = {.sin6_family = AF_INET6, .sin6_port = htons(1), .sin6_scope_id = 3}};
  a6.sin6.sin6_addr.s6_addr[15] = 1;
  uint8_t buf[WIRE_TABLE_HEADER_BYTES + 3 * WIRE_ADDR_BYTES];
  wire_encode_addr(&a4, buf), add(buf, WIRE_ADDR_BYTES);
  wire_encode_addr(&a6, buf), add(buf, WIRE_ADDR_BYTES);
  struct wire_id id = {.root = a6};
  wire_random_secret(id.secret);
  mscclppUniqueId uid;
  wire_encode_id(&id, &uid), add(uid.internal, sizeof(uid.internal));
  for (int k = WIRE_KIND_ROOT; k <= WIRE_KIND_P2P; k++) {
    struct wire_hello h = {.kind = k, .rank = k - 1, .nranks = 3 * k, .timeout_ms = 5000, .addr = k == 2 ? a6 : a4};
    wire_encode_hello(&h, buf), add(buf, WIRE_HELLO_BYTES);
  }
  union sock_addr tab[3] = {a4, a6, a4};
  wire_encode_table(tab, 3, buf, sizeof(buf)), add(buf, wire_table_bytes(3));
  wire_encode_table(tab, 1, buf, sizeof(buf)), add(buf, wire_table_bytes(1));
  struct wire_frame f = {.tag = 7, .length = 1 << 20};
  wire_encode_frame(&f, buf), add(buf, WIRE_FRAME_BYTES);
  struct wire_fail x = {.cause = WIRE_FAIL_NRANKS, .rank = 2, .value = 8, .other_rank = 0, .other_value = 4};
  wire_encode_fail(&x, fail_key, fail_hello, fail_nonce, buf), add(buf, WIRE_FAIL_BYTES);
  x = (struct wire_fail){.cause = WIRE_FAIL_FDS, .rank = -1, .value = 24, .other_rank = -1, .other_value = 16};
  wire_encode_fail(&x, fail_key, fail_hello, fail_nonce, buf), add(buf, WIRE_FAIL_BYTES);
  seed_sealed(add, 7, "an endpoint name and a region key");
  seed_sealed(add, 1, "");
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz_addr(data, size);
  fuzz_id(data, size);
  fuzz_hello(data, size);
  fuzz_table(data, size);
  fuzz_frame(data, size);
  fuzz_fail(data, size);
  fuzz_sealed(data, size);
  return 0;
}
