/* service.c - the proxy thread (see service.h). The hot loop never sleeps: while triggers flow it
 * polls, handles and retires them back to back; only after MSCCLPP_PROXY_IDLE_SPINS empty polls in
 * a row does it yield its CPU between polls (sched_yield returns at once when nobody else wants
 * the CPU, so an idle proxy still answers within microseconds). */
#include "proxy/service.h"

#include <sched.h>
#include <string.h>

#include "channel/ext.h"
#include "sys/cudawrap.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/timeutil.h"

/* Says, once per stall, what the thread is waiting for when nothing arrived for 2 s while a slot
 * is half written, and when one trigger took over 1 s to handle: who is stuck is then in the log. */
static void stall_report(struct proxy_core* p, uint64_t idle_since) {
  const mscclppTrigger* slot = &p->fifo.consumer.triggers[p->fifo.consumer.tail & (p->fifo.size - 1)];
  uint64_t fst = __atomic_load_n(&slot->fst, __ATOMIC_ACQUIRE), snd = __atomic_load_n(&slot->snd, __ATOMIC_ACQUIRE);
  if (fst != 0 || snd != 0)
    log_msg(LOG_WARN, LOG_SUB_PROXY, "proxy: slot %llu half written for %.1f s (fst %016llx snd %016llx)",
            (unsigned long long)p->fifo.consumer.tail, (double)(time_now_ns() - idle_since) * 1e-9,
            (unsigned long long)fst, (unsigned long long)snd);
}

/* Handles every trigger that arrives until asked to stop. Each pop stores the tail where producers
 * read it: a host store, no CUDA call (see mscclpp/fifo.h). */
static void serve(struct proxy_core* p) {
  struct fifo_host* f = &p->fifo;
  uint64_t idle_spins = (uint64_t)param_int(PARAM_PROXY_IDLE_SPINS), idle = 0, idle_since = 0;
  int reported = 0;
  while (atomic_load_explicit(&p->state, memory_order_relaxed) == PROXY_RUNNING) {
    mscclppTrigger t;
    if (mscclppFifoPoll(&f->consumer, &t)) {
      uint64_t t0 = time_now_ns();
      p->handle(p->arg, t);
      uint64_t took = time_now_ns() - t0;
      if (took > 1000000000ull)
        log_msg(LOG_WARN, LOG_SUB_PROXY, "proxy: trigger %llu (type %u, port %u) took %.1f s to handle",
                (unsigned long long)f->consumer.tail, mscclppTriggerType(t), mscclppTriggerPort(t), (double)took * 1e-9);
      mscclppFifoPop(&f->consumer);
      p->handled++;
      idle = 0;
      reported = 0;
      continue;
    }
    if (++idle > idle_spins) sched_yield();
    if ((idle & 0xffff) == 1) {
      uint64_t now = time_now_ns();
      if (idle == 1) idle_since = now;
      else if (!reported && now - idle_since > 2000000000ull) {
        stall_report(p, idle_since);
        reported = 1;
      }
    }
  }
}

static void* proxy_main(void* arg) {
  struct proxy_core* p = arg;
#if MSCCLPP_HAVE_CUDA
  if (p->dev >= 0 && cudaSetDevice(p->dev) != cudaSuccess)
    log_msg(LOG_WARN, LOG_SUB_PROXY, "proxy: cudaSetDevice(%d) failed in the proxy thread", p->dev);
#endif
  if (p->bus_id[0] != '\0' && param_int(PARAM_PROXY_CPU_AFFINITY) != 0 && proxy_pin_near(p->bus_id) != 0)
    LOG_INFO_(LOG_SUB_PROXY, "proxy: not pinned near GPU %s (no sysfs CPU list or affinity refused)", p->bus_id);
  serve(p);
  return NULL;
}

mscclppResult_t proxy_core_start(struct proxy_core* p) {
  int expected = PROXY_STOPPED;
  if (!atomic_compare_exchange_strong(&p->state, &expected, PROXY_RUNNING))
    return MPP_ERR(mscclppInvalidUsage, "proxy: the proxy thread is already running");
  int e = pthread_create(&p->thread, NULL, proxy_main, p);
  if (e != 0) {
    atomic_store(&p->state, PROXY_STOPPED);
    return MPP_ERRNO(mscclppSystemError, e, "proxy: pthread_create of the proxy thread");
  }
  return mscclppSuccess;
}

mscclppResult_t proxy_core_stop(struct proxy_core* p) {
  int expected = PROXY_RUNNING;
  if (!atomic_compare_exchange_strong(&p->state, &expected, PROXY_STOPPING)) return mscclppSuccess;
  pthread_join(p->thread, NULL);
  atomic_store(&p->state, PROXY_STOPPED);
  return mscclppSuccess;
}
