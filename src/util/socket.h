/* socket.h - TCP sockets with bounded waits: addresses, listen/accept/connect, full sends and
 * receives against a deadline. Used by the bootstrap and the tcp transport. */
#ifndef MPP_UTIL_SOCKET_H_
#define MPP_UTIL_SOCKET_H_

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <mscclpp/core.h>

union sock_addr {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
};

/* Parses "a.b.c.d:port", "[v6]:port" or "hostname:port" (resolved, IPv4 preferred unless
 * MSCCLPP_SOCKET_FAMILY says otherwise). */
mscclppResult_t sock_parse_addr(const char* host_port, union sock_addr* out);

/* The address this host should listen on: MSCCLPP_SOCKET_IFNAME's interface when set (prefix
 * match; "=name" exact; "^name" excludes), else the first up non-loopback IPv4 interface, else
 * loopback. Port 0. */
mscclppResult_t sock_local_addr(union sock_addr* out);

/* Writes "ip:port" (IPv6 as "[ip]:port") into buf and returns buf. */
const char* sock_addr_str(const union sock_addr* addr, char* buf, size_t len);

/* Creates a listening socket bound to addr (port 0: any free port); *bound gets the actual
 * address. CLOEXEC and SO_REUSEADDR are set. */
mscclppResult_t sock_listen(const union sock_addr* addr, int* fd, union sock_addr* bound);

/* Accepts one connection, waiting at most until deadline_ns (time_now_ns() based). Timeout when
 * it passes. */
mscclppResult_t sock_accept(int listen_fd, uint64_t deadline_ns, int* fd);

/* Connects to addr, retrying refused or unreachable attempts until deadline_ns. TCP_NODELAY set. */
mscclppResult_t sock_connect(const union sock_addr* addr, uint64_t deadline_ns, int* fd);

/* Sends all len bytes, or fails: Timeout at the deadline, RemoteError when the peer is gone. */
mscclppResult_t sock_send_all(int fd, const void* buf, size_t len, uint64_t deadline_ns);

/* Receives exactly len bytes, or fails: Timeout at the deadline, RemoteError on EOF or reset. */
mscclppResult_t sock_recv_all(int fd, void* buf, size_t len, uint64_t deadline_ns);

/* Closes fd if >= 0 and sets it to -1. */
void sock_close(int* fd);

/* For an errno of a call that makes an fd: ", too many open files: raise ulimit -n (now N)" for
 * EMFILE, a system-wide variant for ENFILE, else "". Points to a thread-local buffer. */
const char* sock_fd_hint(int err);

#endif /* MPP_UTIL_SOCKET_H_ */
