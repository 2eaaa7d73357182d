/* ring_setup.c - forming the ring during init, so that a rank that dies or stops in any part of
 * init is named on every other rank within about the stall limit, not at the bootstrap timeout.
 *
 * Each rank connects to rank+1's listener and runs a RING handshake; rank+1's progress thread
 * answers it and takes the socket as its connection from rank-1. From the moment a ring socket
 * exists on a rank, its progress thread beats on it and watches it (heartbeat.c, liveness.c), as it
 * does between operations later, so silence and hang-ups are caught in the rest of init as well.
 *
 * Before that, one wait has no heartbeat: for rank+1's challenge. Rank+1's progress thread ran
 * before it joined the root (only then is its address in the table) and answers a hello within one
 * poll round, so a connection that the kernel accepted but that brings no challenge within the
 * stall limit (counted in capped ticks as heartbeat silence is, so our own descheduling does not
 * count) means rank+1's process is stopped or hung: STUCK. A refused connection, or one closed
 * during the handshake, means rank+1 is gone (it listens until its bootstrap ends): DIED. Either
 * becomes b's fault and goes to rank-1 and on around the ring; a rank still waiting for rank-1's
 * connection learns it on its connection to rank+1.
 *
 * A rank whose init fails after the table came lingers until rank-1's ring connection arrives (at
 * most the stall limit) and tells it why; otherwise rank-1 would find this rank's listener gone
 * and blame it. What this cannot tell apart from slowness: a rank that never reached the root (the
 * root's timeout reports it), and a connect() to rank+1 that the kernel never answers (a full
 * listen queue, a lossy network: the timeout). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "bootstrap/internal.h"
#include "util/err.h"
#include "util/timeutil.h"

#define LINGER_OFF_MS 1000 /* how long a failed init lingers when the stall check is off */

static int ring_prev(const struct bootstrap* b) { return (b->rank + b->nranks - 1) % b->nranks; }

/* b's error for init when it knows of a fault or was aborted (mu taken), else Success. */
static mscclppResult_t known_fault(struct bootstrap* b) {
  pthread_mutex_lock(&b->mu);
  mscclppResult_t res = b->fault.type || b->aborted ? boot_check_state(b, "init") : mscclppSuccess;
  pthread_mutex_unlock(&b->mu);
  return res;
}

/* Waits for rank+1's challenge on fd. Rank+1's silence is counted like a neighbour's (each tick
 * worth at most tick_cap_ns); at the stall limit *quiet_ns is set and the result is RemoteError.
 * Also fails on a hang-up, on b's fault and at the deadline. */
static mscclppResult_t await_challenge(struct bootstrap* b, int fd, uint8_t chal[AUTH_CHALLENGE_BYTES],
                                       uint64_t deadline_ns, const char* who, uint64_t* quiet_ns) {
  size_t got = 0;
  uint64_t quiet = 0, tick = time_now_ns();
  while (got < AUTH_CHALLENGE_BYTES) {
    ssize_t n = recv(fd, chal + got, AUTH_CHALLENGE_BYTES - got, MSG_DONTWAIT);
    if (n > 0) {
      got += (size_t)n;
      continue;
    }
    if (n == 0) return MPP_ERR(mscclppRemoteError, "%s closed the ring connection during the handshake", who);
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return MPP_ERRNO(mscclppRemoteError, errno, "ring handshake with %s", who);
    uint64_t now = time_now_ns(), gap = now - tick;
    quiet += gap < b->tick_cap_ns ? gap : b->tick_cap_ns;
    tick = now;
    if (b->stall_ns && quiet >= b->stall_ns) {
      *quiet_ns = quiet;
      return MPP_ERR(mscclppRemoteError, "%s accepted the ring connection but did not answer its handshake", who);
    }
    MPP_CHECK(known_fault(b));
    if (time_now_ns() >= deadline_ns)
      return MPP_ERR(mscclppTimeout, "ring handshake with %s: no challenge within the bootstrap timeout", who);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, b->poll_ms) < 0 && errno != EINTR) return MPP_ERRNO(mscclppSystemError, errno, "poll");
  }
  return mscclppSuccess;
}

/* The ring connection to rank+1 failed with res: a stall (quiet_ns set) or a hang-up becomes b's
 * fault, told around the ring; this rank's own failures (Timeout, SystemError) are returned as
 * they are (the linger tells them). */
static mscclppResult_t connect_failed(struct bootstrap* b, mscclppResult_t res, uint64_t quiet_ns, const char* who) {
  mscclppResult_t known = known_fault(b);
  if (known != mscclppSuccess) return known; /* learnt meanwhile from the other side: that is the cause */
  if (res != mscclppRemoteError)
    return BOOT_WRAP(res, "bootstrap init of rank %d: ring connection to %s", b->rank, who);
  char detail[512], why[256];
  snprintf(detail, sizeof(detail), "%s", err_last());
  uint64_t tenths = quiet_ns / 100000000ull;
  int next = (b->rank + 1) % b->nranks;
  struct boot_notice n = quiet_ns ? (struct boot_notice){.type = BOOT_NOTICE_STUCK, .rank = next,
                                                         .cause = tenths > 255 ? 255 : (int)tenths}
                                  : (struct boot_notice){.type = BOOT_NOTICE_DIED, .rank = next};
  pthread_mutex_lock(&b->mu);
  if (!b->fault.type && !b->aborted) boot_adopt(b, &n, 1);
  boot_fault_text(b, &b->fault, why, sizeof(why));
  pthread_mutex_unlock(&b->mu);
  return MPP_ERR(mscclppRemoteError, "bootstrap init on rank %d: %s (ring connection: %s)", b->rank, why, detail);
}

/* Waits until the progress thread has handed over rank-1's ring connection, or b learns of a
 * fault (the progress thread watches the connection to rank+1 meanwhile). */
static mscclppResult_t wait_prev(struct bootstrap* b, uint64_t deadline_ns) {
  char who[128];
  mscclppResult_t res = mscclppSuccess;
  pthread_mutex_lock(&b->mu);
  while (b->ring_prev_fd < 0 && (res = boot_check_state(b, "init")) == mscclppSuccess)
    if (boot_cv_wait_until(b, deadline_ns) == ETIMEDOUT && b->ring_prev_fd < 0)
      res = MPP_ERR(mscclppTimeout, "bootstrap init: rank %d waited in vain for %s to connect its ring", b->rank,
                    boot_peer_str(b, ring_prev(b), who, sizeof(who)));
  pthread_mutex_unlock(&b->mu);
  return res;
}

mscclppResult_t boot_ring_setup(struct bootstrap* b, uint64_t deadline_ns) {
  if (b->nranks == 1) return mscclppSuccess;
  int next = (b->rank + 1) % b->nranks, fd = -1;
  char who[128];
  boot_peer_str(b, next, who, sizeof(who));
  uint8_t hello[WIRE_HELLO_BYTES], chal[AUTH_CHALLENGE_BYTES];
  uint64_t quiet_ns = 0;
  mscclppResult_t res = boot_connect_peer(&b->addrs[next], deadline_ns, &fd);
  if (res == mscclppSuccess) res = boot_hello_start(b, fd, WIRE_KIND_RING, deadline_ns, who, hello);
  if (res == mscclppSuccess) res = await_challenge(b, fd, chal, deadline_ns, who, &quiet_ns);
  if (res == mscclppSuccess) res = boot_hello_finish(b, fd, hello, chal, deadline_ns, who);
  /* the challenge's nonce follows its 8-byte header (util/auth.h) */
  if (res == mscclppSuccess) res = boot_seal_keys(b, hello, chal + 8, SEAL_CLIENT, &b->ring_tx, NULL);
  if (res != mscclppSuccess) {
    sock_close(&fd);
    return connect_failed(b, res, quiet_ns, who);
  }
  pthread_mutex_lock(&b->mu);
  b->ring_next_fd = fd; /* from now on the progress thread beats on it and watches it */
  pthread_mutex_unlock(&b->mu);
  boot_progress_wake(b);
  return wait_prev(b, deadline_ns);
}

void boot_ring_linger(struct bootstrap* b) {
  if (b->nranks == 1) return;
  uint64_t end = time_deadline_ms(b->stall_ns ? (int64_t)(b->stall_ns / 1000000ull) : LINGER_OFF_MS);
  int prev = ring_prev(b);
  pthread_mutex_lock(&b->mu);
  boot_ring_shutdown(b); /* tells the neighbours connected so far why; a later rank-1 is told on arrival */
  while (b->ring_prev_fd < 0 && !(b->fault.type && b->fault.rank == prev) && !b->aborted &&
         b->progress_err == mscclppSuccess)
    if (boot_cv_wait_until(b, end) == ETIMEDOUT) break;
  pthread_mutex_unlock(&b->mu);
}
