/* internal.h - the bootstrap's private state and the functions its files share.
 *
 * Threads: the caller's thread runs init, allgather and barrier (over the ring sockets); any thread
 * may send or recv; one progress thread per bootstrap accepts connections on the listener, checks
 * their hellos and reads incoming point-to-point frames into a queue that recv takes from, so a
 * sender never waits for the receiver to post its recv. `mu` guards the queue, the fds that abort
 * shuts down and the flags; the progress thread alone owns its list of incoming connections. */
#ifndef MPP_BOOTSTRAP_INTERNAL_H_
#define MPP_BOOTSTRAP_INTERNAL_H_

#include <pthread.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "util/log.h"
#include "util/socket.h"

#define BOOT_SEND_LOCKS 64 /* send mutexes, striped over peers */

/* One received point-to-point message waiting for its recv. */
struct boot_msg {
  struct boot_msg* next;
  int peer;
  int32_t tag;
  uint64_t size;
  uint8_t* data;
};

struct boot_conn; /* an incoming connection (progress.c) */

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
  uint32_t ring_seq; /* allgathers and barriers done, to catch mismatched calls */

  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC; signalled on new messages, state changes */
  int aborted, stopping, ring_broken;
  mscclppResult_t progress_err; /* set when the progress thread died */
  struct boot_msg *q_head, *q_tail;
  uint8_t* peer_gone;  /* [nranks]: its incoming p2p connection ended */
  int* send_fds;       /* [nranks]: our outgoing p2p connection, -1 until the first send */
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
/* The connecting side of a handshake (util/auth.h) of the given kind: sends our hello (fresh
 * nonce, no secret), checks that the peer's challenge proves the job's key, sends our proof. */
mscclppResult_t boot_send_hello(struct bootstrap* b, int fd, int kind, uint64_t deadline_ns, const char* what);
/* 1 when fd has hung up or reports an error or unexpected data, without waiting. */
int boot_fd_dead(int fd);
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

/* Listens on addr (falling back to the wildcard address of its family when that address is not
 * local) and starts a detached thread serving one rendezvous with the given secret. *bound gets
 * the address actually listened on. */
mscclppResult_t boot_root_start(const union sock_addr* addr, const uint8_t secret[WIRE_SECRET_BYTES],
                                union sock_addr* bound);

/* ---- progress.c ---- */

/* Starts / stops the progress thread (stop joins it and closes its connections). */
mscclppResult_t boot_progress_start(struct bootstrap* b);
void boot_progress_stop(struct bootstrap* b);
/* Makes the progress thread look at its flags now (abort, stop). */
void boot_progress_wake(struct bootstrap* b);

/* ---- p2p.c ---- */

/* Why b cannot be used any more (Aborted, or the progress thread's failure), else Success; mu held. */
mscclppResult_t boot_check_state(struct bootstrap* b, const char* op);
/* Appends a received message to the queue and wakes waiting recvs (takes mu). */
void boot_enqueue(struct bootstrap* b, struct boot_msg* m);
/* Waits until the progress thread has handed over the ring connection from rank-1, watching the
 * connection to rank+1 for a hang-up meanwhile. */
mscclppResult_t boot_wait_ring_prev(struct bootstrap* b, uint64_t deadline_ns);
/* Frees every queued message (destroy). */
void boot_queue_free(struct bootstrap* b);

/* ---- ring.c ---- */

/* Fails every later ring operation and closes both ring sockets so that the neighbours see EOF. */
void boot_ring_break(struct bootstrap* b);
/* The same with mu held (abort). */
void boot_ring_shutdown(struct bootstrap* b);
/* A barrier that init runs once the ring is connected, to confirm it end to end. */
mscclppResult_t boot_ring_check(struct bootstrap* b);

/* The bootstrap's deadline for a wait starting now. */
uint64_t boot_deadline(const struct bootstrap* b);

#endif /* MPP_BOOTSTRAP_INTERNAL_H_ */
