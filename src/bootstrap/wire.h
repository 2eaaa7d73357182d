/* wire.h - the bytes of every bootstrap message that crosses a socket, and of the unique id.
 * All integers are little-endian; every layout has a fixed size or a size computed from a checked
 * count. Decoders take (buf, len), check every length, count, rank, family and magic before using
 * them, and fail with a message that names what was wrong (never read past len).
 *
 *   address (24 B)   u8 family (4|6), u8 0, u16 port, u32 IPv6 scope id, 16 B address (IPv4 in
 *                    the first 4 bytes, the rest 0)
 *   unique id (128)  u32 "MPBI", u16 version, u16 0, address of the root, 16 B secret, 80 B zero
 *   hello (64 B)     u32 "MPBH", u16 version, u16 kind, 16 B random nonce, i32 rank, i32 nranks,
 *                    u32 timeout_ms, u32 0, address the sender listens on. It opens the handshake
 *                    of util/auth.h (the accepting side answers with a challenge, the connecting
 *                    side with its proof) keyed by wire_boot_key(secret): the secret itself never
 *                    crosses the wire
 *   table            u32 "MPBT", u32 nranks, nranks addresses (the root's answer to each rank)
 *   failure (56 B)   u32 "MPBX", u16 cause, u16 0, i32 rank, i32 value, i32 other rank, i32 other
 *                    value, 32 B HMAC-SHA256(key, "mscclpp-root failure" | hello | the root's
 *                    challenge nonce | the first 24 bytes): the root's answer in place of the
 *                    table when the rendezvous failed (enum wire_fail_cause says why). Its MAC
 *                    binds it to this rank's handshake, so no one without the key can make a rank
 *                    report a failure, and a recorded one fits no other connection. A rank reads
 *                    the first WIRE_REPLY_PEEK_BYTES of the answer, then the rest of whichever it is
 *                    (a table's size comes from the rank's own nranks, a failure's is fixed)
 *   frame (16 B)     u32 "MPBF", i32 tag, u64 payload length; the payload follows sealed
 *                    (util/seal.h: ciphertext, u64 record number, 16 B tag; SEAL_OVERHEAD bytes
 *                    more than the length says) under the connection's key for that direction,
 *                    with these 16 bytes as associated data. Ring and p2p connections only;
 *                    notices and heartbeats (liveness.c) are bare 16-byte frames
 */
#ifndef MPP_BOOTSTRAP_WIRE_H_
#define MPP_BOOTSTRAP_WIRE_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/comm.h>

#include "util/socket.h"

/* 2: hellos carry a nonce and open a challenge-response handshake instead of carrying the secret.
 * 3: the root may answer with a failure in place of the table.
 * 4: ring and point-to-point frames carry their payload sealed (util/seal.h). */
#define WIRE_VERSION 4
#define WIRE_SECRET_BYTES 16
#define WIRE_NONCE_BYTES 16
#define WIRE_KEY_BYTES 32
#define WIRE_ADDR_BYTES 24
#define WIRE_HELLO_BYTES 64
#define WIRE_TABLE_HEADER_BYTES 8
#define WIRE_FRAME_BYTES 16
#define WIRE_FAIL_BYTES 56
#define WIRE_FAIL_BODY_BYTES 24
#define WIRE_REPLY_PEEK_BYTES 8 /* what tells a table from a failure */
#define WIRE_MAX_RANKS (1 << 20)
/* Largest payload of one framed message (bootstrap messages are small; this only stops absurd
 * lengths from a corrupt stream). */
#define WIRE_MAX_PAYLOAD ((uint64_t)1 << 32)

/* Who a connection is for: the root's rendezvous, the allgather ring, or point-to-point messages. */
enum wire_kind { WIRE_KIND_ROOT = 1, WIRE_KIND_RING = 2, WIRE_KIND_P2P = 3 };

struct wire_id {
  union sock_addr root;
  uint8_t secret[WIRE_SECRET_BYTES];
};

struct wire_hello {
  int kind; /* enum wire_kind */
  uint8_t nonce[WIRE_NONCE_BYTES];
  int rank, nranks;
  uint32_t timeout_ms;
  union sock_addr addr;
};

struct wire_frame {
  int32_t tag;
  uint64_t length;
};

/* Addresses: IPv4 or IPv6 only; a zero port is refused by the decoder. */
mscclppResult_t wire_encode_addr(const union sock_addr* addr, uint8_t out[WIRE_ADDR_BYTES]);
mscclppResult_t wire_decode_addr(const void* buf, size_t len, union sock_addr* out);

/* Unique ids. A bad id is InvalidArgument (it comes from the application). */
mscclppResult_t wire_encode_id(const struct wire_id* id, mscclppUniqueId* out);
mscclppResult_t wire_decode_id(const void* buf, size_t len, struct wire_id* out);

/* Hellos. The decoder checks magic, version, kind, 1 <= nranks <= WIRE_MAX_RANKS,
 * 0 <= rank < nranks and the address; a hello of another version is refused with both versions
 * named. A decoded hello proves nothing until the handshake's proof has been checked. */
void wire_encode_hello(const struct wire_hello* h, uint8_t out[WIRE_HELLO_BYTES]);
mscclppResult_t wire_decode_hello(const void* buf, size_t len, struct wire_hello* out);

/* Size in bytes of a table of nranks addresses (0 when nranks is out of range). */
size_t wire_table_bytes(int nranks);
/* Writes the table into out, which holds wire_table_bytes(nranks) bytes. */
mscclppResult_t wire_encode_table(const union sock_addr* addrs, int nranks, uint8_t* out, size_t out_len);
/* Decodes a table that must hold exactly nranks addresses (len == wire_table_bytes(nranks)). */
mscclppResult_t wire_decode_table(const void* buf, size_t len, int nranks, union sock_addr* addrs);

/* Why a rendezvous failed, as the root tells each rank. Ranks are -1 where none applies; the
 * values' meaning depends on the cause:
 *   FDS       the root's process ran out of file descriptors: rank = the root's owner (the rank
 *             whose process runs it, -1: the process that made the unique id), value = EMFILE or
 *             ENFILE, other_value = that process's RLIMIT_NOFILE (-1: unknown)
 *   HUNG_UP   rank = a joined rank whose connection ended before the table was sent
 *   NRANKS    rank said nranks = value, other_rank had said other_value
 *   TWICE     rank joined twice
 *   TIMEOUT   value ranks of other_value joined in time; rank = the lowest missing one
 *   STOPPED   the owner's init failed (rank = the owner)
 *   INTERNAL  rank = the owner, value = an errno (0: see the owner's log) */
enum wire_fail_cause {
  WIRE_FAIL_FDS = 1,
  WIRE_FAIL_HUNG_UP,
  WIRE_FAIL_NRANKS,
  WIRE_FAIL_TWICE,
  WIRE_FAIL_TIMEOUT,
  WIRE_FAIL_STOPPED,
  WIRE_FAIL_INTERNAL,
};
struct wire_fail {
  int cause; /* enum wire_fail_cause */
  int32_t rank, value, other_rank, other_value;
};

/* 1 when the first WIRE_REPLY_PEEK_BYTES of the root's answer begin a failure, not a table. */
int wire_reply_is_fail(const uint8_t peek[WIRE_REPLY_PEEK_BYTES]);
/* Encodes f, MACed under key over the handshake (hello, the root's challenge nonce). */
void wire_encode_fail(const struct wire_fail* f, const uint8_t key[WIRE_KEY_BYTES], const uint8_t hello[WIRE_HELLO_BYTES],
                      const uint8_t nonce[WIRE_NONCE_BYTES], uint8_t out[WIRE_FAIL_BYTES]);
/* Checks the MAC first (RemoteError when it does not match this handshake), then the magic, the
 * cause, the reserved bytes and the ranks (-1 or within [0, WIRE_MAX_RANKS)). */
mscclppResult_t wire_decode_fail(const void* buf, size_t len, const uint8_t key[WIRE_KEY_BYTES],
                                 const uint8_t hello[WIRE_HELLO_BYTES], const uint8_t nonce[WIRE_NONCE_BYTES],
                                 struct wire_fail* out);

/* Frame headers. The decoder checks the magic and length <= WIRE_MAX_PAYLOAD. */
void wire_encode_frame(const struct wire_frame* f, uint8_t out[WIRE_FRAME_BYTES]);
mscclppResult_t wire_decode_frame(const void* buf, size_t len, struct wire_frame* out);

/* Compares two secrets in time independent of where they differ. 1 when equal. */
int wire_secret_equal(const uint8_t a[WIRE_SECRET_BYTES], const uint8_t b[WIRE_SECRET_BYTES]);

/* Fills secret from the kernel-seeded random source (libcrypto). */
mscclppResult_t wire_random_secret(uint8_t secret[WIRE_SECRET_BYTES]);

/* The text behind the secret of "host:port" ids when neither MSCCLPP_BOOTSTRAP_SECRET nor a
 * launcher's job id is available: fixed and public, so such ids authenticate nothing. */
#define WIRE_DEFAULT_SECRET_TEXT "mscclpp-bootstrap-no-secret-v1"

/* Derives a secret from text (MSCCLPP_BOOTSTRAP_SECRET, or a launcher's job id) by HKDF-SHA256:
 * equal on every rank that has the same text. */
mscclppResult_t wire_secret_from_text(const char* text, uint8_t secret[WIRE_SECRET_BYTES]);

/* The key of the bootstrap's handshakes (HKDF-SHA256 of the secret). */
mscclppResult_t wire_boot_key(const uint8_t secret[WIRE_SECRET_BYTES], uint8_t key[WIRE_KEY_BYTES]);

#endif /* MPP_BOOTSTRAP_WIRE_H_ */
