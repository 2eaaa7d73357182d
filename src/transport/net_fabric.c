/* net_fabric.c - the net transport's libfabric endpoint, progress thread and operations
 * (net_fabric.h says what each does). */
#if MSCCLPP_HAVE_LIBFABRIC
#include "transport/net_fabric.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "sys/cudawrap.h"
#include "transport/tcp_regions.h"
#include "util/auth.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/socket.h"
#include "util/timeutil.h"

#define NET_RX_SLOTS 64           /* signal buffers kept posted */
#define NET_CQ_BATCH 16
#define NET_SREAD_MS 50 /* longest sleep of the progress thread in fi_cq_sread */
#define NET_MAX_OP (4u << 20) /* bytes per write/read operation (larger ones are split) */

/* The receiving side of one connection (net_fabric_auth_reserve/set). */
struct net_auth {
  int ready; /* key and addr set */
  int peer;
  uint64_t addr;
  struct net_sig_mac mac; /* keyed with the connection's receiving key */
  struct net_replay replay;
  net_msg_fn on_msg; /* the staged path's messages (net_fabric_auth_hook), or NULL */
  void* arg;
};

/* Signals refused by every endpoint of the process (the tests read it). */
static atomic_uint_fast64_t refused_total;

struct net_rx {
  struct net_sig sig;
};

struct net_fabric {
  struct fi_info* info;
  struct fid_fabric* fabric;
  struct fid_domain* domain;
  struct fid_av* av;
  struct fid_cq* cq;
  struct fid_ep* ep;
  struct fid_mr* rx_mr; /* the rx slots' region where the provider needs local registration */
  /* 1: the queue has a wait object and the progress thread blocks in fi_cq_sread; it may turn it
   * off (relaxed: close reads it only to wake that thread, which sread's timeout also does). */
  atomic_int cq_waits;
  struct region_table* regions;
  int rank;
  pthread_t thread;
  int thread_started;
  atomic_int stop;
  char name[NET_ADDR_MAX];
  size_t name_len;
  char desc[160];
  pthread_mutex_t retired_lock;
  struct net_pending* retired;
  int has_source; /* the provider reports message sources (FI_SOURCE) */
  int sas;        /* messages are received in the order they were sent (FI_ORDER_SAS) */
  int hmem;       /* the provider granted FI_HMEM (device memory registered and carried directly) */
  int cuda_dev;   /* this rank's device (-1: CPU rank): the progress thread copies into it */
  atomic_int owed; /* a hook could not send (queue full): the progress thread calls it again */
  /* Receiving sides of connections, by id - 1; ids are never reused. Guarded by auth_lock (the
   * progress thread checks signals, connections add and remove). */
  pthread_mutex_t auth_lock;
  struct net_auth** auth;
  uint32_t n_auth, cap_auth;
  struct net_sig last_ok; /* the last accepted signal (tests), under auth_lock */
  int have_last;
  struct log_rate refusals;
  struct net_rx rx[NET_RX_SLOTS];
};

/* ---- the progress thread ---------------------------------------------------------------------- */

static int is_rx(const struct net_fabric* f, const void* ctx) {
  return (const char*)ctx >= (const char*)f->rx && (const char*)ctx < (const char*)(f->rx + NET_RX_SLOTS);
}

static void post_rx(struct net_fabric* f, struct net_rx* slot) {
  void* desc = f->rx_mr != NULL ? fi_mr_desc(f->rx_mr) : NULL;
  for (int tries = 0; tries < 100000 && !atomic_load_explicit(&f->stop, memory_order_relaxed); tries++) {
    ssize_t r = fi_recv(f->ep, &slot->sig, sizeof(slot->sig), desc, FI_ADDR_UNSPEC, slot);
    if (r != -FI_EAGAIN) {
      if (r != 0) log_msg(LOG_WARN, LOG_SUB_NET, "net: posting a signal buffer failed: %s", fi_strerror((int)-r));
      return;
    }
    struct fi_cq_data_entry none;
    (void)fi_cq_read(f->cq, &none, 0); /* progress */
  }
}

/* Counts and logs (rate-limited) a refused signal message. */
static void refuse(struct net_fabric* f, const char* why, uint64_t src) {
  atomic_fetch_add_explicit(&refused_total, 1, memory_order_relaxed);
  char from[40] = "an unreported source";
  if (f->has_source && src != FI_ADDR_NOTAVAIL) snprintf(from, sizeof(from), "address %llu", (unsigned long long)src);
  else if (f->has_source) snprintf(from, sizeof(from), "an address not in its address vector");
  log_limited(&f->refusals, LOG_WARN, LOG_SUB_NET, "refused signal messages",
              "net: rank %d refused a signal message from %s: %s", f->rank, from, why);
}

/* Why the signal s (len bytes, from src) may not be applied, or NULL when it may: known
 * connection, its peer's address (FI_SOURCE), right MAC, fresh sequence number (recorded). Called
 * with auth_lock held. */
static const char* check_signal(struct net_fabric* f, const struct net_sig* s, size_t len, uint64_t src) {
  int magic_ok = s->magic == NET_SIG_MAGIC || s->magic == NET_STAGE_MAGIC || s->magic == NET_CREDIT_MAGIC;
  if (len != sizeof(*s) || !magic_ok) return "malformed (size or magic)";
  if (s->conn_id == 0 || s->conn_id > f->n_auth) return "unknown connection id";
  struct net_auth* a = f->auth[s->conn_id - 1];
  if (a == NULL || !a->ready) return "unknown connection id";
  if (f->has_source && src != a->addr) return "not sent from the connection's peer";
  if (!net_sig_mac_ok(&a->mac, s)) return "bad MAC";
  if (s->magic != NET_SIG_MAGIC && a->on_msg == NULL) return "a staging message on a connection without staging";
  if (!net_replay_accept(&a->replay, s->seq)) return "replayed or too old sequence number";
  return NULL;
}

/* Applies a received signal that checks: a release store of the word (tcp_regions.c), so that the
 * waiter's acquire load sees the data the provider placed before it handed us the message. */
static void apply_signal(struct net_fabric* f, struct net_rx* slot, size_t len, uint64_t src) {
  const struct net_sig* s = &slot->sig;
  pthread_mutex_lock(&f->auth_lock);
  const char* why = check_signal(f, s, len, src);
  if (why == NULL && s->magic != NET_SIG_MAGIC) {
    /* The staged path's message, handled in receive order (after every earlier message and write
     * of the connection), with auth_lock held: its connection cannot close meanwhile. */
    struct net_auth* a = f->auth[s->conn_id - 1];
    a->on_msg(a->arg, s);
    pthread_mutex_unlock(&f->auth_lock);
    post_rx(f, slot);
    return;
  }
  if (why == NULL) {
    f->last_ok = *s;
    f->have_last = 1;
  }
  pthread_mutex_unlock(&f->auth_lock);
  if (why != NULL) refuse(f, why, src);
  else if (region_store64(f->regions, s->region, s->offset, s->value) != mscclppSuccess)
    log_limited(&f->refusals, LOG_WARN, LOG_SUB_NET, "refused signal messages", "net: rank %d refused a signal: %s",
                f->rank, err_last());
  post_rx(f, slot);
}

/* Counts one completion in p; a failure's text is written before failed (release) is set. */
static void complete(struct net_pending* p, const char* failure) {
  if (failure != NULL && !atomic_load_explicit(&p->failed, memory_order_relaxed)) {
    snprintf(p->why, sizeof(p->why), "%s", failure);
    /* Release: a reader that sees failed == 1 (acquire) sees why. */
    atomic_store_explicit(&p->failed, 1, memory_order_release);
  }
  /* Release: a flush that sees done reach its count (acquire) sees every earlier failure. */
  atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
}

static void read_error(struct net_fabric* f) {
  struct fi_cq_err_entry e;
  memset(&e, 0, sizeof(e));
  if (fi_cq_readerr(f->cq, &e, 0) != 1) return;
  if (e.op_context == NULL) return;
  if (is_rx(f, e.op_context)) {
    if (e.err == FI_ETRUNC) refuse(f, "malformed (longer than a signal)", FI_ADDR_NOTAVAIL);
    if (e.err != FI_ECANCELED) post_rx(f, e.op_context);
    return;
  }
  char text[160];
  snprintf(text, sizeof(text), "%s (provider error %d: %s)", fi_strerror(e.err), e.prov_errno,
           fi_cq_strerror(f->cq, e.prov_errno, e.err_data, NULL, 0));
  complete(e.op_context, text);
}

/* Calls every hook again (with no message) after one of them could not send: what it still owes
 * goes out once the provider's queue has room. */
static void retry_owed(struct net_fabric* f) {
  /* Relaxed: a hook that sets it again after this exchange is called on the next round. */
  if (!atomic_exchange_explicit(&f->owed, 0, memory_order_relaxed)) return;
  pthread_mutex_lock(&f->auth_lock);
  for (uint32_t i = 0; i < f->n_auth; i++)
    if (f->auth[i] != NULL && f->auth[i]->on_msg != NULL) f->auth[i]->on_msg(f->auth[i]->arg, NULL);
  pthread_mutex_unlock(&f->auth_lock);
}

static void* progress_main(void* arg) {
  struct net_fabric* f = arg;
  unsigned idle = 0;
#if MSCCLPP_HAVE_CUDA
  /* Staged writes and signals into GPU memory are copied with cudaMemcpy, on this rank's device. */
  if (f->cuda_dev >= 0 && cu_available()) (void)cudaSetDevice(f->cuda_dev);
#endif
  while (!atomic_load_explicit(&f->stop, memory_order_acquire)) {
    retry_owed(f);
    struct fi_cq_data_entry ents[NET_CQ_BATCH];
    fi_addr_t src[NET_CQ_BATCH];
    for (int i = 0; i < NET_CQ_BATCH; i++) src[i] = FI_ADDR_NOTAVAIL; /* providers without FI_SOURCE */
    /* With a wait object the thread sleeps until the provider has something (its sockets are
     * readable), at most NET_SREAD_MS so that stop is seen; else it polls. */
    int waits = atomic_load_explicit(&f->cq_waits, memory_order_relaxed);
    int sleep_ms = atomic_load_explicit(&f->owed, memory_order_relaxed) ? 1 : NET_SREAD_MS;
    ssize_t n = waits ? fi_cq_sreadfrom(f->cq, ents, NET_CQ_BATCH, src, NULL, sleep_ms)
                      : fi_cq_readfrom(f->cq, ents, NET_CQ_BATCH, src);
    log_rate_tick(&f->refusals, LOG_SUB_NET);
    if (n == -FI_EAVAIL) {
      read_error(f);
      continue;
    }
    if (atomic_load_explicit(&f->stop, memory_order_acquire)) break; /* fi_cq_signal woke it (-FI_ECANCELED) */
    if (n < 0 && n != -FI_EAGAIN && n != -FI_ETIMEDOUT && n != -FI_ECANCELED && waits) {
      log_msg(LOG_WARN, LOG_SUB_NET, "net: waiting on the completion queue failed (%s); polling it instead",
              fi_strerror((int)-n));
      atomic_store_explicit(&f->cq_waits, 0, memory_order_relaxed);
      waits = 0;
    }
    if (n <= 0) {
      /* Spin a little, then sleep in short steps: latency while busy, little CPU while idle. */
      if (!waits && ++idle > 2000) {
        struct timespec ts = {0, idle > 20000 ? 200000 : 20000};
        nanosleep(&ts, NULL);
      }
      continue;
    }
    idle = 0;
    for (ssize_t i = 0; i < n; i++) {
      if (is_rx(f, ents[i].op_context)) apply_signal(f, ents[i].op_context, ents[i].len, src[i]);
      else if (ents[i].op_context != NULL) complete(ents[i].op_context, NULL);
    }
  }
  return NULL;
}

/* ---- opening ---------------------------------------------------------------------------------- */

/* The requirements; with_source adds FI_SOURCE (signals then accepted only from their peer). */
static struct fi_info* make_hints(const char* prov, int with_source, int with_hmem) {
  struct fi_info* h = fi_allocinfo();
  if (h == NULL) return NULL;
  h->caps = FI_RMA | FI_MSG | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND | FI_RECV;
  if (with_source) h->caps |= FI_SOURCE;
  if (with_hmem) h->caps |= FI_HMEM;
  h->ep_attr->type = FI_EP_RDM;
  h->mode = 0; /* no FI_CONTEXT: contexts are our counters */
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  if (with_hmem) h->domain_attr->mr_mode |= FI_MR_HMEM;
  h->domain_attr->threading = FI_THREAD_SAFE;
  h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
  h->tx_attr->msg_order = FI_ORDER_SAW;
  h->rx_attr->msg_order = FI_ORDER_SAW;
  if (prov[0] != '\0') h->fabric_attr->prov_name = strdup(prov);
  return h;
}

/* 1 when info's source address is the host's bootstrap address (same IP). */
static int same_ip(const struct fi_info* i, const union sock_addr* mine) {
  if (i->src_addr == NULL) return 0;
  const struct sockaddr* sa = i->src_addr;
  if (sa->sa_family != mine->sa.sa_family) return 0;
  if (sa->sa_family == AF_INET)
    return ((const struct sockaddr_in*)i->src_addr)->sin_addr.s_addr == mine->sin.sin_addr.s_addr;
  if (sa->sa_family == AF_INET6)
    return memcmp(&((const struct sockaddr_in6*)i->src_addr)->sin6_addr, &mine->sin6.sin6_addr, 16) == 0;
  return 0;
}

/* Picks among what fi_getinfo offered: the entry on the bootstrap's interface, else the first. */
static const struct fi_info* pick(const struct fi_info* list) {
  union sock_addr mine;
  int quiet = err_quiet(1);
  mscclppResult_t res = sock_local_addr(&mine);
  err_quiet(quiet);
  if (res == mscclppSuccess)
    for (const struct fi_info* i = list; i != NULL; i = i->next)
      if (same_ip(i, &mine)) return i;
  return list;
}

static mscclppResult_t fi_fail(const char* what, int r) {
  return MPP_ERR(mscclppSystemError, "net transport: %s failed: %s", what, fi_strerror(r < 0 ? -r : r));
}

/* Asks libfabric for the entries of provider prov (any where ""), FI_SOURCE where offered, FI_HMEM
 * when with_hmem: 0 with *list, else the fi_getinfo error. */
static int get_list(const char* prov, int with_hmem, struct fi_info** list) {
  int r = -FI_ENODATA;
  *list = NULL;
  for (int with_source = 1; with_source >= 0 && *list == NULL; with_source--) {
    struct fi_info* hints = make_hints(prov, with_source, with_hmem);
    if (hints == NULL) return -FI_ENOMEM;
    r = fi_getinfo(FI_VERSION(1, 11), NULL, NULL, 0, hints, list);
    fi_freeinfo(hints);
    if (r != 0) *list = NULL;
  }
  return r;
}

/* The provider is chosen without FI_HMEM (asking for it would pick another provider, e.g. shm, which
 * grants it but reaches one machine only); then, for a GPU rank, the same provider is asked again
 * with FI_HMEM, and its answer replaces the list where it grants it (*hmem = 1). */
static void try_hmem(struct fi_info** list, int* hmem) {
  struct fi_info* with = NULL;
  const char* name = pick(*list)->fabric_attr->prov_name;
  if (name == NULL || get_list(name, 1, &with) != 0 || with == NULL) return;
  fi_freeinfo(*list);
  *list = with;
  *hmem = 1;
}

/* Finds and copies the provider's description into f->info. */
static mscclppResult_t choose(struct net_fabric* f, int want_hmem) {
  const char* prov = param_str(PARAM_NET_PROVIDER);
  struct fi_info* list = NULL;
  int r = get_list(prov, 0, &list);
  if (r == -FI_ENOMEM) return MPP_ERR(mscclppSystemError, "net transport: out of host memory");
  if (r != 0 || list == NULL)
    return MPP_ERR(mscclppInvalidUsage,
                   "net transport: no libfabric provider %s%s%soffers reliable datagram endpoints with RMA, "
                   "delivery completion and send-after-write order (fi_getinfo: %s); set MSCCLPP_NET_PROVIDER to one "
                   "that does (tcp, sockets, verbs) or leave MSCCLPP_NET_TRANSPORT off",
                   prov[0] ? "named '" : "", prov, prov[0] ? "' (MSCCLPP_NET_PROVIDER) " : "", fi_strerror(-r));
  if (want_hmem) try_hmem(&list, &f->hmem);
  f->info = fi_dupinfo(pick(list));
  fi_freeinfo(list);
  if (f->info == NULL) return MPP_ERR(mscclppSystemError, "net transport: out of host memory");
  if (f->info->tx_attr->inject_size < sizeof(struct net_sig))
    return MPP_ERR(mscclppInvalidUsage, "net transport: provider %s injects only %zu bytes, a signal needs %zu",
                   f->info->fabric_attr->prov_name, f->info->tx_attr->inject_size, sizeof(struct net_sig));
  f->has_source = (f->info->caps & FI_SOURCE) != 0;
  f->sas = (f->info->tx_attr->msg_order & FI_ORDER_SAS) && (f->info->rx_attr->msg_order & FI_ORDER_SAS);
  snprintf(f->desc, sizeof(f->desc), "provider %s, fabric %s, domain %s%s", f->info->fabric_attr->prov_name,
           f->info->fabric_attr->name, f->info->domain_attr->name,
           f->has_source ? "" : " (no FI_SOURCE: signals checked by MAC only)");
  return mscclppSuccess;
}

int net_fabric_probe(char* buf, size_t len) {
  struct net_fabric f;
  memset(&f, 0, sizeof(f));
  int quiet = err_quiet(1);
  mscclppResult_t res = choose(&f, 0);
  err_quiet(quiet);
  snprintf(buf, len, "%s", res == mscclppSuccess ? f.desc : err_last());
  if (f.info != NULL) fi_freeinfo(f.info);
  return res == mscclppSuccess;
}

/* Opens fabric, domain, completion queue, address vector and the endpoint, enabled. */
static mscclppResult_t open_endpoint(struct net_fabric* f) {
  int r;
  if ((r = fi_fabric(f->info->fabric_attr, &f->fabric, NULL)) != 0) return fi_fail("fi_fabric", r);
  if ((r = fi_domain(f->fabric, f->info, &f->domain, NULL)) != 0) return fi_fail("fi_domain", r);
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_UNSPEC};
  atomic_init(&f->cq_waits, 1);
  if (fi_cq_open(f->domain, &cq_attr, &f->cq, NULL) != 0) { /* a provider without wait objects: poll */
    cq_attr.wait_obj = FI_WAIT_NONE;
    atomic_store_explicit(&f->cq_waits, 0, memory_order_relaxed);
    if ((r = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL)) != 0) return fi_fail("fi_cq_open", r);
  }
  struct fi_av_attr av_attr = {.type = f->info->domain_attr->av_type};
  if ((r = fi_av_open(f->domain, &av_attr, &f->av, NULL)) != 0) return fi_fail("fi_av_open", r);
  if ((r = fi_endpoint(f->domain, f->info, &f->ep, NULL)) != 0) return fi_fail("fi_endpoint", r);
  if ((r = fi_ep_bind(f->ep, &f->av->fid, 0)) != 0) return fi_fail("binding the address vector", r);
  if ((r = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV)) != 0) return fi_fail("binding the queue", r);
  if ((r = fi_enable(f->ep)) != 0) return fi_fail("fi_enable", r);
  f->name_len = sizeof(f->name);
  if ((r = fi_getname(&f->ep->fid, f->name, &f->name_len)) != 0) return fi_fail("fi_getname", r);
  return mscclppSuccess;
}

/* Registers the signal buffers where needed and posts them all. */
static mscclppResult_t post_all_rx(struct net_fabric* f) {
  if (f->info->domain_attr->mr_mode & FI_MR_LOCAL) {
    struct net_mr m;
    MPP_CHECK(net_fabric_reg(f, f->rx, sizeof(f->rx), &m));
    f->rx_mr = m.mr;
  }
  for (int i = 0; i < NET_RX_SLOTS; i++) {
    ssize_t r = fi_recv(f->ep, &f->rx[i].sig, sizeof(f->rx[i].sig), f->rx_mr ? fi_mr_desc(f->rx_mr) : NULL,
                        FI_ADDR_UNSPEC, &f->rx[i]);
    if (r != 0) return fi_fail("posting the signal buffers", (int)r);
  }
  return mscclppSuccess;
}

mscclppResult_t net_fabric_open(int rank, void* regions, int cuda_dev, int want_hmem, struct net_fabric** out) {
  struct net_fabric* f = calloc(1, sizeof(*f));
  if (f == NULL) return MPP_ERR(mscclppSystemError, "net transport: out of host memory");
  f->rank = rank;
  f->regions = regions;
  f->cuda_dev = cuda_dev;
  pthread_mutex_init(&f->retired_lock, NULL);
  pthread_mutex_init(&f->auth_lock, NULL);
  mscclppResult_t res = choose(f, want_hmem);
  if (res == mscclppSuccess) res = open_endpoint(f);
  if (res == mscclppSuccess) res = post_all_rx(f);
  if (res == mscclppSuccess) {
    int e = pthread_create(&f->thread, NULL, progress_main, f);
    if (e != 0) res = MPP_ERRNO(mscclppSystemError, e, "net transport: starting the progress thread");
    f->thread_started = e == 0;
  }
  if (res != mscclppSuccess) {
    net_fabric_close(f);
    return res;
  }
  LOG_INFO_(LOG_SUB_NET, "net transport: rank %d uses %s%s", rank, f->desc,
            !want_hmem ? "" : f->hmem ? " (FI_HMEM granted)" : " (FI_HMEM not offered: GPU memory staged)");
  *out = f;
  return mscclppSuccess;
}

static void close_fid(void* fid) {
  if (fid != NULL) (void)fi_close((struct fid*)fid);
}

void net_fabric_close(struct net_fabric* f) {
  if (f == NULL) return;
  /* Release: the thread's acquire load of stop ends its loop. */
  atomic_store_explicit(&f->stop, 1, memory_order_release);
  /* Wakes a thread sleeping in fi_cq_sread. */
  if (f->cq != NULL && atomic_load_explicit(&f->cq_waits, memory_order_relaxed)) (void)fi_cq_signal(f->cq);
  if (f->thread_started) pthread_join(f->thread, NULL);
  close_fid(f->ep);
  for (struct net_pending* p = f->retired; p != NULL;) { /* no completion can reach them any more */
    struct net_pending* next = p->next;
    net_pending_free(p);
    p = next;
  }
  close_fid(f->rx_mr);
  close_fid(f->av);
  close_fid(f->cq);
  close_fid(f->domain);
  close_fid(f->fabric);
  if (f->info != NULL) fi_freeinfo(f->info);
  pthread_mutex_destroy(&f->retired_lock);
  for (uint32_t i = 0; i < f->n_auth; i++)
    if (f->auth[i] != NULL) {
      net_sig_mac_free(&f->auth[i]->mac);
      free(f->auth[i]);
    }
  free(f->auth);
  pthread_mutex_destroy(&f->auth_lock);
  free(f);
}

size_t net_fabric_name(const struct net_fabric* f, void* buf) {
  memcpy(buf, f->name, f->name_len);
  return f->name_len;
}

const char* net_fabric_desc(const struct net_fabric* f) { return f->desc; }
int net_fabric_hmem(const struct net_fabric* f) { return f->hmem; }
int net_fabric_sas(const struct net_fabric* f) { return f->sas; }
size_t net_fabric_max_op(const struct net_fabric* f) {
  size_t m = f->info->ep_attr->max_msg_size;
  return m != 0 && m < NET_MAX_OP ? m : NET_MAX_OP;
}

mscclppResult_t net_fabric_add_peer(struct net_fabric* f, int peer, const void* name, size_t len, uint64_t* addr) {
  if (len == 0 || len > NET_ADDR_MAX)
    return MPP_ERR(mscclppRemoteError, "net transport: rank %d sent a malformed endpoint name (%zu bytes)", peer, len);
  fi_addr_t a = FI_ADDR_NOTAVAIL;
  int n = fi_av_insert(f->av, name, 1, &a, 0, NULL);
  if (n != 1 || a == FI_ADDR_NOTAVAIL)
    return MPP_ERR(mscclppRemoteError, "net transport: rank %d's endpoint name is not an address of %s", peer, f->desc);
  *addr = a;
  return mscclppSuccess;
}

mscclppResult_t net_buf_alloc(struct net_fabric* f, size_t bytes, int dev, struct net_buf* out) {
  memset(out, 0, sizeof(*out));
  bytes = (bytes + 4095) / 4096 * 4096; /* aligned_alloc wants a multiple of the alignment */
  char* ptr = aligned_alloc(4096, bytes);
  if (ptr == NULL) return MPP_ERR(mscclppSystemError, "net transport: out of host memory for %zu staging bytes", bytes);
  memset(ptr, 0, bytes);
#if MSCCLPP_HAVE_CUDA
  /* Pinned: cudaMemcpy between it and GPU memory is one DMA, not a copy through a driver buffer. */
  if (dev >= 0 && cu_available()) out->pinned = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable) == cudaSuccess;
#else
  (void)dev;
#endif
  out->ptr = ptr;
  out->bytes = bytes;
  mscclppResult_t res = net_fabric_reg(f, ptr, bytes, &out->mr);
  if (res != mscclppSuccess) net_buf_free(out);
  return res;
}

void net_buf_free(struct net_buf* b) {
  if (b->ptr == NULL) return;
  close_fid(b->mr.mr);
#if MSCCLPP_HAVE_CUDA
  if (b->pinned) (void)cudaHostUnregister(b->ptr);
#endif
  free(b->ptr);
  memset(b, 0, sizeof(*b));
}

void net_pending_free(struct net_pending* p) {
  if (p == NULL) return;
  net_buf_free(&p->stage_tx);
  close_fid(p->bounce_mr.mr);
  free(p->bounce);
  free(p);
}

void net_fabric_retire(struct net_fabric* f, struct net_pending* p) {
  pthread_mutex_lock(&f->retired_lock);
  p->next = f->retired;
  f->retired = p;
  pthread_mutex_unlock(&f->retired_lock);
}

/* ---- memory regions --------------------------------------------------------------------------- */

/* A random key of the provider's key size (mr_key_size bytes, at most 8), never 0. */
static mscclppResult_t random_key(const struct net_fabric* f, uint64_t* key) {
  size_t bytes = f->info->domain_attr->mr_key_size;
  MPP_CHECK(auth_random(key, sizeof(*key)));
  if (bytes != 0 && bytes < 8) *key &= (1ull << (8 * bytes)) - 1;
  if (*key == 0) *key = 1;
  return mscclppSuccess;
}

/* Where the application chooses keys (no FI_MR_PROV_KEY), each region gets a random one, so that a
 * process that reaches the endpoint cannot guess it (counters would be); a key already in use
 * (FI_ENOKEY) is drawn again. With FI_MR_PROV_KEY the provider's key is what there is. */
mscclppResult_t net_fabric_reg(struct net_fabric* f, void* ptr, size_t size, struct net_mr* out) {
  int mode = f->info->domain_attr->mr_mode;
  struct fid_mr* mr = NULL;
  uint64_t access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND | FI_RECV;
  int r = -FI_ENOKEY;
  for (int tries = 0; tries < 8 && r == -FI_ENOKEY; tries++) {
    uint64_t want_key = 0;
    if (!(mode & FI_MR_PROV_KEY)) MPP_CHECK(random_key(f, &want_key));
    r = fi_mr_reg(f->domain, ptr, size, access, 0, want_key, 0, &mr, NULL);
  }
  if (r != 0) return fi_fail("registering memory (fi_mr_reg)", r);
  if (mode & FI_MR_ENDPOINT) {
    if ((r = fi_mr_bind(mr, &f->ep->fid, 0)) == 0) r = fi_mr_enable(mr);
    if (r != 0) {
      fi_close(&mr->fid);
      return fi_fail("binding a memory region to the endpoint", r);
    }
  }
  *out = (struct net_mr){.mr = mr, .desc = fi_mr_desc(mr), .key = fi_mr_key(mr),
                         .base = (mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)ptr : 0};
  return mscclppSuccess;
}

#if MSCCLPP_HAVE_CUDA
/* Registers GPU memory of device dev (fi_mr_regattr, FI_HMEM_CUDA); only where FI_HMEM was granted. */
mscclppResult_t net_fabric_reg_dev(struct net_fabric* f, void* ptr, size_t size, int dev, struct net_mr* out) {
  if (!f->hmem) return MPP_ERR(mscclppInvalidUsage, "net transport: %s did not grant FI_HMEM", f->desc);
  int mode = f->info->domain_attr->mr_mode;
  struct iovec iov = {.iov_base = ptr, .iov_len = size};
  struct fi_mr_attr attr = {.mr_iov = &iov, .iov_count = 1, .iface = FI_HMEM_CUDA,
                            .access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE};
  attr.device.cuda = dev;
  struct fid_mr* mr = NULL;
  int r = -FI_ENOKEY;
  for (int tries = 0; tries < 8 && r == -FI_ENOKEY; tries++) {
    if (!(mode & FI_MR_PROV_KEY)) MPP_CHECK(random_key(f, &attr.requested_key));
    r = fi_mr_regattr(f->domain, &attr, 0, &mr);
  }
  if (r != 0) return fi_fail("registering GPU memory (fi_mr_regattr, FI_HMEM_CUDA)", r);
  if (mode & FI_MR_ENDPOINT) {
    if ((r = fi_mr_bind(mr, &f->ep->fid, 0)) == 0) r = fi_mr_enable(mr);
    if (r != 0) {
      fi_close(&mr->fid);
      return fi_fail("binding a GPU memory region to the endpoint", r);
    }
  }
  *out = (struct net_mr){.mr = mr, .desc = fi_mr_desc(mr), .key = fi_mr_key(mr),
                         .base = (mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)ptr : 0};
  return mscclppSuccess;
}
#else
mscclppResult_t net_fabric_reg_dev(struct net_fabric* f, void* ptr, size_t size, int dev, struct net_mr* out) {
  (void)f, (void)ptr, (void)size, (void)dev, (void)out;
  return MPP_ERR(mscclppInvalidUsage, "net transport: GPU memory in a library built without CUDA");
}
#endif

void net_fabric_dereg(struct net_mr* m) {
  close_fid(m->mr);
  m->mr = NULL;
}

/* ---- operations ------------------------------------------------------------------------------- */

static ssize_t post_signal(struct net_fabric* f, struct net_pending* p, uint64_t addr, const struct net_op* op) {
  struct iovec iov = {.iov_base = (void*)op->sig, .iov_len = sizeof(*op->sig)};
  struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1, .addr = (fi_addr_t)addr, .context = p};
  /* FI_INJECT: the message may go once the call returns; the completion still comes (delivery
   * complete). choose() checked that the provider injects this many bytes. */
  return fi_sendmsg(f->ep, &msg, FI_INJECT | FI_DELIVERY_COMPLETE | FI_COMPLETION);
}

int net_fabric_post(struct net_fabric* f, struct net_pending* p, uint64_t addr, const struct net_op* op) {
  ssize_t r;
  const char* what = "an RMA write";
  switch (op->kind) {
    case NET_OP_WRITE:
      r = fi_write(f->ep, op->local, op->size, op->desc, (fi_addr_t)addr, op->raddr, op->key, p);
      break;
    case NET_OP_READ:
      what = "an RMA read";
      r = fi_read(f->ep, op->local, op->size, op->desc, (fi_addr_t)addr, op->raddr, op->key, p);
      break;
    default:
      what = "a signal";
      r = post_signal(f, p, addr, op);
      break;
  }
  if (r == 0) return 0;
  if (r == -FI_EAGAIN) return 1;
  (void)MPP_ERR(mscclppRemoteError, "net transport: posting %s failed: %s", what, fi_strerror((int)-r));
  return -1;
}
/* ---- receiving sides of connections ---------------------------------------------------------- */

mscclppResult_t net_fabric_auth_reserve(struct net_fabric* f, uint32_t* id) {
  struct net_auth* a = calloc(1, sizeof(*a));
  if (a == NULL) return MPP_ERR(mscclppSystemError, "net transport: out of host memory");
  pthread_mutex_lock(&f->auth_lock);
  if (f->n_auth == f->cap_auth) {
    uint32_t cap = f->cap_auth ? 2 * f->cap_auth : 16;
    struct net_auth** grown = realloc(f->auth, cap * sizeof(*grown));
    if (grown == NULL) {
      pthread_mutex_unlock(&f->auth_lock);
      free(a);
      return MPP_ERR(mscclppSystemError, "net transport: out of host memory");
    }
    f->auth = grown;
    f->cap_auth = cap;
  }
  f->auth[f->n_auth++] = a;
  *id = f->n_auth;
  pthread_mutex_unlock(&f->auth_lock);
  return mscclppSuccess;
}

mscclppResult_t net_fabric_auth_set(struct net_fabric* f, uint32_t id, int peer, uint64_t addr,
                                    const uint8_t key[AUTH_KEY_BYTES]) {
  struct net_sig_mac mac;
  MPP_CHECK(net_sig_mac_init(&mac, key));
  pthread_mutex_lock(&f->auth_lock);
  struct net_auth* a = id >= 1 && id <= f->n_auth ? f->auth[id - 1] : NULL;
  int ok = a != NULL && !a->ready;
  if (ok) {
    a->peer = peer;
    a->addr = addr;
    a->mac = mac;
    a->ready = 1;
  }
  pthread_mutex_unlock(&f->auth_lock);
  if (ok) return mscclppSuccess;
  net_sig_mac_free(&mac);
  return MPP_ERR(mscclppInternalError, "net transport: no fresh connection id %u", id);
}

void net_fabric_auth_remove(struct net_fabric* f, uint32_t id) {
  pthread_mutex_lock(&f->auth_lock);
  if (id >= 1 && id <= f->n_auth && f->auth[id - 1] != NULL) {
    net_sig_mac_free(&f->auth[id - 1]->mac);
    free(f->auth[id - 1]);
    f->auth[id - 1] = NULL;
  }
  pthread_mutex_unlock(&f->auth_lock);
}

void net_fabric_auth_hook(struct net_fabric* f, uint32_t id, net_msg_fn fn, void* arg) {
  pthread_mutex_lock(&f->auth_lock);
  if (id >= 1 && id <= f->n_auth && f->auth[id - 1] != NULL) {
    f->auth[id - 1]->on_msg = fn;
    f->auth[id - 1]->arg = arg;
  }
  pthread_mutex_unlock(&f->auth_lock);
}

void net_fabric_owe(struct net_fabric* f) { atomic_store_explicit(&f->owed, 1, memory_order_relaxed); }

int net_fabric_last_signal(struct net_fabric* f, struct net_sig* out) {
  pthread_mutex_lock(&f->auth_lock);
  int have = f->have_last;
  if (have) *out = f->last_ok;
  pthread_mutex_unlock(&f->auth_lock);
  return have;
}

uint64_t net_fabric_refused_total(void) { return atomic_load_explicit(&refused_total, memory_order_relaxed); }
#endif /* MSCCLPP_HAVE_LIBFABRIC */
