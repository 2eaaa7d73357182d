/* fdpass.c - the fd service of fdpass.h: a thread answering fd requests on an abstract UNIX socket,
 * and the client side that fetches one fd. */
#include "transport/fdpass.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/bytes.h"
#include "util/err.h"
#include "util/log.h"
#include "util/timeutil.h"

#define FD_MAGIC 0x4446504du /* "MPFD" */
#define FD_SERVICE_IO_MS 2000 /* bound of one request's read and reply on the service side */

enum { FD_OK = 0, FD_BAD_REQUEST = 1, FD_NO_EXPORT = 2 };

struct fd_request {
  uint32_t magic;
  int32_t rank;
  uint64_t comm_id;
  uint64_t id;
  uint64_t key;
};

struct fd_reply {
  uint32_t magic;
  int32_t status;
  uint64_t size;
};

struct fd_export {
  uint64_t id, key, size;
  int fd;
};

struct fd_service {
  uint64_t comm_id;
  int rank, nranks;
  int listen_fd, wake_fd;
  pthread_t thread;
  pthread_mutex_t lock;
  struct fd_export* exports;
  size_t count, cap;
  uint64_t next_id;
};

/* 64 random bits from the kernel. */
static mscclppResult_t random_u64(uint64_t* out) {
  ssize_t n = getrandom(out, sizeof(*out), 0);
  if (n != (ssize_t)sizeof(*out)) return MPP_ERRNO(mscclppSystemError, errno, "getrandom");
  return mscclppSuccess;
}

/* The abstract socket address of rank's service; returns the address length. */
static socklen_t service_addr(uint64_t comm_id, int rank, struct sockaddr_un* sa) {
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "mscclpp-fd-%016llx-%d", (unsigned long long)comm_id, rank);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
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

/* Sends the reply, with fd attached when fd >= 0. */
static void send_reply(int conn, const struct fd_reply* rep, int fd) {
  struct iovec iov = {.iov_base = (void*)rep, .iov_len = sizeof(*rep)};
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
  if (sendmsg(conn, &msg, MSG_NOSIGNAL) < 0)
    LOG_INFO_(LOG_SUB_TRANSPORT, "fd service: reply failed: %s", strerror(errno));
}

/* Answers one request on conn (bounded by FD_SERVICE_IO_MS). */
static void serve_one(struct fd_service* s, int conn) {
  struct timeval tv = {.tv_sec = FD_SERVICE_IO_MS / 1000, .tv_usec = (FD_SERVICE_IO_MS % 1000) * 1000};
  setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  struct fd_request req;
  ssize_t n = recv(conn, &req, sizeof(req), MSG_WAITALL);
  struct fd_reply rep = {.magic = FD_MAGIC, .status = FD_BAD_REQUEST, .size = 0};
  if (n != (ssize_t)sizeof(req) || req.magic != FD_MAGIC || req.comm_id != s->comm_id || req.rank < 0 ||
      req.rank >= s->nranks || req.rank == s->rank) {
    log_msg(LOG_WARN, LOG_SUB_TRANSPORT, "fd service of rank %d: refused a malformed request (%zd bytes)", s->rank, n);
    send_reply(conn, &rep, -1);
    return;
  }
  pthread_mutex_lock(&s->lock);
  int fd = find_export(s, req.id, req.key, &rep.size);
  rep.status = fd >= 0 ? FD_OK : FD_NO_EXPORT;
  /* Sent under the lock: the fd cannot be closed by fd_service_remove while it is attached. */
  send_reply(conn, &rep, fd);
  pthread_mutex_unlock(&s->lock);
  if (fd < 0)
    log_msg(LOG_WARN, LOG_SUB_TRANSPORT, "fd service of rank %d: rank %d asked for export %llu with a wrong key or after release",
            s->rank, req.rank, (unsigned long long)req.id);
}

static void* service_main(void* arg) {
  struct fd_service* s = arg;
  for (;;) {
    struct pollfd p[2] = {{.fd = s->listen_fd, .events = POLLIN}, {.fd = s->wake_fd, .events = POLLIN}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      log_msg(LOG_WARN, LOG_SUB_TRANSPORT, "fd service of rank %d: poll: %s; stopping", s->rank, strerror(errno));
      break;
    }
    if (p[1].revents) break;
    if (!(p[0].revents & POLLIN)) continue;
    int conn = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (conn < 0) continue;
    serve_one(s, conn);
    close(conn);
  }
  return NULL;
}

mscclppResult_t fd_service_start(uint64_t comm_id, int rank, int nranks, struct fd_service** out) {
  struct fd_service* s = calloc(1, sizeof(*s));
  if (s == NULL) return MPP_ERR(mscclppSystemError, "fd service: out of host memory");
  *s = (struct fd_service){.comm_id = comm_id, .rank = rank, .nranks = nranks, .listen_fd = -1, .wake_fd = -1, .next_id = 1};
  pthread_mutex_init(&s->lock, NULL);
  mscclppResult_t res = mscclppSuccess;
  struct sockaddr_un sa;
  socklen_t len = service_addr(comm_id, rank, &sa);
  s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
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
static mscclppResult_t client_connect(uint64_t comm_id, int owner, uint64_t deadline_ns, int* out) {
  struct sockaddr_un sa;
  socklen_t len = service_addr(comm_id, owner, &sa);
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
  struct iovec iov = {.iov_base = rep, .iov_len = sizeof(*rep)};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
  ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
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
  if (n != (ssize_t)sizeof(*rep) || rep->magic != FD_MAGIC || (msg.msg_flags & MSG_CTRUNC)) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
    return MPP_ERR(mscclppRemoteError, "fd fetch from rank %d: malformed reply (%zd bytes)", owner, n);
  }
  return mscclppSuccess;
}

mscclppResult_t fd_fetch(uint64_t comm_id, int my_rank, int owner, uint64_t id, uint64_t key, int64_t timeout_ms,
                         int* fd, uint64_t* size) {
  uint64_t deadline = time_deadline_ms(timeout_ms);
  int sock = -1, got = -1;
  MPP_CHECK(client_connect(comm_id, owner, deadline, &sock));
  struct fd_request req = {.magic = FD_MAGIC, .rank = my_rank, .comm_id = comm_id, .id = id, .key = key};
  mscclppResult_t res = mscclppSuccess;
  if (send(sock, &req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req)) {
    res = MPP_ERRNO(mscclppRemoteError, errno, "fd fetch from rank %d: sending the request", owner);
    goto out;
  }
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
