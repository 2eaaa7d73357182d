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

#include "bootstrap/wire.h"
#include "helpers.h"
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
static inline void mp_expect_refused(int fd, const void* msg, size_t len, const char* what) {
  CHECK_MSG(send(fd, msg, len, MSG_NOSIGNAL) == (ssize_t)len, "%s: send: %s", what, strerror(errno));
  struct pollfd p = {.fd = fd, .events = POLLIN};
  CHECK_MSG(poll(&p, 1, 15000) == 1, "%s: the connection was not closed within 15 s", what);
  char c;
  ssize_t n = recv(fd, &c, 1, 0);
  CHECK_MSG(n == 0 || (n < 0 && errno == ECONNRESET), "%s: expected the connection closed, recv gave %zd", what, n);
  close(fd);
}

/* A hello of the given kind from `rank` of `nranks`, with `secret`. */
static inline void mp_hello(int kind, int rank, int nranks, const uint8_t* secret, uint8_t out[WIRE_HELLO_BYTES]) {
  struct wire_hello h = {.kind = kind, .rank = rank, .nranks = nranks, .timeout_ms = 60000};
  memcpy(h.secret, secret, WIRE_SECRET_BYTES);
  h.addr.sin.sin_family = AF_INET;
  h.addr.sin.sin_port = htons(9);
  h.addr.sin.sin_addr.s_addr = htonl(0x7f000001);
  wire_encode_hello(&h, out);
}

#endif /* MPP_TESTS_MP_BOOTSTRAP_MP_H_ */
