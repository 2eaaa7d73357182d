/* netio.c - the bootstrap's bounded socket primitives: connect to a peer, send/receive all bytes
 * by poll (optionally giving up once a bootstrap learns of a fault), run the connecting side of a
 * handshake, and wrap errors with context. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "util/auth.h"
#include "util/err.h"
#include "util/timeutil.h"

uint64_t boot_deadline(const struct bootstrap* b) { return time_deadline_ms(b->timeout_ms); }

mscclppResult_t boot_wrap(mscclppResult_t res, const char* file, int line, const char* fmt, ...) {
  char saved[768], ctx[256];
  snprintf(saved, sizeof(saved), "%s", err_last());
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx, sizeof(ctx), fmt, ap);
  va_end(ap);
  return err_set(res, file, line, "%s: %s", ctx, saved);
}

const char* boot_peer_str(const struct bootstrap* b, int peer, char* buf, size_t len) {
  char a[INET6_ADDRSTRLEN + 16] = "?";
  if (b->addrs && peer >= 0 && peer < b->nranks) sock_addr_str(&b->addrs[peer], a, sizeof(a));
  snprintf(buf, len, "rank %d at %s", peer, a);
  return buf;
}

#define WATCH_MS 100 /* how often a wait watched by a bootstrap looks at what it has learnt */

/* 1 when b (may be NULL) learnt of a fault or was aborted: waits watched by it give up. */
static int given_up(struct bootstrap* b) {
  if (!b) return 0;
  pthread_mutex_lock(&b->mu);
  int out = b->fault.type != 0 || b->aborted;
  pthread_mutex_unlock(&b->mu);
  return out;
}

/* Waits for events on fd until the deadline, or until watch (may be NULL) learns of a fault.
 * Returns 1 when ready, 0 at the deadline, -2 on watch's fault, -1 with errno set on a poll
 * failure other than EINTR. */
static int wait_fd(struct bootstrap* watch, int fd, short events, uint64_t deadline_ns) {
  for (;;) {
    if (given_up(watch)) return -2;
    int64_t left = time_left_ms(deadline_ns);
    if (left <= 0) return 0;
    if (watch && left > WATCH_MS) left = WATCH_MS;
    struct pollfd p = {.fd = fd, .events = events};
    int n = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
    if (n > 0) return 1;
    if (n < 0 && errno != EINTR) return -1;
  }
}

/* The error of a wait that gave up on watch's fault. */
static mscclppResult_t given_up_err(struct bootstrap* watch, const char* what) {
  pthread_mutex_lock(&watch->mu);
  mscclppResult_t res = boot_check_state(watch, "I/O");
  pthread_mutex_unlock(&watch->mu);
  return BOOT_WRAP(res, "gave up on %s", what);
}

mscclppResult_t boot_connect_peer(const union sock_addr* addr, uint64_t deadline_ns, int* out) {
  char a[INET6_ADDRSTRLEN + 16];
  sock_addr_str(addr, a, sizeof(a));
  int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    int e = errno;
    return MPP_ERRNO(mscclppSystemError, e, "socket() for a connection to %s%s", a, sock_fd_hint(e));
  }
  socklen_t alen = addr->sa.sa_family == AF_INET ? sizeof(addr->sin) : sizeof(addr->sin6);
  int err = 0;
  if (connect(fd, &addr->sa, alen) < 0) {
    err = errno;
    if (err == EINPROGRESS || err == EINTR) {
      int w = wait_fd(NULL, fd, POLLOUT, deadline_ns);
      socklen_t elen = sizeof(err);
      if (w == 0) {
        close(fd);
        return MPP_ERR(mscclppTimeout, "connecting to %s: no answer within the bootstrap timeout", a);
      }
      if (w < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0) err = errno;
    }
  }
  if (err != 0) {
    close(fd);
    return MPP_ERRNO(mscclppRemoteError, err, "connecting to %s (the peer exited or aborted?)", a);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  *out = fd;
  return mscclppSuccess;
}

mscclppResult_t boot_send_all(int fd, const void* buf, size_t len, uint64_t deadline_ns, const char* what) {
  return boot_send_all_w(NULL, fd, buf, len, deadline_ns, what);
}

mscclppResult_t boot_recv_all(int fd, void* buf, size_t len, uint64_t deadline_ns, const char* what) {
  return boot_recv_all_w(NULL, fd, buf, len, deadline_ns, what);
}

mscclppResult_t boot_send_all_w(struct bootstrap* watch, int fd, const void* buf, size_t len, uint64_t deadline_ns,
                                const char* what) {
  const uint8_t* p = buf;
  size_t done = 0;
  while (done < len) {
    ssize_t n = send(fd, p + done, len - done, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      return MPP_ERRNO(mscclppRemoteError, errno, "sending %zu bytes to %s", len, what);
    int w = wait_fd(watch, fd, POLLOUT, deadline_ns);
    if (w == -2) return given_up_err(watch, what);
    if (w == 0)
      return MPP_ERR(mscclppTimeout, "sending to %s: %zu of %zu bytes sent within the bootstrap timeout", what, done,
                     len);
    if (w < 0) return MPP_ERRNO(mscclppSystemError, errno, "poll while sending to %s", what);
  }
  return mscclppSuccess;
}

mscclppResult_t boot_recv_all_w(struct bootstrap* watch, int fd, void* buf, size_t len, uint64_t deadline_ns,
                                const char* what) {
  uint8_t* p = buf;
  size_t done = 0;
  while (done < len) {
    ssize_t n = recv(fd, p + done, len - done, MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n == 0)
      return MPP_ERR(mscclppRemoteError, "%s closed the connection after %zu of %zu bytes (exited or aborted?)", what,
                     done, len);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return MPP_ERRNO(mscclppRemoteError, errno, "receiving %zu bytes from %s", len, what);
    int w = wait_fd(watch, fd, POLLIN, deadline_ns);
    if (w == -2) return given_up_err(watch, what);
    if (w == 0)
      return MPP_ERR(mscclppTimeout, "receiving from %s: %zu of %zu bytes arrived within the bootstrap timeout", what,
                     done, len);
    if (w < 0) return MPP_ERRNO(mscclppSystemError, errno, "poll while receiving from %s", what);
  }
  return mscclppSuccess;
}

mscclppResult_t boot_hello_start(struct bootstrap* b, int fd, int kind, uint64_t deadline_ns, const char* what,
                                 uint8_t hello[WIRE_HELLO_BYTES]) {
  struct wire_hello h = {.kind = kind, .rank = b->rank, .nranks = b->nranks, .timeout_ms = (uint32_t)b->timeout_ms};
  MPP_CHECK(auth_random(h.nonce, WIRE_NONCE_BYTES));
  h.addr = b->my_addr;
  wire_encode_hello(&h, hello);
  return boot_send_all_w(b, fd, hello, WIRE_HELLO_BYTES, deadline_ns, what);
}

mscclppResult_t boot_hello_finish(struct bootstrap* b, int fd, const uint8_t hello[WIRE_HELLO_BYTES],
                                  const uint8_t chal[AUTH_CHALLENGE_BYTES], uint64_t deadline_ns, const char* what) {
  uint8_t proof[AUTH_PROOF_BYTES];
  MPP_CHECK(auth_answer_challenge(b->key, hello, WIRE_HELLO_BYTES, chal, what, proof));
  return boot_send_all_w(b, fd, proof, sizeof(proof), deadline_ns, what);
}

mscclppResult_t boot_send_hello(struct bootstrap* b, int fd, int kind, uint64_t deadline_ns, const char* what) {
  struct boot_transcript t;
  return boot_send_hello_kept(b, fd, kind, deadline_ns, what, &t);
}

mscclppResult_t boot_send_hello_kept(struct bootstrap* b, int fd, int kind, uint64_t deadline_ns, const char* what,
                                     struct boot_transcript* t) {
  uint8_t chal[AUTH_CHALLENGE_BYTES];
  MPP_CHECK(boot_hello_start(b, fd, kind, deadline_ns, what, t->hello));
  mscclppResult_t res = boot_recv_all_w(b, fd, chal, sizeof(chal), deadline_ns, what);
  if (res == mscclppRemoteError && !given_up(b))
    return BOOT_WRAP(res, "handshake: %s refused our hello (a rank of another job, another library version, or a "
                     "process that is not this job's)", what);
  if (res != mscclppSuccess) return BOOT_WRAP(res, "handshake: waiting for the challenge of %s", what);
  memcpy(t->nonce, chal + 8, WIRE_NONCE_BYTES); /* the challenge's nonce (util/auth.h layout) */
  return boot_hello_finish(b, fd, t->hello, chal, deadline_ns, what);
}

mscclppResult_t boot_seal_keys(const struct bootstrap* b, const uint8_t hello[WIRE_HELLO_BYTES],
                               const uint8_t nonce[WIRE_NONCE_BYTES], enum seal_side side, struct seal* tx,
                               struct seal* rx) {
  return seal_derive(b->key, hello, WIRE_HELLO_BYTES, nonce, WIRE_NONCE_BYTES, side, tx, rx);
}
