/* fdpass.c - the fd service of fdpass.h: a thread answering fd requests on an abstract UNIX socket
 * (every connection at once, by poll, each bounded by FD_SERVICE_IO_MS), and the client side that
 * fetches one fd. */
#include "transport/fdpass.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/auth.h"
#include "util/bytes.h"
#include "util/err.h"
#include "util/log.h"
#include "util/timeutil.h"

#define FD_MAGIC 0x4446504du   /* "MPFD" */
#define FD_VERSION 2           /* 2: requests open a handshake (util/auth.h) */
#define FD_SERVICE_IO_MS 2000  /* how long one connection may take for its request and proof */
#define FD_MAX_CONNS 64        /* connections being served at once; beyond, the oldest is dropped */
#define FD_ACCEPT_BURST 16     /* connections accepted per poll round */
#define FD_POLL_MS 200
#define FD_REQ_BYTES 48
#define FD_REPLY_BYTES 16

enum { FD_OK = 0, FD_BAD_REQUEST = 1, FD_NO_EXPORT = 2 };

/* Request (the handshake's hello), 48 B little endian: u32 magic, u16 version, u16 0, i32 rank
 * (the requester), i32 owner (the service's rank), 16 B nonce, u64 export id, u64 export key. */
struct fd_request {
  int32_t rank, owner;
  uint64_t id, key;
};

/* Reply, 16 B: u32 magic, i32 status, u64 size; the fd rides along when status is FD_OK. */
struct fd_reply {
  int32_t status;
  uint64_t size;
};

struct fd_export {
  uint64_t id, key, size;
  int fd;
};

/* A connection being served: reading its request, then (challenge sent) its proof. */
struct fd_conn {
  int fd;
  int proving;
  size_t got;
  uint8_t req[FD_REQ_BYTES];  /* the request: the handshake's transcript */
  uint8_t proof[AUTH_PROOF_BYTES];
  uint8_t nonce[AUTH_NONCE_BYTES];
  uint64_t deadline_ns;
};

struct fd_service {
  uint8_t key[AUTH_KEY_BYTES];
  int rank, nranks;
  int listen_fd, wake_fd;
  pthread_t thread;
  pthread_mutex_t lock;
  struct fd_export* exports;
  size_t count, cap;
  uint64_t next_id;
  struct fd_conn conns[FD_MAX_CONNS]; /* service thread only */
  int nconns;
  struct log_rate refusals;
};

/* 64 random bits. */
static mscclppResult_t random_u64(uint64_t* out) { return auth_random(out, sizeof(*out)); }

/* The abstract socket address of rank's service: a name made from the communicator's key, so that
 * only its ranks can compute (and nobody else can take first) the name of a rank's service.
 * Returns the address length. */
static socklen_t service_addr(const uint8_t key[AUTH_KEY_BYTES], int rank, struct sockaddr_un* sa) {
  uint8_t r[4], mac[AUTH_MAC_BYTES];
  le_put32(r, (uint32_t)rank);
  struct auth_part part = {r, sizeof(r)};
  auth_mac(key, "mscclpp-fd-name", &part, 1, mac);
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "mscclpp-fd-");
  for (int i = 0; i < 12; i++) n += snprintf(sa->sun_path + 1 + n, sizeof(sa->sun_path) - 1 - (size_t)n, "%02x", mac[i]);
  n += snprintf(sa->sun_path + 1 + n, sizeof(sa->sun_path) - 1 - (size_t)n, "-%d", rank);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static void encode_request(const struct fd_request* q, const uint8_t nonce[AUTH_NONCE_BYTES], uint8_t out[FD_REQ_BYTES]) {
  memset(out, 0, FD_REQ_BYTES);
  le_put32(out, FD_MAGIC);
  le_put16(out + 4, FD_VERSION);
  le_put32(out + 8, (uint32_t)q->rank);
  le_put32(out + 12, (uint32_t)q->owner);
  memcpy(out + 16, nonce, AUTH_NONCE_BYTES);
  le_put64(out + 32, q->id);
  le_put64(out + 40, q->key);
}

/* 1 when in holds a request of this version; fills q. */
static int decode_request(const uint8_t in[FD_REQ_BYTES], struct fd_request* q) {
  if (le_get32(in) != FD_MAGIC || le_get16(in + 4) != FD_VERSION || le_get16(in + 6) != 0) return 0;
  q->rank = (int32_t)le_get32(in + 8);
  q->owner = (int32_t)le_get32(in + 12);
  q->id = le_get64(in + 32);
  q->key = le_get64(in + 40);
  return 1;
}

/* Looks up export id with key; returns a borrowed fd and its size, or -1. Call with the lock. */
static int find_export(struct fd_service* s, uint64_t id, uint64_t key, uint64_t* size) {
  for (size_t i = 0; i < s->count; i++) {
    if (s->exports[i].id == id && s->exports[i].key == key) {
      *size = s->exports[i].size;
      return s->exports[i].fd;
    }
  }
  return -1;
}

/* Sends the reply, with fd attached when fd >= 0 (16 bytes: fits a fresh socket's buffer at once). */
static void send_reply(int conn, const struct fd_reply* rep, int fd) {
  uint8_t buf[FD_REPLY_BYTES];
  le_put32(buf, FD_MAGIC);
  le_put32(buf + 4, (uint32_t)rep->status);
  le_put64(buf + 8, rep->size);
  struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    memset(&ctl, 0, sizeof(ctl));
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof(ctl.buf);
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  if (sendmsg(conn, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
    LOG_INFO_(LOG_SUB_TRANSPORT, "fd service: reply failed: %s", strerror(errno));
}

static void conn_drop(struct fd_service* s, int i) {
  close(s->conns[i].fd);
  s->conns[i] = s->conns[--s->nconns];
}

/* Logs (rate-limited) why connection i is refused and drops it. */
static void conn_refuse(struct fd_service* s, int i, const char* why) {
  char what[64];
  snprintf(what, sizeof(what), "refused connections to the fd service of rank %d", s->rank);
  log_limited(&s->refusals, LOG_WARN, LOG_SUB_TRANSPORT, what, "fd service of rank %d: refused a connection: %s",
              s->rank, why);
  conn_drop(s, i);
}

/* The request of connection i is complete: answers it with our challenge. */
static void got_request(struct fd_service* s, int i) {
  struct fd_conn* c = &s->conns[i];
  struct fd_request q;
  if (!decode_request(c->req, &q)) return conn_refuse(s, i, "not a request of this library's version");
  if (q.owner != s->rank) return conn_refuse(s, i, "a request for another rank's service");
  uint8_t chal[AUTH_CHALLENGE_BYTES];
  if (auth_make_challenge(s->key, c->req, FD_REQ_BYTES, c->nonce, chal) != mscclppSuccess)
    return conn_refuse(s, i, "no random nonce for the challenge");
  if (send(c->fd, chal, sizeof(chal), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(chal))
    return conn_refuse(s, i, "could not send the challenge");
  c->proving = 1;
  c->got = 0;
}

/* The proof of connection i is complete: serves the request if the proof holds, then drops it. */
static void got_proof(struct fd_service* s, int i) {
  struct fd_conn* c = &s->conns[i];
  if (!auth_check_proof(s->key, c->req, FD_REQ_BYTES, c->nonce, c->proof))
    return conn_refuse(s, i, "no proof of the communicator's key");
  struct fd_request q;
  decode_request(c->req, &q);
  struct fd_reply rep = {.status = FD_BAD_REQUEST, .size = 0};
  if (q.rank < 0 || q.rank >= s->nranks || q.rank == s->rank) {
    log_msg(LOG_WARN, LOG_SUB_TRANSPORT, "fd service of rank %d: refused a request from rank %d (not a peer)", s->rank,
            (int)q.rank);
    send_reply(c->fd, &rep, -1);
    return conn_drop(s, i);
  }
  pthread_mutex_lock(&s->lock);
  int fd = find_export(s, q.id, q.key, &rep.size);
  rep.status = fd >= 0 ? FD_OK : FD_NO_EXPORT;
  /* Sent under the lock: the fd cannot be closed by fd_service_remove while it is attached. */
  send_reply(c->fd, &rep, fd);
  pthread_mutex_unlock(&s->lock);
  if (fd < 0)
    log_msg(LOG_WARN, LOG_SUB_TRANSPORT, "fd service of rank %d: rank %d asked for export %llu with a wrong key or after release",
            s->rank, (int)q.rank, (unsigned long long)q.id);
  conn_drop(s, i);
}

/* Reads what connection i has sent; steps to the challenge or the reply when a message is whole. */
static void conn_read(struct fd_service* s, int i) {
  struct fd_conn* c = &s->conns[i];
  uint8_t* dst = c->proving ? c->proof : c->req;
  size_t want = c->proving ? AUTH_PROOF_BYTES : FD_REQ_BYTES;
  ssize_t n = recv(c->fd, dst + c->got, want - c->got, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) return conn_refuse(s, i, "hung up during the handshake");
  c->got += (size_t)n;
  if (c->got < want) return;
  if (c->proving) got_proof(s, i);
  else got_request(s, i);
}

/* Accepts waiting connections; beyond FD_MAX_CONNS the oldest one is dropped (real peers finish
 * their handshake within milliseconds). */
static void accept_some(struct fd_service* s) {
  for (int k = 0; k < FD_ACCEPT_BURST; k++) {
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    if (s->nconns == FD_MAX_CONNS) {
      int oldest = 0;
      for (int i = 1; i < s->nconns; i++)
        if (s->conns[i].deadline_ns < s->conns[oldest].deadline_ns) oldest = i;
      conn_refuse(s, oldest, "too many connections at once");
    }
    s->conns[s->nconns++] = (struct fd_conn){.fd = fd, .deadline_ns = time_deadline_ms(FD_SERVICE_IO_MS)};
  }
}

/* Serves every connection at once (poll), so that silent ones hold up nobody. */
static void* service_main(void* arg) {
  struct fd_service* s = arg;
  struct pollfd p[2 + FD_MAX_CONNS];
  for (;;) {
    p[0] = (struct pollfd){.fd = s->wake_fd, .events = POLLIN};
    p[1] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
    int n = s->nconns;
    for (int i = 0; i < n; i++) p[2 + i] = (struct pollfd){.fd = s->conns[i].fd, .events = POLLIN};
    if (poll(p, (nfds_t)(2 + n), FD_POLL_MS) < 0 && errno != EINTR) {
      log_msg(LOG_WARN, LOG_SUB_TRANSPORT, "fd service of rank %d: poll: %s; stopping", s->rank, strerror(errno));
      break;
    }
    if (p[0].revents) break;
    uint64_t now = time_now_ns();
    for (int i = n - 1; i >= 0; i--) { /* backwards: a drop moves the last entry into i */
      if (p[2 + i].revents) conn_read(s, i);
      else if (now > s->conns[i].deadline_ns) conn_refuse(s, i, "no complete request in time");
    }
    if (p[1].revents) accept_some(s);
    log_rate_tick(&s->refusals, LOG_SUB_TRANSPORT);
  }
  while (s->nconns > 0) conn_drop(s, s->nconns - 1);
  return NULL;
}

mscclppResult_t fd_service_start(const uint8_t key[FD_KEY_BYTES], int rank, int nranks, struct fd_service** out) {
  struct fd_service* s = calloc(1, sizeof(*s));
  if (s == NULL) return MPP_ERR(mscclppSystemError, "fd service: out of host memory");
  s->rank = rank, s->nranks = nranks, s->listen_fd = -1, s->wake_fd = -1, s->next_id = 1;
  memcpy(s->key, key, AUTH_KEY_BYTES);
  pthread_mutex_init(&s->lock, NULL);
  mscclppResult_t res = mscclppSuccess;
  struct sockaddr_un sa;
  socklen_t len = service_addr(key, rank, &sa);
  s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->listen_fd < 0) {
    res = MPP_ERRNO(mscclppSystemError, errno, "fd service of rank %d: socket", rank);
    goto err_free;
  }
  if (bind(s->listen_fd, (struct sockaddr*)&sa, len) != 0 || listen(s->listen_fd, 128) != 0) {
    res = MPP_ERRNO(mscclppSystemError, errno, "fd service of rank %d: bind/listen on @%s", rank, sa.sun_path + 1);
    goto err_close;
  }
  s->wake_fd = eventfd(0, EFD_CLOEXEC);
  if (s->wake_fd < 0) {
    res = MPP_ERRNO(mscclppSystemError, errno, "fd service of rank %d: eventfd", rank);
    goto err_close;
  }
  int e = pthread_create(&s->thread, NULL, service_main, s);
  if (e != 0) {
    res = MPP_ERRNO(mscclppSystemError, e, "fd service of rank %d: pthread_create", rank);
    goto err_close;
  }
  *out = s;
  return mscclppSuccess;
err_close:
  if (s->wake_fd >= 0) close(s->wake_fd);
  if (s->listen_fd >= 0) close(s->listen_fd);
err_free:
  pthread_mutex_destroy(&s->lock);
  free(s);
  return res;
}

const uint8_t* fd_service_key(const struct fd_service* s) { return s->key; }

void fd_service_stop(struct fd_service* s) {
  if (s == NULL) return;
  uint64_t one = 1;
  if (write(s->wake_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
    log_msg(LOG_WARN, LOG_SUB_TRANSPORT, "fd service of rank %d: wake: %s", s->rank, strerror(errno));
  pthread_join(s->thread, NULL);
  close(s->wake_fd);
  close(s->listen_fd);
  for (size_t i = 0; i < s->count; i++) close(s->exports[i].fd);
  free(s->exports);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

mscclppResult_t fd_service_add(struct fd_service* s, int fd, uint64_t size, uint64_t* id, uint64_t* key) {
  uint64_t k;
  mscclppResult_t res = random_u64(&k);
  if (res != mscclppSuccess) {
    close(fd);
    return res;
  }
  pthread_mutex_lock(&s->lock);
  if (s->count == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    struct fd_export* grown = realloc(s->exports, cap * sizeof(*grown));
    if (grown == NULL) {
      pthread_mutex_unlock(&s->lock);
      close(fd);
      return MPP_ERR(mscclppSystemError, "fd service: out of host memory");
    }
    s->exports = grown;
    s->cap = cap;
  }
  *id = s->next_id++;
  *key = k;
  s->exports[s->count++] = (struct fd_export){.id = *id, .key = k, .size = size, .fd = fd};
  pthread_mutex_unlock(&s->lock);
  return mscclppSuccess;
}

void fd_service_remove(struct fd_service* s, uint64_t id) {
  pthread_mutex_lock(&s->lock);
  for (size_t i = 0; i < s->count; i++) {
    if (s->exports[i].id == id) {
      close(s->exports[i].fd);
      s->exports[i] = s->exports[--s->count];
      break;
    }
  }
  pthread_mutex_unlock(&s->lock);
}

/* Connects to owner's service, retrying while it is not (yet) listening or its backlog is full. */
static mscclppResult_t client_connect(const uint8_t key[FD_KEY_BYTES], int owner, uint64_t deadline_ns, int* out) {
  struct sockaddr_un sa;
  socklen_t len = service_addr(key, owner, &sa);
  for (;;) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return MPP_ERRNO(mscclppSystemError, errno, "fd fetch from rank %d: socket", owner);
    if (connect(fd, (struct sockaddr*)&sa, len) == 0) {
      *out = fd;
      return mscclppSuccess;
    }
    int e = errno;
    close(fd);
    if (e != ECONNREFUSED && e != EAGAIN && e != ENOENT)
      return MPP_ERRNO(mscclppSystemError, e, "fd fetch from rank %d: connect to @%s", owner, sa.sun_path + 1);
    if (time_now_ns() >= deadline_ns)
      return MPP_ERRNO(mscclppRemoteError, e,
                       "fd fetch from rank %d: its fd service @%s is unreachable (is it on this host, and alive?)",
                       owner, sa.sun_path + 1);
    usleep(1000);
  }
}

/* Receives the reply and the attached fd (-1 when none). */
static mscclppResult_t client_recv(int sock, int owner, uint64_t deadline_ns, struct fd_reply* rep, int* fd) {
  *fd = -1;
  struct pollfd p = {.fd = sock, .events = POLLIN};
  int64_t left;
  while ((left = time_left_ms(deadline_ns)) > 0) {
    int n = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
    if (n > 0 || (n < 0 && errno != EINTR)) break;
  }
  union {
    char buf[CMSG_SPACE(sizeof(int) * 4)];
    struct cmsghdr align;
  } ctl;
  uint8_t buf[FD_REPLY_BYTES];
  struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
  ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); n >= 0 && c != NULL; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < nfds; i++) {
      int got;
      memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*fd < 0) *fd = got;
      else close(got); /* never more than one is expected */
    }
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return MPP_ERR(mscclppTimeout, "fd fetch from rank %d: no reply from its fd service in time", owner);
  if (n < 0) return MPP_ERRNO(mscclppRemoteError, errno, "fd fetch from rank %d: recvmsg", owner);
  if (n != (ssize_t)sizeof(buf) || le_get32(buf) != FD_MAGIC || (msg.msg_flags & MSG_CTRUNC)) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
    return MPP_ERR(mscclppRemoteError, "fd fetch from rank %d: malformed reply (%zd bytes%s)", owner, n,
                   n == 0 ? ": it closed the connection, refusing our proof" : "");
  }
  rep->status = (int32_t)le_get32(buf + 4);
  rep->size = le_get64(buf + 8);
  return mscclppSuccess;
}

mscclppResult_t fd_fetch(const uint8_t key[FD_KEY_BYTES], int my_rank, int owner, uint64_t id, uint64_t ekey,
                         int64_t timeout_ms, int* fd, uint64_t* size) {
  uint64_t deadline = time_deadline_ms(timeout_ms);
  int sock = -1, got = -1;
  MPP_CHECK(client_connect(key, owner, deadline, &sock));
  struct fd_request q = {.rank = my_rank, .owner = owner, .id = id, .key = ekey};
  uint8_t nonce[AUTH_NONCE_BYTES], req[FD_REQ_BYTES];
  char who[64];
  snprintf(who, sizeof(who), "the fd service of rank %d", owner);
  mscclppResult_t res = auth_random(nonce, sizeof(nonce));
  encode_request(&q, nonce, req);
  if (res == mscclppSuccess) res = auth_client(sock, key, req, sizeof(req), deadline, who);
  if (res != mscclppSuccess) goto out;
  struct fd_reply rep;
  MPP_CHECK_GOTO(client_recv(sock, owner, deadline, &rep, &got), res, out);
  if (rep.status != FD_OK || got < 0) {
    res = MPP_ERR(mscclppRemoteError, "fd fetch from rank %d: export %llu refused (%s)", owner, (unsigned long long)id,
                  rep.status == FD_NO_EXPORT ? "unknown export or wrong key; was the memory released?"
                  : rep.status == FD_BAD_REQUEST ? "request rejected: not a rank of its communicator"
                                                 : "no descriptor attached");
    if (got >= 0) close(got);
    goto out;
  }
  *fd = got;
  *size = rep.size;
out:
  close(sock);
  return res;
}

void fd_ref_encode(const struct fd_ref* e, uint8_t* out) {
  le_put64(out, e->id);
  le_put64(out + 8, e->key);
}

void fd_ref_decode(const uint8_t* in, struct fd_ref* e) {
  e->id = le_get64(in);
  e->key = le_get64(in + 8);
}
