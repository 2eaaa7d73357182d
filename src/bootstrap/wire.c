/* wire.c - encoders and checking decoders of the bootstrap's messages (layouts in wire.h). */
#include "util/bytes.h"
#include "bootstrap/wire.h"

#include <errno.h>
#include <string.h>

#include "util/auth.h"
#include "util/err.h"

#define MAGIC_ID 0x4942504du    /* "MPBI" */
#define MAGIC_HELLO 0x4842504du /* "MPBH" */
#define MAGIC_TABLE 0x5442504du /* "MPBT" */
#define MAGIC_FRAME 0x4642504du /* "MPBF" */
#define MAGIC_FAIL 0x5842504du  /* "MPBX" */

#define ID_ADDR_OFF 8
#define ID_SECRET_OFF (ID_ADDR_OFF + WIRE_ADDR_BYTES)
#define ID_USED_BYTES (ID_SECRET_OFF + WIRE_SECRET_BYTES)

static int all_zero(const uint8_t* p, size_t n) {
  uint8_t acc = 0;
  for (size_t i = 0; i < n; i++) acc |= p[i];
  return acc == 0;
}

mscclppResult_t wire_encode_addr(const union sock_addr* addr, uint8_t out[WIRE_ADDR_BYTES]) {
  memset(out, 0, WIRE_ADDR_BYTES);
  if (addr->sa.sa_family == AF_INET) {
    out[0] = 4;
    le_put16(out + 2, ntohs(addr->sin.sin_port));
    memcpy(out + 8, &addr->sin.sin_addr, 4);
  } else if (addr->sa.sa_family == AF_INET6) {
    out[0] = 6;
    le_put16(out + 2, ntohs(addr->sin6.sin6_port));
    le_put32(out + 4, addr->sin6.sin6_scope_id);
    memcpy(out + 8, &addr->sin6.sin6_addr, 16);
  } else {
    return MPP_ERR(mscclppInvalidArgument, "bootstrap address has unsupported family %d", (int)addr->sa.sa_family);
  }
  return mscclppSuccess;
}

mscclppResult_t wire_decode_addr(const void* buf, size_t len, union sock_addr* out) {
  const uint8_t* p = buf;
  if (len != WIRE_ADDR_BYTES)
    return MPP_ERR(mscclppRemoteError, "bootstrap address is %zu bytes, expected %d", len, WIRE_ADDR_BYTES);
  memset(out, 0, sizeof(*out));
  uint16_t port = le_get16(p + 2);
  if (p[1] != 0) return MPP_ERR(mscclppRemoteError, "bootstrap address has a non-zero reserved byte");
  if (port == 0) return MPP_ERR(mscclppRemoteError, "bootstrap address has port 0");
  if (p[0] == 4) {
    if (!all_zero(p + 4, 4) || !all_zero(p + 12, 12))
      return MPP_ERR(mscclppRemoteError, "IPv4 bootstrap address has non-zero padding");
    out->sin.sin_family = AF_INET;
    out->sin.sin_port = htons(port);
    memcpy(&out->sin.sin_addr, p + 8, 4);
  } else if (p[0] == 6) {
    out->sin6.sin6_family = AF_INET6;
    out->sin6.sin6_port = htons(port);
    out->sin6.sin6_scope_id = le_get32(p + 4);
    memcpy(&out->sin6.sin6_addr, p + 8, 16);
  } else {
    return MPP_ERR(mscclppRemoteError, "bootstrap address has unknown family code %u", (unsigned)p[0]);
  }
  return mscclppSuccess;
}

mscclppResult_t wire_encode_id(const struct wire_id* id, mscclppUniqueId* out) {
  uint8_t* p = (uint8_t*)out->internal;
  memset(p, 0, MSCCLPP_UNIQUE_ID_BYTES);
  le_put32(p, MAGIC_ID);
  le_put16(p + 4, WIRE_VERSION);
  MPP_CHECK(wire_encode_addr(&id->root, p + ID_ADDR_OFF));
  memcpy(p + ID_SECRET_OFF, id->secret, WIRE_SECRET_BYTES);
  return mscclppSuccess;
}

mscclppResult_t wire_decode_id(const void* buf, size_t len, struct wire_id* out) {
  const uint8_t* p = buf;
  if (len != MSCCLPP_UNIQUE_ID_BYTES)
    return MPP_ERR(mscclppInvalidArgument, "unique id is %zu bytes, expected %d", len, MSCCLPP_UNIQUE_ID_BYTES);
  if (le_get32(p) != MAGIC_ID)
    return MPP_ERR(mscclppInvalidArgument, "unique id has a bad magic number (not made by mscclppGetUniqueId?)");
  if (le_get16(p + 4) != WIRE_VERSION)
    return MPP_ERR(mscclppInvalidArgument, "unique id has version %u, this library speaks %d", le_get16(p + 4),
                   WIRE_VERSION);
  if (le_get16(p + 6) != 0 || !all_zero(p + ID_USED_BYTES, MSCCLPP_UNIQUE_ID_BYTES - ID_USED_BYTES))
    return MPP_ERR(mscclppInvalidArgument, "unique id has non-zero reserved bytes");
  if (wire_decode_addr(p + ID_ADDR_OFF, WIRE_ADDR_BYTES, &out->root) != mscclppSuccess)
    return MPP_ERR(mscclppInvalidArgument, "unique id holds a bad root address");
  memcpy(out->secret, p + ID_SECRET_OFF, WIRE_SECRET_BYTES);
  return mscclppSuccess;
}

void wire_encode_hello(const struct wire_hello* h, uint8_t out[WIRE_HELLO_BYTES]) {
  memset(out, 0, WIRE_HELLO_BYTES);
  le_put32(out, MAGIC_HELLO);
  le_put16(out + 4, WIRE_VERSION);
  le_put16(out + 6, (uint16_t)h->kind);
  memcpy(out + 8, h->nonce, WIRE_NONCE_BYTES);
  le_put32(out + 24, (uint32_t)h->rank);
  le_put32(out + 28, (uint32_t)h->nranks);
  le_put32(out + 32, h->timeout_ms);
  /* An address that cannot be encoded stays all-zero and is refused by the decoder. */
  (void)wire_encode_addr(&h->addr, out + 40);
}

mscclppResult_t wire_decode_hello(const void* buf, size_t len, struct wire_hello* out) {
  const uint8_t* p = buf;
  if (len != WIRE_HELLO_BYTES)
    return MPP_ERR(mscclppRemoteError, "bootstrap hello is %zu bytes, expected %d", len, WIRE_HELLO_BYTES);
  if (le_get32(p) != MAGIC_HELLO) return MPP_ERR(mscclppRemoteError, "bootstrap hello has a bad magic number");
  if (le_get16(p + 4) != WIRE_VERSION)
    return MPP_ERR(mscclppRemoteError,
                   "bootstrap hello has wire version %u, this library speaks %d (ranks run different library versions?)",
                   le_get16(p + 4), WIRE_VERSION);
  int kind = le_get16(p + 6);
  if (kind != WIRE_KIND_ROOT && kind != WIRE_KIND_RING && kind != WIRE_KIND_P2P)
    return MPP_ERR(mscclppRemoteError, "bootstrap hello has unknown kind %d", kind);
  int32_t rank = (int32_t)le_get32(p + 24), nranks = (int32_t)le_get32(p + 28);
  if (nranks < 1 || nranks > WIRE_MAX_RANKS)
    return MPP_ERR(mscclppRemoteError, "bootstrap hello has nranks %d outside [1, %d]", (int)nranks, WIRE_MAX_RANKS);
  if (rank < 0 || rank >= nranks)
    return MPP_ERR(mscclppRemoteError, "bootstrap hello has rank %d outside [0, %d)", (int)rank, (int)nranks);
  if (le_get32(p + 36) != 0) return MPP_ERR(mscclppRemoteError, "bootstrap hello has non-zero reserved bytes");
  MPP_CHECK(wire_decode_addr(p + 40, WIRE_ADDR_BYTES, &out->addr));
  out->kind = kind;
  memcpy(out->nonce, p + 8, WIRE_NONCE_BYTES);
  out->rank = rank;
  out->nranks = nranks;
  out->timeout_ms = le_get32(p + 32);
  return mscclppSuccess;
}

size_t wire_table_bytes(int nranks) {
  if (nranks < 1 || nranks > WIRE_MAX_RANKS) return 0;
  return WIRE_TABLE_HEADER_BYTES + (size_t)nranks * WIRE_ADDR_BYTES;
}

mscclppResult_t wire_encode_table(const union sock_addr* addrs, int nranks, uint8_t* out, size_t out_len) {
  size_t need = wire_table_bytes(nranks);
  if (need == 0 || out_len < need)
    return MPP_ERR(mscclppInternalError, "address table of %d ranks does not fit %zu bytes", nranks, out_len);
  le_put32(out, MAGIC_TABLE);
  le_put32(out + 4, (uint32_t)nranks);
  for (int r = 0; r < nranks; r++)
    MPP_CHECK(wire_encode_addr(&addrs[r], out + WIRE_TABLE_HEADER_BYTES + (size_t)r * WIRE_ADDR_BYTES));
  return mscclppSuccess;
}

mscclppResult_t wire_decode_table(const void* buf, size_t len, int nranks, union sock_addr* addrs) {
  const uint8_t* p = buf;
  size_t need = wire_table_bytes(nranks);
  if (need == 0) return MPP_ERR(mscclppInvalidArgument, "address table for %d ranks: out of range", nranks);
  if (len < WIRE_TABLE_HEADER_BYTES)
    return MPP_ERR(mscclppRemoteError, "address table is %zu bytes, shorter than its header", len);
  if (le_get32(p) != MAGIC_TABLE) return MPP_ERR(mscclppRemoteError, "address table has a bad magic number");
  uint32_t n = le_get32(p + 4);
  if (n != (uint32_t)nranks)
    return MPP_ERR(mscclppRemoteError, "address table lists %u ranks, expected %d", n, nranks);
  if (len != need) return MPP_ERR(mscclppRemoteError, "address table is %zu bytes, expected %zu", len, need);
  for (int r = 0; r < nranks; r++) {
    const uint8_t* a = p + WIRE_TABLE_HEADER_BYTES + (size_t)r * WIRE_ADDR_BYTES;
    if (wire_decode_addr(a, WIRE_ADDR_BYTES, &addrs[r]) != mscclppSuccess)
      return MPP_ERR(mscclppRemoteError, "address table entry of rank %d is malformed", r);
  }
  return mscclppSuccess;
}

int wire_reply_is_fail(const uint8_t peek[WIRE_REPLY_PEEK_BYTES]) { return le_get32(peek) == MAGIC_FAIL; }

/* The MAC of a failure's body, bound to the handshake it answers. */
static void fail_mac(const uint8_t* key, const uint8_t* hello, const uint8_t* nonce, const uint8_t* body,
                     uint8_t out[AUTH_MAC_BYTES]) {
  struct auth_part parts[3] = {{hello, WIRE_HELLO_BYTES}, {nonce, WIRE_NONCE_BYTES}, {body, WIRE_FAIL_BODY_BYTES}};
  auth_mac(key, "mscclpp-root failure", parts, 3, out);
}

void wire_encode_fail(const struct wire_fail* f, const uint8_t key[WIRE_KEY_BYTES], const uint8_t hello[WIRE_HELLO_BYTES],
                      const uint8_t nonce[WIRE_NONCE_BYTES], uint8_t out[WIRE_FAIL_BYTES]) {
  memset(out, 0, WIRE_FAIL_BYTES);
  le_put32(out, MAGIC_FAIL);
  le_put16(out + 4, (uint16_t)f->cause);
  le_put32(out + 8, (uint32_t)f->rank);
  le_put32(out + 12, (uint32_t)f->value);
  le_put32(out + 16, (uint32_t)f->other_rank);
  le_put32(out + 20, (uint32_t)f->other_value);
  fail_mac(key, hello, nonce, out, out + WIRE_FAIL_BODY_BYTES);
}

static int rank_or_none(int32_t r) { return r >= -1 && r < WIRE_MAX_RANKS; }

mscclppResult_t wire_decode_fail(const void* buf, size_t len, const uint8_t key[WIRE_KEY_BYTES],
                                 const uint8_t hello[WIRE_HELLO_BYTES], const uint8_t nonce[WIRE_NONCE_BYTES],
                                 struct wire_fail* out) {
  const uint8_t* p = buf;
  if (len != WIRE_FAIL_BYTES)
    return MPP_ERR(mscclppRemoteError, "bootstrap failure reply is %zu bytes, expected %d", len, WIRE_FAIL_BYTES);
  uint8_t want[AUTH_MAC_BYTES];
  fail_mac(key, hello, nonce, p, want);
  if (!auth_equal(want, p + WIRE_FAIL_BODY_BYTES, AUTH_MAC_BYTES))
    return MPP_ERR(mscclppRemoteError, "bootstrap failure reply does not carry the root's MAC for this handshake");
  if (le_get32(p) != MAGIC_FAIL) return MPP_ERR(mscclppRemoteError, "bootstrap failure reply has a bad magic number");
  int cause = le_get16(p + 4);
  if (cause < WIRE_FAIL_FDS || cause > WIRE_FAIL_INTERNAL)
    return MPP_ERR(mscclppRemoteError, "bootstrap failure reply has unknown cause %d (a newer library?)", cause);
  if (le_get16(p + 6) != 0) return MPP_ERR(mscclppRemoteError, "bootstrap failure reply has non-zero reserved bytes");
  struct wire_fail f = {.cause = cause,
                        .rank = (int32_t)le_get32(p + 8),
                        .value = (int32_t)le_get32(p + 12),
                        .other_rank = (int32_t)le_get32(p + 16),
                        .other_value = (int32_t)le_get32(p + 20)};
  if (!rank_or_none(f.rank) || !rank_or_none(f.other_rank))
    return MPP_ERR(mscclppRemoteError, "bootstrap failure reply names rank %d or %d, out of range", (int)f.rank,
                   (int)f.other_rank);
  *out = f;
  return mscclppSuccess;
}

void wire_encode_frame(const struct wire_frame* f, uint8_t out[WIRE_FRAME_BYTES]) {
  le_put32(out, MAGIC_FRAME);
  le_put32(out + 4, (uint32_t)f->tag);
  le_put64(out + 8, f->length);
}

mscclppResult_t wire_decode_frame(const void* buf, size_t len, struct wire_frame* out) {
  const uint8_t* p = buf;
  if (len != WIRE_FRAME_BYTES)
    return MPP_ERR(mscclppRemoteError, "bootstrap frame header is %zu bytes, expected %d", len, WIRE_FRAME_BYTES);
  if (le_get32(p) != MAGIC_FRAME) return MPP_ERR(mscclppRemoteError, "bootstrap frame has a bad magic number");
  uint64_t length = le_get64(p + 8);
  if (length > WIRE_MAX_PAYLOAD)
    return MPP_ERR(mscclppRemoteError, "bootstrap frame announces %llu bytes, more than the limit %llu",
                   (unsigned long long)length, (unsigned long long)WIRE_MAX_PAYLOAD);
  out->tag = (int32_t)le_get32(p + 4);
  out->length = length;
  return mscclppSuccess;
}

int wire_secret_equal(const uint8_t a[WIRE_SECRET_BYTES], const uint8_t b[WIRE_SECRET_BYTES]) {
  return auth_equal(a, b, WIRE_SECRET_BYTES);
}

mscclppResult_t wire_random_secret(uint8_t secret[WIRE_SECRET_BYTES]) {
  return auth_random(secret, WIRE_SECRET_BYTES);
}

mscclppResult_t wire_secret_from_text(const char* text, uint8_t secret[WIRE_SECRET_BYTES]) {
  return auth_hkdf(text, strlen(text), "mscclpp-bootstrap-secret-v2", "text", 4, secret, WIRE_SECRET_BYTES);
}

mscclppResult_t wire_boot_key(const uint8_t secret[WIRE_SECRET_BYTES], uint8_t key[WIRE_KEY_BYTES]) {
  return auth_hkdf(secret, WIRE_SECRET_BYTES, "mscclpp-bootstrap-v2", "handshake", 9, key, WIRE_KEY_BYTES);
}
