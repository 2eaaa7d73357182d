/* seal.h - confidential, integrity-protected records on a connection that util/auth.h's handshake
 * authenticated: AES-256-GCM from OpenSSL's EVP, one key per connection and direction.
 *
 * Keys: HKDF-SHA256(ikm = the handshake's key, salt "mscclpp-seal v1",
 *                   info = direction ("c2s" | "s2c") | hello | the server's challenge nonce).
 * Both nonces are fresh per connection (the client's sits in the hello), so every connection gets
 * keys of its own, and the two directions of one connection never share a key.
 *
 * Record (SEAL_OVERHEAD bytes more than the plaintext):
 *   ciphertext (len bytes) | u64 counter (little-endian) | 16 B GCM tag
 * The counter is the record's number in its direction (0, 1, 2, ...) and its GCM nonce (4 zero
 * bytes, then the counter): never reused under one key. The caller's associated data (e.g. the
 * clear frame header) and the counter are authenticated with the ciphertext. The opener checks
 * that the counter is the next one it expects (a replayed, dropped or reordered record is an
 * error saying so) before the tag; any failure poisons the context: the connection is over. */
#ifndef MPP_UTIL_SEAL_H_
#define MPP_UTIL_SEAL_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/core.h>

#define SEAL_KEY_BYTES 32
#define SEAL_COUNTER_BYTES 8
#define SEAL_TAG_BYTES 16
#define SEAL_OVERHEAD (SEAL_COUNTER_BYTES + SEAL_TAG_BYTES)

/* One direction of one connection, used by one thread at a time. Zeroed = no key (seal/open
 * fail); a keyed one holds libcrypto state until seal_clear. */
struct seal {
  uint8_t key[SEAL_KEY_BYTES];
  uint64_t counter; /* the next record's number */
  int ready;        /* keyed and not poisoned */
  void* ctx;        /* libcrypto's cipher context, keyed on first use (freed by seal_clear) */
};

/* Which side of the handshake we were: the side that sent the hello (client) seals with the
 * "c2s" key and opens with "s2c"; the server the other way round. */
enum seal_side { SEAL_CLIENT = 0, SEAL_SERVER = 1 };

/* Derives both directions' keys of a connection from the handshake's key and transcript (the
 * hello as sent, the server's challenge nonce). tx seals what we send, rx opens what we receive;
 * either may be NULL; each must be zeroed or cleared (seal_clear) before. */
mscclppResult_t seal_derive(const uint8_t key[SEAL_KEY_BYTES], const void* hello, size_t hello_len,
                            const uint8_t* server_nonce, size_t nonce_len, enum seal_side side, struct seal* tx,
                            struct seal* rx);

/* Seals len bytes of in (NULL when len is 0) with the next counter into out (len + SEAL_OVERHEAD
 * bytes; may equal in). aad (aad_len bytes, may be NULL/0) is authenticated, not sent. */
mscclppResult_t seal_record(struct seal* s, const void* aad, size_t aad_len, const void* in, size_t len, uint8_t* out);

/* Opens a record of len + SEAL_OVERHEAD bytes in rec into out (len bytes; may equal rec), with the
 * same aad the sealer used. Fails (RemoteError, naming `who`) when the counter is not the next one
 * or the tag does not match (altered, forged, or sealed under another key); the context is
 * poisoned then and out's content undefined. */
mscclppResult_t seal_open(struct seal* s, const void* aad, size_t aad_len, const uint8_t* rec, size_t len, void* out,
                          const char* who);

/* Forgets the key and frees the cipher context (zeroed or cleared: a no-op). */
void seal_clear(struct seal* s);

#endif /* MPP_UTIL_SEAL_H_ */
