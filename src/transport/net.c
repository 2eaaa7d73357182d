/* net.c - the net transport: registered host memory of any host, reached by libfabric RMA
 * (net_fabric.c). When MSCCLPP_NET_TRANSPORT=on, each communicator opens one RDM endpoint at
 * start; registration exports host memory as a memory region (key and remote address in the
 * blob, with the id of the region in the owner's region table for signals); a write is one or
 * more RMA writes, a semaphore update is a signal message that the owner's progress thread
 * applies after the writes before it, and a flush waits for the delivery completions of
 * everything posted. Auto prefers it to tcp across hosts while it is on. GPU memory goes directly
 * where the provider grants FI_HMEM on both sides, else staged through pinned host memory
 * (net_stage.c); chosen per connection and logged. docs/net-transport.md. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/net.h"
#include "transport/net_conn.h"
#include "transport/net_fabric.h"
#include "transport/net_hello.h"
#include "transport/net_sig.h"
#include "transport/net_stage.h"
#include "transport/tcp_regions.h"
#include "transport/transport.h"
#include "util/auth.h"
#include "util/bytes.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/timeutil.h"

#ifndef NET_LIVENESS_MS
#define NET_LIVENESS_MS 200 /* how often a wait asks the bootstrap whether a rank died */
#endif
#define NET_CLOSE_WAIT_MS 1000
/* In a region id on the wire: the region has no memory region of the provider (GPU memory without
 * FI_HMEM): it is reached through the staged path only. Ids never come near this bit. */
#define NET_REGION_STAGED (1ull << 63)

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

static struct net_state* state_of(const struct transport_comm* tc) { return tc->state[mscclppTransportNet]; }
static int net_on(void) { return strcmp(param_str(PARAM_NET_TRANSPORT), "on") == 0; }

#if MSCCLPP_HAVE_LIBFABRIC
static struct net_fabric* fabric_of(struct transport_conn* conn) { return state_of(conn->tc)->f; }
struct net_fabric* net_fabric_of(struct transport_conn* conn) { return fabric_of(conn); }
struct region_table* net_regions_of(struct transport_conn* conn) { return &state_of(conn->tc)->regions; }
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
  (void)peer; /* GPU memory goes directly (FI_HMEM) or staged: decided when connecting */
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
  int want_hmem = tc->kind == mscclppRankGpu && strcmp(param_str(PARAM_NET_GPU_MEM), "staged") != 0;
  if (net_fabric_open(tc->rank, &s->regions, tc->cuda_dev, want_hmem, &s->f) != mscclppSuccess) {
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
  if ((p->region_id & ~NET_REGION_STAGED) == 0)
    return MPP_ERR(mscclppInvalidArgument, "registered-memory blob of rank %d: net offered without a region id", d->owner);
  if (p->base + d->size < p->base)
    return MPP_ERR(mscclppInvalidArgument, "registered-memory blob of rank %d: net address %#llx + %llu bytes overflows",
                   d->owner, (unsigned long long)p->base, (unsigned long long)d->size);
  return mscclppSuccess;
}

#if MSCCLPP_HAVE_LIBFABRIC
/* Registers GPU memory of device dev with the provider where it granted FI_HMEM (and
 * MSCCLPP_NET_GPU_MEM is not staged): 1 with *m filled, else 0 (then staged only; a refused
 * registration is logged). */
static int reg_device(struct net_state* s, struct transport_mem* mem, int dev, struct net_mr* m) {
  if (!net_fabric_hmem(s->f) || strcmp(param_str(PARAM_NET_GPU_MEM), "staged") == 0) return 0;
  if (net_fabric_reg_dev(s->f, mem->ptr, mem->d.size, dev, m) == mscclppSuccess) return 1;
  log_msg(LOG_WARN, LOG_SUB_NET, "net transport: %s; this buffer's writes go staged", err_last());
  err_clear();
  return 0;
}
#endif

/* Memory of a communicator whose endpoint is open becomes a region of the owner's table: host
 * memory and GPU memory under FI_HMEM also a provider memory region (written directly), other GPU
 * memory without one (NET_REGION_STAGED: reached through the staged path). */
static mscclppResult_t net_export(struct transport_mem* mem, const struct mem_info* info) {
#if MSCCLPP_HAVE_LIBFABRIC
  struct net_state* s = state_of(mem->tc);
  if (s == NULL || s->f == NULL || mem->d.size == 0) return mscclppSuccess;
  struct net_part* p = part_of(mem);
  int dev = mem_kind_is_device(info->kind) ? info->device : -1;
  struct net_mr m = {0};
  int has_mr = dev >= 0 ? reg_device(s, mem, dev, &m) : 0;
  if (dev < 0) {
    MPP_CHECK(net_fabric_reg(s->f, mem->ptr, mem->d.size, &m));
    has_mr = 1;
  }
  mscclppResult_t res = region_add(&s->regions, mem->ptr, mem->d.size, dev, &p->region_id);
  if (res != mscclppSuccess) {
    net_fabric_dereg(&m);
    return res;
  }
  if (!has_mr) p->region_id |= NET_REGION_STAGED;
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
  if (s != NULL) region_remove(&s->regions, p->region_id & ~NET_REGION_STAGED);
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
static mscclppResult_t net_connect_swap(struct transport_conn* conn, struct net_conn* c, const char** mode) {
  struct net_fabric* f = fabric_of(conn);
  struct net_hello mine = {0}, theirs;
  uint8_t out[NET_HELLO_BYTES], in[NET_HELLO_BYTES];
  int tag = boot_tag(BOOT_TAG_TCP, conn->tag);
  mine.name_len = net_fabric_name(f, mine.name);
  MPP_CHECK(net_fabric_auth_reserve(f, &c->my_id));
  mine.conn_id = c->my_id;
  MPP_CHECK(auth_random(mine.nonce, sizeof(mine.nonce)));
  mine.flags = net_fabric_hmem(f) ? NET_HELLO_HMEM : 0;
  MPP_CHECK(net_stage_open(conn, net_needs_stage(conn), &c->stage, &mine.ring));
  net_hello_encode(&mine, out);
  MPP_CHECK(bootstrap_swap(conn->tc->boot, conn->peer, tag, out, in, NET_HELLO_BYTES));
  net_hello_decode(in, &theirs);
  if (theirs.conn_id == 0)
    return MPP_ERR(mscclppRemoteError, "net transport: rank %d sent connection id 0", conn->peer);
  MPP_CHECK(net_fabric_add_peer(f, conn->peer, theirs.name, theirs.name_len > NET_ADDR_MAX ? 0 : theirs.name_len,
                                &c->addr));
  MPP_CHECK(net_gpu_mode(conn, &theirs, mode));
  MPP_CHECK(net_stage_arm(conn, c->stage, &theirs.ring));
  MPP_CHECK(arm_signals(conn, c, &mine, &theirs));
  net_fabric_auth_hook(f, c->my_id, net_stage_on_msg, conn);
  uint8_t ready = 1, peer_ready = 0;
  MPP_CHECK(bootstrap_swap(conn->tc->boot, conn->peer, tag, &ready, &peer_ready, 1));
  return mscclppSuccess;
}

static void conn_free(struct net_conn* c) {
  net_stage_close(c->stage);
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
  c->stage_all = net_stage_host();
  conn->priv = c; /* before the staging hook is armed: the progress thread finds c through conn */
  const char* mode = "";
  mscclppResult_t res = net_connect_swap(conn, c, &mode);
  if (res != mscclppSuccess) {
    if (c->my_id != 0) net_fabric_auth_remove(fabric_of(conn), c->my_id); /* no hook runs after it */
    conn->priv = NULL;
    net_pending_free(c->p);
    conn_free(c);
    return res;
  }
  char ring[64] = "";
  if (net_stage_has_ring(c->stage)) net_stage_describe(c->stage, ring, sizeof(ring));
  LOG_INFO_(LOG_SUB_NET, "net transport: rank %d connected to rank %d (tag %d) through %s; memory: %s%s%s",
            conn->tc->rank, conn->peer, conn->tag, net_fabric_desc(fabric_of(conn)), mode, ring[0] ? ", staging " : "",
            ring);
  return mscclppSuccess;
}

mscclppResult_t net_status(struct transport_conn* conn) {
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

mscclppResult_t net_wait(struct transport_conn* conn, net_done_fn done, void* arg, int64_t timeout_ms) {
  uint64_t deadline = time_deadline_ms(timeout_ms), next_check = time_deadline_ms(NET_LIVENESS_MS);
  unsigned spins = 0;
  MPP_CHECK(bootstrap_health(conn->tc->boot)); /* what we wait for promises something of a live peer */
  while (!done(conn, arg)) {
    MPP_CHECK(net_status(conn));
    uint64_t now = time_now_ns();
    if (now >= deadline) return mscclppTimeout;
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

static int all_completed(struct transport_conn* conn, void* arg) {
  (void)arg;
  struct net_conn* c = conn->priv;
  /* Acquire: pairs with the progress thread's release increments; their failures are visible. */
  return atomic_load_explicit(&c->p->done, memory_order_acquire) >= c->posted;
}

/* Waits until every operation posted on conn has completed, at most timeout_ms. */
static mscclppResult_t wait_all(struct transport_conn* conn, int64_t timeout_ms, const char* what) {
  struct net_conn* c = conn->priv;
  mscclppResult_t res = net_wait(conn, all_completed, NULL, timeout_ms);
  if (res == mscclppTimeout)
    return MPP_ERR(mscclppTimeout, "net %s to rank %d (tag %d): %llu operations not completed within %lld ms", what,
                   conn->peer, conn->tag,
                   (unsigned long long)(c->posted - atomic_load_explicit(&c->p->done, memory_order_relaxed)),
                   (long long)timeout_ms);
  return res;
}

int64_t net_io_timeout_ms(void) { return param_int(PARAM_FLUSH_TIMEOUT); }

int net_send_once(struct net_fabric* f, struct net_conn* c, struct net_pending* p, const struct net_msg* m) {
  struct net_sig sig;
  pthread_mutex_lock(&c->send_lock);
  sig = (struct net_sig){.magic = m->magic, .conn_id = c->peer_id, .seq = ++c->seq, .region = m->region,
                         .offset = m->offset, .value = m->value, .reserved = m->reserved};
  net_sig_seal(&c->send_mac, &sig);
  struct net_op op = {.kind = NET_OP_SIGNAL, .sig = &sig};
  int r = net_fabric_post(f, p, c->addr, &op); /* FI_INJECT: sig may go once this returns */
  pthread_mutex_unlock(&c->send_lock);
  return r;
}

/* One attempt at posting op, or (op NULL) the message m sealed anew: net_fabric_post's result. */
static int post_attempt(struct transport_conn* conn, const struct net_op* op, const struct net_msg* m) {
  struct net_conn* c = conn->priv;
  if (op != NULL) return net_fabric_post(fabric_of(conn), c->p, c->addr, op);
  return net_send_once(fabric_of(conn), c, c->p, m);
}

/* Posts op or m, retrying while the provider's queue is full (a peer that stopped taking data, or
 * one the provider keeps reconnecting to) up to MSCCLPP_FLUSH_TIMEOUT, asking the bootstrap every
 * NET_LIVENESS_MS whether a rank died. */
static mscclppResult_t post_retrying(struct transport_conn* conn, const struct net_op* op, const struct net_msg* m) {
  struct net_conn* c = conn->priv;
  uint64_t deadline = 0, next_check = 0;
  for (;;) {
    int r = post_attempt(conn, op, m);
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
      deadline = time_deadline_ms(net_io_timeout_ms());
      next_check = time_deadline_ms(NET_LIVENESS_MS);
    }
    if (now >= deadline)
      return MPP_ERR(mscclppTimeout, "the provider's queue to rank %d stayed full for %lld ms (peer stalled?)",
                     conn->peer, (long long)net_io_timeout_ms());
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

mscclppResult_t net_post_op(struct transport_conn* conn, const struct net_op* op) {
  return post_retrying(conn, op, NULL);
}

mscclppResult_t net_post_msg(struct transport_conn* conn, const struct net_msg* m) {
  return post_retrying(conn, NULL, m);
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
    mscclppResult_t res = net_post_op(conn, &op);
    if (res != mscclppSuccess)
      return MPP_ERR(res, "net write of %llu bytes to rank %d (offset %llu): %s", (unsigned long long)size, conn->peer,
                     (unsigned long long)dst_off, err_copy().text);
    done += n;
  }
  return mscclppSuccess;
}

/* 1 when a write into dst must be staged: it has no provider memory region (GPU memory without
 * FI_HMEM), or every write is (MSCCLPP_NET_STAGE_HOST=1). */
static int dst_staged(const struct net_conn* c, struct transport_mem* dst) {
  return c->stage_all || (part_of(dst)->region_id & NET_REGION_STAGED) != 0;
}

static mscclppResult_t stage_to(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                const void* src, int src_dev, uint64_t size) {
  uint64_t region = part_of(dst)->region_id & ~NET_REGION_STAGED;
  return net_stage_write(conn, region, dst_off, src, src_dev, size);
}

/* Direct RMA where both buffers are provider memory regions (host memory; GPU memory under
 * FI_HMEM), else the staged path (net_stage.c). */
static mscclppResult_t net_write(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                 struct transport_mem* src, uint64_t src_off, uint64_t size) {
  if (size == 0) return net_status(conn);
  struct net_conn* c = conn->priv;
  const char* from = (const char*)src->ptr + src_off;
  int src_mr = (src->d.transports & TRANSPORT_BIT(mscclppTransportNet)) && part_of(src)->mr != NULL;
  if (src_mr && !dst_staged(c, dst)) return post_writes(conn, dst, dst_off, from, part_of(src)->desc, size);
  MPP_CHECK(net_status(conn));
  return stage_to(conn, dst, dst_off, from, src->is_device ? src->d.cuda_dev : -1, size);
}

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
 * (FI_MR_LOCAL ones need registered sources); or staged (copied into the send slots). */
static mscclppResult_t net_write_host(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                      const void* src, uint64_t size) {
  void *bounce, *desc;
  MPP_CHECK(net_status(conn));
  if (size == 0) return mscclppSuccess;
  if (dst_staged(conn->priv, dst)) return stage_to(conn, dst, dst_off, src, -1, size);
  MPP_CHECK(bounce_of(conn, &bounce, &desc));
  size_t piece = net_fabric_max_op(fabric_of(conn));
  for (uint64_t done = 0; done < size;) {
    size_t n = (size_t)(size - done < piece ? size - done : piece);
    memcpy(bounce, (const char*)src + done, n);
    MPP_CHECK(post_writes(conn, dst, dst_off + done, bounce, desc, n));
    MPP_CHECK(wait_all(conn, net_io_timeout_ms(), "host write"));
    done += n;
  }
  return mscclppSuccess;
}

/* Reads into host memory through the bounce buffer, piece by piece; returns once dst holds it all.
 * A region reached only through staging (GPU memory without FI_HMEM) cannot be read: refused. */
static mscclppResult_t net_read_host(struct transport_conn* conn, void* dst, struct transport_mem* src, uint64_t src_off,
                                     uint64_t size) {
  void *bounce, *desc;
  MPP_CHECK(net_status(conn));
  if (part_of(src)->region_id & NET_REGION_STAGED)
    return MPP_ERR(mscclppInvalidUsage, "net read from rank %d: its buffer is GPU memory that the provider cannot "
                   "reach (no FI_HMEM); the staged path carries writes only", conn->peer);
  if (size == 0) return mscclppSuccess;
  /* A read sees this rank's earlier writes: staged ones are placed once their credits are back. */
  MPP_CHECK(net_stage_drain(conn, net_io_timeout_ms(), "read"));
  MPP_CHECK(bounce_of(conn, &bounce, &desc));
  const struct net_part* s = part_of(src);
  size_t piece = net_fabric_max_op(fabric_of(conn));
  for (uint64_t done = 0; done < size;) {
    size_t n = (size_t)(size - done < piece ? size - done : piece);
    struct net_op op = {.kind = NET_OP_READ, .local = bounce, .size = n, .desc = desc,
                        .raddr = s->base + src_off + done, .key = s->key};
    mscclppResult_t res = net_post_op(conn, &op);
    if (res == mscclppSuccess) res = wait_all(conn, net_io_timeout_ms(), "read");
    if (res != mscclppSuccess)
      return MPP_ERR(res, "net read of %llu bytes from rank %d (offset %llu): %s", (unsigned long long)size, conn->peer,
                     (unsigned long long)src_off, err_copy().text);
    memcpy((char*)dst + done, bounce, n);
    done += n;
  }
  return mscclppSuccess;
}

/* A signal message, applied by the owner after every earlier message of the connection (staged
 * pieces included: FI_ORDER_SAS). A provider without that order first waits for every credit. */
static mscclppResult_t net_update(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                  uint64_t new_value) {
  MPP_CHECK(net_status(conn));
  struct net_conn* c = conn->priv;
  if (!net_fabric_sas(fabric_of(conn)) && !net_stage_idle(c->stage))
    MPP_CHECK(net_stage_drain(conn, net_io_timeout_ms(), "update"));
  struct net_msg m = {.magic = NET_SIG_MAGIC, .region = part_of(dst)->region_id & ~NET_REGION_STAGED,
                      .offset = dst_off, .value = new_value};
  mscclppResult_t res = net_post_msg(conn, &m);
  if (res != mscclppSuccess)
    return MPP_ERR(res, "net update of rank %d's word at offset %llu: %s", conn->peer, (unsigned long long)dst_off,
                   err_copy().text);
  /* Relaxed: a flush this signal must be fenced by is ordered after it by the caller (same thread,
   * or a synchronization of the caller's). */
  atomic_store_explicit(&c->unfenced, 1, memory_order_relaxed);
  return mscclppSuccess;
}

static int64_t ms_left(uint64_t start, int64_t timeout_ms) {
  int64_t left = timeout_ms - (int64_t)((time_now_ns() - start) / 1000000);
  return left > 0 ? left : 0;
}

/* Every posted operation complete (delivered: writes placed); after a signal, also a fence
 * answered (a delivered signal message may not be applied yet; the owner answers the fence after
 * every earlier message: signals applied); with staging, every credit back (pieces placed). Then
 * the data is in the peer's memory, GPU memory included. One bound for all. */
static mscclppResult_t net_flush(struct transport_conn* conn, int64_t timeout_ms) {
  struct net_conn* c = conn->priv;
  uint64_t start = time_now_ns();
  MPP_CHECK(wait_all(conn, timeout_ms, "flush"));
  if (atomic_exchange_explicit(&c->unfenced, 0, memory_order_relaxed))
    MPP_CHECK(net_stage_fence(conn, ms_left(start, timeout_ms), "flush"));
  return net_stage_drain(conn, ms_left(start, timeout_ms), "flush");
}

/* A connection with operations still in flight hands its counters (and send slots) to the
 * endpoint, which frees them when it closes (a late completion must find them). */
static void net_close(struct transport_conn* conn, int abort) {
  struct net_conn* c = conn->priv;
  if (c == NULL) return;
  if (!abort && !atomic_load_explicit(&c->p->failed, memory_order_acquire)) {
    int quiet = err_quiet(1); /* no fence: the peer may have closed its side already */
    if (wait_all(conn, NET_CLOSE_WAIT_MS, "close") == mscclppSuccess)
      (void)net_stage_drain(conn, NET_CLOSE_WAIT_MS, "close");
    err_quiet(quiet);
  }
  net_fabric_auth_remove(fabric_of(conn), c->my_id); /* its messages are refused from now on */
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
  return net_post_op(conn, &op) == mscclppSuccess && wait_all(conn, net_io_timeout_ms(), "raw send") == mscclppSuccess;
}

int net_test_region(const struct transport_mem* mem, uint64_t* key, uint64_t* base) {
  if (!(mem->d.transports & TRANSPORT_BIT(mscclppTransportNet))) return 0;
  const struct net_part* p = (const struct net_part*)(const void*)&mem->d.part[mscclppTransportNet];
  *key = p->key;
  *base = p->base;
  return 1;
}

int net_test_stage_raw(struct transport_conn* conn, const struct transport_mem* mem, uint64_t offset, uint64_t size,
                       uint64_t slot) {
  struct net_conn* c = conn->priv;
  if (!net_stage_has_ring(c->stage) || !(mem->d.transports & TRANSPORT_BIT(mscclppTransportNet))) return 0;
  const struct net_part* p = (const struct net_part*)(const void*)&mem->d.part[mscclppTransportNet];
  return net_stage_test_raw(conn, p->region_id & ~NET_REGION_STAGED, offset, size, slot) == mscclppSuccess;
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
int net_test_stage_raw(struct transport_conn* conn, const struct transport_mem* mem, uint64_t offset, uint64_t size,
                       uint64_t slot) {
  (void)conn, (void)mem, (void)offset, (void)size, (void)slot;
  return 0;
}
unsigned long long net_test_refused(void) { return 0; }
#endif

const struct transport_ops net_transport = {
    .name = "net",
    .api_name = "net",
    .id = mscclppTransportNet,
    .mem_kinds = (1u << MEM_KIND_HOST) | (1u << MEM_KIND_HOST_SHM) | (1u << MEM_KIND_CUDA_IPC) | (1u << MEM_KIND_CUDA_VMM),
    .token_import = TRANSPORT_BIT(mscclppTransportNet),
    .maps_memory = 0,
    .unreachable_why = "it offers no net region (registered while MSCCLPP_NET_TRANSPORT was off)",
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
