/* progress.c - the bootstrap's progress thread: accepts connections on the rank's listener, runs
 * the accepting side of each one's handshake (hello: magic, version, nranks, rank; then our
 * challenge and the peer's proof that it holds the job's key, util/auth.h), hands the ring connection from rank-1 to
 * init, and reads point-to-point frames from every other rank into the message queue. Connections
 * with a bad hello or proof are refused and logged (rate-limited) with the remote address; the
 * thread keeps serving. All
 * reads are non-blocking, so one slow or hostile connection never holds up the others. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "util/auth.h"
#include "util/err.h"
#include "util/log.h"
#include "util/timeutil.h"

#define CONN_HELLO_MS 10000 /* a connection must finish its hello within this */

struct boot_conn {
  int fd;
  int peer; /* -1 until its hello is accepted */
  union sock_addr addr;
  size_t got; /* bytes of the hello, proof, frame header or payload read so far */
  uint8_t hdr[WIRE_HELLO_BYTES];
  int proving;                     /* hello checked and challenged: reading the proof into hdr */
  uint8_t hello[WIRE_HELLO_BYTES]; /* the checked hello (the handshake's transcript) */
  uint8_t nonce[WIRE_NONCE_BYTES]; /* our challenge's nonce */
  struct boot_msg* msg; /* the message whose payload is being read (sealed until opened) */
  uint64_t plain;       /* that message's plaintext length (the header's); msg->size is the record's */
  struct seal rx;       /* opens this connection's records (util/seal.h) */
  uint64_t hello_deadline_ns;
  int held; /* its next step waits for room in the queue (not polled meanwhile) */
};

static void set_held(struct bootstrap* b, struct boot_conn* c, int held) {
  if (c->held == held) return;
  c->held = held;
  b->nheld += held ? 1 : -1;
}

static void conn_drop(struct bootstrap* b, int i) {
  struct boot_conn* c = &b->conns[i];
  sock_close(&c->fd);
  seal_clear(&c->rx);
  pthread_mutex_lock(&b->mu);
  if (c->msg) b->queued_bytes -= c->msg->cap;
  if (c->peer >= 0) b->paused[c->peer] = 0;
  set_held(b, c, 0);
  pthread_mutex_unlock(&b->mu);
  if (c->msg) free(c->msg->data);
  free(c->msg);
  b->conns[i] = b->conns[--b->nconns];
}

/* 1 when a recv is waiting for peer's message with tag (mu held). */
static int wanted(const struct bootstrap* b, int peer, int32_t tag) {
  for (const struct boot_waiter* w = b->waiters; w; w = w->next)
    if (w->peer == peer && w->tag == tag) return 1;
  return 0;
}

/* Charges `extra` more bytes of conn c's message to the queue when they fit under the cap or a
 * recv waits for that message; else holds c back (its peer is marked paused, so that a recv
 * waiting for another of its messages fails at once instead of waiting for the timeout). */
static int admit(struct bootstrap* b, struct boot_conn* c, uint64_t extra) {
  pthread_mutex_lock(&b->mu);
  int ok = b->queued_bytes + extra <= b->queue_cap || wanted(b, c->peer, c->msg->tag);
  if (ok) b->queued_bytes += extra;
  if (b->paused[c->peer] != !ok || (!ok && b->paused_tag[c->peer] != c->msg->tag)) {
    b->paused[c->peer] = (uint8_t)!ok;
    b->paused_tag[c->peer] = c->msg->tag;
    pthread_cond_broadcast(&b->cv);
  }
  set_held(b, c, !ok);
  pthread_mutex_unlock(&b->mu);
  return ok;
}

static void refuse(struct bootstrap* b, int i, const char* why) {
  char a[INET6_ADDRSTRLEN + 16], what[64];
  snprintf(what, sizeof(what), "refused connections to bootstrap rank %d", b->rank);
  log_limited(&b->refusals, LOG_WARN, LOG_SUB_BOOTSTRAP, what, "bootstrap rank %d: refused a connection from %s: %s",
              b->rank, sock_addr_str(&b->conns[i].addr, a, sizeof(a)), why);
  conn_drop(b, i);
}

/* An authenticated peer's connection ended (cleanly or not): recvs from it can no longer be
 * satisfied by new data, so they fail instead of waiting for the timeout. */
static void peer_lost_as(struct bootstrap* b, int i, const char* why, uint8_t mark) {
  struct boot_conn* c = &b->conns[i];
  if (c->msg || c->got > 0 || strcmp(why, "closed") != 0)
    log_msg(LOG_WARN, LOG_SUB_BOOTSTRAP, "bootstrap rank %d: connection from rank %d ended mid-message: %s", b->rank,
            c->peer, why);
  pthread_mutex_lock(&b->mu);
  if (b->peer_gone[c->peer] < mark) b->peer_gone[c->peer] = mark; /* a failed record stays the reason */
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
  conn_drop(b, i);
}

static void peer_lost(struct bootstrap* b, int i, const char* why) { peer_lost_as(b, i, why, 1); }

/* Checks a complete hello and answers it with our challenge. Returns 1 when conn i was removed. */
static int hello_check(struct bootstrap* b, int i) {
  struct boot_conn* c = &b->conns[i];
  struct wire_hello h;
  int quiet = err_quiet(1); /* a stranger's bad hello is logged once, by refuse, rate-limited */
  mscclppResult_t res = wire_decode_hello(c->hdr, WIRE_HELLO_BYTES, &h);
  err_quiet(quiet);
  if (res != mscclppSuccess) return refuse(b, i, err_last()), 1;
  if (h.nranks != b->nranks) return refuse(b, i, "hello for a communicator of another size"), 1;
  if (h.kind != WIRE_KIND_RING && h.kind != WIRE_KIND_P2P) return refuse(b, i, "hello of the wrong kind"), 1;
  uint8_t chal[AUTH_CHALLENGE_BYTES];
  if (auth_make_challenge(b->key, c->hdr, WIRE_HELLO_BYTES, c->nonce, chal) != mscclppSuccess)
    return refuse(b, i, "no random nonce for the challenge"), 1;
  /* A fresh connection's send buffer takes 56 bytes at once; a peer that fills it is no rank. */
  if (send(c->fd, chal, sizeof(chal), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(chal))
    return refuse(b, i, "could not send the challenge"), 1;
  memcpy(c->hello, c->hdr, WIRE_HELLO_BYTES);
  c->proving = 1;
  c->got = 0;
  return 0;
}

/* Checks a complete proof; hands a ring connection to init. Returns 1 when conn i was removed. */
static int hello_done(struct bootstrap* b, int i) {
  struct boot_conn* c = &b->conns[i];
  struct wire_hello h;
  if (!auth_check_proof(b->key, c->hello, WIRE_HELLO_BYTES, c->nonce, c->hdr))
    return refuse(b, i, "no proof of the job's secret (wrong or missing MSCCLPP_BOOTSTRAP_SECRET?)"), 1;
  if (wire_decode_hello(c->hello, WIRE_HELLO_BYTES, &h) != mscclppSuccess) /* decoded before: cannot fail */
    return refuse(b, i, "malformed hello"), 1;
  if (h.kind == WIRE_KIND_RING) {
    int handed = 0;
    pthread_mutex_lock(&b->mu);
    if (h.rank == (b->rank + b->nranks - 1) % b->nranks && b->ring_prev_fd == -1 &&
        boot_seal_keys(b, c->hello, c->nonce, SEAL_SERVER, NULL, &b->ring_rx) == mscclppSuccess) {
      b->ring_prev_fd = c->fd;
      handed = 1;
      if (b->ring_broken) boot_ring_tell_late(b, c->fd); /* our init failed meanwhile: tell rank-1 why */
      pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    if (!handed) return refuse(b, i, "unexpected ring connection"), 1;
    c->fd = -1;
    conn_drop(b, i);
    return 1;
  }
  if (h.kind != WIRE_KIND_P2P) return refuse(b, i, "hello of the wrong kind"), 1;
  if (boot_seal_keys(b, c->hello, c->nonce, SEAL_SERVER, NULL, &c->rx) != mscclppSuccess)
    return refuse(b, i, "no keys for the connection (libcrypto failed)"), 1;
  c->peer = h.rank;
  c->got = 0;
  return 0;
}

/* Frame header complete: starts its message. Returns 1 when conn i was removed. */
static int header_done(struct bootstrap* b, int i) {
  struct boot_conn* c = &b->conns[i];
  struct wire_frame f;
  if (wire_decode_frame(c->hdr, WIRE_FRAME_BYTES, &f) != mscclppSuccess) return peer_lost(b, i, "bad frame header"), 1;
  /* The payload buffer grows as bytes arrive (grow_payload), never by the header's word alone. */
  struct boot_msg* m = calloc(1, sizeof(*m));
  if (!m) return peer_lost(b, i, "no memory for the message"), 1;
  m->peer = c->peer;
  m->tag = f.tag;
  m->size = f.length + SEAL_OVERHEAD; /* the sealed record; f.length <= WIRE_MAX_PAYLOAD */
  c->plain = f.length;
  c->msg = m;
  c->got = 0;
  return 0;
}

#define FIRST_CHUNK 65536 /* a payload's first buffer; it doubles as more arrives */

/* Opens conn i's complete record in place (the frame header, still in hdr, is its associated
 * data): the message then holds the plaintext. A record that fails is the end of the connection,
 * and recvs from that peer say why. 1 when opened; 0 when conn i was removed. */
static int message_open(struct bootstrap* b, int i) {
  struct boot_conn* c = &b->conns[i];
  char who[160], why[512];
  snprintf(who, sizeof(who), "bootstrap rank %d: the connection from rank %d", b->rank, c->peer);
  int quiet = err_quiet(1);
  mscclppResult_t res = seal_open(&c->rx, c->hdr, WIRE_FRAME_BYTES, c->msg->data, (size_t)c->plain, c->msg->data, who);
  err_quiet(quiet);
  if (res == mscclppSuccess) {
    c->msg->size = c->plain;
    c->got = (size_t)c->plain;
    return 1;
  }
  snprintf(why, sizeof(why), "%s", err_last());
  peer_lost_as(b, i, why, 2);
  return 0;
}

/* Queues conn c's complete message once its bookkeeping fits. 0 when held back. */
static int message_done(struct bootstrap* b, struct boot_conn* c) {
  if (!admit(b, c, sizeof(struct boot_msg))) return 0;
  c->msg->cap += sizeof(struct boot_msg);
  boot_enqueue(b, c->msg);
  c->msg = NULL;
  c->got = 0;
  return 1;
}

/* Makes room for more of conn i's payload. 1 when there is; 0 when held back or conn i was
 * removed (no memory). */
static int grow_payload(struct bootstrap* b, int i) {
  struct boot_conn* c = &b->conns[i];
  struct boot_msg* m = c->msg;
  uint64_t want = m->cap < FIRST_CHUNK / 2 ? FIRST_CHUNK : 2 * (uint64_t)m->cap;
  if (want > m->size) want = m->size;
  if (!admit(b, c, want - m->cap)) return 0;
  uint8_t* d = realloc(m->data, (size_t)want);
  if (!d) {
    pthread_mutex_lock(&b->mu);
    b->queued_bytes -= want - m->cap;
    pthread_mutex_unlock(&b->mu);
    return peer_lost(b, i, "no memory for the message"), 0;
  }
  m->data = d;
  m->cap = (size_t)want;
  return 1;
}

/* Bytes one conn_read call takes before it returns to the progress round: a peer streaming
 * without pause (a receiver draining the queue as fast as it fills) would otherwise keep the thread
 * here, and the ring's heartbeats and liveness checks would stop (the peers would then see this
 * rank as silent). */
#define CONN_READ_BUDGET (4u << 20)

/* Reads what conn i has, stepping through hello, header and payload until the socket is empty or
 * CONN_READ_BUDGET bytes were read. Returns after conn i was removed, would block, or used its
 * budget when the next step needs more bytes (never with a complete message or header unhandled:
 * the next poll wakes for this connection only when bytes are there). */
static void conn_read(struct bootstrap* b, int i) {
  size_t budget = CONN_READ_BUDGET;
  for (;;) {
    struct boot_conn* c = &b->conns[i];
    uint8_t* dst;
    size_t want;
    if (c->peer < 0) {
      dst = c->hdr + c->got, want = (c->proving ? AUTH_PROOF_BYTES : WIRE_HELLO_BYTES) - c->got;
    } else if (!c->msg) {
      dst = c->hdr + c->got, want = WIRE_FRAME_BYTES - c->got;
    } else if (c->got == c->msg->size) { /* complete (held back at the end: already opened) */
      if (c->msg->size != c->plain && !message_open(b, i)) return;
      if (!message_done(b, c)) return;
      continue;
    } else {
      if (c->got == c->msg->cap && !grow_payload(b, i)) return;
      dst = c->msg->data + c->got, want = c->msg->cap - c->got;
    }
    if (want && budget == 0) return; /* only before a read: what is complete is finished first */
    ssize_t n = want ? recv(c->fd, dst, want, MSG_DONTWAIT) : 0;
    if (want && n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (want && n <= 0) {
      if (c->peer >= 0) return peer_lost(b, i, n == 0 ? "closed" : strerror(errno));
      return refuse(b, i, "hung up before finishing its hello");
    }
    c->got += (size_t)n;
    budget = (size_t)n < budget ? budget - (size_t)n : 0;
    if (c->peer < 0 && !c->proving && c->got == WIRE_HELLO_BYTES) {
      if (hello_check(b, i)) return;
    } else if (c->peer < 0 && c->proving && c->got == AUTH_PROOF_BYTES) {
      if (hello_done(b, i)) return;
    } else if (c->peer >= 0 && !c->msg && c->got == WIRE_FRAME_BYTES) {
      if (header_done(b, i)) return;
    }
  }
}

/* Makes room for one more connection: grows the list up to its bound, else drops the oldest
 * connection still without a hello (a stranger's: real peers say hello at once). 0 when full. */
static int make_room(struct bootstrap* b) {
  if (b->nconns < b->conns_cap) return 1;
  int cap = b->conns_cap ? 2 * b->conns_cap : 16;
  struct boot_conn* grown = cap <= 2 * b->nranks + 64 ? realloc(b->conns, sizeof(*grown) * (size_t)cap) : NULL;
  if (grown) {
    b->conns = grown;
    b->conns_cap = cap;
    return 1;
  }
  int oldest = -1;
  for (int i = 0; i < b->nconns; i++)
    if (b->conns[i].peer < 0 && (oldest < 0 || b->conns[i].hello_deadline_ns < b->conns[oldest].hello_deadline_ns))
      oldest = i;
  if (oldest < 0) return 0;
  refuse(b, oldest, "too many connections without a hello");
  return 1;
}

/* Accepts one connection. Out of fds (EMFILE, ENFILE) the listener would stay readable and the
 * thread spin: that is this rank's failure instead, told to every rank (SystemError). */
static mscclppResult_t accept_one(struct bootstrap* b) {
  union sock_addr a;
  socklen_t alen = sizeof(a);
  int fd = accept4(b->listen_fd, &a.sa, &alen, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    if (e == EMFILE || e == ENFILE) {
      struct boot_notice n = {.type = BOOT_NOTICE_FAILED, .rank = b->rank, .cause = e};
      pthread_mutex_lock(&b->mu);
      boot_adopt(b, &n, !b->ring_busy);
      pthread_mutex_unlock(&b->mu);
      return MPP_ERRNO(mscclppSystemError, e, "bootstrap rank %d: accepting a connection%s", b->rank, sock_fd_hint(e));
    }
    if (e != EAGAIN && e != EWOULDBLOCK && e != EINTR && e != ECONNABORTED) usleep(10000);
    return mscclppSuccess;
  }
  if (!make_room(b)) {
    char t[INET6_ADDRSTRLEN + 16], what[64];
    snprintf(what, sizeof(what), "refused connections to bootstrap rank %d", b->rank);
    log_limited(&b->refusals, LOG_WARN, LOG_SUB_BOOTSTRAP, what,
                "bootstrap rank %d: refused a connection from %s: too many connections", b->rank,
                sock_addr_str(&a, t, sizeof(t)));
    close(fd);
    return mscclppSuccess;
  }
  struct boot_conn* c = &b->conns[b->nconns++];
  memset(c, 0, sizeof(*c));
  c->fd = fd;
  c->peer = -1;
  c->addr = a;
  c->hello_deadline_ns = time_deadline_ms(CONN_HELLO_MS);
  return mscclppSuccess;
}

static int should_stop(struct bootstrap* b) {
  pthread_mutex_lock(&b->mu);
  int stop = b->aborted || b->stopping;
  pthread_mutex_unlock(&b->mu);
  return stop;
}

#define FIXED_FDS 4 /* wake pipe, listener, ring from rank-1, ring to rank+1 */

/* One poll over the wake pipe, the listener, the idle ring and every connection. */
static mscclppResult_t progress_round(struct bootstrap* b) {
  int n = FIXED_FDS + b->nconns, ring[2];
  struct pollfd* p = malloc(sizeof(*p) * (size_t)n);
  if (!p) return MPP_ERR(mscclppSystemError, "bootstrap rank %d: no memory to poll %d sockets", b->rank, n);
  boot_watch_fds(b, ring);
  p[0] = (struct pollfd){.fd = b->wake_fds[0], .events = POLLIN};
  p[1] = (struct pollfd){.fd = b->listen_fd, .events = POLLIN};
  p[2] = (struct pollfd){.fd = ring[0], .events = POLLIN};
  p[3] = (struct pollfd){.fd = ring[1], .events = POLLIN};
  for (int i = 0; i < b->nconns; i++) /* a held connection is not read, so not polled (no spinning) */
    p[FIXED_FDS + i] = (struct pollfd){.fd = b->conns[i].held ? -1 : b->conns[i].fd, .events = POLLIN};
  if (poll(p, (nfds_t)n, b->poll_ms) < 0 && errno != EINTR) {
    free(p);
    return MPP_ERRNO(mscclppSystemError, errno, "bootstrap rank %d: poll in the progress thread", b->rank);
  }
  uint64_t now = time_now_ns();
  int nconns = b->nconns;
  for (int i = nconns - 1; i >= 0; i--) { /* backwards: removal moves the last entry into i */
    if (p[FIXED_FDS + i].revents || b->conns[i].held) /* a held one retries: a recv may have made room */
      conn_read(b, i);
    else if (b->conns[i].peer < 0 && now > b->conns[i].hello_deadline_ns)
      refuse(b, i, "no hello in time");
  }
  mscclppResult_t res = p[1].revents ? accept_one(b) : mscclppSuccess;
  log_rate_tick(&b->refusals, LOG_SUB_BOOTSTRAP);
  /* After the connections and the listener: a rank's last p2p bytes are read before its notice. */
  short rev[2] = {p[2].revents, p[3].revents};
  if (rev[0] || rev[1]) boot_watch_ready(b, rev);
  boot_idle_liveness(b); /* after reading the ring: what arrived counts before the silence check */
  if (p[0].revents) {
    char junk[64];
    while (read(b->wake_fds[0], junk, sizeof(junk)) > 0) {
    }
  }
  free(p);
  return res;
}

static void* progress_main(void* arg) {
  struct bootstrap* b = arg;
  while (!should_stop(b)) {
    mscclppResult_t res = progress_round(b);
    if (res != mscclppSuccess) {
      pthread_mutex_lock(&b->mu);
      b->progress_err = res;
      pthread_cond_broadcast(&b->cv);
      pthread_mutex_unlock(&b->mu);
      break;
    }
  }
  while (b->nconns > 0) conn_drop(b, b->nconns - 1);
  return NULL;
}

mscclppResult_t boot_progress_start(struct bootstrap* b) {
  int err = pthread_create(&b->progress, NULL, progress_main, b);
  if (err != 0) return MPP_ERRNO(mscclppSystemError, err, "starting the bootstrap progress thread of rank %d", b->rank);
  b->progress_started = 1;
  return mscclppSuccess;
}

void boot_progress_wake(struct bootstrap* b) {
  char one = 1;
  if (b->wake_fds[1] >= 0) (void)!write(b->wake_fds[1], &one, 1);
}

void boot_progress_stop(struct bootstrap* b) {
  if (!b->progress_started) return;
  pthread_mutex_lock(&b->mu);
  b->stopping = 1;
  pthread_mutex_unlock(&b->mu);
  boot_progress_wake(b);
  pthread_join(b->progress, NULL);
  b->progress_started = 0;
}
