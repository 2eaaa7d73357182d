/* root.c - the rendezvous root: a detached thread that collects one hello per rank (with the rank's
 * listen address) and runs the accepting side of each one's handshake (util/auth.h: our challenge
 * proves to the rank that we hold the job's key, its proof proves the same to us), then sends
 * every rank the table of all listen addresses and exits. A connection counts only once its proof
 * is checked: strangers learn nothing and change nothing; they are refused and logged (rate-limited)
 * while the root keeps waiting for real ranks.
 *
 * A failed rendezvous (this process out of fds, a joined rank that hangs up, a duplicate rank, a
 * mismatched nranks, the owner's failed init) is told to every rank: each joined rank gets a
 * failure reply (wire.h: a cause, ranks and values, MACed over its own handshake) in place of the
 * table, and for a while (the linger) later ranks still run their handshake and get the same
 * reply, so every rank's error says why. One fd stays reserved (/dev/null) so that even a process
 * with none left can accept, answer and close one late rank at a time. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "util/auth.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/timeutil.h"

#define ROOT_MAX_PENDING 64          /* connections that have not finished their hello */
#define ROOT_HELLO_MS 10000          /* how long one connection may take to send its hello */
#define ROOT_GRACE_MS 5000 /* the root outlives the ranks' own deadline by this much */
#define ROOT_POLL_MS 200
#define ROOT_LINGER_MS 10000 /* after a failure, late ranks are told why this long */
#define ROOT_SLACK_MS 500 /* a rank hanging up this close to its own deadline timed out; it did not die */
#define ROOT_FD_PAUSE_MS 100 /* out of fds with no spare: the listener waits this long before another try */
#define ROOT_REPLY_MS 200    /* how long one failure reply may take to send */

/* boot_root_stop's request: give up now (its port free at once), or, when this process ran out of
 * fds, fail with that cause and linger (a retry needs a higher limit anyway). */
enum { ROOT_RUN = 0, ROOT_STOP_NOW = 1, ROOT_STOP_FDS = 2 };

struct pending {
  int fd;
  union sock_addr addr;
  uint8_t buf[WIRE_HELLO_BYTES]; /* the hello, then the proof */
  size_t got;
  int proving;                     /* hello checked and challenged: reading the proof */
  uint8_t hello[WIRE_HELLO_BYTES]; /* the checked hello (the handshake's transcript) */
  uint8_t nonce[WIRE_NONCE_BYTES]; /* our challenge's nonce */
  uint64_t deadline_ns;
};

struct root {
  struct root* next; /* in the list of running roots (roots_mu) */
  /* ROOT_STOP_*, stored by boot_root_stop in another thread and read by the root's loops once per
   * round; it publishes nothing else (the listener's shutdown, if any, only wakes the poll). */
  _Atomic int stop;
  int lingering;     /* the rendezvous failed: late ranks are being told why (roots_mu) */
  int owner;         /* the rank whose process runs this root; -1: the one that made a unique id */
  union sock_addr bound;
  int listen_fd;
  int spare_fd;                  /* /dev/null, closed to make room for one accept when out of fds */
  uint64_t listen_paused_ns;     /* out of fds without a spare: the listener is not polled until then */
  uint64_t shortages_at_start;   /* err_shortages() when the root started */
  int failed;                    /* the rendezvous failed: proved ranks get `fail` */
  struct wire_fail fail;
  uint8_t key[WIRE_KEY_BYTES]; /* the handshakes' key (wire_boot_key) */
  struct log_rate refusals;
  uint64_t deadline_ns;
  int nranks, joined; /* nranks 0 until the first valid hello */
  int first_rank;     /* the rank whose hello fixed nranks */
  int* fds;           /* [nranks] joined ranks' connections, -1 until they join */
  struct boot_transcript* trans; /* [nranks] joined ranks' handshakes (what a failure reply is MACed over) */
  uint64_t* give_up_ns; /* [nranks] when a joined rank's own timeout ends; 0 until it joins */
  union sock_addr* addrs;
  struct pending pend[ROOT_MAX_PENDING];
  int npend;
};

/* The roots this process runs, so that a failed init can stop its own at once (its port free
 * for a retry). A root unlinks itself, under roots_mu, before closing its listener. */
static pthread_mutex_t roots_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t roots_cv = PTHREAD_COND_INITIALIZER;
static struct root* roots;
static char last_failure[512];           /* why this process's last failed root failed */
static union sock_addr last_failure_addr; /* and where it listened */

static const char* addr_text(const union sock_addr* a, char* buf, size_t len) { return sock_addr_str(a, buf, len); }

#define ROOT_REFUSALS "refused connections to the bootstrap root"

static void drop_pending(struct root* r, int i) {
  sock_close(&r->pend[i].fd);
  r->pend[i] = r->pend[--r->npend];
}

/* Records why the rendezvous failed (the first cause wins) and returns the error saying so, in the
 * words every rank will read. */
static mscclppResult_t root_fail(struct root* r, struct wire_fail f) {
  if (!r->failed) r->fail = f;
  r->failed = 1;
  char why[400];
  return MPP_ERR(boot_root_fail_code(&r->fail, -1), "bootstrap root: the rendezvous failed: %s",
                 boot_root_fail_text(&r->fail, -1, why, sizeof(why)));
}

/* Why this process ran out of fds: `e` (EMFILE or ENFILE) and its soft RLIMIT_NOFILE. */
static struct wire_fail fd_failure(const struct root* r, int e) {
  struct rlimit rl;
  int limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < INT32_MAX ? (int)rl.rlim_cur : -1;
  return (struct wire_fail){.cause = WIRE_FAIL_FDS, .rank = r->owner, .value = e, .other_rank = -1,
                            .other_value = limit};
}

/* Sends the failure reply to a proved rank whose handshake was t (without blocking for long: it
 * fits any fresh connection's send buffer). */
static void send_fail(struct root* r, int fd, const struct boot_transcript* t) {
  uint8_t msg[WIRE_FAIL_BYTES];
  wire_encode_fail(&r->fail, r->key, t->hello, t->nonce, msg);
  int quiet = err_quiet(1); /* a rank that has gone already finds out on its own */
  if (boot_send_all(fd, msg, sizeof(msg), time_deadline_ms(ROOT_REPLY_MS), "a rank") != mscclppSuccess)
    LOG_DEBUG_(LOG_SUB_BOOTSTRAP, "bootstrap root: could not tell a rank why the rendezvous failed: %s", err_last());
  err_quiet(quiet);
}

/* Takes the first valid hello (of `rank`): fixes nranks and the deadline. */
static mscclppResult_t first_join(struct root* r, const struct wire_hello* h) {
  r->fds = malloc(sizeof(int) * (size_t)h->nranks);
  r->trans = malloc(sizeof(*r->trans) * (size_t)h->nranks);
  r->addrs = calloc((size_t)h->nranks, sizeof(*r->addrs));
  r->give_up_ns = calloc((size_t)h->nranks, sizeof(*r->give_up_ns));
  if (!r->fds || !r->trans || !r->addrs || !r->give_up_ns) { /* nranks stays 0: nothing to close */
    free(r->fds), free(r->trans), free(r->addrs), free(r->give_up_ns);
    r->fds = NULL, r->trans = NULL, r->addrs = NULL, r->give_up_ns = NULL;
    return root_fail(r, (struct wire_fail){.cause = WIRE_FAIL_INTERNAL, .rank = r->owner, .value = ENOMEM,
                                           .other_rank = -1}); /* "failed: Cannot allocate memory" */
  }
  r->nranks = h->nranks;
  r->first_rank = h->rank;
  for (int i = 0; i < h->nranks; i++) r->fds[i] = -1;
  if (h->timeout_ms > 0) {
    uint64_t d = time_deadline_ms((int64_t)h->timeout_ms + ROOT_GRACE_MS);
    if (d < r->deadline_ns) r->deadline_ns = d;
  }
  return mscclppSuccess;
}

/* Logs (rate-limited) why pending connection i was refused and closes it. */
static void refuse(struct root* r, int i, const char* why) {
  char a[INET6_ADDRSTRLEN + 16];
  log_limited(&r->refusals, LOG_WARN, LOG_SUB_BOOTSTRAP, ROOT_REFUSALS,
              "bootstrap root: refused a connection from %s: %s", addr_text(&r->pend[i].addr, a, sizeof(a)), why);
  drop_pending(r, i);
}

/* Checks the complete hello of pending connection i and answers it with our challenge; a bad
 * hello is refused. */
static void check_hello(struct root* r, int i) {
  struct pending* p = &r->pend[i];
  struct wire_hello h;
  int quiet = err_quiet(1); /* a stranger's bad hello is logged once, by refuse, rate-limited */
  mscclppResult_t res = wire_decode_hello(p->buf, sizeof(p->buf), &h);
  err_quiet(quiet);
  if (res != mscclppSuccess) return refuse(r, i, err_last());
  if (h.kind != WIRE_KIND_ROOT) return refuse(r, i, "not a hello for the root");
  uint8_t chal[AUTH_CHALLENGE_BYTES];
  if (auth_make_challenge(r->key, p->buf, sizeof(p->buf), p->nonce, chal) != mscclppSuccess)
    return refuse(r, i, "no random nonce for the challenge");
  /* A fresh connection's send buffer takes 56 bytes at once; a peer that fills it is no rank. */
  if (send(p->fd, chal, sizeof(chal), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(chal))
    return refuse(r, i, "could not send the challenge");
  memcpy(p->hello, p->buf, sizeof(p->hello));
  p->proving = 1;
  p->got = 0;
}

/* Pending connection i has proved the key but cannot join: it learns why (the failure recorded by
 * the caller, or the earlier one), and the connection ends. */
static void answer_failed(struct root* r, int i) {
  struct boot_transcript t;
  memcpy(t.hello, r->pend[i].hello, sizeof(t.hello));
  memcpy(t.nonce, r->pend[i].nonce, sizeof(t.nonce));
  send_fail(r, r->pend[i].fd, &t);
  drop_pending(r, i);
}

/* Records the proved rank h of pending connection i as joined, or fails the rendezvous on a
 * different nranks or a duplicate rank (telling that rank too). */
static mscclppResult_t join(struct root* r, int i, const struct wire_hello* h) {
  struct pending* p = &r->pend[i];
  mscclppResult_t res = r->nranks == 0 ? first_join(r, h) : mscclppSuccess;
  if (res == mscclppSuccess && h->nranks != r->nranks)
    res = root_fail(r, (struct wire_fail){.cause = WIRE_FAIL_NRANKS, .rank = h->rank, .value = h->nranks,
                                          .other_rank = r->first_rank, .other_value = r->nranks});
  else if (res == mscclppSuccess && r->give_up_ns[h->rank] != 0)
    res = root_fail(r, (struct wire_fail){.cause = WIRE_FAIL_TWICE, .rank = h->rank, .other_rank = -1});
  if (res != mscclppSuccess) {
    answer_failed(r, i);
    return res;
  }
  r->fds[h->rank] = p->fd;
  memcpy(r->trans[h->rank].hello, p->hello, sizeof(p->hello));
  memcpy(r->trans[h->rank].nonce, p->nonce, sizeof(p->nonce));
  r->give_up_ns[h->rank] = h->timeout_ms ? time_deadline_ms((int64_t)h->timeout_ms - ROOT_SLACK_MS) : UINT64_MAX;
  r->addrs[h->rank] = h->addr;
  r->joined++;
  p->fd = -1;
  drop_pending(r, i);
  return mscclppSuccess;
}

/* Checks the complete proof of pending connection i: refuses strangers (logged, connection closed),
 * records a rank, or (once the rendezvous has failed) tells the rank why. */
static mscclppResult_t finish_hello(struct root* r, int i) {
  struct pending* p = &r->pend[i];
  char a[INET6_ADDRSTRLEN + 16];
  addr_text(&p->addr, a, sizeof(a));
  struct wire_hello h;
  if (!auth_check_proof(r->key, p->hello, sizeof(p->hello), p->nonce, p->buf)) {
    refuse(r, i, "no proof of the job's secret (wrong or missing MSCCLPP_BOOTSTRAP_SECRET?)");
    return mscclppSuccess;
  }
  MPP_CHECK(wire_decode_hello(p->hello, sizeof(p->hello), &h)); /* checked before */
  if (r->failed) {
    LOG_DEBUG_(LOG_SUB_BOOTSTRAP, "bootstrap root: telling rank %d (%s) that the rendezvous failed", h.rank, a);
    answer_failed(r, i);
    return mscclppSuccess;
  }
  MPP_CHECK(join(r, i, &h));
  LOG_DEBUG_(LOG_SUB_BOOTSTRAP, "bootstrap root: rank %d of %d joined from %s", h.rank, r->nranks, a);
  return mscclppSuccess;
}

/* Reads what pending connection i has sent so far. */
static mscclppResult_t read_pending(struct root* r, int i) {
  struct pending* p = &r->pend[i];
  size_t want = p->proving ? AUTH_PROOF_BYTES : sizeof(p->buf);
  ssize_t n = recv(p->fd, p->buf + p->got, want - p->got, MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return mscclppSuccess;
  if (n <= 0) {
    refuse(r, i, "hung up before finishing its handshake");
    return mscclppSuccess;
  }
  p->got += (size_t)n;
  if (p->got < want) return mscclppSuccess;
  if (!p->proving) {
    check_hello(r, i);
    return mscclppSuccess;
  }
  return finish_hello(r, i);
}

/* Out of fds at accept(). While collecting, that fails the rendezvous (every joined rank holds one
 * of ours; closing them after the failure replies makes room). Once failed, the spare fd makes room
 * for this one connection; without a spare the listener rests ROOT_FD_PAUSE_MS (no spinning). */
static mscclppResult_t accept_short(struct root* r, int e, int* fd, union sock_addr* a) {
  if (!r->failed) return root_fail(r, fd_failure(r, e));
  if (r->spare_fd >= 0) {
    sock_close(&r->spare_fd);
    socklen_t alen = sizeof(*a);
    *fd = accept4(r->listen_fd, &a->sa, &alen, SOCK_CLOEXEC | SOCK_NONBLOCK);
  }
  if (*fd < 0) r->listen_paused_ns = time_deadline_ms(ROOT_FD_PAUSE_MS);
  return mscclppSuccess;
}

/* Accepts one connection as a pending handshake. */
static mscclppResult_t accept_one(struct root* r) {
  union sock_addr a;
  socklen_t alen = sizeof(a);
  int fd = accept4(r->listen_fd, &a.sa, &alen, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE)) MPP_CHECK(accept_short(r, errno, &fd, &a));
  else if (fd < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
    r->listen_paused_ns = time_deadline_ms(ROOT_FD_PAUSE_MS); /* e.g. ENOBUFS: no spinning on it either */
  if (fd < 0) return mscclppSuccess; /* EAGAIN, or a connection that went away */
  if (r->npend == ROOT_MAX_PENDING) { /* drop the oldest: real ranks send their hello at once */
    int oldest = 0;
    for (int i = 1; i < r->npend; i++)
      if (r->pend[i].deadline_ns < r->pend[oldest].deadline_ns) oldest = i;
    refuse(r, oldest, "too many unfinished handshakes");
  }
  struct pending* p = &r->pend[r->npend++];
  memset(p, 0, sizeof(*p));
  p->fd = fd;
  p->addr = a;
  p->deadline_ns = time_deadline_ms(ROOT_HELLO_MS);
  return mscclppSuccess;
}

/* A joined rank hung up. Near its own deadline it timed out, as the others are about to: the root
 * lets them time out on their own (closing their connections now would turn their Timeout into a
 * RemoteError) and gives up shortly after. Earlier, the rank died: fail everyone at once. */
static mscclppResult_t joined_hung_up(struct root* r, int k) {
  sock_close(&r->fds[k]);
  if (time_now_ns() < r->give_up_ns[k])
    return root_fail(r, (struct wire_fail){.cause = WIRE_FAIL_HUNG_UP, .rank = k, .other_rank = -1});
  log_msg(LOG_WARN, LOG_SUB_BOOTSTRAP, "bootstrap root: rank %d gave up waiting (%d of %d ranks have joined)", k,
          r->joined, r->nranks);
  uint64_t d = time_deadline_ms(ROOT_GRACE_MS);
  if (d < r->deadline_ns) r->deadline_ns = d;
  return mscclppSuccess;
}

/* One poll round, until `end` at most, over the listener (unless resting for lack of fds),
 * unfinished handshakes and joined ranks (whose hang-up is fatal). Only open fds are polled:
 * poll() refuses more entries than RLIMIT_NOFILE (EINVAL), and a root short of fds has few open.
 * pfds holds 1 + ROOT_MAX_PENDING + nranks entries, joined nranks (which rank each entry is). */
static mscclppResult_t poll_round(struct root* r, struct pollfd* pfds, int* joined, uint64_t end) {
  if (r->spare_fd < 0) r->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* again, once fds allow */
  uint64_t now = time_now_ns();
  int rest = now < r->listen_paused_ns, listening = !rest && r->listen_fd >= 0;
  int n = 0, npend = r->npend, nj = 0;
  if (listening) pfds[n++] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
  for (int i = 0; i < npend; i++) pfds[n++] = (struct pollfd){.fd = r->pend[i].fd, .events = POLLIN};
  for (int k = 0; k < r->nranks; k++)
    if (r->fds[k] >= 0) joined[nj++] = k, pfds[n++] = (struct pollfd){.fd = r->fds[k], .events = POLLIN};
  if (rest && r->listen_paused_ns < end) end = r->listen_paused_ns;
  int64_t left = time_left_ms(end);
  if (poll(pfds, (nfds_t)n, left < ROOT_POLL_MS ? (int)(left > 0 ? left : 0) : ROOT_POLL_MS) < 0 && errno != EINTR)
    return root_fail(r, (struct wire_fail){.cause = WIRE_FAIL_INTERNAL, .rank = r->owner, .value = errno,
                                           .other_rank = -1});
  const struct pollfd* pend = pfds + listening;
  for (int j = 0; j < nj; j++)
    if (pend[npend + j].revents) MPP_CHECK(joined_hung_up(r, joined[j]));
  now = time_now_ns();
  for (int i = npend - 1; i >= 0; i--) {
    if (pend[i].revents)
      MPP_CHECK(read_pending(r, i));
    else if (now > r->pend[i].deadline_ns)
      refuse(r, i, "no complete handshake in time");
  }
  log_rate_tick(&r->refusals, LOG_SUB_BOOTSTRAP);
  return listening && pfds[0].revents ? accept_one(r) : mscclppSuccess;
}

/* The lowest rank that has not joined (0 before anyone has). */
static int first_missing(const struct root* r) {
  for (int k = 0; r->fds && k < r->nranks; k++)
    if (r->give_up_ns[k] == 0) return k;
  return 0;
}

/* Why boot_root_stop stopped the rendezvous. */
static mscclppResult_t stopped(struct root* r, int how) {
  int e = 0;
  if (how == ROOT_STOP_FDS && err_shortages(&e) > r->shortages_at_start && (e == EMFILE || e == ENFILE))
    return root_fail(r, fd_failure(r, e));
  return root_fail(r, (struct wire_fail){.cause = WIRE_FAIL_STOPPED, .rank = r->owner, .other_rank = -1});
}

/* Collects hellos until every rank has joined or the deadline passes. */
static mscclppResult_t collect(struct root* r) {
  while (r->nranks == 0 || r->joined < r->nranks) {
    int how = atomic_load(&r->stop);
    if (how != ROOT_RUN) return stopped(r, how);
    if (time_left_ms(r->deadline_ns) <= 0)
      return root_fail(r, (struct wire_fail){.cause = WIRE_FAIL_TIMEOUT, .rank = first_missing(r),
                                             .value = r->joined, .other_rank = -1, .other_value = r->nranks});
    size_t cap = 1 + ROOT_MAX_PENDING + (size_t)r->nranks;
    struct pollfd* pfds = malloc(cap * sizeof(*pfds));
    int* joined = malloc(((size_t)r->nranks + 1) * sizeof(int));
    mscclppResult_t res = pfds && joined ? poll_round(r, pfds, joined, r->deadline_ns)
                                         : root_fail(r, (struct wire_fail){.cause = WIRE_FAIL_INTERNAL, .rank = r->owner,
                                                                           .value = ENOMEM, .other_rank = -1});
    free(pfds);
    free(joined);
    MPP_CHECK(res);
  }
  for (int k = 0; k < r->nranks; k++)
    if (r->fds[k] < 0) /* it gave up near its deadline (joined_hung_up) */
      return root_fail(r, (struct wire_fail){.cause = WIRE_FAIL_HUNG_UP, .rank = k, .value = 1, .other_rank = -1});
  return mscclppSuccess;
}

/* Sends the table to every rank; a rank that cannot be reached finds out itself (ring setup). */
static mscclppResult_t send_tables(struct root* r) {
  size_t len = wire_table_bytes(r->nranks);
  uint8_t* buf = malloc(len);
  if (!buf) return MPP_ERR(mscclppSystemError, "bootstrap root: no memory for a %zu-byte table", len);
  mscclppResult_t res = wire_encode_table(r->addrs, r->nranks, buf, len);
  for (int k = 0; k < r->nranks && res == mscclppSuccess; k++) {
    char what[64];
    snprintf(what, sizeof(what), "rank %d", k);
    if (boot_send_all(r->fds[k], buf, len, r->deadline_ns, what) != mscclppSuccess)
      log_msg(LOG_WARN, LOG_SUB_BOOTSTRAP, "bootstrap root: could not send the address table to rank %d", k);
  }
  free(buf);
  return res;
}

static void root_free(struct root* r) {
  log_rate_tick(&r->refusals, LOG_SUB_BOOTSTRAP);
  for (int i = 0; i < r->npend; i++) sock_close(&r->pend[i].fd);
  for (int k = 0; r->fds && k < r->nranks; k++) sock_close(&r->fds[k]);
  sock_close(&r->listen_fd);
  sock_close(&r->spare_fd);
  free(r->fds);
  free(r->trans);
  free(r->give_up_ns);
  free(r->addrs);
  free(r);
}

/* After a failed rendezvous: tells every joined rank why and closes its connection (making room
 * when fds ran out), then for a while keeps running the handshakes of pending and late ranks,
 * answering each proved one with the same failure, so they fail at once saying why instead of
 * retrying until their timeout. Stopped by a failed init of the owner (not for lack of fds), it
 * does not linger: the port is freed for a retry at once. */
static void fail_everyone(struct root* r) {
  log_msg(LOG_WARN, LOG_SUB_BOOTSTRAP, "bootstrap root: rendezvous failed; telling every rank why");
  pthread_mutex_lock(&roots_mu); /* a failed rendezvous is not cut short: late ranks learn at once */
  r->lingering = 1;
  pthread_mutex_unlock(&roots_mu);
  for (int k = 0; r->fds && k < r->nranks; k++)
    if (r->fds[k] >= 0) {
      send_fail(r, r->fds[k], &r->trans[k]);
      sock_close(&r->fds[k]);
    }
  int now_only = atomic_load(&r->stop) == ROOT_STOP_NOW;
  uint64_t end = now_only ? 0 : time_deadline_ms(ROOT_LINGER_MS);
  if (end > r->deadline_ns) end = r->deadline_ns;
  struct pollfd pfds[1 + ROOT_MAX_PENDING];
  int saved_nranks = r->nranks;
  r->nranks = 0; /* no joined rank left to poll */
  while (time_left_ms(end) > 0 && atomic_load(&r->stop) != ROOT_STOP_NOW) (void)poll_round(r, pfds, NULL, end);
  r->nranks = saved_nranks;
  for (int i = 0; i < r->npend; i++) sock_close(&r->pend[i].fd);
  r->npend = 0;
}

/* Closes r's listener and unlists r, under roots_mu (a stopper may be looking at its fd). */
static void unregister(struct root* r) {
  pthread_mutex_lock(&roots_mu);
  sock_close(&r->listen_fd);
  for (struct root** p = &roots; *p; p = &(*p)->next)
    if (*p == r) {
      *p = r->next;
      break;
    }
  pthread_cond_broadcast(&roots_cv);
  pthread_mutex_unlock(&roots_mu);
}

static void* root_main(void* arg) {
  struct root* r = arg;
  mscclppResult_t res = collect(r);
  if (res == mscclppSuccess) res = send_tables(r);
  if (res != mscclppSuccess) {
    if (!r->failed) { /* a failure of the root itself: its log (the error below) says more */
      r->failed = 1;
      r->fail = (struct wire_fail){.cause = WIRE_FAIL_INTERNAL, .rank = r->owner, .other_rank = -1};
    }
    log_msg(LOG_WARN, LOG_SUB_BOOTSTRAP, "%s", err_last());
    pthread_mutex_lock(&roots_mu);
    snprintf(last_failure, sizeof(last_failure), "%s", err_last());
    last_failure_addr = r->bound;
    pthread_mutex_unlock(&roots_mu);
    fail_everyone(r);
  }
  unregister(r);
  root_free(r);
  return NULL;
}

static int same_port(const union sock_addr* a, const union sock_addr* b) {
  if (a->sa.sa_family != b->sa.sa_family) return 0;
  return a->sa.sa_family == AF_INET6 ? a->sin6.sin6_port == b->sin6.sin6_port : a->sin.sin_port == b->sin.sin_port;
}

void boot_root_stop(const union sock_addr* addr, const uint8_t secret[WIRE_SECRET_BYTES]) {
  uint8_t key[WIRE_KEY_BYTES]; /* roots keep the handshakes' key, not the secret */
  if (wire_boot_key(secret, key) != mscclppSuccess) return;
  pthread_mutex_lock(&roots_mu);
  struct root* found = NULL;
  for (struct root* r = roots; r && !found; r = r->next)
    if (same_port(&r->bound, addr) && auth_equal(r->key, key, sizeof(key))) found = r;
  if (found && found->lingering) found = NULL; /* ends within ROOT_LINGER_MS on its own */
  int e = 0;
  if (found && err_shortages(&e) > found->shortages_at_start && (e == EMFILE || e == ENFILE)) {
    atomic_store(&found->stop, ROOT_STOP_FDS); /* it fails within a poll round and tells every rank */
    found = NULL;
  }
  if (found) {
    atomic_store(&found->stop, ROOT_STOP_NOW);
    if (found->listen_fd >= 0) shutdown(found->listen_fd, SHUT_RDWR); /* wakes its poll */
  }
  uint64_t end = time_deadline_ms(2000); /* it is gone within one poll round; bounded anyway */
  for (int present = found != NULL; present && time_now_ns() < end;) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50000000;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&roots_cv, &roots_mu, &ts);
    present = 0;
    for (struct root* r = roots; r; r = r->next) present |= r == found;
  }
  pthread_mutex_unlock(&roots_mu);
}

/* Waits (at most 2 s) until no root of this process that finished its rendezvous still holds addr's
 * port: a process that makes communicators one after another on one port (init, destroy, init)
 * may otherwise find its previous, successful root still closing. A lingering failed root is left
 * alone (boot_root_stop ends it). */
static void wait_finished_root(const union sock_addr* addr) {
  uint64_t end = time_deadline_ms(2000);
  pthread_mutex_lock(&roots_mu);
  for (;;) {
    int busy = 0;
    for (struct root* r = roots; r; r = r->next) busy |= same_port(&r->bound, addr) && !r->lingering;
    if (!busy || time_now_ns() >= end) break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 20000000;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&roots_cv, &roots_mu, &ts);
  }
  pthread_mutex_unlock(&roots_mu);
}

mscclppResult_t boot_root_start(const union sock_addr* addr, const uint8_t secret[WIRE_SECRET_BYTES], int owner,
                                union sock_addr* bound) {
  union sock_addr any_port = *addr; /* port 0 (any): nothing to wait for */
  if (any_port.sa.sa_family == AF_INET6) any_port.sin6.sin6_port = 0;
  else any_port.sin.sin_port = 0;
  if (!same_port(&any_port, addr)) wait_finished_root(addr);
  struct root* r = calloc(1, sizeof(*r));
  if (!r) return MPP_ERR(mscclppSystemError, "bootstrap root: no memory");
  r->listen_fd = -1;
  r->owner = owner;
  int ignored;
  r->shortages_at_start = err_shortages(&ignored);
  r->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* none now: poll_round tries again */
  mscclppResult_t kres = wire_boot_key(secret, r->key);
  if (kres != mscclppSuccess) {
    free(r);
    return kres;
  }
  int64_t timeout_s = param_int(PARAM_BOOTSTRAP_TIMEOUT);
  r->deadline_ns = time_deadline_ms((timeout_s > 0 ? timeout_s : 120) * 1000 + ROOT_GRACE_MS);
  /* No fallback to the wildcard address: a root listening where it was not asked to is a surprise
   * (and on a port in use it would fail the same way). */
  mscclppResult_t res = sock_listen(addr, &r->listen_fd, bound);
  if (res != mscclppSuccess) {
    char a[INET6_ADDRSTRLEN + 16];
    res = BOOT_WRAP(res, "bootstrap root: cannot listen on %s (another root on that port, or not an address of this "
                    "host?)", addr_text(addr, a, sizeof(a)));
  }
  if (res == mscclppSuccess) r->bound = *bound;
  if (res == mscclppSuccess) { /* non-blocking: a connection gone between poll and accept must not block */
    int fl = fcntl(r->listen_fd, F_GETFL);
    if (fl < 0 || fcntl(r->listen_fd, F_SETFL, fl | O_NONBLOCK) < 0)
      res = MPP_ERRNO(mscclppSystemError, errno, "bootstrap root: making the listener non-blocking");
  }
  pthread_attr_t attr;
  pthread_t t;
  if (res == mscclppSuccess && pthread_attr_init(&attr) == 0) {
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_mutex_lock(&roots_mu); /* listed before it runs: it unlinks itself when done */
    int err = pthread_create(&t, &attr, root_main, r);
    if (err == 0) {
      r->next = roots;
      roots = r;
    }
    pthread_mutex_unlock(&roots_mu);
    pthread_attr_destroy(&attr);
    if (err == 0) return mscclppSuccess;
    res = MPP_ERRNO(mscclppSystemError, err, "starting the bootstrap root thread");
  }
  root_free(r);
  return res;
}

const char* boot_root_failure(const union sock_addr* addr, char* buf, size_t len) {
  pthread_mutex_lock(&roots_mu);
  int mine = last_failure[0] && same_port(&last_failure_addr, addr);
  snprintf(buf, len, "%s", mine ? last_failure : "");
  pthread_mutex_unlock(&roots_mu);
  return mine ? buf : NULL;
}
