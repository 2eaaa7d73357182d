/* bootstrap_wire.c - the bootstrap's wire format: every encoder round-trips through its decoder,
 * and truncated, oversized, bad-magic, bad-version, bad-rank and bad-address inputs are refused
 * with a message; the handshake's MACs bind the hello and the nonces and need the key. */
#include <arpa/inet.h>
#include <string.h>

#include "bootstrap/wire.h"
#include "helpers.h"
#include "util/auth.h"

static union sock_addr v4(const char* ip, int port) {
  union sock_addr a;
  memset(&a, 0, sizeof(a));
  a.sin.sin_family = AF_INET;
  a.sin.sin_port = htons((uint16_t)port);
  CHECK(inet_pton(AF_INET, ip, &a.sin.sin_addr) == 1);
  return a;
}

static union sock_addr v6(const char* ip, int port, uint32_t scope) {
  union sock_addr a;
  memset(&a, 0, sizeof(a));
  a.sin6.sin6_family = AF_INET6;
  a.sin6.sin6_port = htons((uint16_t)port);
  a.sin6.sin6_scope_id = scope;
  CHECK(inet_pton(AF_INET6, ip, &a.sin6.sin6_addr) == 1);
  return a;
}

static int same_addr(const union sock_addr* a, const union sock_addr* b) {
  if (a->sa.sa_family != b->sa.sa_family) return 0;
  if (a->sa.sa_family == AF_INET)
    return a->sin.sin_port == b->sin.sin_port && a->sin.sin_addr.s_addr == b->sin.sin_addr.s_addr;
  return a->sin6.sin6_port == b->sin6.sin6_port && a->sin6.sin6_scope_id == b->sin6.sin6_scope_id &&
         memcmp(&a->sin6.sin6_addr, &b->sin6.sin6_addr, 16) == 0;
}

static void test_addr(void) {
  union sock_addr in[3] = {v4("10.1.2.3", 4000), v6("fe80::1", 65535, 7), v6("::1", 1, 0)}, out;
  uint8_t buf[WIRE_ADDR_BYTES + 1];
  for (int i = 0; i < 3; i++) {
    CHECK_OK(wire_encode_addr(&in[i], buf));
    CHECK_OK(wire_decode_addr(buf, WIRE_ADDR_BYTES, &out));
    CHECK(same_addr(&in[i], &out));
    CHECK_RES(wire_decode_addr(buf, WIRE_ADDR_BYTES - 1, &out), mscclppRemoteError);
    CHECK_RES(wire_decode_addr(buf, WIRE_ADDR_BYTES + 1, &out), mscclppRemoteError);
  }
  CHECK_OK(wire_encode_addr(&in[0], buf));
  buf[0] = 5;
  CHECK_RES(wire_decode_addr(buf, WIRE_ADDR_BYTES, &out), mscclppRemoteError);
  CHECK(strstr(mscclppGetLastError(), "family") != NULL);
  CHECK_OK(wire_encode_addr(&in[0], buf));
  buf[2] = buf[3] = 0; /* port 0 */
  CHECK_RES(wire_decode_addr(buf, WIRE_ADDR_BYTES, &out), mscclppRemoteError);
  CHECK_OK(wire_encode_addr(&in[0], buf));
  buf[20] = 1; /* IPv4 padding */
  CHECK_RES(wire_decode_addr(buf, WIRE_ADDR_BYTES, &out), mscclppRemoteError);
  union sock_addr unix_like;
  memset(&unix_like, 0, sizeof(unix_like));
  unix_like.sa.sa_family = AF_UNIX;
  CHECK_RES(wire_encode_addr(&unix_like, buf), mscclppInvalidArgument);
}

static void test_id(void) {
  struct wire_id in, out;
  in.root = v4("192.168.0.9", 29500);
  CHECK_OK(wire_random_secret(in.secret));
  mscclppUniqueId id;
  CHECK_OK(wire_encode_id(&in, &id));
  CHECK_OK(wire_decode_id(id.internal, sizeof(id.internal), &out));
  CHECK(same_addr(&in.root, &out.root));
  CHECK(wire_secret_equal(in.secret, out.secret));
  CHECK_RES(wire_decode_id(id.internal, sizeof(id.internal) - 1, &out), mscclppInvalidArgument);
  mscclppUniqueId bad = id;
  bad.internal[0] ^= 1;
  CHECK_RES(wire_decode_id(bad.internal, sizeof(bad.internal), &out), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "magic") != NULL);
  bad = id;
  bad.internal[4] = 9; /* version */
  CHECK_RES(wire_decode_id(bad.internal, sizeof(bad.internal), &out), mscclppInvalidArgument);
  bad = id;
  bad.internal[100] = 1; /* reserved */
  CHECK_RES(wire_decode_id(bad.internal, sizeof(bad.internal), &out), mscclppInvalidArgument);
  memset(&bad, 0, sizeof(bad));
  CHECK_RES(wire_decode_id(bad.internal, sizeof(bad.internal), &out), mscclppInvalidArgument);
}

static void encode_hello(int kind, int rank, int nranks, uint8_t* buf) {
  struct wire_hello h = {.kind = kind, .rank = rank, .nranks = nranks, .timeout_ms = 1234};
  memset(h.nonce, 0xab, sizeof(h.nonce));
  h.addr = v6("2001:db8::5", 777, 0);
  wire_encode_hello(&h, buf);
}

static void test_hello(void) {
  uint8_t buf[WIRE_HELLO_BYTES + 8];
  struct wire_hello out;
  encode_hello(WIRE_KIND_RING, 3, 8, buf);
  CHECK_OK(wire_decode_hello(buf, WIRE_HELLO_BYTES, &out));
  CHECK(out.kind == WIRE_KIND_RING && out.rank == 3 && out.nranks == 8 && out.timeout_ms == 1234);
  CHECK(out.nonce[0] == 0xab && out.nonce[15] == 0xab);
  union sock_addr expect = v6("2001:db8::5", 777, 0);
  CHECK(same_addr(&out.addr, &expect));
  for (size_t len = 0; len < WIRE_HELLO_BYTES; len += 7) CHECK_RES(wire_decode_hello(buf, len, &out), mscclppRemoteError);
  CHECK_RES(wire_decode_hello(buf, WIRE_HELLO_BYTES + 1, &out), mscclppRemoteError);
  int bad[][3] = {{WIRE_KIND_P2P, 8, 8},  {WIRE_KIND_P2P, -1, 8}, {WIRE_KIND_P2P, 0, 0},
                  {WIRE_KIND_P2P, 0, -5}, {WIRE_KIND_P2P, 0, WIRE_MAX_RANKS + 1}, {9, 0, 1}, {0, 0, 1}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    encode_hello(bad[i][0], bad[i][1], bad[i][2], buf);
    CHECK_RES(wire_decode_hello(buf, WIRE_HELLO_BYTES, &out), mscclppRemoteError);
  }
  encode_hello(WIRE_KIND_P2P, 5, 6, buf);
  CHECK_OK(wire_decode_hello(buf, WIRE_HELLO_BYTES, &out));
  encode_hello(WIRE_KIND_P2P, 6, 6, buf);
  CHECK_RES(wire_decode_hello(buf, WIRE_HELLO_BYTES, &out), mscclppRemoteError);
  CHECK(strstr(mscclppGetLastError(), "rank 6") != NULL);
  encode_hello(WIRE_KIND_ROOT, 0, 1, buf);
  buf[1] ^= 0x10;
  CHECK_RES(wire_decode_hello(buf, WIRE_HELLO_BYTES, &out), mscclppRemoteError);
  CHECK(strstr(mscclppGetLastError(), "magic") != NULL);
  encode_hello(WIRE_KIND_ROOT, 0, 1, buf);
  buf[4] = 1; /* the version that carried the secret in clear */
  CHECK_RES(wire_decode_hello(buf, WIRE_HELLO_BYTES, &out), mscclppRemoteError);
  char speaks[64];
  snprintf(speaks, sizeof(speaks), "version 1, this library speaks %d", WIRE_VERSION);
  CHECK(strstr(mscclppGetLastError(), speaks) != NULL);
  encode_hello(WIRE_KIND_ROOT, 0, 1, buf);
  buf[4] = 3; /* the last version before payloads were sealed */
  CHECK_RES(wire_decode_hello(buf, WIRE_HELLO_BYTES, &out), mscclppRemoteError);
  CHECK(WIRE_VERSION == 4 && strstr(mscclppGetLastError(), "wire version 3, this library speaks 4") != NULL);
  encode_hello(WIRE_KIND_ROOT, 0, 1, buf);
  buf[40] = 0; /* address family */
  CHECK_RES(wire_decode_hello(buf, WIRE_HELLO_BYTES, &out), mscclppRemoteError);
}

static void test_table(void) {
  enum { N = 5 };
  union sock_addr in[N], out[N];
  for (int i = 0; i < N; i++) in[i] = i % 2 ? v4("127.0.0.1", 1000 + i) : v6("::1", 2000 + i, (uint32_t)i);
  size_t len = wire_table_bytes(N);
  CHECK(len == WIRE_TABLE_HEADER_BYTES + N * WIRE_ADDR_BYTES);
  CHECK(wire_table_bytes(0) == 0 && wire_table_bytes(-1) == 0 && wire_table_bytes(WIRE_MAX_RANKS + 1) == 0);
  uint8_t buf[WIRE_TABLE_HEADER_BYTES + N * WIRE_ADDR_BYTES + 4];
  CHECK_RES(wire_encode_table(in, N, buf, len - 1), mscclppInternalError);
  CHECK_OK(wire_encode_table(in, N, buf, len));
  CHECK_OK(wire_decode_table(buf, len, N, out));
  for (int i = 0; i < N; i++) CHECK(same_addr(&in[i], &out[i]));
  CHECK_RES(wire_decode_table(buf, len - 1, N, out), mscclppRemoteError);
  CHECK_RES(wire_decode_table(buf, len + 1, N, out), mscclppRemoteError);
  CHECK_RES(wire_decode_table(buf, 3, N, out), mscclppRemoteError);
  CHECK_RES(wire_decode_table(buf, len, N - 1, out), mscclppRemoteError);
  CHECK_RES(wire_decode_table(buf, len, 0, out), mscclppInvalidArgument);
  buf[4] = 0xff; /* count */
  CHECK_RES(wire_decode_table(buf, len, N, out), mscclppRemoteError);
  CHECK_OK(wire_encode_table(in, N, buf, len));
  buf[0] = 0;
  CHECK_RES(wire_decode_table(buf, len, N, out), mscclppRemoteError);
  CHECK_OK(wire_encode_table(in, N, buf, len));
  buf[WIRE_TABLE_HEADER_BYTES + 2 * WIRE_ADDR_BYTES] = 3; /* entry 2's family */
  CHECK_RES(wire_decode_table(buf, len, N, out), mscclppRemoteError);
  CHECK(strstr(mscclppGetLastError(), "rank 2") != NULL);
}

/* The root's failure reply: round trip, bound to its handshake (another hello or nonce, or a
 * changed byte, fails the MAC), unknown causes and out-of-range ranks refused, and a table is
 * never taken for a failure. */
static void test_fail(void) {
  uint8_t key[WIRE_KEY_BYTES], hello[WIRE_HELLO_BYTES], nonce[WIRE_NONCE_BYTES], buf[WIRE_FAIL_BYTES];
  CHECK_OK(auth_random(key, sizeof(key)));
  CHECK_OK(auth_random(nonce, sizeof(nonce)));
  encode_hello(WIRE_KIND_ROOT, 2, 8, hello);
  struct wire_fail f = {.cause = WIRE_FAIL_NRANKS, .rank = 2, .value = 8, .other_rank = 0, .other_value = 4}, g;
  wire_encode_fail(&f, key, hello, nonce, buf);
  CHECK(wire_reply_is_fail(buf));
  CHECK_OK(wire_decode_fail(buf, sizeof(buf), key, hello, nonce, &g));
  CHECK(g.cause == f.cause && g.rank == 2 && g.value == 8 && g.other_rank == 0 && g.other_value == 4);
  CHECK_RES(wire_decode_fail(buf, sizeof(buf) - 1, key, hello, nonce, &g), mscclppRemoteError);
  uint8_t other[WIRE_HELLO_BYTES];
  memcpy(other, hello, sizeof(other));
  other[8] ^= 1; /* another client nonce: another handshake */
  CHECK_RES(wire_decode_fail(buf, sizeof(buf), key, other, nonce, &g), mscclppRemoteError);
  CHECK(strstr(mscclppGetLastError(), "MAC") != NULL);
  uint8_t nonce2[WIRE_NONCE_BYTES];
  memcpy(nonce2, nonce, sizeof(nonce2));
  nonce2[15] ^= 0x80; /* another challenge of the root */
  CHECK_RES(wire_decode_fail(buf, sizeof(buf), key, hello, nonce2, &g), mscclppRemoteError);
  for (size_t i = 0; i < sizeof(buf); i += 5) {
    uint8_t bad[WIRE_FAIL_BYTES];
    memcpy(bad, buf, sizeof(bad));
    bad[i] ^= 0x01;
    CHECK_RES(wire_decode_fail(bad, sizeof(bad), key, hello, nonce, &g), mscclppRemoteError);
  }
  f.cause = 99; /* MACed correctly, but not a cause this library knows */
  wire_encode_fail(&f, key, hello, nonce, buf);
  CHECK_RES(wire_decode_fail(buf, sizeof(buf), key, hello, nonce, &g), mscclppRemoteError);
  CHECK(strstr(mscclppGetLastError(), "unknown cause 99") != NULL);
  f.cause = WIRE_FAIL_HUNG_UP, f.rank = -2;
  wire_encode_fail(&f, key, hello, nonce, buf);
  CHECK_RES(wire_decode_fail(buf, sizeof(buf), key, hello, nonce, &g), mscclppRemoteError);
  union sock_addr a[1];
  memset(a, 0, sizeof(a));
  a[0].sin.sin_family = AF_INET;
  a[0].sin.sin_port = htons(5);
  uint8_t table[WIRE_TABLE_HEADER_BYTES + WIRE_ADDR_BYTES];
  CHECK_OK(wire_encode_table(a, 1, table, sizeof(table)));
  CHECK(!wire_reply_is_fail(table));
}

static void test_frame(void) {
  uint8_t buf[WIRE_FRAME_BYTES + 1];
  struct wire_frame out, in = {.tag = -7, .length = 1u << 20};
  wire_encode_frame(&in, buf);
  CHECK_OK(wire_decode_frame(buf, WIRE_FRAME_BYTES, &out));
  CHECK(out.tag == -7 && out.length == (1u << 20));
  CHECK_RES(wire_decode_frame(buf, WIRE_FRAME_BYTES - 1, &out), mscclppRemoteError);
  CHECK_RES(wire_decode_frame(buf, WIRE_FRAME_BYTES + 1, &out), mscclppRemoteError);
  in.length = WIRE_MAX_PAYLOAD;
  wire_encode_frame(&in, buf);
  CHECK_OK(wire_decode_frame(buf, WIRE_FRAME_BYTES, &out));
  in.length = WIRE_MAX_PAYLOAD + 1;
  wire_encode_frame(&in, buf);
  CHECK_RES(wire_decode_frame(buf, WIRE_FRAME_BYTES, &out), mscclppRemoteError);
  in.length = UINT64_MAX;
  wire_encode_frame(&in, buf);
  CHECK_RES(wire_decode_frame(buf, WIRE_FRAME_BYTES, &out), mscclppRemoteError);
  in.length = 0;
  wire_encode_frame(&in, buf);
  buf[3] = 0;
  CHECK_RES(wire_decode_frame(buf, WIRE_FRAME_BYTES, &out), mscclppRemoteError);
}

static void test_secrets(void) {
  uint8_t a[WIRE_SECRET_BYTES], b[WIRE_SECRET_BYTES];
  CHECK_OK(wire_random_secret(a));
  CHECK_OK(wire_random_secret(b));
  CHECK(!wire_secret_equal(a, b));
  CHECK(wire_secret_equal(a, a));
  CHECK_OK(wire_secret_from_text("hunter2", a));
  CHECK_OK(wire_secret_from_text("hunter2", b));
  CHECK(wire_secret_equal(a, b));
  CHECK_OK(wire_secret_from_text("hunter3", b));
  CHECK(!wire_secret_equal(a, b));
  CHECK_OK(wire_secret_from_text("", b));
  CHECK(!wire_secret_equal(a, b));
  /* HKDF-SHA256 itself: RFC 5869's test case 3 (no salt, no info) is not reachable through our
   * fixed salts; check that the key differs from the secret and from another secret's key. */
  uint8_t ka[WIRE_KEY_BYTES], kb[WIRE_KEY_BYTES];
  CHECK_OK(wire_boot_key(a, ka));
  CHECK_OK(wire_boot_key(b, kb));
  CHECK(memcmp(ka, kb, sizeof(ka)) != 0 && memcmp(ka, a, sizeof(a)) != 0);
}

/* The handshake of util/auth.h over a bootstrap hello: both proofs hold with the same key; a
 * wrong key, a changed hello (rank, nranks, kind) or a replayed proof for another nonce fail; the
 * hello carries no secret; two hellos' challenges differ. */
static void test_handshake(void) {
  uint8_t secret[WIRE_SECRET_BYTES], key[WIRE_KEY_BYTES], other[WIRE_KEY_BYTES];
  CHECK_OK(wire_random_secret(secret));
  CHECK_OK(wire_boot_key(secret, key));
  memcpy(other, key, sizeof(key));
  other[7] ^= 1;
  struct wire_hello h = {.kind = WIRE_KIND_ROOT, .rank = 2, .nranks = 4, .timeout_ms = 1000};
  CHECK_OK(auth_random(h.nonce, sizeof(h.nonce)));
  h.addr = v4("127.0.0.1", 4000);
  uint8_t hello[WIRE_HELLO_BYTES];
  wire_encode_hello(&h, hello);
  CHECK(memmem(hello, sizeof(hello), secret, sizeof(secret)) == NULL);
  CHECK(memmem(hello, sizeof(hello), key, 8) == NULL);

  uint8_t nonce[AUTH_NONCE_BYTES], chal[AUTH_CHALLENGE_BYTES], proof[AUTH_PROOF_BYTES];
  CHECK_OK(auth_make_challenge(key, hello, sizeof(hello), nonce, chal));
  CHECK(memmem(chal, sizeof(chal), secret, sizeof(secret)) == NULL);
  CHECK_OK(auth_answer_challenge(key, hello, sizeof(hello), chal, "the root", proof));
  CHECK(auth_check_proof(key, hello, sizeof(hello), nonce, proof));
  /* A client with another key refuses the server's challenge, naming the secret. */
  uint8_t proof2[AUTH_PROOF_BYTES];
  CHECK_RES(auth_answer_challenge(other, hello, sizeof(hello), chal, "the root", proof2), mscclppRemoteError);
  CHECK(strstr(mscclppGetLastError(), "did not prove") != NULL);
  /* A server with another key refuses the proof. */
  CHECK(!auth_check_proof(other, hello, sizeof(hello), nonce, proof));
  /* The proof is bound to the hello: another rank, nranks or kind makes it invalid. */
  uint8_t changed[WIRE_HELLO_BYTES];
  size_t offsets[] = {6, 24, 28, 8};
  for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
    memcpy(changed, hello, sizeof(hello));
    changed[offsets[i]] ^= 1;
    CHECK(!auth_check_proof(key, changed, sizeof(changed), nonce, proof));
  }
  /* Replay: the same proof for a second challenge (fresh nonce) of the same hello fails, and the
   * challenges (their MACs) differ. */
  uint8_t nonce2[AUTH_NONCE_BYTES], chal2[AUTH_CHALLENGE_BYTES];
  CHECK_OK(auth_make_challenge(key, hello, sizeof(hello), nonce2, chal2));
  CHECK(memcmp(chal + 24, chal2 + 24, AUTH_MAC_BYTES) != 0);
  CHECK(!auth_check_proof(key, hello, sizeof(hello), nonce2, proof));
  /* A challenge of another handshake version is refused by name. */
  chal[4] = 9;
  CHECK_RES(auth_answer_challenge(key, hello, sizeof(hello), chal, "rank 1", proof2), mscclppRemoteError);
  CHECK(strstr(mscclppGetLastError(), "handshake version 9") != NULL);
}

int main(void) {
  test_addr();
  test_id();
  test_hello();
  test_table();
  test_frame();
  test_fail();
  test_secrets();
  test_handshake();
  printf("bootstrap_wire: ok\n");
  return 0;
}
