/* proxy.h - the port-channel proxy service inside the library: the table of semaphores and ports
 * its thread serves, and what a trigger does (proxy.c, port.c). */
#ifndef MPP_PROXY_PROXY_H_
#define MPP_PROXY_PROXY_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <mscclpp/port_channel.h>

#include "channel/ext.h"
#include "proxy/service.h"
#include "util/err.h"

#define PROXY_MAX_SEMS 16384u
#define PROXY_MAX_PORTS MSCCLPP_TRIGGER_MAX_PORTS

/* A host-to-device semaphore: the peer's token, which our proxy's signals advance, and our own
 * token's wait side, which the peer's proxy advances. */
struct proxy_sem {
  struct mscclppConnection* conn;
  mscclppRegMem_t remote; /* the peer's token slab (owned by the channel state's import cache) */
  uint64_t remote_off;
  uint64_t* remote_ptr;   /* the peer's token mapped here (p2p, shm), else NULL */
  uint64_t outbound;      /* signals sent (the proxy thread's alone) */
  mscclppHostDevSemaphore dev;
};

/* What a trigger's port id selects. */
struct proxy_port {
  uint32_t sem;
  uint32_t conn_idx; /* the connection's index in the service's connection table */
  struct mscclppConnection* conn;
  mscclppRegMem_t dst, src; /* NULL for a port that only signals and flushes */
  int channel;
  int lane;                 /* 1: served by the connection's copy-engine lane (p2p.c) */
  char* dst_ptr;            /* lane ports: the memories mapped here and their sizes */
  const char* src_ptr;
  uint64_t dst_size, src_size;
};

struct mscclppProxyService {
  struct mscclppComm* comm;
  struct chan_ext* ext;       /* NULL once the channels were released (the service was stopped) */
  struct chan_dependent dep;  /* in ext's dependents while ext lives */
  struct proxy_core core;
  pthread_mutex_t add_lock; /* serializes adding semaphores and ports (never taken by the thread) */
  struct proxy_sem* sems;   /* PROXY_MAX_SEMS entries */
  struct proxy_port* ports; /* PROXY_MAX_PORTS entries */
  /* The distinct connections of the ports (added under add_lock) and whether each has had a
   * write or signal since its last flush (the thread's alone): flushing a clean connection is a
   * no-op, skipped. */
  struct mscclppConnection** conns; /* PROXY_MAX_SEMS entries */
  uint8_t* dirty;
  void** lanes;                     /* per connection: its copy-engine lane (a cudaStream_t), or NULL */
  uint32_t nconns;
  /* Entries below these counts are complete: stored with release after the entry is written, read
   * by the thread with acquire, so a trigger of a new port sees the port's fields. */
  atomic_uint nsems, nports;
  pthread_mutex_t err_lock; /* the first failure of the thread since the last check */
  mscclppResult_t err;
  char err_msg[512];
};

/* The proxy thread's handler: does what trigger t asks of its port (handle.c). */
void proxy_handle_trigger(void* arg, mscclppTrigger t);

/* ---- p2p.c: copy-engine lanes for ports between GPU ranks of one host ------------------------ */

/* 1 when lanes can be used here (CUDA, a driver, cuStreamWriteValue64). */
int p2p_available(void);
mscclppResult_t p2p_lane_create(int dev, void** lane);
void p2p_lane_destroy(int dev, void* lane);
/* Asynchronous copy on the lane (the calling thread's device must be the lane's). */
mscclppResult_t p2p_put(void* lane, void* dst, const void* src, uint64_t size);
/* Stores value into token (mapped here) after every earlier copy of the lane. */
mscclppResult_t p2p_signal(void* lane, uint64_t* token, uint64_t value);
/* Waits until the lane's work is done, at most timeout_ms. */
mscclppResult_t p2p_flush(void* lane, int64_t timeout_ms);

/* Refuses a call on a service whose channels were released (it was stopped then): only its destroy
 * remains. */
#define PROXY_CHECK_CHANNELS(proxy, fn)                                                                    \
  do {                                                                                                     \
    if ((proxy)->ext == NULL)                                                                              \
      return MPP_ERR(mscclppInvalidUsage,                                                                  \
                     "%s: this proxy service was stopped when its communicator's channels were released "  \
                     "(mscclppCommReleaseChannels or the communicator's destroy); only "                     \
                     "mscclppProxyServiceDestroy remains", (fn));                                          \
  } while (0)

#endif /* MPP_PROXY_PROXY_H_ */
