/* handle.c - what the proxy thread does with one trigger: the copy through the port's connection
 * (or its copy-engine lane, p2p.c), then the signal (a 64-bit store into the peer's token ordered
 * after the copy), then the flush (skipped when nothing was written or signalled through the port's connection
 * since its last flush). A failure is recorded for mscclppProxyServiceCheck and logged; the
 * trigger is retired all the same so that no pusher waits forever, but a signal whose data failed
 * is not sent (the peer's wait then times out naming this rank instead of reading bad data). */
#include <stdio.h>
#include <string.h>

#include "core/comm.h"
#include "core/connection.h"
#include "proxy/proxy.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

/* Keeps the first failure since the last check (with this thread's last error as its text). */
static void note(struct mscclppProxyService* p, mscclppResult_t r, uint32_t port, const char* what) {
  char msg[sizeof(p->err_msg)];
  snprintf(msg, sizeof(msg), "proxy of rank %d: %s of port %u failed: %s", p->comm->rank, what, port, err_last());
  log_msg(LOG_WARN, LOG_SUB_PROXY, "%s", msg);
  pthread_mutex_lock(&p->err_lock);
  if (p->err == mscclppSuccess) {
    p->err = r;
    memcpy(p->err_msg, msg, sizeof(msg));
  }
  pthread_mutex_unlock(&p->err_lock);
}

static mscclppResult_t do_put(struct proxy_port* port, mscclppTrigger t) {
  if (port->dst == NULL || port->src == NULL)
    return MPP_ERR(mscclppInvalidUsage, "the port was made without dst or src memory, but a put was pushed");
  return mscclppConnectionWrite(port->conn, port->dst, mscclppTriggerDstOffset(t), port->src,
                                mscclppTriggerSrcOffset(t), mscclppTriggerSize(t));
}

static mscclppResult_t do_signal(struct proxy_sem* s) {
  return mscclppConnectionUpdateAndSync(s->conn, s->remote, s->remote_off, &s->outbound, s->outbound + 1);
}

/* The lane's checks of a put (the connection's write checks its own). */
static mscclppResult_t lane_put(void* lane, struct proxy_port* port, mscclppTrigger t) {
  uint64_t d = mscclppTriggerDstOffset(t), s = mscclppTriggerSrcOffset(t), n = mscclppTriggerSize(t);
  if (port->dst_ptr == NULL || port->src_ptr == NULL)
    return MPP_ERR(mscclppInvalidUsage, "the port was made without dst or src memory, but a put was pushed");
  if (d > port->dst_size || n > port->dst_size - d || s > port->src_size || n > port->src_size - s)
    return MPP_ERR(mscclppInvalidArgument,
                   "put of %llu bytes from offset %llu to offset %llu would exceed the %llu-byte source or the %llu-byte "
                   "destination", (unsigned long long)n, (unsigned long long)s, (unsigned long long)d,
                   (unsigned long long)port->src_size, (unsigned long long)port->dst_size);
  return p2p_put(lane, port->dst_ptr + d, port->src_ptr + s, n);
}

static mscclppResult_t lane_signal(void* lane, struct proxy_sem* s) {
  MPP_CHECK(p2p_signal(lane, s->remote_ptr, s->outbound + 1));
  s->outbound++;
  return mscclppSuccess;
}

void proxy_handle_trigger(void* arg, mscclppTrigger t) {
  struct mscclppProxyService* p = arg;
  uint32_t id = mscclppTriggerPort(t), type = mscclppTriggerType(t);
  /* Acquire: pairs with the release that published the port; its fields are complete. */
  if (id >= atomic_load_explicit(&p->nports, memory_order_acquire)) {
    note(p, MPP_ERR(mscclppInvalidUsage, "no such port (this proxy has %u)", atomic_load(&p->nports)), id, "a trigger");
    return;
  }
  struct proxy_port* port = &p->ports[id];
  void* lane = port->lane ? p->lanes[port->conn_idx] : NULL;
  int data_ok = 1;
  if (type & MSCCLPP_TRIGGER_DATA) {
    mscclppResult_t r = lane ? lane_put(lane, port, t) : do_put(port, t);
    if (r != mscclppSuccess) {
      data_ok = 0;
      note(p, r, id, "a put");
    }
  }
  if ((type & MSCCLPP_TRIGGER_FLAG) && data_ok) {
    mscclppResult_t r = lane ? lane_signal(lane, &p->sems[port->sem]) : do_signal(&p->sems[port->sem]);
    if (r != mscclppSuccess) note(p, r, id, "a signal");
  }
  if (type & (MSCCLPP_TRIGGER_DATA | MSCCLPP_TRIGGER_FLAG)) p->dirty[port->conn_idx] = 1;
  /* The connection table entry was published with the port (release of nports above). */
  if ((type & MSCCLPP_TRIGGER_SYNC) && p->dirty[port->conn_idx]) {
    p->dirty[port->conn_idx] = 0;
    mscclppResult_t r = lane ? p2p_flush(lane, param_int(PARAM_FLUSH_TIMEOUT)) : mscclppConnectionFlush(port->conn, -1);
    if (r != mscclppSuccess) note(p, r, id, "a flush");
  }
}
