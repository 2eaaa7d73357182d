/* net.c - the net transport: registered host memory of any host, reached by libfabric RMA
 * (net_fabric.c). When MSCCLPP_NET_TRANSPORT=on, each communicator opens one RDM endpoint at
 * start; registration exports host memory as a memory region (key and remote address in the
 * blob, with the id of the region in the owner's region table for signals); a write is one or
 * more RMA writes, a semaphore update is a signal message that the owner's progress thread
 * applies after the writes before it, and a flush waits for the delivery completions of
 * everything posted. Auto prefers it to tcp across hosts while it is on; GPU memory is not carried
 * yet (no FI_HMEM or staging): GPU ranks keep tcp. docs/net-transport.md. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/net.h"
#include "transport/net_fabric.h"
#include "transport/net_sig.h"
#include "transport/tcp_regions.h"
#include "transport/transport.h"
#include "util/auth.h"
#include "util/bytes.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/timeutil.h"

#define NET_LIVENESS_MS 200 /* how often a wait asks the bootstrap whether a rank died */
#define NET_CLOSE_WAIT_MS 1000

/* What net adds to a buffer's description; the wire form is region_id, key and base. */
struct net_part {
  uint64_t region_id; /* the owner's region table: where signals go */
  uint64_t key;       /* remote key of its memory region */
  uint64_t base;      /* remote address of its first byte */
  void* mr;           /* local only: the struct fid_mr* */
  void* desc;         /* local only: its descriptor */
};
_Static_assert(sizeof(struct net_part) <= TRANSPORT_PART_BYTES, "net's part must fit");
#define NET_PART_WIRE 24

/* Per communicator: the endpoint (NULL when it could not be opened, why says why). */
struct net_state {
  struct region_table regions;
  struct net_fabric* f;
  char why[400];
};

struct net_conn {
  struct net_pending* p;
  uint64_t posted; /* operations posted (this connection's thread only) */
  uint64_t addr;   /* the peer's fi_addr_t */
  int broken;      /* a post failed (peer gone): later calls fail */
  uint32_t my_id;    /* this endpoint's id of the connection: the peer's signals carry it */
  uint32_t peer_id;  /* the peer's id of it: our signals carry it */
  uint64_t seq;                /* our signals' sequence numbers (the last one used), under send_lock */
  struct net_sig_mac send_mac; /* keyed with our direction's key (the receiver holds the same) */
  pthread_mutex_t send_lock;   /* one signal sealed at a time (the proxy and the caller may both signal) */
};

static struct net_state* state_of(const struct transport_comm* tc) { return tc->state[mscclppTransportNet]; }
static int net_on(void) { return strcmp(param_str(PARAM_NET_TRANSPORT), "on") == 0; }

#if MSCCLPP_HAVE_LIBFABRIC
static struct net_fabric* fabric_of(struct transport_conn* conn) { return state_of(conn->tc)->f; }
static struct net_part* part_of(struct transport_mem* mem) {
  return (struct net_part*)(void*)&mem->d.part[mscclppTransportNet];
}
#endif

/* Why the net transport cannot connect this rank with peer; NULL when it can. */
static const char* net_unusable(const struct transport_comm* tc, int peer) {
#if !MSCCLPP_HAVE_LIBFABRIC
  (void)tc;
  (void)peer;
  return "this library was built without libfabric (install libfabric-dev and configure with MSCCLPP_USE_LIBFABRIC=ON)";
#else
  const struct net_state* s = state_of(tc);
  if (s == NULL) return "it is off: set MSCCLPP_NET_TRANSPORT=on on every rank";
  if (s->f == NULL) return s->why;
  if (tc->kind == mscclppRankGpu || tc->peers[peer].kind == mscclppRankGpu)
    return "it carries host memory only so far and GPU ranks register GPU memory (no FI_HMEM or staging path yet)";
  return NULL;
#endif
}

static mscclppResult_t net_start(struct transport_comm* tc) {
  if (!net_on()) return mscclppSuccess;
  struct net_state* s = calloc(1, sizeof(*s));
  if (s == NULL) return MPP_ERR(mscclppSystemError, "net transport: out of host memory");
  region_table_init(&s->regions);
  tc->state[mscclppTransportNet] = s;
#if MSCCLPP_HAVE_LIBFABRIC
  /* A rank that cannot open libfabric still starts: connections over net fail saying why. */
  if (net_fabric_open(tc->rank, &s->regions, &s->f) != mscclppSuccess) {
    snprintf(s->why, sizeof(s->why), "%s", err_last());
    log_msg(LOG_WARN, LOG_SUB_NET, "%s", s->why);
    err_clear();
  }
#else
  snprintf(s->why, sizeof(s->why), "%s", net_unusable(tc, 0));
#endif
  return mscclppSuccess;
}

static void net_stop(struct transport_comm* tc) {
  struct net_state* s = state_of(tc);
  if (s == NULL) return;
#if MSCCLPP_HAVE_LIBFABRIC
  net_fabric_close(s->f);
#endif
  region_table_fini(&s->regions);
  free(s);
  tc->state[mscclppTransportNet] = NULL;
}

static void net_encode_part(const union transport_part* part, uint8_t* out) {
  const struct net_part* p = (const struct net_part*)(const void*)part;
  le_put64(out, p->region_id);
  le_put64(out + 8, p->key);
  le_put64(out + 16, p->base);
}

static mscclppResult_t net_decode_part(const uint8_t* in, const struct regmem_desc* d, union transport_part* part) {
  struct net_part* p = (struct net_part*)(void*)part;
  memset(p, 0, sizeof(*p));
  p->region_id = le_get64(in);
  p->key = le_get64(in + 8);
  p->base = le_get64(in + 16);
  if (p->region_id == 0)
    return MPP_ERR(mscclppInvalidArgument, "registered-memory blob of rank %d: net offered without a region id", d->owner);
  if (p->base + d->size < p->base)
    return MPP_ERR(mscclppInvalidArgument, "registered-memory blob of rank %d: net address %#llx + %llu bytes overflows",
                   d->owner, (unsigned long long)p->base, (unsigned long long)d->size);
  return mscclppSuccess;
}

/* Host memory of a communicator whose endpoint is open becomes a region; anything else is left
 * alone (GPU memory: not carried yet). */
static mscclppResult_t net_export(struct transport_mem* mem, const struct mem_info* info) {
#if MSCCLPP_HAVE_LIBFABRIC
  struct net_state* s = state_of(mem->tc);
  if (s == NULL || s->f == NULL || mem_kind_is_device(info->kind) || mem->d.size == 0) return mscclppSuccess;
  struct net_part* p = part_of(mem);
  struct net_mr m;
  MPP_CHECK(net_fabric_reg(s->f, mem->ptr, mem->d.size, &m));
  mscclppResult_t res = region_add(&s->regions, mem->ptr, mem->d.size, -1, &p->region_id);
  if (res != mscclppSuccess) {
    net_fabric_dereg(&m);
    return res;
  }
  p->key = m.key;
  p->base = m.base;
  p->mr = m.mr;
  p->desc = m.desc;
  mem->d.transports |= TRANSPORT_BIT(mscclppTransportNet);
#else
  (void)mem;
  (void)info;
#endif
  return mscclppSuccess;
}

static void net_unexport(struct transport_mem* mem) {
#if MSCCLPP_HAVE_LIBFABRIC
  struct net_state* s = state_of(mem->tc);
  struct net_part* p = part_of(mem);
  if (s != NULL) region_remove(&s->regions, p->region_id);
  struct net_mr m = {.mr = p->mr};
  net_fabric_dereg(&m); /* later RMA to it fails at the writer (a completion error) */
  p->mr = NULL;
#else
  (void)mem;
#endif
}

/* Nothing to map: the blob's key and address are all a writer needs. */
static mscclppResult_t net_import(struct transport_mem* mem) {
  (void)mem;
  return mscclppSuccess;
}

static void net_unimport(struct transport_mem* mem) { (void)mem; }

#if MSCCLPP_HAVE_LIBFABRIC
/* What the two sides of a connection swap over the (authenticated) bootstrap. */
#define NET_HELLO_BYTES (8 + NET_ADDR_MAX + 8 + NET_SIG_NONCE_BYTES)
struct net_hello {
  uint64_t name_len;
  uint8_t name[NET_ADDR_MAX]; /* the endpoint's name: the only address put in the address vector */
  uint32_t conn_id;           /* the sender's id of the connection, for the signals it will accept */
  uint8_t nonce[NET_SIG_NONCE_BYTES]; /* fresh: the connection's keys are new each time */
};

static void hello_encode(const struct net_hello* h, uint8_t* out) {
  memset(out, 0, NET_HELLO_BYTES);
  le_put64(out, h->name_len);
  memcpy(out + 8, h->name, sizeof(h->name));
  le_put32(out + 8 + NET_ADDR_MAX, h->conn_id);
  memcpy(out + 16 + NET_ADDR_MAX, h->nonce, NET_SIG_NONCE_BYTES);
}

static void hello_decode(const uint8_t* in, struct net_hello* h) {
  h->name_len = le_get64(in);
  memcpy(h->name, in + 8, sizeof(h->name));
  h->conn_id = le_get32(in + 8 + NET_ADDR_MAX);
  memcpy(h->nonce, in + 16 + NET_ADDR_MAX, NET_SIG_NONCE_BYTES);
}

/* Makes both directions' signal keys from the communicator's net key (bootstrap_derive_key: only
 * ranks holding the job's secret have it) and both nonces, and arms the receiving side. */
static mscclppResult_t arm_signals(struct transport_conn* conn, struct net_conn* c, const struct net_hello* mine,
                                   const struct net_hello* theirs) {
  uint8_t comm_key[AUTH_KEY_BYTES], recv_key[AUTH_KEY_BYTES];
  int me = conn->tc->rank, peer = conn->peer;
  uint8_t send_key[AUTH_KEY_BYTES];
  MPP_CHECK(bootstrap_derive_key(conn->tc->boot, "mscclpp-net-v1", conn->tc->comm_id, comm_key));
  mscclppResult_t res = net_sig_key(comm_key, me, peer, conn->tag, mine->nonce, theirs->nonce, send_key);
  if (res == mscclppSuccess) res = net_sig_key(comm_key, peer, me, conn->tag, theirs->nonce, mine->nonce, recv_key);
  if (res == mscclppSuccess) res = net_sig_mac_init(&c->send_mac, send_key);
  if (res == mscclppSuccess) res = net_fabric_auth_set(fabric_of(conn), c->my_id, peer, c->addr, recv_key);
  memset(comm_key, 0, sizeof(comm_key));
  memset(send_key, 0, sizeof(send_key));
  memset(recv_key, 0, sizeof(recv_key));
  c->peer_id = theirs->conn_id;
  return res;
}

/* Swaps endpoint names, connection ids and nonces with the peer through the bootstrap (the tcp
 * transport's tag purpose: a pair creates its connections one at a time, so the two never
 * interleave), inserts the peer's name, arms the signal check, and swaps once more so that
 * neither side signals before the other accepts its signals. */
static mscclppResult_t net_connect_swap(struct transport_conn* conn, struct net_conn* c) {
  struct net_fabric* f = fabric_of(conn);
  struct net_hello mine = {0}, theirs;
  uint8_t out[NET_HELLO_BYTES], in[NET_HELLO_BYTES];
  int tag = boot_tag(BOOT_TAG_TCP, conn->tag);
  mine.name_len = net_fabric_name(f, mine.name);
  MPP_CHECK(net_fabric_auth_reserve(f, &c->my_id));
  mine.conn_id = c->my_id;
  MPP_CHECK(auth_random(mine.nonce, sizeof(mine.nonce)));
  hello_encode(&mine, out);
  MPP_CHECK(bootstrap_swap(conn->tc->boot, conn->peer, tag, out, in, NET_HELLO_BYTES));
  hello_decode(in, &theirs);
  if (theirs.conn_id == 0)
    return MPP_ERR(mscclppRemoteError, "net transport: rank %d sent connection id 0", conn->peer);
  MPP_CHECK(net_fabric_add_peer(f, conn->peer, theirs.name, theirs.name_len > NET_ADDR_MAX ? 0 : theirs.name_len,
                                &c->addr));
  MPP_CHECK(arm_signals(conn, c, &mine, &theirs));
  uint8_t ready = 1, peer_ready = 0;
  MPP_CHECK(bootstrap_swap(conn->tc->boot, conn->peer, tag, &ready, &peer_ready, 1));
  return mscclppSuccess;
}

static void conn_free(struct net_conn* c) {
  net_sig_mac_free(&c->send_mac);
  pthread_mutex_destroy(&c->send_lock);
  free(c);
}

static mscclppResult_t net_connect(struct transport_conn* conn) {
  struct net_conn* c = calloc(1, sizeof(*c));
  if (c != NULL) c->p = calloc(1, sizeof(*c->p));
  if (c == NULL || c->p == NULL) {
    if (c != NULL) free(c);
    return MPP_ERR(mscclppSystemError, "net transport: out of host memory");
  }
  pthread_mutex_init(&c->send_lock, NULL);
  mscclppResult_t res = net_connect_swap(conn, c);
  if (res != mscclppSuccess) {
    if (c->my_id != 0) net_fabric_auth_remove(fabric_of(conn), c->my_id);
    free(c->p);
    conn_free(c);
    return res;
  }
  conn->priv = c;
  LOG_INFO_(LOG_SUB_NET, "net transport: rank %d connected to rank %d (tag %d) through %s", conn->tc->rank, conn->peer,
            conn->tag, net_fabric_desc(fabric_of(conn)));
  return mscclppSuccess;
}

/* RemoteError when an operation of the connection failed (peer gone, region released). */
static mscclppResult_t net_status(struct transport_conn* conn) {
  struct net_conn* c = conn->priv;
  if (c->broken)
    return MPP_ERR(mscclppRemoteError, "net connection to rank %d (tag %d) failed earlier; it is unusable", conn->peer,
                   conn->tag);
  /* Acquire: pairs with the progress thread's release store of failed; why is complete. */
  if (atomic_load_explicit(&c->p->failed, memory_order_acquire))
    return MPP_ERR(mscclppRemoteError, "net connection to rank %d (tag %d) failed: %s (peer exited, or its memory "
                   "was released)", conn->peer, conn->tag, c->p->why);
  return mscclppSuccess;
}

/* Waits until every operation posted on conn has completed, at most timeout_ms, asking the
 * bootstrap every NET_LIVENESS_MS whether a rank died. */
static mscclppResult_t wait_all(struct transport_conn* conn, int64_t timeout_ms, const char* what) {
  struct net_conn* c = conn->priv;
  uint64_t deadline = time_deadline_ms(timeout_ms), next_check = time_deadline_ms(NET_LIVENESS_MS);
  unsigned spins = 0;
  MPP_CHECK(bootstrap_health(conn->tc->boot)); /* a flush promises the data is at a live peer */
  /* Acquire: pairs with the progress thread's release increments; their failures are visible. */
  while (atomic_load_explicit(&c->p->done, memory_order_acquire) < c->posted) {
    MPP_CHECK(net_status(conn));
    uint64_t now = time_now_ns();
    if (now >= deadline)
      return MPP_ERR(mscclppTimeout, "net %s to rank %d (tag %d): %llu operations not completed within %lld ms", what,
                     conn->peer, conn->tag,
                     (unsigned long long)(c->posted - atomic_load_explicit(&c->p->done, memory_order_relaxed)),
                     (long long)timeout_ms);
    if (now >= next_check) {
      MPP_CHECK(bootstrap_health(conn->tc->boot));
      next_check = time_deadline_ms(NET_LIVENESS_MS);
    }
    if (++spins > 1000) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
  return net_status(conn);
}


static int64_t io_timeout_ms(void) { return param_int(PARAM_FLUSH_TIMEOUT); }

/* Posts op, retrying while the provider's queue is full (a peer that stopped taking data, or one
 * the provider keeps reconnecting to) up to MSCCLPP_FLUSH_TIMEOUT, asking the bootstrap every
 * NET_LIVENESS_MS whether a rank died. */
static mscclppResult_t post_op(struct transport_conn* conn, const struct net_op* op) {
  struct net_conn* c = conn->priv;
  uint64_t deadline = 0, next_check = 0;
  for (;;) {
    int r = net_fabric_post(fabric_of(conn), c->p, c->addr, op);
    if (r == 0) {
      c->posted++;
      return mscclppSuccess;
    }
    if (r < 0) {
      c->broken = 1;
      return mscclppRemoteError;
    }
    uint64_t now = time_now_ns();
    if (deadline == 0) {
      deadline = time_deadline_ms(io_timeout_ms());
      next_check = time_deadline_ms(NET_LIVENESS_MS);
    }
    if (now >= deadline)
      return MPP_ERR(mscclppTimeout, "the provider's queue to rank %d stayed full for %lld ms (peer stalled?)",
                     conn->peer, (long long)io_timeout_ms());
    if (now >= next_check) {
      mscclppResult_t res = bootstrap_health(conn->tc->boot);
      if (res == mscclppSuccess) res = net_status(conn);
      if (res != mscclppSuccess) {
        c->broken = 1;
        return res;
      }
      next_check = time_deadline_ms(NET_LIVENESS_MS);
    }
    sched_yield();
  }
}

/* Posts writes of size bytes at src (desc: its region's) to dst+dst_off in pieces. */
static mscclppResult_t post_writes(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                   const char* src, void* desc, uint64_t size) {
  struct net_fabric* f = fabric_of(conn);
  const struct net_part* d = part_of(dst);
  size_t piece = net_fabric_max_op(f);
  MPP_CHECK(net_status(conn));
  for (uint64_t done = 0; done < size;) {
    size_t n = (size_t)(size - done < piece ? size - done : piece);
    struct net_op op = {.kind = NET_OP_WRITE, .local = (void*)(src + done), .size = n, .desc = desc,
                        .raddr = d->base + dst_off + done, .key = d->key};
    mscclppResult_t res = post_op(conn, &op);
    if (res != mscclppSuccess)
      return MPP_ERR(res, "net write of %llu bytes to rank %d (offset %llu): %s", (unsigned long long)size, conn->peer,
                     (unsigned long long)dst_off, err_copy().text);
    done += n;
  }
  return mscclppSuccess;
}

static mscclppResult_t net_write(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                 struct transport_mem* src, uint64_t src_off, uint64_t size) {
  if (size == 0) return net_status(conn);
  if (!(src->d.transports & TRANSPORT_BIT(mscclppTransportNet)))
    return MPP_ERR(mscclppInvalidUsage,
                   "net connection to rank %d: the source is not a net memory region (GPU memory is not carried by the "
                   "net transport yet: no FI_HMEM or staging path)", conn->peer);
  return post_writes(conn, dst, dst_off, (const char*)src->ptr + src_off, part_of(src)->desc, size);
}

/* Host memory the caller may reuse at once: the write is waited for. */
/* The connection's registered bounce buffer (net_fabric_max_op bytes), made on first use. */
static mscclppResult_t bounce_of(struct transport_conn* conn, void** out, void** desc) {
  struct net_pending* p = ((struct net_conn*)conn->priv)->p;
  if (p->bounce == NULL) {
    struct net_fabric* f = fabric_of(conn);
    void* b = malloc(net_fabric_max_op(f));
    if (b == NULL) return MPP_ERR(mscclppSystemError, "net transport: out of host memory for a bounce buffer");
    mscclppResult_t res = net_fabric_reg(f, b, net_fabric_max_op(f), &p->bounce_mr);
    if (res != mscclppSuccess) {
      free(b);
      return res;
    }
    p->bounce = b;
  }
  *out = p->bounce;
  *desc = p->bounce_mr.desc;
  return mscclppSuccess;
}

/* Host memory the caller may reuse at once (the CPU executor's writes): copied piece by piece into
 * the registered bounce buffer, each piece written and waited for, so any provider takes it
 * (FI_MR_LOCAL ones need registered sources). */
static mscclppResult_t net_write_host(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                      const void* src, uint64_t size) {
  void *bounce, *desc;
  MPP_CHECK(net_status(conn));
  if (size == 0) return mscclppSuccess;
  MPP_CHECK(bounce_of(conn, &bounce, &desc));
  size_t piece = net_fabric_max_op(fabric_of(conn));
  for (uint64_t done = 0; done < size;) {
    size_t n = (size_t)(size - done < piece ? size - done : piece);
    memcpy(bounce, (const char*)src + done, n);
    MPP_CHECK(post_writes(conn, dst, dst_off + done, bounce, desc, n));
    MPP_CHECK(wait_all(conn, io_timeout_ms(), "host write"));
    done += n;
  }
  return mscclppSuccess;
}

/* Reads into host memory through the bounce buffer, piece by piece; returns once dst holds it all. */
static mscclppResult_t net_read_host(struct transport_conn* conn, void* dst, struct transport_mem* src, uint64_t src_off,
                                     uint64_t size) {
  void *bounce, *desc;
  MPP_CHECK(net_status(conn));
  if (size == 0) return mscclppSuccess;
  MPP_CHECK(bounce_of(conn, &bounce, &desc));
  const struct net_part* s = part_of(src);
  size_t piece = net_fabric_max_op(fabric_of(conn));
  for (uint64_t done = 0; done < size;) {
    size_t n = (size_t)(size - done < piece ? size - done : piece);
    struct net_op op = {.kind = NET_OP_READ, .local = bounce, .size = n, .desc = desc,
                        .raddr = s->base + src_off + done, .key = s->key};
    mscclppResult_t res = post_op(conn, &op);
    if (res == mscclppSuccess) res = wait_all(conn, io_timeout_ms(), "read");
    if (res != mscclppSuccess)
      return MPP_ERR(res, "net read of %llu bytes from rank %d (offset %llu): %s", (unsigned long long)size, conn->peer,
                     (unsigned long long)src_off, err_copy().text);
    memcpy((char*)dst + done, bounce, n);
    done += n;
  }
  return mscclppSuccess;
}

static mscclppResult_t net_update(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                  uint64_t new_value) {
  MPP_CHECK(net_status(conn));
  struct net_conn* c = conn->priv;
  pthread_mutex_lock(&c->send_lock);
  struct net_sig sig = {.magic = NET_SIG_MAGIC, .conn_id = c->peer_id, .seq = ++c->seq,
                        .region = part_of(dst)->region_id, .offset = dst_off, .value = new_value};
  net_sig_seal(&c->send_mac, &sig);
  pthread_mutex_unlock(&c->send_lock);
  struct net_op op = {.kind = NET_OP_SIGNAL, .sig = &sig};
  mscclppResult_t res = post_op(conn, &op);
  if (res != mscclppSuccess)
    return MPP_ERR(res, "net update of rank %d's word at offset %llu: %s", conn->peer, (unsigned long long)dst_off,
                   err_copy().text);
  return mscclppSuccess;
}

static mscclppResult_t net_flush(struct transport_conn* conn, int64_t timeout_ms) {
  return wait_all(conn, timeout_ms, "flush");
}

/* A connection with operations still in flight hands its counters to the endpoint, which frees
 * them when it closes (a late completion must find them). */
static void net_close(struct transport_conn* conn, int abort) {
  struct net_conn* c = conn->priv;
  if (c == NULL) return;
  if (!abort && !atomic_load_explicit(&c->p->failed, memory_order_acquire)) {
    int quiet = err_quiet(1);
    (void)wait_all(conn, NET_CLOSE_WAIT_MS, "close");
    err_quiet(quiet);
  }
  net_fabric_auth_remove(fabric_of(conn), c->my_id); /* its signals are refused from now on */
  if (atomic_load_explicit(&c->p->done, memory_order_acquire) < c->posted) net_fabric_retire(fabric_of(conn), c->p);
  else net_pending_free(c->p);
  conn_free(c);
  conn->priv = NULL;
}
#else
static mscclppResult_t net_connect(struct transport_conn* conn) {
  (void)conn;
  return MPP_ERR(mscclppInvalidUsage, "net transport: %s", net_unusable(NULL, 0));
}
#endif

int net_probe(char* why, size_t len) {
#if MSCCLPP_HAVE_LIBFABRIC
  return net_fabric_probe(why, len);
#else
  snprintf(why, len, "%s", net_unusable(NULL, 0));
  return 0;
#endif
}

/* ---- for the tests (net.h) ----------------------------------------------------------------- */
#if MSCCLPP_HAVE_LIBFABRIC
size_t net_test_name(const struct transport_comm* tc, void* buf) {
  const struct net_state* s = state_of(tc);
  return s != NULL && s->f != NULL ? net_fabric_name(s->f, buf) : 0;
}

int net_test_last_signal(const struct transport_comm* tc, void* msg64) {
  const struct net_state* s = state_of(tc);
  return s != NULL && s->f != NULL && net_fabric_last_signal(s->f, msg64);
}

int net_test_send_raw(struct transport_conn* conn, const void* msg64) {
  struct net_op op = {.kind = NET_OP_SIGNAL, .sig = msg64};
  return post_op(conn, &op) == mscclppSuccess && wait_all(conn, io_timeout_ms(), "raw send") == mscclppSuccess;
}

int net_test_region(const struct transport_mem* mem, uint64_t* key, uint64_t* base) {
  if (!(mem->d.transports & TRANSPORT_BIT(mscclppTransportNet))) return 0;
  const struct net_part* p = (const struct net_part*)(const void*)&mem->d.part[mscclppTransportNet];
  *key = p->key;
  *base = p->base;
  return 1;
}

unsigned long long net_test_refused(void) { return (unsigned long long)net_fabric_refused_total(); }
#else
size_t net_test_name(const struct transport_comm* tc, void* buf) {
  (void)tc;
  (void)buf;
  return 0;
}
int net_test_last_signal(const struct transport_comm* tc, void* msg64) {
  (void)tc;
  (void)msg64;
  return 0;
}
int net_test_send_raw(struct transport_conn* conn, const void* msg64) {
  (void)conn;
  (void)msg64;
  return 0;
}
int net_test_region(const struct transport_mem* mem, uint64_t* key, uint64_t* base) {
  (void)mem;
  (void)key;
  (void)base;
  return 0;
}
unsigned long long net_test_refused(void) { return 0; }
#endif

const struct transport_ops net_transport = {
    .name = "net",
    .api_name = "net",
    .id = mscclppTransportNet,
    .mem_kinds = (1u << MEM_KIND_HOST) | (1u << MEM_KIND_HOST_SHM),
    .token_import = TRANSPORT_BIT(mscclppTransportNet),
    .maps_memory = 0,
    .unreachable_why = "it offers no net memory region (GPU memory, or registered while MSCCLPP_NET_TRANSPORT was off)",
    .part_wire_bytes = NET_PART_WIRE,
    .unusable = net_unusable,
    .start = net_start,
    .stop = net_stop,
    .encode_part = net_encode_part,
    .decode_part = net_decode_part,
    .export_mem = net_export,
    .unexport_mem = net_unexport,
    .import_mem = net_import,
    .unimport_mem = net_unimport,
    .connect = net_connect,
#if MSCCLPP_HAVE_LIBFABRIC
    .write = net_write,
    .update_and_sync = net_update,
    .write_host = net_write_host,
    .read_host = net_read_host,
    .flush = net_flush,
    .status = net_status,
    .close = net_close,
#endif
};
