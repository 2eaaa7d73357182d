/* service.h - the proxy thread, independent of what triggers mean: it busy-polls a FIFO, hands each
 * trigger to a handler and retires it. The port-channel service (proxy.c)
 * gives it a handler that drives connections; the unit tests give it their own. */
#ifndef MPP_PROXY_SERVICE_H_
#define MPP_PROXY_SERVICE_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "proxy/fifo_host.h"

/* Handles one trigger; the FIFO slot is retired after it returns (whatever it returns). */
typedef void (*proxy_handler_fn)(void* arg, mscclppTrigger t);

enum proxy_state { PROXY_STOPPED = 0, PROXY_RUNNING = 1, PROXY_STOPPING = 2 };

struct proxy_core {
  struct fifo_host fifo;
  proxy_handler_fn handle;
  void* arg;
  int dev;          /* GPU ranks: the device the thread makes current; -1 */
  char bus_id[16];  /* GPU ranks: its PCI bus id, for pinning ("" = no pinning) */
  pthread_t thread;
  atomic_int state; /* enum proxy_state */
  uint64_t handled; /* triggers handled (read after stop) */
};

/* Starts the thread; InvalidUsage when it runs already. */
mscclppResult_t proxy_core_start(struct proxy_core* p);
/* Asks the thread to stop after the trigger in hand and joins it. Success when it was not running. */
mscclppResult_t proxy_core_stop(struct proxy_core* p);

/* Pins the calling thread to the CPUs sysfs lists as local to the PCI device bus_id; returns 0 on
 * success, -1 when there is nothing to read or the affinity cannot be set (a warning-free no-op). */
int proxy_pin_near(const char* bus_id);

#endif /* MPP_PROXY_SERVICE_H_ */
