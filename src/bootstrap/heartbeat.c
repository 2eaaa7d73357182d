/* heartbeat.c - catching a rank that is alive but stuck (its process stopped, or hung so that its
 * bootstrap threads no longer run).
 *
 * Every rank sends a heartbeat (a BEAT notice, liveness.c's 16-byte frame) to both ring
 * neighbours every MSCCLPP_BOOTSTRAP_HEARTBEAT_MS, from the moment each ring socket exists (in
 * init too). The ring's owner sends them: the progress thread while the ring is idle, the ring
 * code during an allgather or barrier (so a rank waiting in a long barrier keeps beating). Towards
 * rank-1 only notices ever travel, so a heartbeat may go at any time; towards rank+1 only between
 * the operation's frames. Every reader of a ring socket skips heartbeats. A heartbeat the socket took only in part is finished before anything else goes
 * that way, so the frames are never cut.
 *
 * Any bytes from a neighbour prove it alive. A neighbour silent for MSCCLPP_BOOTSTRAP_STALL_MS,
 * counted only while the owner watches that socket, is declared stuck: a STUCK notice naming it
 * goes around the ring like a death's (liveness.c), so every survivor's waits fail naming it. The
 * silence is counted by ticks of the owner's loop, each worth at most tick_cap_ns: when this rank
 * itself did not run for a while (descheduled on a loaded machine, or stopped), that gap is not
 * held against its neighbours, whose heartbeats then wait unread in the socket. A stuck rank that
 * resumes finds the STUCK notice naming itself (or its ring shut) and fails its own waits. */
#include <errno.h>
#include <sys/socket.h>

#include "bootstrap/internal.h"
#include "util/param.h"
#include "util/timeutil.h"

#define MIN_BEAT_MS 10
#define MAX_POLL_MS 200  /* the owners' longest wait between looks at the ring */
#define TICK_SLACK_MS 100 /* a tick may come this late before the gap counts as our own pause */

void boot_beat_init(struct bootstrap* b) {
  int64_t beat = param_int(PARAM_BOOTSTRAP_HEARTBEAT_MS), stall = param_int(PARAM_BOOTSTRAP_STALL_MS);
  if (beat < MIN_BEAT_MS) beat = MIN_BEAT_MS;
  if (stall > 0 && stall < 4 * beat) stall = 4 * beat; /* a couple of late heartbeats are no stall */
  b->poll_ms = beat / 2 < MAX_POLL_MS ? (int)(beat / 2) : MAX_POLL_MS;
  b->beat_ns = (uint64_t)beat * 1000000ull;
  b->stall_ns = stall > 0 ? (uint64_t)stall * 1000000ull : 0;
  b->tick_cap_ns = (uint64_t)(b->poll_ms + TICK_SLACK_MS) * 1000000ull;
  struct boot_notice n = {.type = BOOT_NOTICE_BEAT, .rank = b->rank};
  boot_notice_encode(&n, b->beat_frame);
}

static int dir_fd(const struct bootstrap* b, int dir) { return dir == BOOT_DIR_PREV ? b->ring_prev_fd : b->ring_next_fd; }

int boot_beat_flush(struct bootstrap* b, int dir) {
  int fd = dir_fd(b, dir);
  while (b->beat_left[dir] > 0 && fd >= 0) {
    ssize_t n = send(fd, b->beat_frame + WIRE_FRAME_BYTES - b->beat_left[dir], b->beat_left[dir],
                     MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n <= 0) return 0; /* full (the rest goes later) or broken (the watch tells) */
    b->beat_left[dir] -= (uint8_t)n;
  }
  return b->beat_left[dir] == 0;
}

void boot_beat(struct bootstrap* b, int dir, int at_boundary, uint64_t now) {
  int fd = dir_fd(b, dir);
  if (fd < 0 || now - b->beat_sent_ns[dir] < b->beat_ns) return;
  if (dir == BOOT_DIR_NEXT && !at_boundary) return;
  b->beat_sent_ns[dir] = now; /* also when the socket is full: the next try is a period later */
  if (!boot_beat_flush(b, dir)) return;
  ssize_t n = send(fd, b->beat_frame, WIRE_FRAME_BYTES, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n > 0) b->beat_left[dir] = (uint8_t)(WIRE_FRAME_BYTES - (size_t)n);
}

int boot_quiet_tick(struct bootstrap* b, const int watched[2], uint64_t now) {
  uint64_t gap = b->tick_ns && now > b->tick_ns ? now - b->tick_ns : 0;
  if (gap > b->tick_cap_ns) gap = b->tick_cap_ns;
  b->tick_ns = now;
  int stuck = -1;
  for (int d = 0; d < 2; d++) {
    b->quiet_ns[d] = watched[d] ? b->quiet_ns[d] + gap : 0;
    if (b->stall_ns && b->quiet_ns[d] >= b->stall_ns && stuck < 0) stuck = d;
  }
  return stuck;
}

struct boot_notice boot_stuck_notice(const struct bootstrap* b, int dir) {
  uint64_t tenths = b->quiet_ns[dir] / 100000000ull;
  int peer = (b->rank + (dir == BOOT_DIR_PREV ? b->nranks - 1 : 1)) % b->nranks;
  return (struct boot_notice){.type = BOOT_NOTICE_STUCK, .rank = peer, .cause = tenths > 255 ? 255 : (int)tenths};
}

void boot_idle_liveness(struct bootstrap* b) {
  pthread_mutex_lock(&b->mu);
  int on = !b->ring_busy && !b->ring_broken && !b->aborted; /* also during init, once a ring socket exists */
  if (on) {
    uint64_t now = time_now_ns();
    if (!b->prev_gone) boot_beat(b, BOOT_DIR_PREV, 1, now);
    if (!b->next_gone) boot_beat(b, BOOT_DIR_NEXT, 1, now);
    int watched[2] = {b->ring_prev_fd >= 0 && !b->prev_has_data && !b->prev_gone && !b->eof_ns[BOOT_DIR_PREV],
                      b->ring_next_fd >= 0 && !b->next_gone && !b->eof_ns[BOOT_DIR_NEXT]};
    boot_eof_settle(b, 0);
    int d = boot_quiet_tick(b, watched, now);
    if (d >= 0) {
      struct boot_notice n = boot_stuck_notice(b, d);
      boot_adopt(b, &n, 1);
    }
  }
  pthread_mutex_unlock(&b->mu);
}
