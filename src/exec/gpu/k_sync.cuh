/* k_sync.cuh - the executor kernel's synchronization ops: signal / wait (release-acquire or
 * relaxed) over memory and port channels, flush, intra-GPU barriers and semaphores. One thread
 * per channel; the kernel's __syncthreads after each op (and before it: the previous op's) makes
 * the block's writes precede a signal and a wait precede the block's reads, the pattern of
 * mscclpp/memory_channel.h. */
#ifndef MPP_EXEC_GPU_K_SYNC_CUH_
#define MPP_EXEC_GPU_K_SYNC_CUH_

#include <mscclpp/memory_channel.h>
#include <mscclpp/port_channel.h>

#include "exec/gpu/k_common.cuh"

__device__ __forceinline__ const plan_chanref& xk_chan(const xk& k, const plan_op& op, int i) {
  return k.chans[op.first_chan + i];
}
__device__ __forceinline__ int xk_slot(const xk& k, const plan_op& op, int i) { return k.slots[op.first_chan + i]; }

/* signal / rlxsignal: one step to the peer of every listed channel. Memory channels: an atomic
 * add into the peer's token, with release (the block's earlier writes, made visible to this
 * thread by the __syncthreads before the op, reach the peer before the step) or relaxed (counts
 * only). Port channels: a FLAG trigger; the proxy orders it after every earlier copy of the
 * connection (rlxsignal too: the proxy has no relaxed signal). */
__device__ void xk_signal(const xk& k, const plan_op& op, int relaxed) {
  for (int i = (int)xk_tid(); i < op.nchan; i += (int)xk_nt()) {
    int slot = xk_slot(k, op, i);
    if (op.chan_type == PLAN_CH_MEMORY) {
      if (relaxed) mscclppMemoryDevSemaphoreRelaxedSignal(&k.P->msem[slot]);
      else mscclppMemoryDevSemaphoreSignal(&k.P->msem[slot]);
      continue;
    }
    /* A flag trigger does not fence (fifo.h): the block's stores through peer memory before the
     * signal (e.g. a memory put the plan orders with a port signal) must be visible to the peer
     * before the proxy's signal can land there. */
    mscclppFenceSys();
    int rc = mscclppPortChannelSignal(&k.P->pch[slot]);
    if (rc != MSCCLPP_DEVICE_OK) xk_fail(k, rc, xk_chan(k, op, i).peer);
  }
}

/* wait / rlxwait: the next step of every listed channel (acquire: what the peer wrote before its
 * signal is visible to the block after the op's __syncthreads; relaxed: counting only). */
__device__ void xk_wait(const xk& k, const plan_op& op, int relaxed) {
  for (int i = (int)xk_tid(); i < op.nchan; i += (int)xk_nt()) {
    int slot = xk_slot(k, op, i), rc;
    if (op.chan_type == PLAN_CH_MEMORY) {
      const mscclppMemoryDevSemaphore* s = &k.P->msem[slot];
      rc = relaxed ? mscclppMemoryDevSemaphoreRelaxedWait(s) : mscclppMemoryDevSemaphoreWait(s);
    } else {
      const mscclppHostDevSemaphore* s = &k.P->pch[slot].sem;
      rc = mscclppTokenWait(s->inbound, s->expected, &s->wait, !relaxed);
    }
    if (rc != MSCCLPP_DEVICE_OK) xk_fail(k, rc, xk_chan(k, op, i).peer);
  }
}

/* flush: port channels wait until the proxy has completed every earlier put and signal of the
 * channel's connection (a SYNC trigger, then the wait for it); memory channels only order: a
 * system-scope fence by the thread, after the block's writes it synchronized with. */
__device__ void xk_flush(const xk& k, const plan_op& op) {
  for (int i = (int)xk_tid(); i < op.nchan; i += (int)xk_nt()) {
    if (op.chan_type == PLAN_CH_MEMORY) {
      mscclppFenceSys();
      continue;
    }
    int rc = mscclppPortChannelFlush(&k.P->pch[xk_slot(k, op, i)]);
    if (rc != MSCCLPP_DEVICE_OK) xk_fail(k, rc, xk_chan(k, op, i).peer);
  }
}

__device__ __forceinline__ uint64_t xk_load_volatile(const uint64_t* p) { return *(const volatile uint64_t*)p; }

/* barrier: barrier_blocks blocks of this GPU meet (sense by rounds, as the CPU executor). Thread 0
 * of each block arrives; the last arrival zeroes the count and starts the next round. */
__device__ void xk_barrier(const xk& k, const plan_op& op) {
  if (xk_tid() != 0) return;
  uint64_t* count = &k.P->bar_count[op.barrier_id];
  uint64_t* round = &k.P->bar_round[op.barrier_id];
  uint64_t r = xk_load_volatile(round);
  /* Release: the block's writes before the barrier (ordered before thread 0 by the __syncthreads
   * that ended the previous op) are visible to every block that leaves this round. */
  __threadfence();
  if (atomicAdd((unsigned long long*)count, 1ull) + 1 == (unsigned long long)op.barrier_blocks) {
    atomicExch((unsigned long long*)count, 0ull);
    /* The count is zero before anyone can see the new round and arrive again. */
    __threadfence();
    *(volatile uint64_t*)round = r + 1;
    return;
  }
  mscclppSpin s = MSCCLPP_SPIN_INIT;
  for (;;) {
    uint64_t now = xk_load_volatile(round);
    if (now != r) break;
    int rc = mscclppSpinCheck(&s, &k.P->wait, mscclppWaitSemaphore, r + 1, now);
    if (rc != MSCCLPP_DEVICE_OK) {
      xk_fail(k, rc, k.P->rank);
      return;
    }
  }
  /* Acquire: the other blocks' writes before their arrival are visible to this block after it. */
  __threadfence();
}

/* sem_acquire / sem_release on this GPU's counting semaphores (reset to init_value per call). */
__device__ void xk_sem(const xk& k, const plan_op& op) {
  if (xk_tid() != 0) return;
  for (int i = 0; i < op.nchan; i++) {
    unsigned long long* v = &k.P->sems[xk_chan(k, op, i).ord];
    if (op.code == PLAN_OP_SEM_RELEASE) {
      /* Release: the block's writes before the release are visible to the block that acquires. */
      __threadfence();
      atomicAdd(v, 1ull);
      continue;
    }
    mscclppSpin s = MSCCLPP_SPIN_INIT;
    for (;;) {
      long long cur = (long long)*(volatile unsigned long long*)v;
      if (cur > 0 && atomicCAS(v, (unsigned long long)cur, (unsigned long long)(cur - 1)) == (unsigned long long)cur) break;
      int rc = mscclppSpinCheck(&s, &k.P->wait, mscclppWaitSemaphore, 1, (uint64_t)cur);
      if (rc != MSCCLPP_DEVICE_OK) {
        xk_fail(k, rc, k.P->rank);
        return;
      }
    }
    /* Acquire: what the releasing block wrote before its release is visible after this. */
    __threadfence();
  }
}

#endif /* MPP_EXEC_GPU_K_SYNC_CUH_ */
