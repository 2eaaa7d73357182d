/* socket.c - bounded TCP socket helpers (see socket.h). */
#include "util/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/timeutil.h"

static socklen_t addr_len(const union sock_addr* a) {
  return a->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static int wanted_family(void) {
  const char* f = param_str(PARAM_SOCKET_FAMILY);
  if (strcmp(f, "AF_INET6") == 0) return AF_INET6;
  if (strcmp(f, "AF_INET") == 0) return AF_INET;
  return AF_UNSPEC;
}

const char* sock_addr_str(const union sock_addr* addr, char* buf, size_t len) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (addr->sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &addr->sin6.sin6_addr, ip, sizeof(ip));
    snprintf(buf, len, "[%s]:%u", ip, ntohs(addr->sin6.sin6_port));
  } else {
    inet_ntop(AF_INET, &addr->sin.sin_addr, ip, sizeof(ip));
    snprintf(buf, len, "%s:%u", ip, ntohs(addr->sin.sin_port));
  }
  return buf;
}

/* Splits "host:port" / "[v6]:port" into host and port text. */
static mscclppResult_t split_host_port(const char* s, char* host, size_t hlen, char* port, size_t plen) {
  const char* colon;
  const char* hstart = s;
  size_t hsize;
  if (s[0] == '[') {
    const char* close = strchr(s, ']');
    if (!close || close[1] != ':') return MPP_ERR(mscclppInvalidArgument, "address \"%s\": expected [ipv6]:port", s);
    hstart = s + 1;
    hsize = (size_t)(close - hstart);
    colon = close + 1;
  } else {
    colon = strrchr(s, ':');
    if (!colon) return MPP_ERR(mscclppInvalidArgument, "address \"%s\": expected host:port", s);
    hsize = (size_t)(colon - s);
  }
  if (hsize == 0 || hsize >= hlen || strlen(colon + 1) == 0 || strlen(colon + 1) >= plen)
    return MPP_ERR(mscclppInvalidArgument, "address \"%s\": empty or too long host or port", s);
  memcpy(host, hstart, hsize);
  host[hsize] = '\0';
  strcpy(port, colon + 1);
  return mscclppSuccess;
}

mscclppResult_t sock_parse_addr(const char* host_port, union sock_addr* out) {
  MPP_CHECK_ARG(host_port != NULL && out != NULL, "sock_parse_addr: NULL argument");
  char host[256], port[16];
  MPP_CHECK(split_host_port(host_port, host, sizeof(host), port, sizeof(port)));
  char* end = NULL;
  long p = strtol(port, &end, 10);
  if (*end != '\0' || p < 0 || p > 65535)
    return MPP_ERR(mscclppInvalidArgument, "address \"%s\": port \"%s\" is not in 0..65535", host_port, port);
  struct addrinfo hints = {.ai_family = wanted_family(), .ai_socktype = SOCK_STREAM};
  struct addrinfo* res = NULL;
  int rc = getaddrinfo(host, port, &hints, &res);
  if (rc != 0 || !res)
    return MPP_ERR(mscclppInvalidArgument, "address \"%s\": cannot resolve \"%s\": %s", host_port, host,
                   gai_strerror(rc));
  struct addrinfo* pick = res;
  for (struct addrinfo* ai = res; ai; ai = ai->ai_next)
    if (ai->ai_family == AF_INET) { pick = ai; break; } /* IPv4 first unless the family is forced */
  memset(out, 0, sizeof(*out));
  memcpy(out, pick->ai_addr, pick->ai_addrlen <= sizeof(*out) ? pick->ai_addrlen : sizeof(*out));
  freeaddrinfo(res);
  return mscclppSuccess;
}

/* Does interface `name` pass the MSCCLPP_SOCKET_IFNAME filter? */
static int ifname_matches(const char* filter, const char* name) {
  if (!filter[0]) return 1;
  int exclude = filter[0] == '^';
  const char* f = filter + exclude;
  int exact = f[0] == '=';
  f += exact;
  int hit = exact ? strcmp(name, f) == 0 : strncmp(name, f, strlen(f)) == 0;
  return exclude ? !hit : hit;
}

mscclppResult_t sock_local_addr(union sock_addr* out) {
  const char* filter = param_str(PARAM_SOCKET_IFNAME);
  int family = wanted_family();
  struct ifaddrs* ifs = NULL;
  if (getifaddrs(&ifs) != 0) return MPP_ERRNO(mscclppSystemError, errno, "getifaddrs");
  int found = 0;
  for (int pass = 0; pass < 2 && !found; pass++) { /* pass 0: non-loopback; pass 1: loopback */
    for (struct ifaddrs* i = ifs; i && !found; i = i->ifa_next) {
      if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
      int fam = i->ifa_addr->sa_family;
      if (fam != AF_INET && fam != AF_INET6) continue;
      if (family != AF_UNSPEC ? fam != family : fam != AF_INET) continue;
      if (((i->ifa_flags & IFF_LOOPBACK) != 0) != (pass == 1) && !filter[0]) continue;
      if (!ifname_matches(filter, i->ifa_name)) continue;
      if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6*)i->ifa_addr)->sin6_addr)) continue;
      memset(out, 0, sizeof(*out));
      memcpy(out, i->ifa_addr, fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
      found = 1;
    }
  }
  freeifaddrs(ifs);
  if (!found)
    return MPP_ERR(mscclppInvalidUsage, "no usable network interface%s%s", filter[0] ? " matches MSCCLPP_SOCKET_IFNAME=" : "",
                   filter);
  return mscclppSuccess;
}

mscclppResult_t sock_listen(const union sock_addr* addr, int* fd, union sock_addr* bound) {
  char text[80];
  int s = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    int e = errno;
    return MPP_ERRNO(mscclppSystemError, e, "socket() for listening on %s%s", sock_addr_str(addr, text, sizeof(text)),
                     sock_fd_hint(e));
  }
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(s, &addr->sa, addr_len(addr)) != 0 || listen(s, 512) != 0) {
    int e = errno;
    close(s);
    return MPP_ERRNO(mscclppSystemError, e, "cannot listen on %s", sock_addr_str(addr, text, sizeof(text)));
  }
  if (bound) {
    socklen_t len = sizeof(*bound);
    memset(bound, 0, sizeof(*bound));
    getsockname(s, &bound->sa, &len);
  }
  *fd = s;
  return mscclppSuccess;
}

/* Waits for `events` on fd until the deadline. Timeout when it passes. */
static mscclppResult_t wait_fd(int fd, short events, uint64_t deadline_ns, const char* what) {
  for (;;) {
    int64_t left = time_left_ms(deadline_ns);
    if (left <= 0) return MPP_ERR(mscclppTimeout, "timed out waiting to %s (fd %d)", what, fd);
    struct pollfd p = {.fd = fd, .events = events};
    int rc = poll(&p, 1, left > 1000 ? 1000 : (int)left);
    if (rc > 0) return mscclppSuccess;
    if (rc < 0 && errno != EINTR) return MPP_ERRNO(mscclppSystemError, errno, "poll() to %s", what);
  }
}

mscclppResult_t sock_accept(int listen_fd, uint64_t deadline_ns, int* fd) {
  for (;;) {
    MPP_CHECK(wait_fd(listen_fd, POLLIN, deadline_ns, "accept a connection"));
    int s = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (s >= 0) {
      int one = 1;
      setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      *fd = s;
      return mscclppSuccess;
    }
    if (errno == EINVAL || errno == EBADF)
      return MPP_ERRNO(mscclppAborted, errno, "listening socket closed while accepting");
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
      int e = errno;
      return MPP_ERRNO(mscclppSystemError, e, "accept()%s", sock_fd_hint(e));
    }
  }
}

/* One non-blocking connect attempt bounded by the deadline; returns 0 or an errno. */
static int connect_once(const union sock_addr* addr, uint64_t deadline_ns, int* fd) {
  int s = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return errno;
  int rc = connect(s, &addr->sa, addr_len(addr));
  int e = rc == 0 ? 0 : errno;
  if (e == EINPROGRESS) {
    struct pollfd p = {.fd = s, .events = POLLOUT};
    int64_t left = time_left_ms(deadline_ns);
    rc = poll(&p, 1, left > 0 ? (int)(left > 1000 ? 1000 : left) : 0);
    socklen_t len = sizeof(e);
    if (rc <= 0)
      e = ETIMEDOUT;
    else if (getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
      e = errno;
  }
  if (e != 0) {
    close(s);
    return e;
  }
  fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  *fd = s;
  return 0;
}

mscclppResult_t sock_connect(const union sock_addr* addr, uint64_t deadline_ns, int* fd) {
  char text[80];
  int e = 0;
  unsigned backoff_us = 1000;
  for (;;) {
    e = connect_once(addr, deadline_ns, fd);
    if (e == 0) return mscclppSuccess;
    if (e != ECONNREFUSED && e != ETIMEDOUT && e != EHOSTUNREACH && e != ENETUNREACH && e != EAGAIN &&
        e != ECONNRESET)
      return MPP_ERRNO(mscclppSystemError, e, "connect to %s%s", sock_addr_str(addr, text, sizeof(text)), sock_fd_hint(e));
    if (time_left_ms(deadline_ns) <= 0) break;
    usleep(backoff_us);
    if (backoff_us < 100000) backoff_us *= 2;
  }
  return MPP_ERRNO(mscclppTimeout, e, "timed out connecting to %s", sock_addr_str(addr, text, sizeof(text)));
}

mscclppResult_t sock_send_all(int fd, const void* buf, size_t len, uint64_t deadline_ns) {
  const char* p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      MPP_CHECK(wait_fd(fd, POLLOUT, deadline_ns, "send"));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return MPP_ERRNO(mscclppRemoteError, errno, "send of %zu bytes on fd %d failed (peer gone?)", len, fd);
  }
  return mscclppSuccess;
}

mscclppResult_t sock_recv_all(int fd, void* buf, size_t len, uint64_t deadline_ns) {
  char* p = buf;
  size_t want = len;
  while (len > 0) {
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n == 0)
      return MPP_ERR(mscclppRemoteError, "connection closed by peer after %zu of %zu bytes (fd %d)", want - len, want, fd);
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      MPP_CHECK(wait_fd(fd, POLLIN, deadline_ns, "receive"));
      continue;
    }
    if (errno == EINTR) continue;
    return MPP_ERRNO(mscclppRemoteError, errno, "recv of %zu bytes on fd %d failed", want, fd);
  }
  return mscclppSuccess;
}

void sock_close(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

const char* sock_fd_hint(int err) {
  static _Thread_local char buf[96];
  struct rlimit rl;
  if (err == EMFILE && getrlimit(RLIMIT_NOFILE, &rl) == 0)
    snprintf(buf, sizeof(buf), ", too many open files: raise ulimit -n (now %llu)", (unsigned long long)rl.rlim_cur);
  else if (err == EMFILE || err == ENFILE)
    snprintf(buf, sizeof(buf), ", too many open files %s", err == ENFILE ? "on this system (raise fs.file-max)" : ": raise ulimit -n");
  else
    buf[0] = '\0';
  return buf;
}
