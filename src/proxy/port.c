/* port.c - adding semaphores and ports to a proxy service, and the port channels built on them. */
#include <string.h>

#include "core/comm.h"
#include "core/connection.h"
#include "core/handle_reg.h"
#include "proxy/proxy.h"
#include "util/err.h"
#include "util/log.h"

mscclppResult_t mscclppProxyServiceAddSemaphore(mscclppProxyService_t proxy, mscclppConnection_t conn, int* semId) {
  err_clear();
  MPP_CHECK_ARG(semId != NULL, "mscclppProxyServiceAddSemaphore: semId is NULL");
  HANDLE_CHECK(HANDLE_PROXY_SERVICE, proxy);
  HANDLE_CHECK(HANDLE_CONNECTION, conn);
  PROXY_CHECK_CHANNELS(proxy, __func__);
  MPP_CHECK_ARG(conn->comm == proxy->comm, "mscclppProxyServiceAddSemaphore: the connection belongs to another communicator");
  struct chan_ext* x = proxy->ext;
  pthread_mutex_lock(&proxy->add_lock);
  uint32_t id = atomic_load(&proxy->nsems);
  struct token_slot mine;
  memset(&mine, 0, sizeof(mine));
  mscclppResult_t local = mscclppSuccess;
  if (id >= PROXY_MAX_SEMS) {
    local = MPP_ERR(mscclppInvalidUsage, "mscclppProxyServiceAddSemaphore: this proxy has all %u semaphores", PROXY_MAX_SEMS);
  } else {
    pthread_mutex_lock(&x->lock);
    local = tokens_alloc(x, &mine);
    pthread_mutex_unlock(&x->lock);
  }
  struct token_peer theirs;
  mscclppResult_t res = tokens_exchange(x, conn, TOKEN_PORT, local, &mine, &theirs);
  /* The peer's token must be reachable through the connection: our proxy writes it. */
  if (res == mscclppSuccess) res = connection_check_dst(conn, theirs.mem, theirs.offset, sizeof(uint64_t));
  if (res == mscclppSuccess) {
    struct proxy_sem* s = &proxy->sems[id];
    memset(s, 0, sizeof(*s));
    s->conn = conn;
    s->remote = theirs.mem;
    s->remote_off = theirs.offset;
    s->remote_ptr = theirs.ptr;
    s->dev.inbound = mine.token;
    s->dev.expected = mine.expected;
    ext_wait_info(x, conn->t.peer, -1, &s->dev.wait);
    /* Release: the thread that acquire-loads the count sees the entry complete. */
    atomic_store_explicit(&proxy->nsems, id + 1, memory_order_release);
    *semId = (int)id;
  }
  pthread_mutex_unlock(&proxy->add_lock);
  return res;
}

/* Checks a port's memory: dst is the peer's, imported here; src is this rank's own. Offsets in
 * triggers have MSCCLPP_TRIGGER_OFFSET_BITS bits, so neither may be larger. */
static mscclppResult_t check_port_mem(struct mscclppProxyService* p, const struct proxy_sem* s, mscclppRegMem_t dst,
                                      mscclppRegMem_t src) {
  size_t size = 0;
  int owner = -1;
  if (dst != NULL) {
    MPP_CHECK(mscclppRegMemInfo(dst, NULL, &size, &owner));
    if (owner != s->conn->t.peer)
      return MPP_ERR(mscclppInvalidUsage, "mscclppPortChannelCreate: dst is rank %d's memory, the semaphore's peer is rank %d",
                     owner, s->conn->t.peer);
    MPP_CHECK(connection_check_dst(s->conn, dst, 0, size));
    if (size > MSCCLPP_TRIGGER_MAX_OFFSET + 1)
      return MPP_ERR(mscclppInvalidArgument, "mscclppPortChannelCreate: dst of %zu bytes exceeds the trigger's 2^%d", size,
                     MSCCLPP_TRIGGER_OFFSET_BITS);
  }
  if (src != NULL) {
    MPP_CHECK(mscclppRegMemInfo(src, NULL, &size, &owner));
    if (owner != p->comm->rank)
      return MPP_ERR(mscclppInvalidUsage, "mscclppPortChannelCreate: src is rank %d's memory, not this rank's (%d)", owner,
                     p->comm->rank);
    if (size > MSCCLPP_TRIGGER_MAX_OFFSET + 1)
      return MPP_ERR(mscclppInvalidArgument, "mscclppPortChannelCreate: src of %zu bytes exceeds the trigger's 2^%d", size,
                     MSCCLPP_TRIGGER_OFFSET_BITS);
  }
  return mscclppSuccess;
}

/* The service's index of s's connection (added on first use), and its copy-engine lane when the
 * connection is cuda-ipc and lanes work here (p2p.c says why ports do not use its write). */
static mscclppResult_t conn_slot(struct mscclppProxyService* p, const struct proxy_sem* s, uint32_t* out) {
  uint32_t ci = 0;
  while (ci < p->nconns && p->conns[ci] != s->conn) ci++;
  if (ci == p->nconns) { /* fewer connections than semaphores: always room */
    if (s->conn->transport == mscclppTransportP2P && s->remote_ptr != NULL && p2p_available())
      MPP_CHECK(p2p_lane_create(p->core.dev, &p->lanes[ci]));
    p->conns[p->nconns++] = s->conn;
  }
  *out = ci;
  return mscclppSuccess;
}

mscclppResult_t mscclppPortChannelCreate(mscclppProxyService_t proxy, int semId, mscclppRegMem_t dst,
                                         mscclppRegMem_t src, int channelId, mscclppPortChannel* chan) {
  err_clear();
  MPP_CHECK_ARG(chan != NULL, "mscclppPortChannelCreate: chan is NULL");
  HANDLE_CHECK(HANDLE_PROXY_SERVICE, proxy);
  PROXY_CHECK_CHANNELS(proxy, __func__);
  HANDLE_CHECK_OPT(HANDLE_REGMEM, dst);
  HANDLE_CHECK_OPT(HANDLE_REGMEM, src);
  uint32_t nsems = atomic_load(&proxy->nsems);
  MPP_CHECK_ARG(semId >= 0 && (uint32_t)semId < nsems, "mscclppPortChannelCreate: semaphore %d does not exist (%u made)",
                semId, nsems);
  const struct proxy_sem* s = &proxy->sems[semId];
  MPP_CHECK(check_port_mem(proxy, s, dst, src));
  pthread_mutex_lock(&proxy->add_lock);
  uint32_t id = atomic_load(&proxy->nports);
  if (id >= PROXY_MAX_PORTS) {
    pthread_mutex_unlock(&proxy->add_lock);
    return MPP_ERR(mscclppInvalidUsage, "mscclppPortChannelCreate: this proxy has all %u ports", PROXY_MAX_PORTS);
  }
  uint32_t ci = 0;
  mscclppResult_t res = conn_slot(proxy, s, &ci);
  if (res != mscclppSuccess) {
    pthread_mutex_unlock(&proxy->add_lock);
    return res;
  }
  struct proxy_port* port = &proxy->ports[id];
  *port = (struct proxy_port){.sem = (uint32_t)semId, .conn_idx = ci, .conn = s->conn, .dst = dst, .src = src,
                              .channel = channelId, .lane = proxy->lanes[ci] != NULL};
  size_t dsize = 0, ssize = 0; /* both were checked by check_port_mem */
  if (dst != NULL) (void)mscclppRegMemInfo(dst, (void**)&port->dst_ptr, &dsize, NULL);
  if (src != NULL) (void)mscclppRegMemInfo(src, (void**)&port->src_ptr, &ssize, NULL);
  port->dst_size = dsize;
  port->src_size = ssize;
  /* Release: a trigger naming this port is handled with the fields above. */
  atomic_store_explicit(&proxy->nports, id + 1, memory_order_release);
  pthread_mutex_unlock(&proxy->add_lock);
  memset(chan, 0, sizeof(*chan));
  fifo_host_device(&proxy->core.fifo, &chan->fifo);
  ext_wait_info(proxy->ext, s->conn->t.peer, channelId, &chan->fifo.wait);
  chan->sem = s->dev;
  chan->sem.wait.channel = channelId;
  chan->port = id;
  LOG_DEBUG_(LOG_SUB_PROXY, "port %u of rank %d: rank %d, semaphore %d, channel %d", id, proxy->comm->rank, s->conn->t.peer,
             semId, channelId);
  return mscclppSuccess;
}
