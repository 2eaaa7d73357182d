/* proxy.c - the public proxy-service API: create, start, stop, check, destroy. Semaphores and
 * ports are added in port.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/handle_reg.h"
#include "proxy/proxy.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

static void service_free(struct mscclppProxyService* p) {
  for (uint32_t i = 0; p->lanes != NULL && i < p->nconns; i++) p2p_lane_destroy(p->core.dev, p->lanes[i]);
  fifo_host_fini(&p->core.fifo);
  free(p->sems);
  free(p->ports);
  free(p->conns);
  free(p->dirty);
  free(p->lanes);
  pthread_mutex_destroy(&p->add_lock);
  pthread_mutex_destroy(&p->err_lock);
  free(p);
}

/* The channels (and connections) the service's thread uses are going: the thread stops first,
 * and the service forgets them (its destroy then leaves them alone). */
static void service_stop_at_release(void* arg) {
  struct mscclppProxyService* p = arg;
  (void)proxy_core_stop(&p->core);
  p->ext = NULL;
}

mscclppResult_t mscclppProxyServiceCreate(mscclppComm_t comm, int fifoSize, mscclppProxyService_t* proxy) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(proxy != NULL, "mscclppProxyServiceCreate: proxy is NULL");
  int64_t size = fifoSize != 0 ? fifoSize : param_int(PARAM_PROXY_FIFO_SIZE);
  MPP_CHECK_ARG(size >= 2 && size <= (1 << 20) && (size & (size - 1)) == 0,
                "mscclppProxyServiceCreate: FIFO size %lld is not a power of two in [2, 2^20]", (long long)size);
  struct chan_ext* x = NULL;
  MPP_CHECK(chan_ext_get(comm, &x));
  struct mscclppProxyService* p = calloc(1, sizeof(*p));
  if (p == NULL) return MPP_ERR(mscclppSystemError, "mscclppProxyServiceCreate: out of host memory");
  pthread_mutex_init(&p->add_lock, NULL);
  pthread_mutex_init(&p->err_lock, NULL);
  p->comm = comm;
  p->ext = x;
  p->sems = calloc(PROXY_MAX_SEMS, sizeof(*p->sems));
  p->ports = calloc(PROXY_MAX_PORTS, sizeof(*p->ports));
  mscclppResult_t res = mscclppSuccess;
  p->conns = calloc(PROXY_MAX_SEMS, sizeof(*p->conns));
  p->dirty = calloc(PROXY_MAX_SEMS, sizeof(*p->dirty));
  p->lanes = calloc(PROXY_MAX_SEMS, sizeof(*p->lanes));
  if (p->sems == NULL || p->ports == NULL || p->conns == NULL || p->dirty == NULL || p->lanes == NULL) res = MPP_ERR(mscclppSystemError, "mscclppProxyServiceCreate: out of host memory");
  if (res == mscclppSuccess) res = fifo_host_init(&p->core.fifo, x->gpu, x->dev, (uint32_t)size, 0);
  if (res == mscclppSuccess) res = handle_add(HANDLE_PROXY_SERVICE, p, comm);
  if (res != mscclppSuccess) {
    service_free(p);
    return res;
  }
  p->dep.stop = service_stop_at_release;
  p->dep.arg = p;
  chan_ext_depend(x, &p->dep);
  p->core.handle = proxy_handle_trigger;
  p->core.arg = p;
  p->core.dev = x->dev;
  if (x->gpu) snprintf(p->core.bus_id, sizeof(p->core.bus_id), "%s", comm->peers[comm->rank].bus_id);
  LOG_INFO_(LOG_SUB_PROXY, "proxy service of rank %d: %s FIFO of %lld slots", comm->rank, x->gpu ? "GPU" : "host",
            (long long)size);
  *proxy = p;
  return mscclppSuccess;
}

mscclppResult_t mscclppProxyServiceStart(mscclppProxyService_t proxy) {
  err_clear();
  HANDLE_CHECK(HANDLE_PROXY_SERVICE, proxy);
  PROXY_CHECK_CHANNELS(proxy, __func__);
  return proxy_core_start(&proxy->core);
}

mscclppResult_t mscclppProxyServiceCheck(mscclppProxyService_t proxy) {
  err_clear();
  HANDLE_CHECK(HANDLE_PROXY_SERVICE, proxy);
  pthread_mutex_lock(&proxy->err_lock);
  mscclppResult_t r = proxy->err;
  char msg[sizeof(proxy->err_msg)];
  memcpy(msg, proxy->err_msg, sizeof(msg));
  proxy->err = mscclppSuccess;
  proxy->err_msg[0] = '\0';
  pthread_mutex_unlock(&proxy->err_lock);
  if (r == mscclppSuccess) return mscclppSuccess;
  return MPP_ERR(r, "%s", msg);
}

mscclppResult_t mscclppProxyServiceStop(mscclppProxyService_t proxy) {
  err_clear();
  HANDLE_CHECK(HANDLE_PROXY_SERVICE, proxy);
  MPP_CHECK(proxy_core_stop(&proxy->core));
  LOG_DEBUG_(LOG_SUB_PROXY, "proxy of rank %d stopped after %llu triggers", proxy->comm->rank,
             (unsigned long long)proxy->core.handled);
  return mscclppProxyServiceCheck(proxy);
}

mscclppResult_t mscclppProxyServiceDestroy(mscclppProxyService_t proxy) {
  err_clear();
  MPP_CHECK(handle_check_destroy(HANDLE_PROXY_SERVICE, proxy, __func__));
  MPP_CHECK(handle_retire(HANDLE_PROXY_SERVICE, proxy, __func__)); /* refused while another thread's call uses it */
  mscclppResult_t r = proxy_core_stop(&proxy->core);
  if (proxy->ext != NULL) chan_ext_undepend(proxy->ext, &proxy->dep);
  service_free(proxy);
  return r;
}
