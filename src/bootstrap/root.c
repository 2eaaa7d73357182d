/* root.c - the rendezvous root: a detached thread that collects one hello per rank (with the rank's
 * listen address) and runs the accepting side of each one's handshake (util/auth.h: our challenge
 * proves to the rank that we hold the job's key, its proof proves the same to us), then sends
 * every rank the table of all listen addresses and exits. A connection counts only once its proof
 * is checked: strangers learn nothing and change nothing; they are refused and logged (rate-limited)
 * while the root keeps waiting for real ranks. A rank that hangs up before the table is sent, a duplicate rank or a
 * mismatched nranks ends the rendezvous: every connection is closed, so the ranks fail at once. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#define ROOT_LINGER_MS 10000 /* after a failure, late ranks are turned away this long */
#define ROOT_SLACK_MS 500 /* a rank hanging up this close to its own deadline timed out; it did not die */

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
  _Atomic int stop;  /* boot_root_stop: give up now, without lingering */
  int lingering;     /* the rendezvous failed: late ranks are being turned away (roots_mu) */
  union sock_addr bound;
  int listen_fd;
  uint8_t key[WIRE_KEY_BYTES]; /* the handshakes' key (wire_boot_key) */
  struct log_rate refusals;
  uint64_t deadline_ns;
  int nranks, joined; /* nranks 0 until the first valid hello */
  int* fds;           /* [nranks] joined ranks' connections, -1 until they join */
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

/* Takes the first valid hello: fixes nranks and the deadline. */
static mscclppResult_t first_join(struct root* r, const struct wire_hello* h) {
  r->nranks = h->nranks;
  r->fds = malloc(sizeof(int) * (size_t)h->nranks);
  r->addrs = calloc((size_t)h->nranks, sizeof(*r->addrs));
  r->give_up_ns = calloc((size_t)h->nranks, sizeof(*r->give_up_ns));
  if (!r->fds || !r->addrs || !r->give_up_ns) return MPP_ERR(mscclppSystemError, "bootstrap root: no memory for %d ranks", h->nranks);
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

/* Checks the complete proof of pending connection i: refuses strangers (logged, connection closed),
 * records a rank, or fails the rendezvous on a duplicate rank or a different nranks. */
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
  if (r->nranks == 0) MPP_CHECK(first_join(r, &h));
  if (h.nranks != r->nranks)
    return MPP_ERR(mscclppInvalidUsage, "bootstrap root: rank %d (%s) says nranks %d, earlier ranks said %d", h.rank, a,
                   h.nranks, r->nranks);
  if (r->give_up_ns[h.rank] != 0)
    return MPP_ERR(mscclppInvalidUsage, "bootstrap root: rank %d joined twice (second from %s)", h.rank, a);
  r->fds[h.rank] = p->fd;
  r->give_up_ns[h.rank] = h.timeout_ms ? time_deadline_ms((int64_t)h.timeout_ms - ROOT_SLACK_MS) : UINT64_MAX;
  r->addrs[h.rank] = h.addr;
  r->joined++;
  p->fd = -1;
  drop_pending(r, i);
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

/* Accepts one connection. Out of fds the listener stays readable: the rendezvous fails at once,
 * saying so, instead of spinning until the deadline. */
static mscclppResult_t accept_one(struct root* r) {
  union sock_addr a;
  socklen_t alen = sizeof(a);
  int fd = accept4(r->listen_fd, &a.sa, &alen, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
    int e = errno;
    return MPP_ERRNO(mscclppSystemError, e, "bootstrap root (in rank 0's process): accepting a rank's connection%s",
                     sock_fd_hint(e));
  }
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
    return MPP_ERR(mscclppRemoteError, "bootstrap root: rank %d hung up before every rank had joined", k);
  log_msg(LOG_WARN, LOG_SUB_BOOTSTRAP, "bootstrap root: rank %d gave up waiting (%d of %d ranks have joined)", k,
          r->joined, r->nranks);
  uint64_t d = time_deadline_ms(ROOT_GRACE_MS);
  if (d < r->deadline_ns) r->deadline_ns = d;
  return mscclppSuccess;
}

/* One poll round over the listener, unfinished hellos and joined ranks (whose hang-up is fatal). */
static mscclppResult_t poll_round(struct root* r, struct pollfd* pfds) {
  int n = 0, njoined = r->nranks;
  pfds[n++] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
  for (int i = 0; i < r->npend; i++) pfds[n++] = (struct pollfd){.fd = r->pend[i].fd, .events = POLLIN};
  for (int k = 0; k < njoined; k++) pfds[n++] = (struct pollfd){.fd = r->fds[k], .events = POLLIN};
  int64_t left = time_left_ms(r->deadline_ns);
  if (poll(pfds, (nfds_t)n, left < ROOT_POLL_MS ? (int)left : ROOT_POLL_MS) < 0 && errno != EINTR)
    return MPP_ERRNO(mscclppSystemError, errno, "bootstrap root: poll");
  for (int k = 0; k < njoined; k++)
    if (r->fds[k] >= 0 && pfds[1 + r->npend + k].revents) MPP_CHECK(joined_hung_up(r, k));
  uint64_t now = time_now_ns();
  for (int i = r->npend - 1; i >= 0; i--) {
    if (pfds[1 + i].revents)
      MPP_CHECK(read_pending(r, i));
    else if (now > r->pend[i].deadline_ns)
      refuse(r, i, "no complete handshake in time");
  }
  log_rate_tick(&r->refusals, LOG_SUB_BOOTSTRAP);
  return pfds[0].revents ? accept_one(r) : mscclppSuccess;
}

/* Collects hellos until every rank has joined or the deadline passes. */
static mscclppResult_t collect(struct root* r) {
  while (r->nranks == 0 || r->joined < r->nranks) {
    if (atomic_load(&r->stop)) return MPP_ERR(mscclppAborted, "bootstrap root: stopped (rank 0's init failed)");
    if (time_left_ms(r->deadline_ns) <= 0)
      return MPP_ERR(mscclppTimeout, "bootstrap root: %d of %d ranks joined before the timeout", r->joined, r->nranks);
    size_t cap = 1 + ROOT_MAX_PENDING + (size_t)r->nranks;
    struct pollfd* pfds = malloc(cap * sizeof(*pfds));
    if (!pfds) return MPP_ERR(mscclppSystemError, "bootstrap root: no memory to poll %zu sockets", cap);
    mscclppResult_t res = poll_round(r, pfds);
    free(pfds);
    MPP_CHECK(res);
  }
  for (int k = 0; k < r->nranks; k++)
    if (r->fds[k] < 0)
      return MPP_ERR(mscclppRemoteError, "bootstrap root: rank %d gave up before the last rank joined", k);
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
  free(r->fds);
  free(r->give_up_ns);
  free(r->addrs);
  free(r);
}

/* After a failed rendezvous: closes every joined or pending connection at once, then for a while
 * accepts and closes late ranks' connections, so that they fail at once instead of retrying until
 * their timeout. */
static void fail_everyone(struct root* r) {
  log_msg(LOG_WARN, LOG_SUB_BOOTSTRAP, "bootstrap root: rendezvous failed; closing every rank's connection");
  pthread_mutex_lock(&roots_mu); /* a failed rendezvous is not cut short: late ranks learn at once */
  r->lingering = 1;
  pthread_mutex_unlock(&roots_mu);
  for (int i = 0; i < r->npend; i++) sock_close(&r->pend[i].fd);
  r->npend = 0;
  for (int k = 0; r->fds && k < r->nranks; k++) sock_close(&r->fds[k]);
  uint64_t end = atomic_load(&r->stop) ? 0 : time_deadline_ms(ROOT_LINGER_MS);
  if (end > r->deadline_ns) end = r->deadline_ns;
  for (int64_t left; (left = time_left_ms(end)) > 0;) {
    struct pollfd p = {.fd = r->listen_fd, .events = POLLIN};
    if (poll(&p, 1, (int)left) > 0) {
      int fd = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) close(fd);
      if (fd < 0 && (errno == EMFILE || errno == ENFILE)) break; /* cannot turn them away: no spinning */
    }
  }
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
  if (found) {
    atomic_store(&found->stop, 1);
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

mscclppResult_t boot_root_start(const union sock_addr* addr, const uint8_t secret[WIRE_SECRET_BYTES],
                                union sock_addr* bound) {
  union sock_addr any_port = *addr; /* port 0 (any): nothing to wait for */
  if (any_port.sa.sa_family == AF_INET6) any_port.sin6.sin6_port = 0;
  else any_port.sin.sin_port = 0;
  if (!same_port(&any_port, addr)) wait_finished_root(addr);
  struct root* r = calloc(1, sizeof(*r));
  if (!r) return MPP_ERR(mscclppSystemError, "bootstrap root: no memory");
  r->listen_fd = -1;
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
