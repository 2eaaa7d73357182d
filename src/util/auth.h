/* auth.h - keys, MACs and the challenge-response handshake that every connection between ranks
 * uses (bootstrap root, ring and p2p; fd service; tcp transport), on OpenSSL's libcrypto.
 *
 * Handshake (the side that connects is the client, the side that accepts the server):
 *   client -> server  hello: the connection's own message (kind, ranks, ...) holding a fresh
 *                     16-byte client nonce; no secret
 *   server -> client  challenge (56 B): u32 "MPAC", u16 AUTH_VERSION, u16 0, 16 B server nonce,
 *                     32 B HMAC-SHA256(key, "server" | hello | server nonce)
 *   client -> server  proof (40 B): u32 "MPAP", u16 AUTH_VERSION, u16 0,
 *                     32 B HMAC-SHA256(key, "client" | hello | server nonce)
 * The client checks the challenge before it sends anything else, the server checks the proof
 * before it hands out or accepts anything: each side proves it holds the key, the secret never
 * crosses the wire, and both nonces being fresh, a recorded exchange fits no other connection.
 * The hello binds the kind of connection and the ranks, so a MAC made for one connection is
 * useless for another. */
#ifndef MPP_UTIL_AUTH_H_
#define MPP_UTIL_AUTH_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/core.h>

#define AUTH_VERSION 1
#define AUTH_KEY_BYTES 32
#define AUTH_NONCE_BYTES 16
#define AUTH_MAC_BYTES 32
#define AUTH_CHALLENGE_BYTES 56
#define AUTH_PROOF_BYTES 40

/* Fills buf with n bytes from OpenSSL's CSPRNG (seeded by the kernel). */
mscclppResult_t auth_random(void* buf, size_t n);

/* HKDF-SHA256 (RFC 5869) of ikm with the given salt and info into out_len bytes. */
mscclppResult_t auth_hkdf(const void* ikm, size_t ikm_len, const char* salt, const void* info, size_t info_len,
                          uint8_t* out, size_t out_len);

/* HMAC-SHA256 under key of: label, its NUL, then each of the n parts prefixed by its u32 length. */
struct auth_part {
  const void* p;
  size_t len;
};
void auth_mac(const uint8_t key[AUTH_KEY_BYTES], const char* label, const struct auth_part* parts, int n,
              uint8_t out[AUTH_MAC_BYTES]);

/* Compares in time independent of the contents. 1 when equal. */
int auth_equal(const void* a, const void* b, size_t n);

/* Server: makes the challenge answering hello; keeps the server nonce in nonce (for auth_check_proof). */
mscclppResult_t auth_make_challenge(const uint8_t key[AUTH_KEY_BYTES], const void* hello, size_t hello_len,
                                    uint8_t nonce[AUTH_NONCE_BYTES], uint8_t out[AUTH_CHALLENGE_BYTES]);
/* Client: checks the server's challenge to our hello and makes our proof. Fails (RemoteError,
 * naming `who`) on another version or a MAC that does not prove the key. */
mscclppResult_t auth_answer_challenge(const uint8_t key[AUTH_KEY_BYTES], const void* hello, size_t hello_len,
                                      const uint8_t chal[AUTH_CHALLENGE_BYTES], const char* who,
                                      uint8_t proof[AUTH_PROOF_BYTES]);
/* Server: 1 when proof is the client's valid answer to our challenge for hello. */
int auth_check_proof(const uint8_t key[AUTH_KEY_BYTES], const void* hello, size_t hello_len,
                     const uint8_t nonce[AUTH_NONCE_BYTES], const uint8_t proof[AUTH_PROOF_BYTES]);

/* Blocking client side over a connected socket: sends hello, checks the challenge, sends the proof,
 * all before deadline_ns. Errors name `who`. */
mscclppResult_t auth_client(int fd, const uint8_t key[AUTH_KEY_BYTES], const void* hello, size_t hello_len,
                            uint64_t deadline_ns, const char* who);
/* Blocking server side for a hello already read: sends the challenge and checks the proof before
 * deadline_ns. Fails (RemoteError) when the client does not prove the key. */
mscclppResult_t auth_server(int fd, const uint8_t key[AUTH_KEY_BYTES], const void* hello, size_t hello_len,
                            uint64_t deadline_ns, const char* who);

#endif /* MPP_UTIL_AUTH_H_ */
