/* init.c - unique ids, joining a rendezvous, abort and destroy.
 *
 * Init of rank r: listen (on loopback when the root is on loopback, else on sock_local_addr(), so
 * MSCCLPP_SOCKET_IFNAME applies), start the progress thread, run a handshake with the root (our
 * hello with our listen address; the root proves it holds the job's key, we prove the same),
 * receive every rank's address, form the ring (ring_setup.c: connect to rank r+1's listener with a
 * RING handshake while the progress thread accepts rank r-1's) and finish with a barrier around the
 * ring. One deadline (the timeout) bounds the whole init; a dead or stuck rank fails it sooner
 * (ring_setup.c says how, and what only the timeout catches). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/timeutil.h"

mscclppResult_t bootstrap_unique_id(mscclppUniqueId* id) {
  MPP_CHECK_ARG(id != NULL, "bootstrap_unique_id: id is NULL");
  struct wire_id w;
  memset(&w, 0, sizeof(w));
  MPP_CHECK(wire_random_secret(w.secret));
  union sock_addr local;
  MPP_CHECK(sock_local_addr(&local));
  MPP_CHECK(boot_root_start(&local, w.secret, -1, &w.root));
  return wire_encode_id(&w, id);
}

mscclppResult_t bootstrap_id_from_address(const char* host_port, int rank, mscclppUniqueId* id) {
  MPP_CHECK_ARG(host_port != NULL && id != NULL, "bootstrap_id_from_address: NULL argument");
  MPP_CHECK_ARG(rank >= 0, "bootstrap_id_from_address: rank %d is negative", rank);
  struct wire_id w;
  memset(&w, 0, sizeof(w));
  MPP_CHECK(sock_parse_addr(host_port, &w.root));
  MPP_CHECK(boot_address_secret(rank, w.secret));
  if (rank == 0) {
    union sock_addr bound;
    mscclppResult_t res = boot_root_start(&w.root, w.secret, 0, &bound);
    if (res != mscclppSuccess) return BOOT_WRAP(res, "starting the bootstrap root on %s", host_port);
  }
  return wire_encode_id(&w, id);
}

void bootstrap_root_stop(const mscclppUniqueId* id) {
  struct wire_id w;
  if (id && wire_decode_id(id->internal, sizeof(id->internal), &w) == mscclppSuccess) boot_root_stop(&w.root, w.secret);
}

int bootstrap_rank(const struct bootstrap* b) { return b->rank; }
int bootstrap_nranks(const struct bootstrap* b) { return b->nranks; }

static int is_loopback(const union sock_addr* a) {
  if (a->sa.sa_family == AF_INET) return (ntohl(a->sin.sin_addr.s_addr) >> 24) == 127;
  return a->sa.sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&a->sin6.sin6_addr);
}

/* Allocates b with every fd at -1 and its locks ready. */
static mscclppResult_t boot_alloc(int rank, int nranks, int timeout_ms, struct bootstrap** out) {
  struct bootstrap* b = calloc(1, sizeof(*b));
  if (!b) return MPP_ERR(mscclppSystemError, "bootstrap: no memory");
  b->rank = rank, b->nranks = nranks, b->timeout_ms = timeout_ms;
  b->listen_fd = b->ring_next_fd = b->ring_prev_fd = -1;
  b->wake_fds[0] = b->wake_fds[1] = -1;
  b->addrs = calloc((size_t)nranks, sizeof(*b->addrs));
  b->peer_gone = calloc((size_t)nranks, 1);
  b->left_ns = calloc((size_t)nranks, sizeof(*b->left_ns));
  b->ring_left = -1;
  b->paused = calloc((size_t)nranks, 1);
  b->paused_tag = calloc((size_t)nranks, sizeof(*b->paused_tag));
  int64_t cap = param_int(PARAM_BOOTSTRAP_QUEUE_BYTES);
  b->queue_cap = cap > 0 ? (uint64_t)cap : 268435456u;
  b->send_fds = malloc(sizeof(int) * (size_t)nranks);
  b->send_seals = calloc((size_t)nranks, sizeof(*b->send_seals));
  boot_beat_init(b);
  int ignored;
  b->shortages_at_start = err_shortages(&ignored);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&b->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&b->mu, NULL);
  for (int i = 0; i < BOOT_SEND_LOCKS; i++) pthread_mutex_init(&b->send_mu[i], NULL);
  *out = b;
  if (!b->addrs || !b->peer_gone || !b->send_fds || !b->send_seals || !b->paused || !b->paused_tag || !b->left_ns)
    return MPP_ERR(mscclppSystemError, "bootstrap: no memory for %d ranks", nranks);
  for (int i = 0; i < nranks; i++) b->send_fds[i] = -1;
  if (pipe2(b->wake_fds, O_CLOEXEC | O_NONBLOCK) < 0) {
    int e = errno;
    return MPP_ERRNO(mscclppSystemError, e, "bootstrap: pipe for the progress thread%s", sock_fd_hint(e));
  }
  return mscclppSuccess;
}

/* Opens this rank's listener (non-blocking: the progress thread polls it). */
static mscclppResult_t boot_listen(struct bootstrap* b) {
  union sock_addr la;
  memset(&la, 0, sizeof(la));
  if (is_loopback(&b->root)) {
    la.sa.sa_family = b->root.sa.sa_family;
    if (la.sa.sa_family == AF_INET)
      la.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else
      la.sin6.sin6_addr = in6addr_loopback;
  } else {
    MPP_CHECK(sock_local_addr(&la));
  }
  MPP_CHECK(sock_listen(&la, &b->listen_fd, &b->my_addr));
  int fl = fcntl(b->listen_fd, F_GETFL);
  if (fl < 0 || fcntl(b->listen_fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return MPP_ERRNO(mscclppSystemError, errno, "bootstrap: making the listener non-blocking");
  return mscclppSuccess;
}

/* Sends our hello to the root and receives every rank's listen address, or why the rendezvous
 * failed (the root's failure reply, checked against our handshake). */
static mscclppResult_t join_root(struct bootstrap* b, uint64_t deadline) {
  char what[INET6_ADDRSTRLEN + 64], a[INET6_ADDRSTRLEN + 16];
  snprintf(what, sizeof(what), "the bootstrap root at %s", sock_addr_str(&b->root, a, sizeof(a)));
  int fd = -1;
  mscclppResult_t res = sock_connect(&b->root, deadline, &fd);
  if (res != mscclppSuccess) return BOOT_WRAP(res, "bootstrap init of rank %d: connecting to %s", b->rank, what);
  struct boot_transcript t;
  res = boot_send_hello_kept(b, fd, WIRE_KIND_ROOT, deadline, what, &t);
  int told = 0; /* the root said why it failed */
  if (res == mscclppSuccess) res = boot_root_read_reply(b, fd, &t, deadline, what, &told);
  sock_close(&fd);
  if (res != mscclppSuccess && !told) {
    char why[512];
    if (boot_root_failure(&b->root, why, sizeof(why))) /* our own root failed: say why */
      return MPP_ERR(res, "bootstrap init of rank %d of %d: the root failed: %s", b->rank, b->nranks, why);
    return BOOT_WRAP(res, "bootstrap init of rank %d of %d: waiting for the address table (the root runs in rank 0's "
                     "process, or the one that made the unique id: its log says why it failed)", b->rank, b->nranks);
  }
  if (res != mscclppSuccess) return res;
  uint8_t mine[WIRE_ADDR_BYTES], listed[WIRE_ADDR_BYTES];
  wire_encode_addr(&b->my_addr, mine);
  wire_encode_addr(&b->addrs[b->rank], listed);
  if (memcmp(mine, listed, sizeof(mine)) != 0)
    return MPP_ERR(mscclppRemoteError, "bootstrap init of rank %d: the root lists another address for this rank", b->rank);
  return mscclppSuccess;
}

mscclppResult_t bootstrap_init(const mscclppUniqueId* id, int rank, int nranks, int timeout_ms, struct bootstrap** out) {
  MPP_CHECK_ARG(id != NULL && out != NULL, "bootstrap_init: NULL argument");
  MPP_CHECK_ARG(nranks >= 1 && nranks <= WIRE_MAX_RANKS, "bootstrap_init: nranks %d outside [1, %d]", nranks,
                WIRE_MAX_RANKS);
  MPP_CHECK_ARG(rank >= 0 && rank < nranks, "bootstrap_init: rank %d outside [0, %d)", rank, nranks);
  *out = NULL;
  struct wire_id w;
  MPP_CHECK(wire_decode_id(id->internal, sizeof(id->internal), &w));
  if (timeout_ms <= 0) {
    int64_t s = param_int(PARAM_BOOTSTRAP_TIMEOUT);
    timeout_ms = s <= 0 ? 120000 : (s > INT_MAX / 1000 ? INT_MAX : (int)(s * 1000));
  }
  uint64_t deadline = time_deadline_ms(timeout_ms);
  struct bootstrap* b = NULL;
  mscclppResult_t res = boot_alloc(rank, nranks, timeout_ms, &b);
  if (res == mscclppSuccess) {
    b->root = w.root;
    memcpy(b->secret, w.secret, WIRE_SECRET_BYTES);
    res = wire_boot_key(b->secret, b->key);
  }
  if (res == mscclppSuccess) {
    res = boot_listen(b);
  }
  if (res == mscclppSuccess) res = boot_progress_start(b);
  if (res == mscclppSuccess) res = join_root(b, deadline);
  int joined = res == mscclppSuccess;
  if (res == mscclppSuccess) res = boot_ring_setup(b, deadline);
  if (res == mscclppSuccess) res = boot_ring_check(b);
  if (res != mscclppSuccess) {
    if (joined) boot_ring_linger(b); /* so that rank-1 learns why too, rather than blaming this rank */
    bootstrap_abort(b);
    bootstrap_destroy(b);
    return res;
  }
  pthread_mutex_lock(&b->mu);
  b->ring_ready = 1; /* a clean destroy now tells the neighbours LEFT */
  pthread_mutex_unlock(&b->mu);
  boot_progress_wake(b);
  LOG_INFO_(LOG_SUB_BOOTSTRAP, "bootstrap: rank %d of %d ready", rank, nranks);
  *out = b;
  return mscclppSuccess;
}

/* The errno of a resource shortage (fds, memory) that this process reported since b began, else 0:
 * told to the other ranks with this rank's FAILED notice, so their errors say why it failed. */
static int shortage_cause(const struct bootstrap* b) {
  int e = 0;
  return err_shortages(&e) > b->shortages_at_start ? e : 0;
}

void bootstrap_abort(struct bootstrap* b) {
  if (!b) return;
  int cause = shortage_cause(b);
  pthread_mutex_lock(&b->mu);
  b->aborted = 1;
  if (!b->own_cause) b->own_cause = cause;
  /* shutdown, not close: other threads may be blocked on these fds; destroy closes them. */
  if (b->listen_fd >= 0) shutdown(b->listen_fd, SHUT_RDWR);
  if (!b->fault.type) { /* the abort may be a death's consequence: tell that */
    boot_ring_look_now(b);
    boot_eof_settle(b, 1);
  }
  boot_ring_shutdown(b);
  for (int i = 0; b->send_fds && i < b->nranks; i++)
    if (b->send_fds[i] >= 0) shutdown(b->send_fds[i], SHUT_RDWR);
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
  boot_progress_wake(b); /* the progress thread closes the incoming connections */
}

void bootstrap_destroy(struct bootstrap* b) {
  if (!b) return;
  boot_progress_stop(b);
  if (!b->aborted && b->ring_ready) { /* tell both neighbours this is a departure, not a death */
    struct boot_notice bye = {.type = BOOT_NOTICE_LEFT, .rank = b->rank};
    pthread_mutex_lock(&b->mu);
    boot_ring_close_with(b, &bye, 1);
    pthread_mutex_unlock(&b->mu);
  }
  sock_close(&b->listen_fd);
  sock_close(&b->ring_next_fd);
  sock_close(&b->ring_prev_fd);
  for (int i = 0; b->send_fds && i < b->nranks; i++)
    if (b->send_fds[i] >= 0) sock_close(&b->send_fds[i]);
  sock_close(&b->wake_fds[0]);
  sock_close(&b->wake_fds[1]);
  boot_queue_free(b);
  free(b->conns);
  free(b->addrs);
  free(b->peer_gone);
  free(b->paused);
  free(b->left_ns);
  free(b->paused_tag);
  free(b->send_fds);
  for (int i = 0; b->send_seals && i < b->nranks; i++) seal_clear(&b->send_seals[i]);
  free(b->send_seals);
  seal_clear(&b->ring_tx);
  free(b->ring_buf);
  seal_clear(&b->ring_rx);
  for (int i = 0; i < BOOT_SEND_LOCKS; i++) pthread_mutex_destroy(&b->send_mu[i]);
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
  free(b);
}
