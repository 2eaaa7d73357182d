/* tcpstore.c - the client side of PyTorch's TCPStore protocol, as far as the rendezvous needs it.
 *
 * The protocol (torch/csrc/distributed/c10d, both its classic and libuv servers): a client first
 * sends the query type VALIDATE and a 32-bit magic number; then each request is a one-byte query
 * type followed by its arguments, strings and byte strings as a 64-bit length and the bytes, all
 * integers in the host's byte order (the store only serves clients of its own architecture). SET
 * has no reply; CHECK replies one byte (READY or NOT_READY); GET replies a byte string. The server
 * keeps keys until deleted, so every key this library writes names the job's restart (see
 * launch_store.c). */
#include "bootstrap/tcpstore.h"

#include <string.h>
#include <time.h>

#include "util/err.h"
#include "util/socket.h"
#include "util/timeutil.h"

enum tcpstore_query { Q_VALIDATE = 0, Q_SET = 1, Q_GET = 3, Q_CHECK = 5 };
enum { CHECK_READY = 0, CHECK_NOT_READY = 1 };
static const uint32_t TCPSTORE_MAGIC = 0x3C85F7CEu;
#define TCPSTORE_MAX_VALUE (1u << 20) /* what this library ever stores: a unique id or a message */

static mscclppResult_t send_u8(int fd, uint8_t v, uint64_t deadline) { return sock_send_all(fd, &v, 1, deadline); }

static mscclppResult_t send_bytes(int fd, const void* p, size_t len, uint64_t deadline) {
  uint64_t n = len;
  MPP_CHECK(sock_send_all(fd, &n, sizeof(n), deadline));
  return len ? sock_send_all(fd, p, len, deadline) : mscclppSuccess;
}

mscclppResult_t tcpstore_connect(const char* host_port, uint64_t deadline_ns, int* fd) {
  union sock_addr addr;
  MPP_CHECK(sock_parse_addr(host_port, &addr));
  MPP_CHECK(sock_connect(&addr, deadline_ns, fd));
  uint8_t hello[1 + sizeof(uint32_t)] = {Q_VALIDATE};
  memcpy(hello + 1, &TCPSTORE_MAGIC, sizeof(uint32_t));
  mscclppResult_t res = sock_send_all(*fd, hello, sizeof(hello), deadline_ns);
  if (res != mscclppSuccess) sock_close(fd);
  return res;
}

mscclppResult_t tcpstore_set(int fd, const char* key, const void* value, size_t len, uint64_t deadline_ns) {
  MPP_CHECK(send_u8(fd, Q_SET, deadline_ns));
  MPP_CHECK(send_bytes(fd, key, strlen(key), deadline_ns));
  return send_bytes(fd, value, len, deadline_ns);
}

/* CHECK for one key: *ready is 1 when it exists. */
static mscclppResult_t check_key(int fd, const char* key, int* ready, uint64_t deadline_ns) {
  uint64_t nkeys = 1;
  MPP_CHECK(send_u8(fd, Q_CHECK, deadline_ns));
  MPP_CHECK(sock_send_all(fd, &nkeys, sizeof(nkeys), deadline_ns));
  MPP_CHECK(send_bytes(fd, key, strlen(key), deadline_ns));
  uint8_t reply = 0xff;
  MPP_CHECK(sock_recv_all(fd, &reply, 1, deadline_ns));
  if (reply != CHECK_READY && reply != CHECK_NOT_READY)
    return MPP_ERR(mscclppRemoteError, "launcher's store: unexpected reply %u to a check of \"%s\" (not a torch TCPStore?)",
                   reply, key);
  *ready = reply == CHECK_READY;
  return mscclppSuccess;
}

/* Polls CHECK until key exists, sleeping 1 ms at first and up to 20 ms between polls (a rendezvous
 * waits for rank 0's process to start: seconds, not microseconds). */
static mscclppResult_t wait_key(int fd, const char* key, uint64_t deadline_ns) {
  long nap_us = 1000;
  for (;;) {
    int ready = 0;
    MPP_CHECK(check_key(fd, key, &ready, deadline_ns));
    if (ready) return mscclppSuccess;
    if (time_now_ns() >= deadline_ns)
      return MPP_ERR(mscclppTimeout, "launcher's store: key \"%s\" did not appear before the bootstrap timeout", key);
    struct timespec ts = {0, nap_us * 1000};
    nanosleep(&ts, NULL);
    nap_us = nap_us * 2 > 20000 ? 20000 : nap_us * 2;
  }
}

mscclppResult_t tcpstore_wait_get(int fd, const char* key, void* buf, size_t cap, size_t* len, uint64_t deadline_ns) {
  MPP_CHECK(wait_key(fd, key, deadline_ns));
  MPP_CHECK(send_u8(fd, Q_GET, deadline_ns));
  MPP_CHECK(send_bytes(fd, key, strlen(key), deadline_ns));
  uint64_t n = 0;
  MPP_CHECK(sock_recv_all(fd, &n, sizeof(n), deadline_ns));
  if (n > cap || n > TCPSTORE_MAX_VALUE)
    return MPP_ERR(mscclppInternalError, "launcher's store: value of \"%s\" has %llu bytes, more than the %zu expected",
                   key, (unsigned long long)n, cap);
  *len = (size_t)n;
  return n ? sock_recv_all(fd, buf, (size_t)n, deadline_ns) : mscclppSuccess;
}
