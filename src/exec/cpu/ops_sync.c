/* ops_sync.c - signal/wait over channels, intra-rank barriers and semaphores (cpu.h has the
 * counter semantics). */
#include "exec/cpu/block.h"

int exec_signal(struct blk* k, const struct plan_op* op, int relaxed) {
  struct exec_cpu* st = k->c->st;
  for (uint16_t i = 0; i < op->nchan; i++) {
    const struct plan_chanref* ch = &k->bl->chans[op->first_chan + i];
    if (!st->peer_sync[ch->peer]) { /* another host: lands after this rank's earlier writes to it */
      if (exec_remote_signal(st, ch->peer, op->chan_type, ch->ord) != mscclppSuccess)
        return blk_fail(k, mscclppRemoteError, "signalling rank %d: %s", ch->peer, err_last());
      continue;
    }
    uint64_t* ctr = exec_sem_counter(st, ch->peer, op->chan_type, st->rank, ch->ord);
    /* release: the data this block wrote before is visible to the peer once its wait sees this */
    if (relaxed) mscclppAddRelaxed64(ctr, 1);
    else mscclppAddRelease64(ctr, 1);
  }
  return 0;
}

int exec_flush(struct blk* k, const struct plan_op* op) {
  struct exec_cpu* st = k->c->st;
  mscclppFenceSys(); /* stores into mapped memory are complete when issued; order them */
  for (uint16_t i = 0; i < op->nchan; i++) {
    int peer = k->bl->chans[op->first_chan + i].peer;
    if (!st->peer_sync[peer] && exec_remote_flush(st, peer) != mscclppSuccess)
      return blk_fail(k, mscclppRemoteError, "flushing the writes to rank %d: %s", peer, err_last());
  }
  return 0;
}

int exec_wait(struct blk* k, const struct plan_op* op) {
  struct exec_cpu* st = k->c->st;
  for (uint16_t i = 0; i < op->nchan; i++) {
    const struct plan_chanref* ch = &k->bl->chans[op->first_chan + i];
    uint64_t* exp = &st->expected[((uint64_t)(op->chan_type - 1) * (uint64_t)st->nranks + (uint64_t)ch->peer) * EXEC_MAX_ORD +
                                  (uint64_t)ch->ord];
    uint64_t want = __atomic_add_fetch(exp, 1, __ATOMIC_RELAXED);
    const uint64_t* ctr = exec_sem_counter(st, st->rank, op->chan_type, ch->peer, ch->ord);
    uint64_t t0 = mscclppNowNs();
    uint32_t spins = 0;
    /* acquire: pairs with the peer's release add, so its data is visible after the loop */
    while (mscclppLoadAcquire64(ctr) < want)
      if (blk_spin(k, &spins, t0, op->chan_type == PLAN_CH_PORT ? "a signal on a port channel" : "a signal on a memory channel",
                   ch->peer))
        return -1;
  }
  return 0;
}

/* Sense by rounds: the last of `blocks` arrivals starts the next round. */
int exec_barrier(struct blk* k, const struct plan_op* op) {
  struct exec_plan_state* ps = k->c->ps;
  uint64_t* count = &ps->bar_count[op->barrier_id];
  uint64_t* round = &ps->bar_round[op->barrier_id];
  uint64_t r = __atomic_load_n(round, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(count, 1, __ATOMIC_ACQ_REL) == (uint64_t)op->barrier_blocks) {
    __atomic_store_n(count, 0, __ATOMIC_RELAXED);
    __atomic_store_n(round, r + 1, __ATOMIC_RELEASE); /* the others' wait sees every block's writes */
    return 0;
  }
  uint64_t t0 = mscclppNowNs();
  uint32_t spins = 0;
  while (__atomic_load_n(round, __ATOMIC_ACQUIRE) == r)
    if (blk_spin(k, &spins, t0, "the other blocks at a barrier", k->c->st->rank)) return -1;
  return 0;
}

int exec_sem(struct blk* k, const struct plan_op* op) {
  for (uint16_t i = 0; i < op->nchan; i++) {
    int64_t* v = &k->c->ps->sems[k->bl->chans[op->first_chan + i].ord];
    if (op->code == PLAN_OP_SEM_RELEASE) {
      __atomic_add_fetch(v, 1, __ATOMIC_RELEASE);
      continue;
    }
    uint64_t t0 = mscclppNowNs();
    uint32_t spins = 0;
    for (;;) {
      int64_t cur = __atomic_load_n(v, __ATOMIC_ACQUIRE);
      if (cur > 0 && __atomic_compare_exchange_n(v, &cur, cur - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) break;
      if (blk_spin(k, &spins, t0, "a semaphore release", k->c->st->rank)) return -1;
    }
  }
  return 0;
}
