/* internal.h - the bootstrap's private state and the functions its files share.
 *
 * Threads: the caller's thread runs init, allgather and barrier (over the ring sockets); any thread
 * may send or recv; one progress thread per bootstrap accepts connections on the listener, checks
 * their hellos and reads incoming point-to-point frames into a queue that recv takes from, so a
 * sender never waits for the receiver to post its recv. Between ring operations (ring_busy 0) the
 * progress thread also watches the ring sockets for notices and hang-ups (liveness.c) and sends
 * heartbeats (heartbeat.c); during one, only the ring code reads and writes them. `mu` guards the queue, the fds that abort shuts down, the flags
 * and any read of an idle ring socket; the progress thread alone owns its list of incoming
 * connections. */
#ifndef MPP_BOOTSTRAP_INTERNAL_H_
#define MPP_BOOTSTRAP_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "util/auth.h"
#include "util/log.h"
#include "util/seal.h"
#include "util/socket.h"

#define BOOT_SEND_LOCKS 64 /* send mutexes, striped over peers */

/* One received point-to-point message waiting for its recv. */
struct boot_msg {
  struct boot_msg* next;
  int peer;
  int32_t tag;
  uint64_t size;
  uint8_t* data;
  size_t cap; /* bytes allocated for data (counted in queued_bytes) */
};

/* A recv waiting for (peer, tag) (on its stack, listed under mu): the progress thread reads a
 * message that such a recv wants even when the queue is over its cap. */
struct boot_waiter {
  struct boot_waiter* next;
  int peer;
  int32_t tag;
};

struct boot_conn; /* an incoming connection (progress.c) */

/* What one rank tells the ring about a rank that ended or stopped responding, or a heartbeat
 * (liveness.c). BEAT is no fault: it only proves its sender's progress thread runs. */
enum { BOOT_NOTICE_DIED = 1, BOOT_NOTICE_FAILED = 2, BOOT_NOTICE_LEFT = 3, BOOT_NOTICE_BEAT = 4, BOOT_NOTICE_STUCK = 5 };
struct boot_notice {
  int type;  /* 0: none */
  int rank;  /* the rank that died, failed, left, stopped responding, or sends the heartbeat */
  int cause; /* FAILED: an errno (0: aborted or failed, see its log); STUCK: the silence in 100 ms */
};

/* Ring directions, the index of the per-neighbour liveness state. */
enum { BOOT_DIR_PREV = 0, BOOT_DIR_NEXT = 1 };
/* A bare EOF from a ring neighbour waits this long for a notice from the other side naming the
 * rank that failed first (the neighbour may only have gone down because of it). */
#define BOOT_NOTICE_GRACE_MS 300

struct bootstrap {
  int rank, nranks;
  int timeout_ms;
  uint8_t secret[WIRE_SECRET_BYTES];
  uint8_t key[WIRE_KEY_BYTES]; /* the handshakes' key: wire_boot_key(secret) */
  union sock_addr root;
  union sock_addr my_addr; /* where this rank listens */
  union sock_addr* addrs; /* every rank's listen address, from the root */
  int listen_fd;
  int ring_next_fd, ring_prev_fd;
  /* Sealing (util/seal.h) of the ring's frames: ring_tx seals what goes to rank+1 (set by init
   * before it uses ring_next_fd), ring_rx opens what comes from rank-1 (set by the progress thread
   * under mu with ring_prev_fd). Then only the ring code uses them (like the ring's data). */
  struct seal ring_tx, ring_rx;
  uint8_t* ring_buf; /* the ring code's buffer for sealed bodies (ring.c), ring_buf_cap bytes */
  size_t ring_buf_cap;
  uint32_t ring_seq; /* allgathers and barriers done, to catch mismatched calls */

  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC; signalled on new messages, state changes */
  int aborted, stopping, ring_broken;
  int ring_ready;    /* init is done: destroy tells the neighbours LEFT */
  int ring_busy;     /* an allgather or barrier is using the ring sockets */
  int prev_has_data; /* rank-1's next operation has begun arriving: left for the ring code */
  struct boot_notice fault; /* the first death or failure learnt of (type 0: none) */
  _Atomic int faulted;      /* fault.type is set: read without the lock (bootstrap_faulted) */
  int own_cause;            /* errno told with this rank's own FAILED notice (abort: a shortage's) */
  uint64_t shortages_at_start; /* err_shortages() when this bootstrap began */
  int ring_left;            /* a rank whose departure broke the ring, else -1 */
  int prev_gone, next_gone; /* that ring neighbour left: its socket is no longer watched */
  /* When the progress thread saw that neighbour's ring socket end without a notice (0: not); its
   * death is adopted only after BOOT_NOTICE_GRACE_MS without a notice from the other side, since it
   * may have gone down after another rank's failure (liveness.c). The socket is not watched since. */
  uint64_t eof_ns[2];
  uint64_t* left_ns;        /* [nranks]: when that rank's departure was learnt (0: not) */
  /* Heartbeats (liveness.c), by ring direction. Owned by whichever thread owns the ring: the
   * progress thread while ring_busy is 0 (under mu), the ring code while it is 1; ring_busy
   * changes under mu, which orders the hand-over. */
  uint64_t beat_ns, stall_ns, tick_cap_ns; /* heartbeat period, silence limit (0: off), credit cap */
  int poll_ms;                             /* how long either owner waits between looks at the ring */
  uint8_t beat_frame[WIRE_FRAME_BYTES];    /* this rank's heartbeat */
  uint8_t beat_left[2];                    /* bytes of a heartbeat the socket has not yet taken */
  uint64_t beat_sent_ns[2];                /* when the last heartbeat went that way */
  uint64_t quiet_ns[2];                    /* silence heard from that neighbour while watched */
  uint64_t tick_ns;                        /* the last silence tick */
  mscclppResult_t progress_err; /* set when the progress thread died */
  struct boot_msg *q_head, *q_tail;
  _Atomic uint64_t nqueued;         /* messages in the queue (changed under mu; read without it by try_recv) */
  uint64_t queued_bytes, queue_cap; /* unreceived message bytes (incl. ones being read) and the cap */
  struct boot_waiter* waiters;      /* recvs waiting now */
  int32_t* paused_tag;              /* [nranks]: tag of the message of that peer held back by the cap */
  uint8_t* paused;                  /* [nranks]: 1 while that peer's connection is held back */
  int nheld;                        /* connections held back (progress thread writes, under mu) */
  uint8_t* peer_gone;  /* [nranks]: its incoming p2p connection ended (2: on a record that failed
                        * authentication) */
  int* send_fds;       /* [nranks]: our outgoing p2p connection, -1 until the first send */
  struct seal* send_seals; /* [nranks]: what seals the frames on send_fds[peer] (under its send lock) */
  pthread_mutex_t send_mu[BOOT_SEND_LOCKS];

  int wake_fds[2]; /* pipe: a byte wakes the progress thread */
  pthread_t progress;
  int progress_started;
  struct boot_conn* conns; /* progress thread only */
  struct log_rate refusals; /* rate limit of the progress thread's refusal warnings */
  int nconns, conns_cap;
};

/* ---- netio.c: bounded socket I/O for the bootstrap's own connections ---- */

/* Connects to a rank's listener. Unlike sock_connect a refusal is final: ranks listen before the
 * root hands out their addresses, so a refused connection means the peer is gone. */
mscclppResult_t boot_connect_peer(const union sock_addr* addr, uint64_t deadline_ns, int* fd);
/* Sends / receives exactly len bytes by poll and non-blocking calls (never SIGPIPE). Failures
 * name `what` (e.g. "rank 3 at 10.0.0.2:4000"). */
mscclppResult_t boot_send_all(int fd, const void* buf, size_t len, uint64_t deadline_ns, const char* what);
mscclppResult_t boot_recv_all(int fd, void* buf, size_t len, uint64_t deadline_ns, const char* what);
/* The same, watched by `watch` (NULL: not): they also give up, with watch's fault as the error,
 * within 100 ms of watch learning of a fault (a dead or stuck rank) or being aborted. */
mscclppResult_t boot_send_all_w(struct bootstrap* watch, int fd, const void* buf, size_t len, uint64_t deadline_ns,
                                const char* what);
mscclppResult_t boot_recv_all_w(struct bootstrap* watch, int fd, void* buf, size_t len, uint64_t deadline_ns,
                                const char* what);
/* The connecting side of a handshake (util/auth.h) of the given kind, watched by b: sends our
 * hello (fresh nonce, no secret), checks that the peer's challenge proves the job's key, sends our
 * proof. boot_send_hello does it all; start (sends the hello, kept in `hello`) and finish (given
 * the challenge) let the caller wait for the challenge its own way. */
mscclppResult_t boot_send_hello(struct bootstrap* b, int fd, int kind, uint64_t deadline_ns, const char* what);
mscclppResult_t boot_hello_start(struct bootstrap* b, int fd, int kind, uint64_t deadline_ns, const char* what,
                                 uint8_t hello[WIRE_HELLO_BYTES]);
mscclppResult_t boot_hello_finish(struct bootstrap* b, int fd, const uint8_t hello[WIRE_HELLO_BYTES],
                                  const uint8_t chal[AUTH_CHALLENGE_BYTES], uint64_t deadline_ns, const char* what);
/* The same, keeping the handshake's transcript: what an answer bound to it (the root's failure
 * reply) is checked against. */
struct boot_transcript {
  uint8_t hello[WIRE_HELLO_BYTES]; /* ours, as sent */
  uint8_t nonce[WIRE_NONCE_BYTES]; /* the accepting side's challenge nonce */
};
mscclppResult_t boot_send_hello_kept(struct bootstrap* b, int fd, int kind, uint64_t deadline_ns, const char* what,
                                     struct boot_transcript* t);
/* Derives a connection's sealing keys (util/seal.h) from b's handshake key and the transcript
 * (hello as sent, the server's challenge nonce); side: which end we were. */
mscclppResult_t boot_seal_keys(const struct bootstrap* b, const uint8_t hello[WIRE_HELLO_BYTES],
                               const uint8_t nonce[WIRE_NONCE_BYTES], enum seal_side side, struct seal* tx,
                               struct seal* rx);
/* Records "context: <the error already recorded>" as the last error and returns res. */
mscclppResult_t boot_wrap(mscclppResult_t res, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define BOOT_WRAP(res, ...) boot_wrap((res), __FILE__, __LINE__, __VA_ARGS__)
/* "rank R at ip:port" for messages. */
const char* boot_peer_str(const struct bootstrap* b, int peer, char* buf, size_t len);

/* ---- secret.c ---- */

/* The secret of a "host:port" rendezvous (MSCCLPP_BOOTSTRAP_SECRET, else the launcher's job id,
 * else the public default, warned about once when rank is 0). */
mscclppResult_t boot_address_secret(int rank, uint8_t secret[WIRE_SECRET_BYTES]);

/* ---- root.c ---- */

/* Listens on addr (an error naming it when that fails) and starts a detached thread serving one
 * rendezvous with the given secret. owner: the rank whose process this is (-1: unknown, a unique
 * id's maker), named when the root itself fails. *bound gets the address actually listened on. */
mscclppResult_t boot_root_start(const union sock_addr* addr, const uint8_t secret[WIRE_SECRET_BYTES], int owner,
                                union sock_addr* bound);
/* Stops this process's root on addr's port with that secret, if one still collects ranks: it
 * tells every joined rank that the owner's init failed, closes its listener and returns once the
 * port is free (at most 2 s). When this process ran out of fds it instead fails the rendezvous with
 * that cause and lingers like any failed root, so that every rank learns it. A root whose
 * rendezvous failed is left to tell late ranks why for its last few seconds. */
void boot_root_stop(const union sock_addr* addr, const uint8_t secret[WIRE_SECRET_BYTES]);
/* Why this process's root on addr's port failed last (into buf), or NULL when none of its did. */
const char* boot_root_failure(const union sock_addr* addr, char* buf, size_t len);

/* ---- root_reply.c: what a failed rendezvous tells the ranks ---- */

/* The failure in words, for rank `me` (-1: the root's own log), e.g. "rank 3 hung up during the
 * rendezvous ...". */
const char* boot_root_fail_text(const struct wire_fail* f, int me, char* buf, size_t len);
/* The result code a rank returns for f. */
mscclppResult_t boot_root_fail_code(const struct wire_fail* f, int me);
/* Rank side: reads the root's answer to a finished handshake t: the table into b->addrs, or a
 * failure, whose MAC is checked against t, as an error saying why the rendezvous failed (*told
 * set to 1; 0 for any other error). */
mscclppResult_t boot_root_read_reply(struct bootstrap* b, int fd, const struct boot_transcript* t, uint64_t deadline_ns,
                                     const char* what, int* told);

/* ---- progress.c ---- */

/* Starts / stops the progress thread (stop joins it and closes its connections). */
mscclppResult_t boot_progress_start(struct bootstrap* b);
void boot_progress_stop(struct bootstrap* b);
/* Makes the progress thread look at its flags now (abort, stop). */
void boot_progress_wake(struct bootstrap* b);

/* ---- liveness.c (mu held by the caller unless said) ---- */

void boot_notice_encode(const struct boot_notice* n, uint8_t out[WIRE_FRAME_BYTES]);
/* 1 when hdr is a valid notice for this bootstrap (filled into n). */
int boot_notice_decode(const struct bootstrap* b, const uint8_t hdr[WIRE_FRAME_BYTES], struct boot_notice* n);
/* Sends n to both ring neighbours (to rank+1 only when its stream is at a frame boundary), once,
 * then shuts both ring sockets down. */
void boot_ring_close_with(struct bootstrap* b, const struct boot_notice* n, int next_at_boundary);
/* Records n (the first death or failure becomes b->fault; a departure is noted) and passes it on. */
void boot_adopt(struct bootstrap* b, const struct boot_notice* n, int next_at_boundary);
/* "rank 3 died (...)" and the like. */
const char* boot_fault_text(const struct bootstrap* b, const struct boot_notice* n, char* buf, size_t len);
/* The error of b->fault for operation op. */
mscclppResult_t boot_fault_error(struct bootstrap* b, const char* op);
/* Progress thread (takes mu): the ring fds to poll now ([0] from rank-1, [1] to rank+1; -1 when
 * not), and the handling of what poll found on them. */
int boot_watch_fds(struct bootstrap* b, int fds[2]);
void boot_watch_ready(struct bootstrap* b, const short revents[2]);
/* Looks at the idle ring once, without waiting (abort: a neighbour's death already visible there
 * is what this rank passes on, rather than its own abort). */
void boot_ring_look_now(struct bootstrap* b);
/* Adopts the death of a neighbour whose socket ended without a notice (eof_ns) once the grace has
 * passed with no other fault known, or at once when now_anyway (mu held). */
void boot_eof_settle(struct bootstrap* b, int now_anyway);
/* A ring connection from rank-1 arrived after the ring broke (init failed meanwhile): tells it
 * why (b->fault, else this rank's own failure) and shuts it down. mu held. */
void boot_ring_tell_late(struct bootstrap* b, int fd);
/* Waits up to grace_ms for a notice on fd (without mu); 1 and *out when one came. Heartbeats are
 * skipped. What is already queued is always looked at (grace_ms 0: only that, without waiting). */
int boot_wait_notice(struct bootstrap* b, int fd, int grace_ms, struct boot_notice* out);
/* Progress thread (takes mu): heartbeats to the idle ring's neighbours, and the silence check
 * that declares one stuck. */
void boot_idle_liveness(struct bootstrap* b);

/* ---- heartbeats (liveness.c): the ring's owner (see struct bootstrap) calls these ---- */

/* Reads MSCCLPP_BOOTSTRAP_HEARTBEAT_MS / STALL_MS and prepares this rank's heartbeat (init). */
void boot_beat_init(struct bootstrap* b);
/* Sends a heartbeat towards dir when one is due; to rank+1 only when at_boundary (its stream is
 * between frames). A heartbeat the socket took only part of is finished first (boot_beat_flush). */
void boot_beat(struct bootstrap* b, int dir, int at_boundary, uint64_t now);
/* Finishes a partly sent heartbeat towards dir; 1 when none is pending (a frame may follow). */
int boot_beat_flush(struct bootstrap* b, int dir);
/* Bytes came from dir: that neighbour is alive. */
static inline void boot_heard(struct bootstrap* b, int dir) { b->quiet_ns[dir] = 0; }
/* Adds the time since the last tick (at most tick_cap_ns: a gap longer than that means this rank
 * itself did not run, which says nothing of its neighbour) to the silence of each watched
 * direction and clears the others. Returns a direction silent for the stall limit, else -1. */
int boot_quiet_tick(struct bootstrap* b, const int watched[2], uint64_t now);
/* The STUCK notice for the neighbour towards dir. */
struct boot_notice boot_stuck_notice(const struct bootstrap* b, int dir);

/* ---- p2p.c ---- */

/* Why b cannot be used any more (Aborted, or the progress thread's failure), else Success; mu held. */
mscclppResult_t boot_check_state(struct bootstrap* b, const char* op);
/* Appends a received message to the queue and wakes waiting recvs (takes mu). */
void boot_enqueue(struct bootstrap* b, struct boot_msg* m);
/* Waits on b->cv (mu held) until deadline_ns. Returns ETIMEDOUT once it has passed. */
int boot_cv_wait_until(struct bootstrap* b, uint64_t deadline_ns);
/* Frees every queued message (destroy). */
void boot_queue_free(struct bootstrap* b);

/* ---- ring_setup.c: forming the ring during init ---- */

/* Connects to rank+1 (a RING handshake whose challenge must come within the stall limit) and
 * waits for rank-1's connection; a dead or stuck neighbour becomes b's fault, told around. */
mscclppResult_t boot_ring_setup(struct bootstrap* b, uint64_t deadline_ns);
/* Init failed after the address table came: breaks the ring telling why, then waits (at most the
 * stall limit) for rank-1's ring connection, so that it learns why too instead of finding this
 * rank's listener gone (which would name this rank). */
void boot_ring_linger(struct bootstrap* b);

/* ---- ring.c ---- */

/* Fails every later ring operation: tells both neighbours why (b->fault, else this rank's own
 * failure) and shuts both ring sockets down. mu held (abort). */
void boot_ring_shutdown(struct bootstrap* b);
/* A barrier that init runs once the ring is connected, to confirm it end to end. */
mscclppResult_t boot_ring_check(struct bootstrap* b);

/* The bootstrap's deadline for a wait starting now. */
uint64_t boot_deadline(const struct bootstrap* b);

#endif /* MPP_BOOTSTRAP_INTERNAL_H_ */
