/* p2p.c - tagged point-to-point messages. A sender keeps one connection per peer (opened on its
 * first send, with a P2P hello) and writes framed messages on it under that peer's send lock, so
 * messages of one pair arrive in the order sent. The receiver's progress thread reads every frame
 * into the queue right away; recv takes the oldest queued message of its (peer, tag), waiting on a
 * condition variable until one arrives, the peer's connection ends, abort, or the deadline. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "bootstrap/internal.h"
#include "util/err.h"
#include "util/timeutil.h"

#define SMALL_FRAME 4096 /* payloads up to this go out in one send with their header */
#define LEFT_GRACE_MS 1000

int boot_cv_wait_until(struct bootstrap* b, uint64_t deadline_ns) {
  if (time_now_ns() >= deadline_ns) return ETIMEDOUT;
  struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000ull),
                        .tv_nsec = (long)(deadline_ns % 1000000000ull)};
  return pthread_cond_timedwait(&b->cv, &b->mu, &ts);
}

/* Why b cannot be used any more (mu held), or Success. */
mscclppResult_t boot_check_state(struct bootstrap* b, const char* op) {
  if (b->aborted) return MPP_ERR(mscclppAborted, "bootstrap %s on rank %d: the bootstrap was aborted", op, b->rank);
  if (b->fault.type) return boot_fault_error(b, op);
  if (b->progress_err != mscclppSuccess)
    return MPP_ERR(b->progress_err, "bootstrap %s on rank %d: the progress thread failed earlier", op, b->rank);
  return mscclppSuccess;
}

void boot_enqueue(struct bootstrap* b, struct boot_msg* m) {
  m->next = NULL;
  pthread_mutex_lock(&b->mu);
  if (m->peer == b->rank) b->queued_bytes += m->cap; /* a peer's was charged as it arrived */
  if (b->q_tail)
    b->q_tail->next = m;
  else
    b->q_head = m;
  b->q_tail = m;
  atomic_fetch_add_explicit(&b->nqueued, 1, memory_order_relaxed);
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

void boot_queue_free(struct bootstrap* b) {
  while (b->q_head) {
    struct boot_msg* m = b->q_head;
    b->q_head = m->next;
    free(m->data);
    free(m);
  }
  b->q_tail = NULL;
}

/* Removes and returns the oldest queued message from peer with tag (mu held), or NULL. */
static struct boot_msg* dequeue(struct bootstrap* b, int peer, int tag) {
  struct boot_msg* prev = NULL;
  for (struct boot_msg* m = b->q_head; m; prev = m, m = m->next) {
    if (m->peer != peer || m->tag != tag) continue;
    if (prev)
      prev->next = m->next;
    else
      b->q_head = m->next;
    if (b->q_tail == m) b->q_tail = prev;
    atomic_fetch_sub_explicit(&b->nqueued, 1, memory_order_relaxed);
    b->queued_bytes -= m->cap;
    if (b->nheld > 0) boot_progress_wake(b); /* room for a held-back connection */
    return m;
  }
  return NULL;
}

/* Returns the connection to peer (send lock held), opening it on first use. */
static mscclppResult_t send_conn(struct bootstrap* b, int peer, uint64_t deadline_ns, int* fd) {
  char who[128];
  boot_peer_str(b, peer, who, sizeof(who));
  pthread_mutex_lock(&b->mu);
  *fd = b->send_fds[peer];
  pthread_mutex_unlock(&b->mu);
  if (*fd == -2) return MPP_ERR(mscclppRemoteError, "bootstrap send: an earlier send to %s failed", who);
  if (*fd >= 0) return mscclppSuccess;
  int s = -1;
  struct boot_transcript t;
  mscclppResult_t res = boot_connect_peer(&b->addrs[peer], deadline_ns, &s);
  if (res == mscclppSuccess) res = boot_send_hello_kept(b, s, WIRE_KIND_P2P, deadline_ns, who, &t);
  if (res == mscclppSuccess) res = boot_seal_keys(b, t.hello, t.nonce, SEAL_CLIENT, &b->send_seals[peer], NULL);
  pthread_mutex_lock(&b->mu);
  if (res == mscclppSuccess) res = boot_check_state(b, "send");
  if (res == mscclppSuccess) b->send_fds[peer] = s;
  pthread_mutex_unlock(&b->mu);
  if (res != mscclppSuccess) sock_close(&s);
  *fd = s;
  return res;
}

/* Writes one frame: its header in clear (tag, plaintext length), then the payload sealed under
 * the connection's key with the header as associated data (util/seal.h: SEAL_OVERHEAD bytes more);
 * in one send when small. Gives up when b learns of a fault (a stuck receiver would otherwise hold
 * a large send until the timeout). */
static mscclppResult_t send_frame(struct bootstrap* b, int peer, int fd, int tag, const void* data, size_t size,
                                  uint64_t deadline_ns, const char* who) {
  uint8_t small[WIRE_FRAME_BYTES + SMALL_FRAME + SEAL_OVERHEAD];
  uint8_t* buf = size <= SMALL_FRAME ? small : malloc(WIRE_FRAME_BYTES + size + SEAL_OVERHEAD);
  if (!buf) return MPP_ERR(mscclppSystemError, "bootstrap send to %s: no memory to seal %zu bytes", who, size);
  struct wire_frame f = {.tag = tag, .length = size};
  wire_encode_frame(&f, buf);
  mscclppResult_t res =
      seal_record(&b->send_seals[peer], buf, WIRE_FRAME_BYTES, data, size, buf + WIRE_FRAME_BYTES);
  if (res == mscclppSuccess)
    res = boot_send_all_w(b, fd, buf, WIRE_FRAME_BYTES + size + SEAL_OVERHEAD, deadline_ns, who);
  if (buf != small) free(buf);
  return res;
}

static mscclppResult_t send_self(struct bootstrap* b, int tag, const void* data, size_t size) {
  struct boot_msg* m = calloc(1, sizeof(*m));
  if (m) m->data = malloc(size ? size : 1);
  if (!m || !m->data) {
    free(m);
    return MPP_ERR(mscclppSystemError, "bootstrap send to self: no memory for %zu bytes", size);
  }
  if (size) memcpy(m->data, data, size);
  m->cap = (size ? size : 1) + sizeof(*m);
  m->peer = b->rank;
  m->tag = tag;
  m->size = size;
  boot_enqueue(b, m);
  return mscclppSuccess;
}

mscclppResult_t bootstrap_send(struct bootstrap* b, int peer, int tag, const void* data, size_t size) {
  MPP_CHECK_ARG(b != NULL, "bootstrap_send: bootstrap is NULL");
  MPP_CHECK_ARG(peer >= 0 && peer < b->nranks, "bootstrap_send: peer %d outside [0, %d)", peer, b->nranks);
  MPP_CHECK_ARG(data != NULL || size == 0, "bootstrap_send: data is NULL for %zu bytes", size);
  MPP_CHECK_ARG((uint64_t)size <= WIRE_MAX_PAYLOAD, "bootstrap_send: %zu bytes exceed the limit %llu", size,
                (unsigned long long)WIRE_MAX_PAYLOAD);
  pthread_mutex_lock(&b->mu);
  mscclppResult_t res = boot_check_state(b, "send");
  pthread_mutex_unlock(&b->mu);
  MPP_CHECK(res);
  if (peer == b->rank) return send_self(b, tag, data, size);
  char who[128];
  boot_peer_str(b, peer, who, sizeof(who));
  uint64_t deadline = boot_deadline(b);
  pthread_mutex_t* lock = &b->send_mu[peer % BOOT_SEND_LOCKS];
  pthread_mutex_lock(lock);
  int fd = -1;
  res = send_conn(b, peer, deadline, &fd);
  if (res == mscclppSuccess) {
    res = send_frame(b, peer, fd, tag, data, size, deadline, who);
    if (res != mscclppSuccess) { /* the stream may hold half a frame: never use it again */
      pthread_mutex_lock(&b->mu);
      shutdown(fd, SHUT_RDWR);
      sock_close(&b->send_fds[peer]);
      b->send_fds[peer] = -2;
      pthread_mutex_unlock(&b->mu);
    }
  }
  pthread_mutex_unlock(lock);
  if (res != mscclppSuccess) {
    pthread_mutex_lock(&b->mu);
    int aborted = b->aborted;
    pthread_mutex_unlock(&b->mu);
    if (aborted) return MPP_ERR(mscclppAborted, "bootstrap send to %s (tag %d): aborted", who, tag);
    /* The peer gone: say which rank failed first when the bootstrap learns it within the grace
     * (the peer may only have closed after another rank's failure). */
    if (bootstrap_explain(b, peer, 500) != mscclppSuccess) return BOOT_WRAP(mscclppRemoteError, "bootstrap send to %s", who);
    return BOOT_WRAP(res, "bootstrap send of %zu bytes with tag %d to %s", size, tag, who); /* explain left it */
  }
  return mscclppSuccess;
}

/* Copies a dequeued message out and frees it; a size mismatch is an error. */
static mscclppResult_t take(struct boot_msg* m, void* data, size_t size, const char* who) {
  mscclppResult_t res = mscclppSuccess;
  if (m->size != (uint64_t)size)
    res = MPP_ERR(mscclppInvalidUsage, "bootstrap recv from %s with tag %d: expected %zu bytes, received %llu", who,
                  (int)m->tag, size, (unsigned long long)m->size);
  else if (size)
    memcpy(data, m->data, size);
  free(m->data);
  free(m);
  return res;
}

mscclppResult_t bootstrap_try_recv(struct bootstrap* b, int peer, int tag, void* data, size_t size, int* got) {
  MPP_CHECK_ARG(b != NULL && got != NULL, "bootstrap_try_recv: bootstrap or got is NULL");
  MPP_CHECK_ARG(peer >= 0 && peer < b->nranks, "bootstrap_try_recv: peer %d outside [0, %d)", peer, b->nranks);
  MPP_CHECK_ARG(data != NULL || size == 0, "bootstrap_try_recv: data is NULL for %zu bytes", size);
  *got = 0;
  /* No lock while nothing is queued (the per-call case): a message enqueued just now is found by
   * the next try. (A connection is held back only behind queued messages: the queue's cap.) */
  if (atomic_load_explicit(&b->nqueued, memory_order_relaxed) == 0) return mscclppSuccess;
  pthread_mutex_lock(&b->mu);
  struct boot_msg* m = dequeue(b, peer, tag);
  if (m == NULL && b->nheld > 0) boot_progress_wake(b); /* a held-back message may be this one */
  pthread_mutex_unlock(&b->mu);
  *got = m != NULL;
  if (m == NULL) return mscclppSuccess;
  char who[128];
  boot_peer_str(b, peer, who, sizeof(who));
  return take(m, data, size, who);
}

mscclppResult_t bootstrap_recv(struct bootstrap* b, int peer, int tag, void* data, size_t size) {
  MPP_CHECK_ARG(b != NULL, "bootstrap_recv: bootstrap is NULL");
  MPP_CHECK_ARG(peer >= 0 && peer < b->nranks, "bootstrap_recv: peer %d outside [0, %d)", peer, b->nranks);
  MPP_CHECK_ARG(data != NULL || size == 0, "bootstrap_recv: data is NULL for %zu bytes", size);
  char who[128];
  boot_peer_str(b, peer, who, sizeof(who));
  uint64_t deadline = boot_deadline(b);
  mscclppResult_t res = mscclppSuccess;
  struct boot_msg* m = NULL;
  int gone = 0;
  struct boot_waiter me = {.peer = peer, .tag = tag};
  pthread_mutex_lock(&b->mu);
  me.next = b->waiters;
  b->waiters = &me;
  if (b->nheld > 0) boot_progress_wake(b); /* a held-back message may be this one */
  while (!(m = dequeue(b, peer, tag))) {
    res = boot_check_state(b, "recv");
    if (res != mscclppSuccess) break;
    if (b->paused[peer] && b->paused_tag[peer] != tag) {
      res = MPP_ERR(mscclppInvalidUsage,
                    "bootstrap recv with tag %d from %s: %llu bytes of unreceived messages fill this rank's queue "
                    "(cap %llu, MSCCLPP_BOOTSTRAP_QUEUE_BYTES), and that rank's next message (tag %d) waits behind "
                    "them: receive the queued messages first or raise the cap",
                    tag, who, (unsigned long long)b->queued_bytes, (unsigned long long)b->queue_cap,
                    (int)b->paused_tag[peer]);
      break;
    }
    if (b->peer_gone[peer]) {
      gone = b->peer_gone[peer];
      break;
    }
    /* A rank that left cleanly sends nothing more: what it sent before its notice has arrived
     * within LEFT_GRACE_MS (its connection is read before the ring in each progress round). */
    uint64_t left = b->left_ns[peer], until = deadline;
    if (left && time_now_ns() >= left + LEFT_GRACE_MS * 1000000ull) {
      res = MPP_ERR(mscclppRemoteError, "bootstrap recv with tag %d: %s left (destroyed its communicator) without "
                    "sending it", tag, who);
      break;
    }
    if (left && left + LEFT_GRACE_MS * 1000000ull < until) until = left + LEFT_GRACE_MS * 1000000ull;
    if (boot_cv_wait_until(b, until) == ETIMEDOUT && until == deadline && !(m = dequeue(b, peer, tag))) {
      res = MPP_ERR(mscclppTimeout, "bootstrap recv of %zu bytes with tag %d from %s: nothing within %d ms", size,
                    tag, who, b->timeout_ms);
      break;
    }
    if (m) break;
  }
  for (struct boot_waiter** w = &b->waiters; *w; w = &(*w)->next)
    if (*w == &me) {
      *w = me.next;
      break;
    }
  pthread_mutex_unlock(&b->mu);
  if (m) return take(m, data, size, who);
  if (!gone) return res;
  if (gone == 2)
    return MPP_ERR(mscclppRemoteError,
                   "bootstrap recv with tag %d: a message from %s failed authentication (altered, replayed or "
                   "reordered in transit, or not sealed by that rank); its connection was closed",
                   tag, who);
  /* The peer's connection closed: it may have gone down after another rank's failure, which the
   * ring tells within the grace; name that first cause, else the closed connection. */
  if (bootstrap_explain(b, peer, 500) != mscclppSuccess)
    return BOOT_WRAP(mscclppRemoteError, "bootstrap recv with tag %d from %s", tag, who);
  return MPP_ERR(mscclppRemoteError, "bootstrap recv with tag %d: %s closed its connection (exited or aborted?)", tag,
                 who);
}

mscclppResult_t bootstrap_swap(struct bootstrap* b, int peer, int tag, const void* mine, void* theirs, size_t size) {
  if (bootstrap_rank(b) < peer) {
    MPP_CHECK(bootstrap_send(b, peer, tag, mine, size));
    return bootstrap_recv(b, peer, tag, theirs, size);
  }
  MPP_CHECK(bootstrap_recv(b, peer, tag, theirs, size));
  return bootstrap_send(b, peer, tag, mine, size);
}
