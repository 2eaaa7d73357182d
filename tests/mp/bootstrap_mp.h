/* bootstrap_mp.h - what the bootstrap's multi-process tests share: the rank and root that
 * mscclpp-run put in the environment, communicator creation through each public init path, a
 * clock, and a deterministic random generator that every rank can replay. */
#ifndef MPP_TESTS_MP_BOOTSTRAP_MP_H_
#define MPP_TESTS_MP_BOOTSTRAP_MP_H_

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <poll.h>
#include <sys/socket.h>

#include "util/err.h"
#include "util/timeutil.h"

#include "bootstrap/internal.h"
#include "bootstrap/wire.h"
#include "helpers.h"
#include "util/auth.h"
#include "util/socket.h"

static inline int mp_env_int(const char* name) {
  const char* v = getenv(name);
  if (!v) TEST_FAIL("%s is not set (run under mscclpp-run)", name);
  return atoi(v);
}

static inline double mp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* "host:port" of the root as mscclpp-run gave it. */
static inline void mp_root(char* buf, size_t len) {
  const char* host = getenv("MSCCLPP_MASTER_ADDR");
  snprintf(buf, len, "%s:%d", host ? host : "127.0.0.1", mp_env_int("MSCCLPP_MASTER_PORT"));
}

/* splitmix64: the same sequence on every rank for the same seed. */
static inline uint64_t mp_rand(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Shares a unique id from rank 0 with the others through a file named by the (per-run) master
 * port: rank 0 creates it with mscclppGetUniqueId and renames it into place; others wait for it. */
static inline void mp_share_id(int rank, mscclppUniqueId* id) {
  char path[128], tmp[160];
  snprintf(path, sizeof(path), "/tmp/mscclpp-test-id-%d-%d", (int)getuid(), mp_env_int("MSCCLPP_MASTER_PORT"));
  if (rank == 0) {
    CHECK_OK(mscclppGetUniqueId(id));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    CHECK(f && fwrite(id, sizeof(*id), 1, f) == 1 && fclose(f) == 0);
    CHECK(rename(tmp, path) == 0);
    return;
  }
  double t0 = mp_now();
  for (;;) {
    FILE* f = fopen(path, "rb");
    if (f) {
      size_t n = fread(id, sizeof(*id), 1, f);
      fclose(f);
      if (n == 1) return;
    }
    CHECK_MSG(mp_now() - t0 < 30, "rank %d: no unique id in %s after 30 s", rank, path);
    usleep(5000);
  }
}

/* Rank 0 removes the id file once every rank has joined. */
static inline void mp_unshare_id(int rank) {
  char path[128];
  snprintf(path, sizeof(path), "/tmp/mscclpp-test-id-%d-%d", (int)getuid(), mp_env_int("MSCCLPP_MASTER_PORT"));
  if (rank == 0) unlink(path);
}

/* A plain TCP connection to addr, retried (the listener may not be up yet) for up to 30 s. */
static inline int mp_raw_connect(const union sock_addr* addr) {
  double t0 = mp_now();
  for (;;) {
    int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    socklen_t len = addr->sa.sa_family == AF_INET ? sizeof(addr->sin) : sizeof(addr->sin6);
    if (connect(fd, &addr->sa, len) == 0) return fd;
    close(fd);
    CHECK_MSG(mp_now() - t0 < 30, "cannot connect: %s", strerror(errno));
    usleep(5000);
  }
}

/* Sends len bytes on fd and asserts that the other side then closes the connection (EOF or
 * reset) within 15 s without sending anything. */
static inline void mp_expect_closed(int fd, const char* what);
static inline void mp_expect_refused(int fd, const void* msg, size_t len, const char* what) {
  CHECK_MSG(send(fd, msg, len, MSG_NOSIGNAL) == (ssize_t)len, "%s: send: %s", what, strerror(errno));
  mp_expect_closed(fd, what);
}

/* The secret that the library derives for this job's "host:port" root (MSCCLPP_BOOTSTRAP_SECRET,
 * which mscclpp-run sets, else a launcher's job id, else the public default). */
static inline void mp_job_secret(uint8_t secret[WIRE_SECRET_BYTES]) { CHECK_OK(boot_address_secret(1, secret)); }

/* A hello of the given kind from `rank` of `nranks` (fresh nonce, listening on 127.0.0.1:port). */
static inline void mp_hello_at(int kind, int rank, int nranks, int port, uint8_t out[WIRE_HELLO_BYTES]) {
  struct wire_hello h = {.kind = kind, .rank = rank, .nranks = nranks, .timeout_ms = 60000};
  CHECK_OK(auth_random(h.nonce, sizeof(h.nonce)));
  h.addr.sin.sin_family = AF_INET;
  h.addr.sin.sin_port = htons((uint16_t)port);
  h.addr.sin.sin_addr.s_addr = htonl(0x7f000001);
  wire_encode_hello(&h, out);
}
static inline void mp_hello(int kind, int rank, int nranks, uint8_t out[WIRE_HELLO_BYTES]) {
  mp_hello_at(kind, rank, nranks, 9, out);
}

/* The connecting side of a handshake by hand: sends hello, reads the challenge (15 s at most) and,
 * when it proves `secret`, sends our proof under it; otherwise sends a forged proof (what a
 * stranger can do). Returns 1 when the peer proved `secret`. */
static inline int mp_handshake_kept(int fd, const uint8_t secret[WIRE_SECRET_BYTES], const uint8_t hello[WIRE_HELLO_BYTES],
                                    uint8_t nonce_out[WIRE_NONCE_BYTES]);
static inline int mp_handshake(int fd, const uint8_t secret[WIRE_SECRET_BYTES], const uint8_t hello[WIRE_HELLO_BYTES]) {
  return mp_handshake_kept(fd, secret, hello, NULL);
}
/* The same, keeping the server's challenge nonce (NULL: not) for the connection's sealing keys. */
static inline int mp_handshake_kept(int fd, const uint8_t secret[WIRE_SECRET_BYTES], const uint8_t hello[WIRE_HELLO_BYTES],
                                    uint8_t nonce_out[WIRE_NONCE_BYTES]) {
  uint8_t key[WIRE_KEY_BYTES], chal[AUTH_CHALLENGE_BYTES], proof[AUTH_PROOF_BYTES];
  CHECK_OK(wire_boot_key(secret, key));
  CHECK(send(fd, hello, WIRE_HELLO_BYTES, MSG_NOSIGNAL) == WIRE_HELLO_BYTES);
  CHECK_OK(sock_recv_all(fd, chal, sizeof(chal), time_deadline_ms(15000)));
  if (nonce_out) memcpy(nonce_out, chal + 8, WIRE_NONCE_BYTES);
  int quiet = err_quiet(1);
  int proved = auth_answer_challenge(key, hello, WIRE_HELLO_BYTES, chal, "peer", proof) == mscclppSuccess;
  err_quiet(quiet);
  if (!proved) { /* a forged proof: the right header, a MAC made without the key */
    memcpy(proof, "MPAP\x01\0\0\0", 8);
    CHECK_OK(auth_random(proof + 8, AUTH_MAC_BYTES));
  }
  CHECK(send(fd, proof, sizeof(proof), MSG_NOSIGNAL) == (ssize_t)sizeof(proof));
  return proved;
}

/* Asserts that the other side closes fd within 15 s without sending anything more. */
static inline void mp_expect_closed(int fd, const char* what) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  CHECK_MSG(poll(&p, 1, 15000) == 1, "%s: the connection was not closed within 15 s", what);
  char c;
  ssize_t n = recv(fd, &c, 1, 0);
  CHECK_MSG(n == 0 || (n < 0 && errno == ECONNRESET), "%s: expected the connection closed, recv gave %zd", what, n);
  close(fd);
}

/* A handshake by hand with `secret` (see mp_handshake), then the peer must close the connection:
 * a stranger's forged proof, or a proved connection the peer has no use for. */
static inline void mp_expect_refused_handshake(int fd, const uint8_t* secret, const uint8_t* hello, const char* what) {
  mp_handshake(fd, secret, hello);
  mp_expect_closed(fd, what);
}

/* Joins the root at root_text by hand as `rank` of `nranks`, with the job's secret (into secret):
 * opens a loopback listener (its fd in *lfd, its port in the hello) and returns the connection to
 * the root once the handshake is done (the address table, or a failure reply, comes next). */
static inline int mp_join_root(const char* root_text, int rank, int nranks, uint8_t secret[WIRE_SECRET_BYTES],
                               int* lfd, int* port) {
  union sock_addr root;
  CHECK_OK(sock_parse_addr(root_text, &root));
  uint8_t hello[WIRE_HELLO_BYTES];
  mp_job_secret(secret);
  *lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in la = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof(la);
  CHECK(bind(*lfd, (struct sockaddr*)&la, sizeof(la)) == 0 && listen(*lfd, 16) == 0);
  CHECK(getsockname(*lfd, (struct sockaddr*)&la, &alen) == 0);
  *port = ntohs(la.sin_port);
  mp_hello_at(WIRE_KIND_ROOT, rank, nranks, *port, hello);
  int fd = mp_raw_connect(&root);
  CHECK_MSG(mp_handshake(fd, secret, hello), "the root did not prove the job's secret");
  return fd;
}

#endif /* MPP_TESTS_MP_BOOTSTRAP_MP_H_ */
