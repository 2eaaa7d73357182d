/* block.h - what the op implementations of the CPU executor share: the running block and helpers
 * to address buffers, spin with a bound, and fail naming rank, block, op and peer. */
#ifndef MPP_EXEC_CPU_BLOCK_H_
#define MPP_EXEC_CPU_BLOCK_H_

#include <sched.h>

#include <mscclpp/atomics.h>
#include <mscclpp/packet.h>

#include "exec/cpu/cpu.h"
#include "util/err.h"

struct blk {
  struct exec_call* c;
  int b;
  const struct plan_block* bl;
  char* temp;
  uint32_t op_index;
  const struct plan_op* op;
  uint64_t iters; /* iterations of the pipeline being run */
};

/* Records the block's failure (first one wins per block) and stops the others; returns -1. */
int blk_fail(struct blk* k, mscclppResult_t rc, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
/* One step of a bounded spin started at t0: -1 (recorded) on timeout or when another block failed. */
int blk_spin(struct blk* k, uint32_t* spins, uint64_t t0, const char* what, int peer);
uint64_t blk_ref_off(const struct blk* k, const struct plan_ref* r, uint64_t* len);
char* blk_base(const struct blk* k, int owner, int btype);
/* Address of ref's range + s (data), or of its packets (pkt: twice the data offset). */
char* blk_ptr(const struct blk* k, const struct plan_ref* r, uint64_t s, int pkt);

/* Runs op over its window [s, s+n) (ops.c). 0, or -1 after blk_fail. */
int exec_op(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n);
/* ops_sync.c */
int exec_signal(struct blk* k, const struct plan_op* op, int relaxed);
int exec_wait(struct blk* k, const struct plan_op* op);
int exec_barrier(struct blk* k, const struct plan_op* op);
int exec_sem(struct blk* k, const struct plan_op* op);
/* ops_pkt.c: packets of data -> dst; packets at src -> data (waiting for the call's flag). */
void exec_put_pkts(struct blk* k, char* dst, const char* src, uint64_t n);
int exec_get_pkts(struct blk* k, char* dst, const char* pkts, uint64_t n, int peer);
int exec_pkt_op(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n);
int exec_switch_op(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n);

#endif /* MPP_EXEC_CPU_BLOCK_H_ */
