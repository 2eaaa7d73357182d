/* liveness.c - which rank died, failed or left, told around the ring.
 *
 * The ring sockets stay open for the life of the bootstrap. From the moment each exists (during
 * init too), while no allgather or barrier runs the progress thread watches it; during one, the
 * ring code does. A rank that ends its bootstrap sends a notice (a 16-byte frame with tag NOTICE_TAG, see below) to
 * both ring neighbours before closing: LEFT (destroyed cleanly), or FAILED (aborted, or failed
 * itself, with a cause such as EMFILE). A ring connection that ends without a notice means the
 * rank at its other end died (killed, crashed, exited without destroying). Whoever learns of a
 * death or failure first records it as the bootstrap's fault and passes the same notice on in both
 * directions before shutting its own ring down, so every survivor names the rank that actually
 * died, within a few hops' time, whatever it was doing. Every later wait of a survivor fails with
 * that fault. A departure is not passed on (the others may still be finishing the last operation,
 * which the rank that left completed): its neighbours stop watching it, later ring operations fail
 * naming it, and recvs from it are bounded. The same frames carry heartbeats (BEAT, skipped by every
 * reader) and STUCK, a neighbour silent too long (heartbeat.c), which travels like a death. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "bootstrap/internal.h"
#include "util/err.h"
#include "util/log.h"
#include "util/timeutil.h"

#define NOTICE_TAG INT32_MIN /* ring operation tags are >= 0 */

void boot_notice_encode(const struct boot_notice* n, uint8_t out[WIRE_FRAME_BYTES]) {
  /* length = type:4 | cause:8 | rank:20 bits (ranks < WIRE_MAX_RANKS = 2^20): under the frame limit */
  uint64_t len = ((uint64_t)n->type << 28) | ((uint64_t)(n->cause & 0xff) << 20) | (uint64_t)n->rank;
  struct wire_frame f = {.tag = NOTICE_TAG, .length = len};
  wire_encode_frame(&f, out);
}

int boot_notice_decode(const struct bootstrap* b, const uint8_t hdr[WIRE_FRAME_BYTES], struct boot_notice* n) {
  struct wire_frame f;
  if (wire_decode_frame(hdr, WIRE_FRAME_BYTES, &f) != mscclppSuccess || f.tag != NOTICE_TAG) return 0;
  n->type = (int)(f.length >> 28);
  n->cause = (int)((f.length >> 20) & 0xff);
  n->rank = (int)(f.length & 0xfffff);
  return n->type >= BOOT_NOTICE_DIED && n->type <= BOOT_NOTICE_STUCK && n->rank < b->nranks;
}

/* Sends notice n towards dir without waiting (the stream is empty or at a frame boundary, once a
 * partly sent heartbeat is finished). */
static void send_notice(struct bootstrap* b, int dir, const struct boot_notice* n) {
  uint8_t buf[WIRE_FRAME_BYTES];
  int fd = dir == BOOT_DIR_PREV ? b->ring_prev_fd : b->ring_next_fd;
  if (fd < 0 || !boot_beat_flush(b, dir)) return; /* a socket that full: the shutdown tells instead */
  boot_notice_encode(n, buf);
  (void)!send(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL);
}

void boot_ring_close_with(struct bootstrap* b, const struct boot_notice* n, int next_at_boundary) {
  if (!b->ring_broken) {
    send_notice(b, BOOT_DIR_PREV, n);
    if (next_at_boundary) send_notice(b, BOOT_DIR_NEXT, n);
  }
  b->ring_broken = 1;
  if (b->ring_prev_fd >= 0) shutdown(b->ring_prev_fd, SHUT_RDWR);
  if (b->ring_next_fd >= 0) shutdown(b->ring_next_fd, SHUT_RDWR);
  pthread_cond_broadcast(&b->cv);
}

void boot_adopt(struct bootstrap* b, const struct boot_notice* n, int next_at_boundary) {
  if (n->type == BOOT_NOTICE_LEFT) { /* only a neighbour's own: not passed on (the others may be
                                      * finishing their last operation, which it completed) */
    if (!b->left_ns[n->rank]) b->left_ns[n->rank] = time_now_ns();
    if (b->ring_left < 0) b->ring_left = n->rank;
    if (n->rank == (b->rank + b->nranks - 1) % b->nranks) b->prev_gone = 1;
    if (n->rank == (b->rank + 1) % b->nranks) b->next_gone = 1;
    pthread_cond_broadcast(&b->cv);
    return;
  }
  if (!b->fault.type) {
    b->fault = *n;
    /* release: a caller that sees faulted set and then takes the lock reads fault as written */
    atomic_store_explicit(&b->faulted, 1, memory_order_release);
    char why[256];
    log_msg(LOG_WARN, LOG_SUB_BOOTSTRAP, "bootstrap rank %d: %s", b->rank, boot_fault_text(b, &b->fault, why, sizeof(why)));
  }
  boot_ring_close_with(b, n, next_at_boundary);
}

const char* boot_fault_text(const struct bootstrap* b, const struct boot_notice* n, char* buf, size_t len) {
  const char* self = n->rank == b->rank ? " (this rank)" : "";
  if (n->type == BOOT_NOTICE_DIED)
    snprintf(buf, len, "rank %d died (its connections closed without a word: killed, crashed or exited without destroying "
             "its communicator)", n->rank);
  else if (n->type == BOOT_NOTICE_LEFT)
    snprintf(buf, len, "rank %d left (destroyed its communicator)", n->rank);
  else if (n->type == BOOT_NOTICE_STUCK)
    snprintf(buf, len, "rank %d%s stopped responding (silent for %d ms: no heartbeat or handshake answer; its process is "
             "stopped or hung)", n->rank, self, n->cause * 100);
  else if ((n->cause == EMFILE || n->cause == ENFILE) && n->rank == b->rank)
    snprintf(buf, len, "rank %d%s failed: out of file descriptors%s", n->rank, self, sock_fd_hint(n->cause));
  else if (n->cause == EMFILE) /* not sock_fd_hint: its "(now N)" would be this rank's limit */
    snprintf(buf, len, "rank %d failed: too many open files (raise ulimit -n on that rank)", n->rank);
  else if (n->cause == ENFILE)
    snprintf(buf, len, "rank %d failed: too many open files on its system (raise fs.file-max there)", n->rank);
  else if (n->cause)
    snprintf(buf, len, "rank %d%s failed: %s", n->rank, self, strerror(n->cause));
  else
    snprintf(buf, len, "rank %d%s failed or aborted (its log says why)", n->rank, self);
  return buf;
}

mscclppResult_t boot_fault_error(struct bootstrap* b, const char* op) {
  char why[256];
  return MPP_ERR(b->fault.rank == b->rank ? mscclppSystemError : mscclppRemoteError, "bootstrap %s on rank %d: %s", op,
                 b->rank, boot_fault_text(b, &b->fault, why, sizeof(why)));
}

void boot_ring_tell_late(struct bootstrap* b, int fd) {
  struct boot_notice self = {.type = BOOT_NOTICE_FAILED, .rank = b->rank, .cause = b->own_cause};
  uint8_t buf[WIRE_FRAME_BYTES];
  boot_notice_encode(b->fault.type ? &b->fault : &self, buf);
  (void)!send(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL); /* a fresh socket takes 16 bytes */
  shutdown(fd, SHUT_RDWR);
}

/* The progress thread's look at one idle ring socket that poll found readable (mu held).
 * From rank+1 only notices come; from rank-1 a notice, or the first bytes of the next operation,
 * which it leaves for the ring code (and stops watching until that operation ends). */
static void watch_one(struct bootstrap* b, int from_prev) {
  int fd = from_prev ? b->ring_prev_fd : b->ring_next_fd;
  int peer = (b->rank + (from_prev ? b->nranks - 1 : 1)) % b->nranks;
  uint8_t hdr[WIRE_FRAME_BYTES];
  ssize_t n = recv(fd, hdr, sizeof(hdr), MSG_DONTWAIT | MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n > 0) boot_heard(b, from_prev ? BOOT_DIR_PREV : BOOT_DIR_NEXT);
  struct boot_notice note;
  if (n == (ssize_t)sizeof(hdr) && boot_notice_decode(b, hdr, &note)) {
    (void)!recv(fd, hdr, sizeof(hdr), MSG_DONTWAIT);
    if (note.type != BOOT_NOTICE_BEAT) boot_adopt(b, &note, 1);
    return;
  }
  if (n > 0 && from_prev) { /* the next operation's data: rank-1 is alive and ahead of us */
    b->prev_has_data = 1;
    return;
  }
  if (n > 0 && n < (ssize_t)sizeof(hdr)) return; /* half a notice: the rest is on its way */
  if (n > 0) { /* garbage from rank+1: it failed */
    struct boot_notice failed = {.type = BOOT_NOTICE_FAILED, .rank = peer};
    boot_adopt(b, &failed, 1);
    return;
  }
  /* EOF or an error without a notice: that rank is gone, unless a notice from the other side says
   * it went down after another's failure (boot_eof_settle decides after the grace). */
  int dir = from_prev ? BOOT_DIR_PREV : BOOT_DIR_NEXT;
  if (!b->eof_ns[dir]) b->eof_ns[dir] = time_now_ns();
}

void boot_eof_settle(struct bootstrap* b, int now_anyway) {
  uint64_t now = time_now_ns();
  for (int d = 0; d < 2 && !b->fault.type && !b->ring_broken; d++) {
    if (!b->eof_ns[d] || (!now_anyway && now - b->eof_ns[d] < BOOT_NOTICE_GRACE_MS * 1000000ull)) continue;
    int peer = (b->rank + (d == BOOT_DIR_PREV ? b->nranks - 1 : 1)) % b->nranks;
    struct boot_notice died = {.type = BOOT_NOTICE_DIED, .rank = peer};
    boot_adopt(b, &died, 1);
  }
}

void boot_ring_look_now(struct bootstrap* b) {
  int on = !b->ring_busy && !b->ring_broken;
  struct pollfd p[2] = {{.fd = on && !b->prev_has_data && !b->prev_gone && !b->eof_ns[BOOT_DIR_PREV] ? b->ring_prev_fd : -1,
                         .events = POLLIN},
                        {.fd = on && !b->next_gone && !b->eof_ns[BOOT_DIR_NEXT] ? b->ring_next_fd : -1, .events = POLLIN}};
  if (!on || poll(p, 2, 0) <= 0) return;
  if (p[0].revents) watch_one(b, 1);
  if (p[1].revents && !b->ring_broken && !b->next_gone) watch_one(b, 0);
}

int boot_watch_fds(struct bootstrap* b, int fds[2]) {
  pthread_mutex_lock(&b->mu);
  int on = !b->ring_busy && !b->ring_broken && !b->aborted;
  fds[0] = on && !b->prev_has_data && !b->prev_gone && !b->eof_ns[BOOT_DIR_PREV] ? b->ring_prev_fd : -1;
  fds[1] = on && !b->next_gone && !b->eof_ns[BOOT_DIR_NEXT] ? b->ring_next_fd : -1;
  pthread_mutex_unlock(&b->mu);
  return on;
}

void boot_watch_ready(struct bootstrap* b, const short revents[2]) {
  pthread_mutex_lock(&b->mu);
  int on = !b->ring_busy && !b->ring_broken && !b->aborted;
  if (on && revents[0] && !b->prev_has_data && !b->prev_gone && !b->eof_ns[BOOT_DIR_PREV]) watch_one(b, 1);
  on = !b->ring_busy && !b->ring_broken && !b->aborted;
  if (on && revents[1] && !b->next_gone && !b->eof_ns[BOOT_DIR_NEXT]) watch_one(b, 0);
  pthread_mutex_unlock(&b->mu);
}

int boot_wait_notice(struct bootstrap* b, int fd, int grace_ms, struct boot_notice* out) {
  uint64_t end = time_deadline_ms(grace_ms);
  uint8_t hdr[WIRE_FRAME_BYTES];
  /* left is recomputed every round (heartbeats keep coming: they must not renew the grace); the
   * round at 0 left still looks at what is queued, however late this runs. */
  for (int64_t left = grace_ms; fd >= 0; left = time_left_ms(end)) {
    if (left < 0) left = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, (int)left) > 0) {
      ssize_t n = recv(fd, hdr, sizeof(hdr), MSG_DONTWAIT | MSG_PEEK);
      if (n == (ssize_t)sizeof(hdr) && boot_notice_decode(b, hdr, out) && out->type == BOOT_NOTICE_BEAT) {
        (void)!recv(fd, hdr, sizeof(hdr), MSG_DONTWAIT); /* a heartbeat queued before the notice */
        continue;
      }
      if (n == (ssize_t)sizeof(hdr)) return boot_notice_decode(b, hdr, out);
      if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) return 0;
    }
    if (left == 0) return 0;
  }
  return 0;
}

int bootstrap_faulted(struct bootstrap* b) { return atomic_load_explicit(&b->faulted, memory_order_acquire); }

mscclppResult_t bootstrap_health(struct bootstrap* b) {
  pthread_mutex_lock(&b->mu);
  mscclppResult_t res = b->fault.type ? boot_fault_error(b, "liveness") : mscclppSuccess;
  pthread_mutex_unlock(&b->mu);
  return res;
}

mscclppResult_t bootstrap_explain(struct bootstrap* b, int peer, int grace_ms) {
  uint64_t end = time_deadline_ms(grace_ms);
  mscclppResult_t res = mscclppSuccess;
  pthread_mutex_lock(&b->mu);
  while (!b->fault.type && !b->left_ns[peer] && !b->aborted && time_now_ns() < end) {
    struct timespec ts = {.tv_sec = (time_t)(end / 1000000000ull), .tv_nsec = (long)(end % 1000000000ull)};
    pthread_cond_timedwait(&b->cv, &b->mu, &ts); /* CLOCK_MONOTONIC (boot_alloc) */
  }
  char why[256];
  if (b->fault.type && b->fault.rank != peer)
    res = MPP_ERR(mscclppRemoteError, "%s; the connection to rank %d ended after that",
                  boot_fault_text(b, &b->fault, why, sizeof(why)), peer);
  else if (b->fault.type)
    res = MPP_ERR(mscclppRemoteError, "%s", boot_fault_text(b, &b->fault, why, sizeof(why)));
  else if (b->left_ns[peer])
    res = MPP_ERR(mscclppRemoteError, "rank %d left (destroyed its communicator)", peer);
  pthread_mutex_unlock(&b->mu);
  return res;
}

void bootstrap_report_death(struct bootstrap* b, int peer) {
  if (!b || peer < 0 || peer >= b->nranks || peer == b->rank) return;
  pthread_mutex_lock(&b->mu);
  if (!b->fault.type && !b->aborted && b->ring_ready) {
    struct boot_notice died = {.type = BOOT_NOTICE_DIED, .rank = peer};
    boot_adopt(b, &died, !b->ring_busy); /* recorded and passed to both neighbours before we go on */
  }
  pthread_mutex_unlock(&b->mu);
}
