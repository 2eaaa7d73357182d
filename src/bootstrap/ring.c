/* ring.c - allgather and barrier over the ring (rank -> rank+1). Step s of an allgather sends the
 * slot received in step s-1 (our own first) to rank+1 while receiving the next slot from rank-1,
 * both non-blocking under one poll, so large slots cannot deadlock on full socket buffers. Every
 * frame carries the operation's sequence number as its tag, so mismatched calls are caught.
 * Any failure breaks the ring: a notice naming the rank that died or failed (liveness.c) goes to
 * rank-1 (the only bytes ever sent against the ring's direction) and, at a frame boundary, to
 * rank+1, and both ring sockets are shut down; the neighbours fail and pass the notice on, in both
 * directions around the ring, so every survivor returns an error naming that rank promptly. A bare
 * EOF waits BOOT_NOTICE_GRACE_MS for a notice from the other side (the neighbour may only have relayed
 * a failure mid-frame) before it counts as that neighbour's death; a send to rank+1 that fails first
 * takes the notice rank+1 may have queued before its close (ring_fail). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bootstrap/internal.h"
#include "util/err.h"
#include "util/timeutil.h"

/* One step: a frame out to rank+1 and a frame in from rank-1. */
struct xfer {
  uint8_t shdr[WIRE_FRAME_BYTES], rhdr[WIRE_FRAME_BYTES];
  const uint8_t* sbuf;
  uint8_t* rbuf;
  size_t size, sdone, rdone; /* the sealed body's bytes; done counts include the 16-byte header */
  size_t plain;              /* the slot's bytes (the header's length; size = plain + SEAL_OVERHEAD) */
  int32_t tag;
  int eof_from;  /* the neighbour whose connection ended without a notice, else -1 */
  int next_left; /* rank+1 left after taking all we send in this operation (its last step) */
};


void boot_ring_shutdown(struct bootstrap* b) {
  struct boot_notice self = {.type = BOOT_NOTICE_FAILED, .rank = b->rank, .cause = b->own_cause};
  boot_ring_close_with(b, b->fault.type ? &b->fault : &self, !b->ring_busy);
}

/* A notice arrived from a neighbour during an operation: adopt it and fail with it. */
static mscclppResult_t notice_err(struct bootstrap* b, const struct boot_notice* n, int next_at_boundary) {
  pthread_mutex_lock(&b->mu);
  boot_adopt(b, n, next_at_boundary);
  mscclppResult_t res = n->type == BOOT_NOTICE_LEFT ? mscclppSuccess : boot_fault_error(b, "allgather/barrier");
  pthread_mutex_unlock(&b->mu);
  if (n->type == BOOT_NOTICE_LEFT) {
    char why[256];
    res = MPP_ERR(mscclppRemoteError, "bootstrap ring on rank %d: %s", b->rank, boot_fault_text(b, n, why, sizeof(why)));
  }
  return res;
}

static mscclppResult_t io_err(struct bootstrap* b, struct xfer* x, int peer, ssize_t n, int err, const char* dir) {
  char who[128];
  boot_peer_str(b, peer, who, sizeof(who));
  if (n == 0 || err == ECONNRESET || err == EPIPE) { /* a reset: it died with our bytes unread */
    x->eof_from = peer;
    return MPP_ERR(mscclppRemoteError, "bootstrap ring: %s closed the connection (exited, aborted or failed)", who);
  }
  return MPP_ERRNO(mscclppRemoteError, err, "bootstrap ring: %s %s", dir, who);
}

/* Sends what the socket takes now (a partly sent heartbeat first: frames are never cut). */
static mscclppResult_t step_send(struct bootstrap* b, struct xfer* x) {
  if (x->sdone == 0 && !boot_beat_flush(b, BOOT_DIR_NEXT)) return mscclppSuccess;
  const uint8_t* p = x->sdone < WIRE_FRAME_BYTES ? x->shdr + x->sdone : x->sbuf + (x->sdone - WIRE_FRAME_BYTES);
  size_t want = x->sdone < WIRE_FRAME_BYTES ? WIRE_FRAME_BYTES - x->sdone : WIRE_FRAME_BYTES + x->size - x->sdone;
  ssize_t n = send(b->ring_next_fd, p, want, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return mscclppSuccess;
  if (n <= 0) return io_err(b, x, (b->rank + 1) % b->nranks, -1, errno, "sending to");
  x->sdone += (size_t)n;
  return mscclppSuccess;
}

/* Receives what has arrived; checks the header once complete. */
static mscclppResult_t step_recv(struct bootstrap* b, struct xfer* x) {
  int prev = (b->rank + b->nranks - 1) % b->nranks;
  uint8_t* p = x->rdone < WIRE_FRAME_BYTES ? x->rhdr + x->rdone : x->rbuf + (x->rdone - WIRE_FRAME_BYTES);
  size_t want = x->rdone < WIRE_FRAME_BYTES ? WIRE_FRAME_BYTES - x->rdone : WIRE_FRAME_BYTES + x->size - x->rdone;
  ssize_t n = recv(b->ring_prev_fd, p, want, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return mscclppSuccess;
  if (n <= 0) return io_err(b, x, prev, n, errno, "receiving from");
  boot_heard(b, BOOT_DIR_PREV);
  x->rdone += (size_t)n;
  if (x->rdone == WIRE_FRAME_BYTES) {
    struct wire_frame f;
    struct boot_notice note;
    if (boot_notice_decode(b, x->rhdr, &note) && note.type == BOOT_NOTICE_BEAT) { /* between frames */
      x->rdone = 0;
      return mscclppSuccess;
    }
    if (boot_notice_decode(b, x->rhdr, &note)) return notice_err(b, &note, x->sdone == 0 || x->sdone == WIRE_FRAME_BYTES + x->size);
    MPP_CHECK(wire_decode_frame(x->rhdr, WIRE_FRAME_BYTES, &f));
    char who[128];
    if (f.tag != x->tag || f.length != (uint64_t)x->plain)
      return MPP_ERR(mscclppInvalidUsage,
                     "bootstrap ring: %s sent %llu bytes for operation %d, this rank expected %zu bytes for "
                     "operation %d (mismatched allgather/barrier calls?)",
                     boot_peer_str(b, prev, who, sizeof(who)), (unsigned long long)f.length, (int)f.tag, x->plain,
                     (int)x->tag);
  }
  return mscclppSuccess;
}

/* rank+1 became readable. It sends us nothing but notices, so a notice or other data means it
 * failed, died or left. EOF while we still send means it is gone; EOF after our part is sent may be
 * a clean finish (it completed the operation and left), so *watch is cleared and rank-1's EOF will
 * tell instead. */
static mscclppResult_t next_readable(struct bootstrap* b, struct xfer* x, size_t total, int* watch) {
  int next = (b->rank + 1) % b->nranks;
  uint8_t hdr[WIRE_FRAME_BYTES];
  ssize_t n = recv(b->ring_next_fd, hdr, sizeof(hdr), MSG_DONTWAIT | MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return mscclppSuccess;
  if (n > 0) boot_heard(b, BOOT_DIR_NEXT);
  struct boot_notice note;
  if (n == (ssize_t)sizeof(hdr) && boot_notice_decode(b, hdr, &note)) {
    (void)!recv(b->ring_next_fd, hdr, sizeof(hdr), MSG_DONTWAIT);
    if (note.type == BOOT_NOTICE_BEAT) return mscclppSuccess;
    if (note.type == BOOT_NOTICE_LEFT && note.rank == next && x->sdone == total) { /* a clean finish */
      x->next_left = 1;
      *watch = 0;
      return mscclppSuccess;
    }
    return notice_err(b, &note, x->sdone == 0 || x->sdone == total);
  }
  if (n > 0 && n < (ssize_t)sizeof(hdr)) return mscclppSuccess; /* the rest of a notice is coming */
  if (n > 0) {
    char who[128];
    return MPP_ERR(mscclppRemoteError, "bootstrap ring: %s failed or aborted", boot_peer_str(b, next, who, sizeof(who)));
  }
  if (n == 0 && x->sdone == total) {
    *watch = 0;
    return mscclppSuccess;
  }
  return io_err(b, x, next, n, errno, "receiving from");
}

/* Heartbeats to both neighbours and the silence check while an operation waits (init's own
 * barrier too: a neighbour not yet in it beats from its progress thread, which owns its ring
 * sockets from the moment they exist). A neighbour silent for the stall limit breaks the ring
 * naming it. */
static mscclppResult_t step_liveness(struct bootstrap* b, const struct xfer* x, int watch_next) {
  size_t total = WIRE_FRAME_BYTES + x->size;
  uint64_t now = time_now_ns();
  boot_beat(b, BOOT_DIR_PREV, 1, now);
  if (watch_next) boot_beat(b, BOOT_DIR_NEXT, x->sdone == 0 || x->sdone == total, now);
  int watched[2] = {x->rdone < total, watch_next};
  int d = boot_quiet_tick(b, watched, now);
  if (d < 0) return mscclppSuccess;
  struct boot_notice n = boot_stuck_notice(b, d);
  return notice_err(b, &n, x->sdone == 0 || x->sdone == total);
}

/* Runs one step to completion or failure. */
static mscclppResult_t step(struct bootstrap* b, struct xfer* x, uint64_t deadline_ns) {
  size_t total = WIRE_FRAME_BYTES + x->size;
  int watch_next = 1;
  while (x->sdone < total || x->rdone < total) {
    MPP_CHECK(step_liveness(b, x, watch_next));
    struct pollfd p[2] = {{.fd = watch_next ? b->ring_next_fd : -1, .events = POLLIN | (x->sdone < total ? POLLOUT : 0)},
                          {.fd = x->rdone < total ? b->ring_prev_fd : -1, .events = POLLIN}};
    int64_t left = time_left_ms(deadline_ns);
    if (left <= 0) {
      char n[128], q[128];
      return MPP_ERR(mscclppTimeout,
                     "bootstrap ring on rank %d: operation %d stalled (sent %zu/%zu bytes to %s, received %zu/%zu "
                     "from %s) within the bootstrap timeout",
                     b->rank, (int)x->tag, x->sdone, total, boot_peer_str(b, (b->rank + 1) % b->nranks, n, sizeof(n)),
                     x->rdone, total, boot_peer_str(b, (b->rank + b->nranks - 1) % b->nranks, q, sizeof(q)));
    }
    if (poll(p, 2, left > b->poll_ms ? b->poll_ms : (int)left) < 0) {
      if (errno == EINTR) continue;
      return MPP_ERRNO(mscclppSystemError, errno, "bootstrap ring: poll");
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) MPP_CHECK(next_readable(b, x, total, &watch_next));
    /* Each goes on while it makes progress: a frame's header and sealed body without another poll. */
    for (size_t was = SIZE_MAX; (p[0].revents & POLLOUT) && x->sdone < total && x->sdone != was;) {
      was = x->sdone;
      MPP_CHECK(step_send(b, x));
    }
    for (size_t was = SIZE_MAX; p[1].revents && x->rdone < total && x->rdone != was;) {
      was = x->rdone;
      MPP_CHECK(step_recv(b, x));
    }
  }
  return mscclppSuccess;
}

/* Fails fast when the ring cannot be used; else marks it busy (the progress thread leaves it). */
static mscclppResult_t ring_enter(struct bootstrap* b, const char* op) {
  pthread_mutex_lock(&b->mu);
  mscclppResult_t res = boot_check_state(b, op);
  if (res == mscclppSuccess && b->ring_left >= 0)
    res = MPP_ERR(mscclppRemoteError, "bootstrap %s on rank %d: rank %d left (destroyed its communicator)", op, b->rank,
                  b->ring_left);
  else if (res == mscclppSuccess && b->ring_broken)
    res = MPP_ERR(mscclppRemoteError, "bootstrap %s on rank %d: the ring broke in an earlier failure", op, b->rank);
  if (res == mscclppSuccess) b->ring_busy = 1;
  b->tick_ns = 0; /* the ring code counts silence from its own first tick */
  pthread_mutex_unlock(&b->mu);
  if (res == mscclppSuccess) boot_progress_wake(b); /* it stops polling the ring now */
  return res;
}

/* The operation is over: the progress thread watches the ring again. */
static void ring_leave(struct bootstrap* b) {
  pthread_mutex_lock(&b->mu);
  b->ring_busy = 0;
  b->prev_has_data = 0;
  b->tick_ns = 0; /* the progress thread counts silence from its own first tick */
  pthread_mutex_unlock(&b->mu);
  boot_progress_wake(b);
}

/* A step failed with res. Breaks the ring telling why: the fault already known, a notice that
 * comes within the grace from the other side after a bare EOF (the neighbour only relayed it), else
 * the neighbour's death (bare EOF) or this rank's own failure. Returns the error to report. */
static mscclppResult_t ring_fail(struct bootstrap* b, const struct xfer* x, mscclppResult_t res, const char* op) {
  size_t total = WIRE_FRAME_BYTES + x->size;
  int at_boundary = x->sdone == 0 || x->sdone == total;
  pthread_mutex_lock(&b->mu);
  int known = b->fault.type != 0 || b->aborted || b->ring_broken;
  pthread_mutex_unlock(&b->mu);
  struct boot_notice n = {.type = BOOT_NOTICE_FAILED, .rank = b->rank};
  /* A send to rank+1 that failed (EPIPE, ECONNRESET: it closed with our frame unread) tells
   * nothing of what rank+1 sent first. A rank that goes down sends its notice before it closes, so
   * the notice precedes the FIN or reset in this socket's receive stream and stays queued after
   * the reset; poll may only have woken us for the send. Read it before blaming rank+1 itself. */
  if (!known && x->eof_from == (b->rank + 1) % b->nranks && boot_wait_notice(b, b->ring_next_fd, 0, &n))
    return notice_err(b, &n, at_boundary);
  if (!known && x->eof_from >= 0) {
    int prev = (b->rank + b->nranks - 1) % b->nranks;
    int other = x->eof_from == prev ? b->ring_next_fd : b->ring_prev_fd;
    if (!boot_wait_notice(b, other, BOOT_NOTICE_GRACE_MS, &n)) n = (struct boot_notice){.type = BOOT_NOTICE_DIED, .rank = x->eof_from};
  }
  pthread_mutex_lock(&b->mu);
  if (!known) {
    boot_adopt(b, &n, at_boundary);
    if (n.type != BOOT_NOTICE_FAILED || n.rank != b->rank) res = boot_fault_error(b, op);
  } else {
    boot_ring_shutdown(b);
    if (b->fault.type && !b->aborted) res = boot_fault_error(b, op);
  }
  pthread_mutex_unlock(&b->mu);
  return res;
}

/* Buffers for one operation's sealed bodies (what goes out, what comes in): on the stack when
 * small (barriers, small allgathers), else b's kept buffer (ring code only), reused by later
 * operations up to RING_KEEP_BYTES (fresh pages each time would cost more than the sealing). */
#define SEALED_INLINE 512
#define RING_KEEP_BYTES ((size_t)64 << 20)
struct sealed {
  uint8_t inline_buf[2][SEALED_INLINE];
  uint8_t *out, *in;
};
static mscclppResult_t sealed_get(struct bootstrap* b, struct sealed* s, size_t bpr) {
  size_t one = bpr + SEAL_OVERHEAD;
  if (one <= SEALED_INLINE) {
    s->out = s->inline_buf[0], s->in = s->inline_buf[1];
    return mscclppSuccess;
  }
  if (b->ring_buf_cap < 2 * one) {
    free(b->ring_buf);
    b->ring_buf = malloc(2 * one);
    b->ring_buf_cap = b->ring_buf ? 2 * one : 0;
    if (!b->ring_buf) return MPP_ERR(mscclppSystemError, "bootstrap ring: no memory to seal %zu bytes", bpr);
  }
  s->out = b->ring_buf, s->in = b->ring_buf + one;
  return mscclppSuccess;
}
static void sealed_put(struct bootstrap* b) {
  if (b->ring_buf_cap <= RING_KEEP_BYTES) return;
  free(b->ring_buf);
  b->ring_buf = NULL;
  b->ring_buf_cap = 0;
}

/* Step s of an allgather: seals slot `from` (header as associated data) for rank+1, moves the
 * bodies, and opens what rank-1 sent into slot `to` (a record that fails is an error naming
 * rank-1: never wrong data). */
static mscclppResult_t ring_step(struct bootstrap* b, struct xfer* x, struct sealed* sb, const uint8_t* from,
                                 uint8_t* to, uint64_t deadline) {
  struct wire_frame f = {.tag = x->tag, .length = x->plain};
  wire_encode_frame(&f, x->shdr);
  MPP_CHECK(seal_record(&b->ring_tx, x->shdr, WIRE_FRAME_BYTES, from, x->plain, sb->out));
  x->sbuf = sb->out;
  x->rbuf = sb->in;
  MPP_CHECK(step(b, x, deadline));
  char who[160];
  snprintf(who, sizeof(who), "bootstrap ring on rank %d: the connection from rank %d", b->rank,
           (b->rank + b->nranks - 1) % b->nranks);
  return seal_open(&b->ring_rx, x->rhdr, WIRE_FRAME_BYTES, sb->in, x->plain, to ? to : sb->in, who);
}

/* The ring allgather; data may be NULL when bytes_per_rank is 0 (barrier). */
static mscclppResult_t ring_allgather(struct bootstrap* b, uint8_t* data, size_t bpr, const char* op) {
  if (b->nranks == 1) {
    pthread_mutex_lock(&b->mu);
    mscclppResult_t res = boot_check_state(b, op);
    pthread_mutex_unlock(&b->mu);
    return res;
  }
  MPP_CHECK(ring_enter(b, op));
  struct sealed sb;
  mscclppResult_t res = sealed_get(b, &sb, bpr);
  int n = b->nranks, r = b->rank;
  int32_t tag = (int32_t)(++b->ring_seq & 0x7fffffff);
  uint64_t deadline = boot_deadline(b);
  struct xfer x;
  x = (struct xfer){.eof_from = -1};
  for (int s = 0; s < n - 1 && res == mscclppSuccess; s++) {
    x = (struct xfer){.size = bpr + SEAL_OVERHEAD, .plain = bpr, .tag = tag, .eof_from = -1};
    const uint8_t* from = data ? data + (size_t)((r - s + n) % n) * bpr : NULL;
    uint8_t* to = data ? data + (size_t)((r - s - 1 + n) % n) * bpr : NULL;
    res = ring_step(b, &x, &sb, from, to, deadline);
  }
  sealed_put(b);
  if (res != mscclppSuccess) {
    res = ring_fail(b, &x, res, op);
  } else if (x.next_left) { /* now that the operation is done, the ring is over */
    struct boot_notice bye = {.type = BOOT_NOTICE_LEFT, .rank = (r + 1) % n};
    pthread_mutex_lock(&b->mu);
    boot_adopt(b, &bye, 1);
    pthread_mutex_unlock(&b->mu);
  }
  ring_leave(b);
  if (res == mscclppSuccess) return mscclppSuccess;
  pthread_mutex_lock(&b->mu);
  int aborted = b->aborted;
  pthread_mutex_unlock(&b->mu);
  if (aborted) return MPP_ERR(mscclppAborted, "bootstrap %s on rank %d: aborted", op, b->rank);
  return res;
}

mscclppResult_t bootstrap_allgather(struct bootstrap* b, void* data, size_t bytes_per_rank) {
  MPP_CHECK_ARG(b != NULL, "bootstrap_allgather: bootstrap is NULL");
  MPP_CHECK_ARG(data != NULL || bytes_per_rank == 0, "bootstrap_allgather: data is NULL");
  MPP_CHECK_ARG(bytes_per_rank <= WIRE_MAX_PAYLOAD && bytes_per_rank <= SIZE_MAX / (size_t)b->nranks,
                "bootstrap_allgather: %zu bytes per rank times %d ranks is too large", bytes_per_rank, b->nranks);
  return ring_allgather(b, data, bytes_per_rank, "allgather");
}

mscclppResult_t bootstrap_barrier(struct bootstrap* b) {
  MPP_CHECK_ARG(b != NULL, "bootstrap_barrier: bootstrap is NULL");
  /* Step s forwards what arrived in step s-1, so finishing n-1 steps means every rank entered. */
  return ring_allgather(b, NULL, 0, "barrier");
}

/* Used by init to confirm the ring end to end. */
mscclppResult_t boot_ring_check(struct bootstrap* b) { return ring_allgather(b, NULL, 0, "init"); }
