/* tcp.c - the tcp transport: any registered memory of any host, written by the owner's receiving
 * thread. Each connection is two sockets, one per direction, so that neither side's receiver ever
 * waits for the other's sender:
 *   out_fd  our WRITE/UPDATE/FLUSH/READ messages to the peer; the peer's receiver answers FLUSH with
 *           ACK and READ with DATA (the bytes, or a failure status) on the same socket, and our
 *           flush or read waits for the answer;
 *   in_fd   the peer's messages, applied by our receiving thread to regions of the communicator's
 *           region table (tcp_regions.c) (checked: region exists, offset+size inside it, updates 8-byte aligned).
 * Messages are a 32-byte header (host byte order: both hosts must share it), WRITE followed by its
 * data. The receiver applies messages in order, so an UPDATE lands after every earlier WRITE, and a
 * FLUSH is acknowledged after everything before it was applied. A receiver-side failure (bad
 * region) is reported in the next ACK, so the sender's flush returns it. Both sockets start with a
 * handshake (util/auth.h) keyed by the communicator's key: a connection that cannot prove it is
 * refused before anything is read from or written to it. */
#include <errno.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sys/cudawrap.h"
#include "transport/tcp_regions.h"
#include "transport/transport.h"
#include "util/auth.h"
#include "util/bytes.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/socket.h"
#include "util/timeutil.h"

#define TCP_MAGIC 0x4354504du /* "MPTC" */
#define TCP_CHUNK (1u << 20)  /* staging buffer of the receiver and of device sources */
#define TCP_HELLO_MS 5000     /* bound of the wait for an accepted connection's HELLO */

/* What tcp adds to a buffer's description: the id of the region in the owner's table. */
struct tcp_part {
  uint64_t region_id;
};
_Static_assert(sizeof(struct tcp_part) <= TRANSPORT_PART_BYTES, "tcp's part must fit");

static struct tcp_part* tcp_part(struct regmem_desc* d) { return (struct tcp_part*)(void*)&d->part[mscclppTransportTCP]; }
static uint64_t region_of(const struct transport_mem* mem) {
  return ((const struct tcp_part*)(const void*)&mem->d.part[mscclppTransportTCP])->region_id;
}
/* The communicator's region table (tcp's state slot). */
static struct region_table* regions_of(struct transport_comm* tc) { return tc->state[mscclppTransportTCP]; }

enum tcp_type { TCP_HELLO = 1, TCP_WRITE = 2, TCP_UPDATE = 3, TCP_FLUSH = 4, TCP_ACK = 5, TCP_READ = 6, TCP_DATA = 7 };

struct tcp_hdr {
  uint32_t type;
  uint32_t status;  /* ACK: first failure (mscclppResult_t) since the last ACK */
  uint64_t region;  /* WRITE/UPDATE/READ: region id; ACK: region of the failure */
  uint64_t offset;  /* WRITE/UPDATE/READ: offset in the region; ACK: of the failure */
  uint64_t arg;     /* WRITE/DATA: bytes that follow; READ: bytes asked; UPDATE: value; FLUSH/ACK: sequence */
};

struct tcp_conn {
  struct transport_conn* conn;
  int out_fd, in_fd;
  pthread_t thread;
  int thread_started;
  atomic_int dead;   /* the receiver saw in_fd close or fail: the peer is gone */
  int broken;        /* out_fd failed mid-message: later calls fail */
  uint64_t flush_seq;
  char* rbuf;        /* receiver's staging chunk */
  char* sbuf;        /* sender's staging chunk for GPU sources (lazily) */
  /* The receiver's first failure since the last ACK, reported in the next ACK. */
  uint32_t fail_status;
  uint64_t fail_region, fail_offset;
};

/* Receives exactly len bytes; 0 on success, 1 on a clean EOF before the first byte, -1 on error
 * or EOF later. Blocks without a bound (used for the idle wait for the next message header; close
 * and abort wake it by shutting the socket down). */
static int recv_blocking(int fd, void* buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = recv(fd, (char*)buf + got, len - got, 0);
    if (n > 0) {
      got += (size_t)n;
    } else if (n == 0) {
      return got == 0 ? 1 : -1;
    } else if (errno != EINTR) {
      return -1;
    }
  }
  return 0;
}

static int64_t io_timeout_ms(void) { return param_int(PARAM_FLUSH_TIMEOUT); }


/* Records the first receiver-side failure since the last ACK. */
static void note_failure(struct tcp_conn* t, mscclppResult_t res, const struct tcp_hdr* h) {
  if (t->fail_status != 0) return;
  t->fail_status = (uint32_t)res;
  t->fail_region = h->region;
  t->fail_offset = h->offset;
}

/* Applies one WRITE: receives its data in chunks and copies each into the region (a region that
 * fails the check still has its data drained, so the stream stays in step). 0, or -1 when the
 * socket failed. */
static int apply_write(struct tcp_conn* t, const struct tcp_hdr* h) {
  struct region_table* regions = regions_of(t->conn->tc);
  mscclppResult_t failed = mscclppSuccess;
  for (uint64_t done = 0; done < h->arg;) {
    size_t n = (size_t)(h->arg - done < TCP_CHUNK ? h->arg - done : TCP_CHUNK);
    /* Each chunk is bounded on its own: a stalled peer is noticed, a slow one is not cut off. */
    if (sock_recv_all(t->in_fd, t->rbuf, n, time_deadline_ms(io_timeout_ms())) != mscclppSuccess) return -1;
    if (failed == mscclppSuccess && h->offset + done >= h->offset)
      failed = region_write(regions, h->region, h->offset + done, t->rbuf, n);
    done += n;
  }
  if (failed != mscclppSuccess) note_failure(t, failed, h);
  return 0;
}

/* Answers one READ with DATA on in_fd: the bytes, read from the region in chunks, or (region or
 * range refused) a failure status and no bytes. 0, or -1 when the socket failed. */
static int answer_read(struct tcp_conn* t, const struct tcp_hdr* h) {
  struct region_table* regions = regions_of(t->conn->tc);
  uint64_t deadline = time_deadline_ms(io_timeout_ms());
  mscclppResult_t res = region_check(regions, h->region, h->offset, h->arg);
  if (res != mscclppSuccess)
    log_msg(LOG_WARN, LOG_SUB_TRANSPORT, "tcp: refused rank %d's read: %s", t->conn->peer, err_last());
  struct tcp_hdr d = {.type = TCP_DATA, .status = (uint32_t)res, .region = h->region, .offset = h->offset,
                      .arg = res == mscclppSuccess ? h->arg : 0};
  if (sock_send_all(t->in_fd, &d, sizeof(d), deadline) != mscclppSuccess) return -1;
  for (uint64_t done = 0; done < d.arg;) {
    size_t n = (size_t)(d.arg - done < TCP_CHUNK ? d.arg - done : TCP_CHUNK);
    /* Checked above; a region released meanwhile reads as zeros rather than desynchronizing the stream. */
    if (region_read(regions, h->region, h->offset + done, t->rbuf, n) != mscclppSuccess) memset(t->rbuf, 0, n);
    if (sock_send_all(t->in_fd, t->rbuf, n, time_deadline_ms(io_timeout_ms())) != mscclppSuccess) return -1;
    done += n;
  }
  return 0;
}

/* Applies one message of the peer; 0, or -1 when the connection cannot go on. */
static int apply_message(struct tcp_conn* t, const struct tcp_hdr* h) {
  struct region_table* regions = regions_of(t->conn->tc);
  switch (h->type) {
    case TCP_WRITE: return apply_write(t, h);
    case TCP_UPDATE: {
      mscclppResult_t res = region_store64(regions, h->region, h->offset, h->arg);
      if (res != mscclppSuccess) note_failure(t, res, h);
      return 0;
    }
    case TCP_READ: return answer_read(t, h);
    case TCP_FLUSH: {
      struct tcp_hdr ack = {.type = TCP_ACK, .status = t->fail_status, .region = t->fail_region,
                            .offset = t->fail_offset, .arg = h->arg};
      t->fail_status = 0;
      return sock_send_all(t->in_fd, &ack, sizeof(ack), time_deadline_ms(io_timeout_ms())) == mscclppSuccess ? 0 : -1;
    }
    default:
      log_msg(LOG_WARN, LOG_SUB_TRANSPORT, "tcp: rank %d sent an unknown message type %u; closing the connection",
              t->conn->peer, h->type);
      return -1;
  }
}

static void* receiver_main(void* arg) {
  struct tcp_conn* t = arg;
#if MSCCLPP_HAVE_CUDA
  /* Regions in GPU memory are written with cudaMemcpy, on this rank's device. */
  if (t->conn->tc->cuda_dev >= 0 && cu_available()) (void)cudaSetDevice(t->conn->tc->cuda_dev);
#endif
  for (;;) {
    struct tcp_hdr h;
    int r = recv_blocking(t->in_fd, &h, sizeof(h));
    if (r == 0 && apply_message(t, &h) == 0) continue;
    if (r != 1) LOG_INFO_(LOG_SUB_TRANSPORT, "tcp: connection from rank %d failed", t->conn->peer);
    break;
  }
  /* Release: a thread that sees dead == 1 (acquire) also sees every update applied before it. */
  atomic_store_explicit(&t->dead, 1, memory_order_release);
  return NULL;
}

/* Exchanges listening addresses with the peer through the bootstrap. */
static mscclppResult_t exchange_addr(struct transport_conn* conn, const union sock_addr* mine, union sock_addr* theirs) {
  MPP_CHECK(bootstrap_swap(conn->tc->boot, conn->peer, boot_tag(BOOT_TAG_TCP, conn->tag), mine, theirs, sizeof(*mine)));
  sa_family_t fam = theirs->sa.sa_family;
  if (fam != AF_INET && fam != AF_INET6)
    return MPP_ERR(mscclppRemoteError, "tcp: rank %d sent a malformed address (family %d)", conn->peer, (int)fam);
  return mscclppSuccess;
}

/* The hello of a tcp connection's handshake (util/auth.h), 40 B little endian: u32 "MPTC",
 * u16 TCP_HELLO_VERSION, u16 0, i32 sender rank, i32 receiver rank, i32 tag, u32 0, 16 B nonce.
 * The handshake's key is the communicator's (tcp_key), so the hello needs no communicator id. */
#define TCP_HELLO_BYTES 40
#define TCP_HELLO_VERSION 2
#define TCP_LIVENESS_MS 200 /* how often a connection wait asks the bootstrap whether a rank died */

static void tcp_hello(int from, int to, int tag, const uint8_t nonce[AUTH_NONCE_BYTES], uint8_t out[TCP_HELLO_BYTES]) {
  memset(out, 0, TCP_HELLO_BYTES);
  le_put32(out, TCP_MAGIC);
  le_put16(out + 4, TCP_HELLO_VERSION);
  le_put32(out + 8, (uint32_t)from);
  le_put32(out + 12, (uint32_t)to);
  le_put32(out + 16, (uint32_t)tag);
  memcpy(out + 24, nonce, AUTH_NONCE_BYTES);
}

static mscclppResult_t tcp_key(struct transport_conn* conn, uint8_t key[AUTH_KEY_BYTES]) {
  return bootstrap_derive_key(conn->tc->boot, "mscclpp-tcp-v1", conn->tc->comm_id, key);
}

static struct log_rate tcp_refusals; /* refusals of every tcp listener of this process */

/* Reads a hello from a fresh connection and runs the accepting side of the handshake: the
 * connection must be the peer's, for this connection's tag, and prove the communicator's key. */
static mscclppResult_t accept_hello(struct transport_conn* conn, const uint8_t* key, int fd, uint64_t deadline) {
  uint8_t h[TCP_HELLO_BYTES];
  char who[64];
  snprintf(who, sizeof(who), "a connection claiming to be rank %d's", conn->peer);
  int quiet = err_quiet(1); /* a stranger's failure is logged once, rate-limited, by accept_peer */
  mscclppResult_t res = sock_recv_all(fd, h, sizeof(h), deadline);
  if (res == mscclppSuccess && (le_get32(h) != TCP_MAGIC || le_get16(h + 4) != TCP_HELLO_VERSION ||
                                le_get32(h + 8) != (uint32_t)conn->peer || le_get32(h + 12) != (uint32_t)conn->tc->rank ||
                                le_get32(h + 16) != (uint32_t)conn->tag))
    res = MPP_ERR(mscclppRemoteError, "not a hello of rank %d for tag %d of this library version", conn->peer, conn->tag);
  if (res == mscclppSuccess) res = auth_server(fd, key, h, sizeof(h), deadline, who);
  err_quiet(quiet);
  return res;
}

/* Accepts one connection on lfd by the deadline, in slices of TCP_LIVENESS_MS between which the
 * bootstrap is asked whether a rank died or failed: a peer that dies before it connects fails this
 * wait at once, naming the rank, rather than at the transport's timeout. */
static mscclppResult_t accept_alive(struct transport_conn* conn, int lfd, uint64_t deadline, int* fd) {
  for (;;) {
    uint64_t slice = time_deadline_ms(TCP_LIVENESS_MS);
    int quiet = err_quiet(1); /* a slice's timeout is no error of ours */
    mscclppResult_t res = sock_accept(lfd, slice < deadline ? slice : deadline, fd);
    err_quiet(quiet);
    if (res != mscclppTimeout || time_now_ns() >= deadline) {
      if (res == mscclppTimeout) return MPP_ERR(res, "tcp: rank %d (tag %d) did not connect in time", conn->peer, conn->tag);
      return res;
    }
    MPP_CHECK(bootstrap_health(conn->tc->boot));
  }
}

/* Accepts on lfd until the peer's connection arrives and passes accept_hello. Anything else is
 * closed (logged with a rate limit) and the wait goes on. */
static mscclppResult_t accept_peer(struct transport_conn* conn, const uint8_t* key, int lfd, uint64_t deadline, int* out) {
  for (;;) {
    int fd = -1;
    MPP_CHECK(accept_alive(conn, lfd, deadline, &fd));
    /* A stranger that connects and stays silent holds us up for at most a few seconds. */
    uint64_t hello_deadline = time_deadline_ms(TCP_HELLO_MS) < deadline ? time_deadline_ms(TCP_HELLO_MS) : deadline;
    if (accept_hello(conn, key, fd, hello_deadline) == mscclppSuccess) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* ACKs must not wait for Nagle */
      *out = fd;
      return mscclppSuccess;
    }
    log_limited(&tcp_refusals, LOG_WARN, LOG_SUB_TRANSPORT, "refused tcp transport connections",
                "tcp: refused a connection that is not rank %d's (tag %d) of this communicator: %s", conn->peer,
                conn->tag, err_last());
    sock_close(&fd);
  }
}

/* Connects out_fd to the peer's listener and runs the connecting side of the handshake. */
static mscclppResult_t connect_peer(struct transport_conn* conn, const uint8_t* key, const union sock_addr* theirs,
                                    uint64_t deadline, int* out) {
  for (;;) { /* in slices, as accept_alive: a dead peer's refusals end the wait at once */
    uint64_t slice = time_deadline_ms(TCP_LIVENESS_MS);
    int quiet = err_quiet(1);
    mscclppResult_t res = sock_connect(theirs, slice < deadline ? slice : deadline, out);
    err_quiet(quiet);
    if (res == mscclppSuccess) break;
    if (res != mscclppTimeout || time_now_ns() >= deadline) {
      char why[512];
      snprintf(why, sizeof(why), "%s", err_last());
      return MPP_ERR(res, "tcp: connecting to rank %d (tag %d): %s", conn->peer, conn->tag, why);
    }
    MPP_CHECK(bootstrap_health(conn->tc->boot));
  }
  uint8_t nonce[AUTH_NONCE_BYTES], h[TCP_HELLO_BYTES];
  MPP_CHECK(auth_random(nonce, sizeof(nonce)));
  tcp_hello(conn->tc->rank, conn->peer, conn->tag, nonce, h);
  char who[64];
  snprintf(who, sizeof(who), "tcp: rank %d (tag %d)", conn->peer, conn->tag);
  return auth_client(*out, key, h, sizeof(h), deadline, who);
}

/* Sets up out_fd (to the peer's listener) and in_fd (from the peer) through the bootstrap. Each
 * handshake needs its server to answer: the lower rank connects first while the higher accepts,
 * then the other way round. */
static mscclppResult_t open_sockets(struct transport_conn* conn, struct tcp_conn* t) {
  uint64_t deadline = time_deadline_ms(conn->tc->timeout_ms);
  union sock_addr local, bound, theirs;
  uint8_t key[AUTH_KEY_BYTES];
  int lfd = -1;
  mscclppResult_t res = mscclppSuccess;
  MPP_CHECK(tcp_key(conn, key));
  MPP_CHECK(sock_local_addr(&local));
  MPP_CHECK(sock_listen(&local, &lfd, &bound));
  MPP_CHECK_GOTO(exchange_addr(conn, &bound, &theirs), res, out);
  if (conn->tc->rank < conn->peer) {
    MPP_CHECK_GOTO(connect_peer(conn, key, &theirs, deadline, &t->out_fd), res, out);
    MPP_CHECK_GOTO(accept_peer(conn, key, lfd, deadline, &t->in_fd), res, out);
  } else {
    MPP_CHECK_GOTO(accept_peer(conn, key, lfd, deadline, &t->in_fd), res, out);
    MPP_CHECK_GOTO(connect_peer(conn, key, &theirs, deadline, &t->out_fd), res, out);
  }
out:
  sock_close(&lfd);
  return res;
}

static void tcp_free(struct tcp_conn* t) {
  sock_close(&t->out_fd);
  sock_close(&t->in_fd);
  free(t->rbuf);
  free(t->sbuf);
  free(t);
}

static mscclppResult_t tcp_connect(struct transport_conn* conn) {
  struct tcp_conn* t = calloc(1, sizeof(*t));
  if (t == NULL) return MPP_ERR(mscclppSystemError, "tcp: out of host memory");
  t->conn = conn;
  t->out_fd = t->in_fd = -1;
  mscclppResult_t res = mscclppSuccess;
  t->rbuf = malloc(TCP_CHUNK);
  if (t->rbuf == NULL) {
    res = MPP_ERR(mscclppSystemError, "tcp: out of host memory");
    goto err_free;
  }
  MPP_CHECK_GOTO(open_sockets(conn, t), res, err_free);
  int e = pthread_create(&t->thread, NULL, receiver_main, t);
  if (e != 0) {
    res = MPP_ERRNO(mscclppSystemError, e, "tcp: starting the receiving thread for rank %d", conn->peer);
    goto err_free;
  }
  t->thread_started = 1;
  conn->priv = t;
  return mscclppSuccess;
err_free:
  tcp_free(t);
  return res;
}

/* Drains what is left to read on fd without blocking (late ACKs), so that closing it sends FIN
 * rather than RST, which could cost the peer data it has not read yet. */
static void drain(int fd) {
  char buf[256];
  while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
  }
}

/* Normal close: our out direction ends with FIN after all data (the peer's receiver applies it and
 * exits); our receiver is woken by shutting in_fd down. Abort: both directions are cut at once. */
static void tcp_close(struct transport_conn* conn, int abort) {
  struct tcp_conn* t = conn->priv;
  if (t == NULL) return;
  if (abort) {
    shutdown(t->out_fd, SHUT_RDWR);
  } else {
    shutdown(t->out_fd, SHUT_WR);
    drain(t->out_fd);
  }
  shutdown(t->in_fd, SHUT_RDWR);
  if (t->thread_started) pthread_join(t->thread, NULL);
  tcp_free(t);
  conn->priv = NULL;
}

/* RemoteError when the connection cannot carry more messages. */
static mscclppResult_t tcp_status(struct transport_conn* conn) {
  struct tcp_conn* t = conn->priv;
  if (t->broken)
    return MPP_ERR(mscclppRemoteError, "tcp connection to rank %d (tag %d) failed earlier; it is unusable", conn->peer,
                   conn->tag);
  /* Acquire: pairs with the receiver's release store of dead. */
  if (atomic_load_explicit(&t->dead, memory_order_acquire))
    return MPP_ERR(mscclppRemoteError, "tcp connection to rank %d (tag %d) was closed by the peer (exited or destroyed it)",
                   conn->peer, conn->tag);
  return mscclppSuccess;
}

/* Sends len bytes of a message; a failure leaves the stream out of step, so it breaks the
 * connection. */
static mscclppResult_t send_part(struct tcp_conn* t, const void* buf, size_t len, uint64_t deadline) {
  mscclppResult_t res = sock_send_all(t->out_fd, buf, len, deadline);
  if (res != mscclppSuccess) t->broken = 1;
  return res;
}

/* Sends a WRITE's size bytes in chunks, each bounded by MSCCLPP_FLUSH_TIMEOUT (a stalled peer is
 * noticed; a slow but moving one is not cut off). GPU memory is staged through sbuf. */
static mscclppResult_t send_payload(struct tcp_conn* t, const char* src, int dev, uint64_t size) {
  if (dev >= 0 && t->sbuf == NULL && (t->sbuf = malloc(TCP_CHUNK)) == NULL) {
    t->broken = 1; /* the header is out already */
    return MPP_ERR(mscclppSystemError, "tcp: out of host memory for staging");
  }
  for (uint64_t done = 0; done < size;) {
    size_t n = (size_t)(size - done < TCP_CHUNK ? size - done : TCP_CHUNK);
    const char* from = src + done;
    if (dev >= 0) {
      mscclppResult_t res = mem_copy(t->sbuf, -1, from, dev, n);
      if (res != mscclppSuccess) {
        t->broken = 1;
        return res;
      }
      from = t->sbuf;
    }
    MPP_CHECK(send_part(t, from, n, time_deadline_ms(io_timeout_ms())));
    done += n;
  }
  return mscclppSuccess;
}

/* One WRITE of size bytes at src (GPU memory of device dev when dev >= 0) to dst+dst_off. */
static mscclppResult_t send_write(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                  const char* src, int dev, uint64_t size) {
  struct tcp_conn* t = conn->priv;
  MPP_CHECK(tcp_status(conn));
  if (size == 0) return mscclppSuccess;
  struct tcp_hdr h = {.type = TCP_WRITE, .region = region_of(dst), .offset = dst_off, .arg = size};
  mscclppResult_t res = send_part(t, &h, sizeof(h), time_deadline_ms(io_timeout_ms()));
  if (res == mscclppSuccess) res = send_payload(t, src, dev, size);
  if (res != mscclppSuccess)
    return MPP_ERR(res, "tcp write of %llu bytes to rank %d (offset %llu) failed: %s", (unsigned long long)size,
                   conn->peer, (unsigned long long)dst_off, err_copy().text);
  return mscclppSuccess;
}

static mscclppResult_t tcp_write(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                 struct transport_mem* src, uint64_t src_off, uint64_t size) {
  return send_write(conn, dst, dst_off, (const char*)src->ptr + src_off, src->is_device ? src->d.cuda_dev : -1, size);
}

static mscclppResult_t tcp_write_host(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                      const void* src, uint64_t size) {
  return send_write(conn, dst, dst_off, src, -1, size);
}

static mscclppResult_t tcp_update(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                  uint64_t new_value) {
  struct tcp_conn* t = conn->priv;
  MPP_CHECK(tcp_status(conn));
  struct tcp_hdr h = {.type = TCP_UPDATE, .region = region_of(dst), .offset = dst_off, .arg = new_value};
  mscclppResult_t res = send_part(t, &h, sizeof(h), time_deadline_ms(io_timeout_ms()));
  if (res != mscclppSuccess)
    return MPP_ERR(res, "tcp update of rank %d's word at offset %llu failed: %s", conn->peer, (unsigned long long)dst_off,
                   err_copy().text);
  return mscclppSuccess;
}

/* Waits for the ACK of seq on out_fd (skipping late ACKs of earlier flushes that timed out). */
static mscclppResult_t wait_ack(struct transport_conn* conn, uint64_t seq, uint64_t deadline, int64_t timeout_ms) {
  struct tcp_conn* t = conn->priv;
  for (;;) {
    struct tcp_hdr ack;
    mscclppResult_t res = sock_recv_all(t->out_fd, &ack, sizeof(ack), deadline);
    if (res == mscclppTimeout)
      return MPP_ERR(mscclppTimeout, "tcp flush to rank %d (tag %d): no acknowledgement within %lld ms", conn->peer,
                     conn->tag, (long long)timeout_ms);
    if (res != mscclppSuccess) {
      t->broken = 1;
      return MPP_ERR(mscclppRemoteError, "tcp flush to rank %d (tag %d): connection lost (peer exited?): %s", conn->peer,
                     conn->tag, err_copy().text);
    }
    if (ack.type != TCP_ACK || ack.arg > seq) {
      t->broken = 1;
      return MPP_ERR(mscclppRemoteError, "tcp flush to rank %d: malformed acknowledgement (type %u, seq %llu)", conn->peer,
                     ack.type, (unsigned long long)ack.arg);
    }
    if (ack.arg < seq) continue;
    if (ack.status != 0)
      return MPP_ERR(mscclppRemoteError,
                     "tcp: rank %d rejected an earlier write or update (region %llu, offset %llu): %s; its log says why",
                     conn->peer, (unsigned long long)ack.region, (unsigned long long)ack.offset,
                     mscclppGetErrorString((mscclppResult_t)ack.status));
    return mscclppSuccess;
  }
}

static mscclppResult_t tcp_flush(struct transport_conn* conn, int64_t timeout_ms) {
  struct tcp_conn* t = conn->priv;
  MPP_CHECK(tcp_status(conn));
  uint64_t deadline = time_deadline_ms(timeout_ms);
  uint64_t seq = ++t->flush_seq;
  struct tcp_hdr h = {.type = TCP_FLUSH, .arg = seq};
  mscclppResult_t res = send_part(t, &h, sizeof(h), deadline);
  if (res != mscclppSuccess)
    return MPP_ERR(res, "tcp flush to rank %d (tag %d): sending failed: %s", conn->peer, conn->tag, err_copy().text);
  return wait_ack(conn, seq, deadline, timeout_ms);
}

/* Receives the DATA answering a READ of size bytes into dst (skipping late ACKs of flushes that
 * timed out). A refused read is RemoteError naming the region; a lost or malformed stream breaks
 * the connection. */
static mscclppResult_t recv_data(struct transport_conn* conn, char* dst, uint64_t size, uint64_t deadline) {
  struct tcp_conn* t = conn->priv;
  struct tcp_hdr d;
  do {
    if (sock_recv_all(t->out_fd, &d, sizeof(d), deadline) != mscclppSuccess) {
      t->broken = 1;
      return MPP_ERR(mscclppRemoteError, "tcp read from rank %d: no answer (peer exited or stalled): %s", conn->peer,
                     err_copy().text);
    }
  } while (d.type == TCP_ACK);
  if (d.type != TCP_DATA || (d.status == 0 && d.arg != size)) {
    t->broken = 1;
    return MPP_ERR(mscclppRemoteError, "tcp read from rank %d: malformed answer (type %u, %llu bytes)", conn->peer,
                   d.type, (unsigned long long)d.arg);
  }
  if (d.status != 0)
    return MPP_ERR(mscclppRemoteError, "tcp read from rank %d refused (region %llu, offset %llu): %s", conn->peer,
                   (unsigned long long)d.region, (unsigned long long)d.offset,
                   mscclppGetErrorString((mscclppResult_t)d.status));
  for (uint64_t done = 0; done < size;) {
    size_t n = (size_t)(size - done < TCP_CHUNK ? size - done : TCP_CHUNK);
    if (sock_recv_all(t->out_fd, dst + done, n, time_deadline_ms(io_timeout_ms())) != mscclppSuccess) {
      t->broken = 1;
      return MPP_ERR(mscclppRemoteError, "tcp read from rank %d: connection lost mid-answer: %s", conn->peer,
                     err_copy().text);
    }
    done += n;
  }
  return mscclppSuccess;
}

static mscclppResult_t tcp_read_host(struct transport_conn* conn, void* dst, struct transport_mem* src,
                                     uint64_t src_off, uint64_t size) {
  struct tcp_conn* t = conn->priv;
  MPP_CHECK(tcp_status(conn));
  if (size == 0) return mscclppSuccess;
  uint64_t deadline = time_deadline_ms(io_timeout_ms());
  struct tcp_hdr h = {.type = TCP_READ, .region = region_of(src), .offset = src_off, .arg = size};
  mscclppResult_t res = send_part(t, &h, sizeof(h), deadline);
  if (res != mscclppSuccess)
    return MPP_ERR(res, "tcp read from rank %d: sending the request failed: %s", conn->peer, err_copy().text);
  return recv_data(conn, dst, size, deadline);
}

static mscclppResult_t tcp_export(struct transport_mem* mem, const struct mem_info* info) {
  int device = mem_kind_is_device(info->kind) ? info->device : -1;
  MPP_CHECK(region_add(regions_of(mem->tc), mem->ptr, mem->d.size, device, &tcp_part(&mem->d)->region_id));
  mem->d.transports |= TRANSPORT_BIT(mscclppTransportTCP);
  return mscclppSuccess;
}

static void tcp_unexport(struct transport_mem* mem) { region_remove(regions_of(mem->tc), region_of(mem)); }

/* Nothing to map: the owner's receiver writes the memory; the blob's region id is all we need. */
static mscclppResult_t tcp_import(struct transport_mem* mem) {
  (void)mem;
  return mscclppSuccess;
}

static void tcp_unimport(struct transport_mem* mem) { (void)mem; }

static mscclppResult_t tcp_start(struct transport_comm* tc) {
  struct region_table* t = malloc(sizeof(*t));
  if (t == NULL) return MPP_ERR(mscclppSystemError, "tcp: out of host memory for the region table");
  region_table_init(t);
  tc->state[mscclppTransportTCP] = t;
  return mscclppSuccess;
}

static void tcp_stop(struct transport_comm* tc) {
  struct region_table* t = regions_of(tc);
  if (t == NULL) return;
  region_table_fini(t);
  free(t);
  tc->state[mscclppTransportTCP] = NULL;
}

/* Any two ranks: tcp reaches every host. */
static const char* tcp_unusable(const struct transport_comm* tc, int peer) {
  (void)tc;
  (void)peer;
  return NULL;
}

static void tcp_encode_part(const union transport_part* part, uint8_t* out) {
  le_put64(out, ((const struct tcp_part*)(const void*)part)->region_id);
}

static mscclppResult_t tcp_decode_part(const uint8_t* in, const struct regmem_desc* d, union transport_part* part) {
  uint64_t id = le_get64(in);
  if (id == 0)
    return MPP_ERR(mscclppInvalidArgument, "registered-memory blob of rank %d: tcp offered without a region id", d->owner);
  ((struct tcp_part*)(void*)part)->region_id = id;
  return mscclppSuccess;
}

const struct transport_ops tcp_transport = {
    .name = "tcp",
    .api_name = "tcp",
    .id = mscclppTransportTCP,
    .mem_kinds = (1u << MEM_KIND_HOST) | (1u << MEM_KIND_HOST_SHM) | (1u << MEM_KIND_CUDA_IPC) | (1u << MEM_KIND_CUDA_VMM),
    .token_import = TRANSPORT_BIT(mscclppTransportTCP),
    .maps_memory = 0,
    .unreachable_why = "it offers no tcp region",
    .part_wire_bytes = sizeof(struct tcp_part),
    .unusable = tcp_unusable,
    .start = tcp_start,
    .stop = tcp_stop,
    .encode_part = tcp_encode_part,
    .decode_part = tcp_decode_part,
    .export_mem = tcp_export,
    .unexport_mem = tcp_unexport,
    .import_mem = tcp_import,
    .unimport_mem = tcp_unimport,
    .connect = tcp_connect,
    .write = tcp_write,
    .update_and_sync = tcp_update,
    .write_host = tcp_write_host,
    .read_host = tcp_read_host,
    .flush = tcp_flush,
    .status = tcp_status,
    .close = tcp_close,
};
