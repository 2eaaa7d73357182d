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
  int gone;       /* 1 + the rank a wait last found gone (blk_spin fails when it finds it again) */
};

/* Records the block's failure (first one wins per block) and stops the others; returns -1. */
int blk_fail(struct blk* k, mscclppResult_t rc, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
/* One step of a bounded spin started at t0: -1 (recorded) on timeout or when another block failed. */
int blk_spin(struct blk* k, uint32_t* spins, uint64_t t0, const char* what, int peer);
uint64_t blk_ref_off(const struct blk* k, const struct plan_ref* r, uint64_t* len);
/* The rank that owns a local or remote ref's buffer. */
int blk_owner(const struct blk* k, const struct plan_ref* r);
/* Whether owner's memory is mapped here (else it is on another host: blk_write / blk_read). */
int blk_mapped(const struct blk* k, int owner);
/* Address of offset off of rank owner's buffer btype in this call (scratch: this call's half);
 * NULL when owner is on another host. */
char* blk_at(const struct blk* k, int owner, int btype, uint64_t off);
/* Address of ref's range + s (data), or of its packets (pkt: twice the data offset); NULL when
 * its owner is on another host. */
char* blk_ptr(const struct blk* k, const struct plan_ref* r, uint64_t s, int pkt);
/* blk_ptr, failing (NULL, recorded) for a buffer on another host: for what only reads or writes
 * memory in place (packets are read where they landed). */
char* blk_here(struct blk* k, const struct plan_ref* r, uint64_t s, int pkt);
/* Copies n bytes of host memory src to offset off of owner's buffer btype (memmove when mapped,
 * a tcp write otherwise). 0, or -1 after blk_fail. */
int blk_write_at(struct blk* k, int owner, int btype, uint64_t off, const void* src, uint64_t n);
/* Copies n bytes at offset off of owner's buffer btype into dst (a tcp read when not mapped). */
int blk_read_at(struct blk* k, int owner, int btype, uint64_t off, void* dst, uint64_t n);
/* The same by reference: ref's range + s (pkt: its packets). */
int blk_write(struct blk* k, const struct plan_ref* r, uint64_t s, int pkt, const void* src, uint64_t n);
/* The data of ref's range + s for n bytes: its address when mapped, else read into buf. NULL after blk_fail. */
const char* blk_source(struct blk* k, const struct plan_ref* r, uint64_t s, uint64_t n, char* buf);
/* Tile i (EXEC_RTILE bytes) of the block's remote temp space (maxrefs + 3 tiles). */
char* blk_rtile(const struct blk* k, uint32_t i);
/* Whether any reference of op (a switch reference: any member) is on another host. */
int blk_op_remote(const struct blk* k, const struct plan_op* op);

/* Runs op over its window [s, s+n) (ops.c). 0, or -1 after blk_fail. */
int exec_op(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n);
/* ops_sync.c */
int exec_signal(struct blk* k, const struct plan_op* op, int relaxed);
int exec_wait(struct blk* k, const struct plan_op* op);
/* Orders this block's stores, and waits until its writes to the op's channel peers on other hosts landed. */
int exec_flush(struct blk* k, const struct plan_op* op);
int exec_barrier(struct blk* k, const struct plan_op* op);
int exec_sem(struct blk* k, const struct plan_op* op);
/* ops_pkt.c: cpkt and ppkt (data to packets), upkt (packets to data), rppkt (packets forwarded as
 * packets), repkt, respkt, recpkt and recspkt (packet reductions); gstore and gstorepkt (a switch
 * group's stores), glre and glres (its reductions). */
int exec_pkt_copy(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n);
int exec_pkt_unpack(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n);
int exec_pkt_forward(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n);
int exec_pkt_reduce(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n);
int exec_switch_store(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n);
int exec_switch_reduce(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n);

#endif /* MPP_EXEC_CPU_BLOCK_H_ */
