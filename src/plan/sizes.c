/* sizes.c - chunk offsets for a message size (plan.h: plan_layout_get), cached per plan.
 *
 * The rule (docs/plans.md): a base group of C chunks spans B bytes - C and B from the smaller of
 * the input and output buffers (allgather: the input, reducescatter: the output; alltoall: the
 * input's share of one peer). B is split in buffer_alignment units, the first B/align % C chunks
 * one unit longer, the bytes below one unit appended to the last chunk. Chunk k of the input or
 * output is chunk k % C of group k / C (groups follow each other without gaps). Scratch chunks are
 * uniform slots of the longest chunk rounded up to the alignment (at least 8, a packet's payload),
 * so a slot holds any chunk; packets sit at twice the data offset in LL plans. An op moves the
 * length of its first input/output reference (all of them must agree); an op on scratch only
 * moves what the data grid has at the same chunk indices. */
#include <string.h>

#include "plan/plan.h"
#include "util/err.h"

static uint64_t group_off(const struct plan_layout* l, uint64_t j, uint64_t align) {
  if (j >= l->chunks) return l->period;
  return j * l->unit_base + (j < l->extra ? j : l->extra) * align;
}

uint64_t plan_chunk_off(const struct plan_layout* l, int btype, uint64_t k) {
  if (btype == PLAN_BUF_SCR) return k * l->slot;
  uint64_t q = k / l->chunks, j = k % l->chunks;
  return q * l->period + group_off(l, j, l->align_unit);
}

uint64_t plan_op_len(const struct plan_layout* l, const struct plan_ref* refs, const struct plan_op* op) {
  int n = op->nsrc + op->ndst;
  if (n == 0) return 0;
  const struct plan_ref* r = &refs[op->first_ref];
  for (int i = 0; i < n; i++)
    if (r[i].btype != PLAN_BUF_SCR) {
      r = &r[i];
      break;
    }
  /* scratch-only ops move what the data grid has at the same chunk indices */
  return plan_chunk_off(l, PLAN_BUF_OUT, (uint64_t)r->index + r->size) - plan_chunk_off(l, PLAN_BUF_OUT, r->index);
}

/* Every op's references must move the same number of bytes at this size. */
static mscclppResult_t check_lengths(const struct mscclppPlan* p, const struct plan_layout* l) {
  for (int r = 0; r < p->nranks; r++)
    for (int b = 0; b < p->ranks[r].nblocks; b++) {
      const struct plan_block* bl = &p->ranks[r].blocks[b];
      for (uint32_t i = 0; i < bl->nops; i++) {
        const struct plan_op* op = &bl->ops[i];
        uint64_t len0 = plan_op_len(l, bl->refs, op);
        for (uint16_t k = 0; k < op->nsrc + op->ndst; k++) {
          const struct plan_ref* ref = &bl->refs[op->first_ref + k];
          if (ref->btype == PLAN_BUF_SCR) continue; /* slots hold any chunk */
          uint64_t len = plan_chunk_off(l, ref->btype, ref->index + ref->size) - plan_chunk_off(l, ref->btype, ref->index);
          if (len != len0)
            return MPP_ERR(mscclppInvalidUsage,
                           "%s: gpu %d threadblock %d op %d (%s): at input %llu / output %llu bytes its buffers split "
                           "into %llu and %llu bytes; use a size that splits evenly (a multiple of %llu)",
                           p->file, r, b, i, plan_op_name(op->code), (unsigned long long)l->in_bytes,
                           (unsigned long long)l->out_bytes, (unsigned long long)len0, (unsigned long long)len,
                           (unsigned long long)l->align_unit * l->chunks);
        }
      }
    }
  return mscclppSuccess;
}

static mscclppResult_t make_layout(const struct mscclppPlan* p, uint64_t in, uint64_t out, struct plan_layout* l) {
  const struct plan_rank* r0 = &p->ranks[0];
  memset(l, 0, sizeof(*l));
  l->in_bytes = in, l->out_bytes = out, l->align_unit = p->align;
  uint32_t ic = r0->in_chunks, oc = r0->out_chunks;
  if (!strcmp(p->collective, "alltoall") && ic && ic % (uint32_t)p->nranks == 0 && in % (uint64_t)p->nranks == 0)
    l->chunks = ic / (uint32_t)p->nranks, l->period = in / (uint64_t)p->nranks;
  else if (ic && (!oc || ic <= oc))
    l->chunks = ic, l->period = in;
  else if (oc)
    l->chunks = oc, l->period = out;
  else
    l->chunks = 1, l->period = in > out ? in : out;
  uint64_t units = l->period / p->align, pad = p->align < 8 ? 8 : p->align;
  l->unit_base = units / l->chunks * p->align, l->extra = (uint32_t)(units % l->chunks);
  uint64_t first = group_off(l, 1, p->align), last = l->period - group_off(l, l->chunks - 1, p->align);
  l->chunk_max = first > last ? first : last;
  l->slot = (l->chunk_max + pad - 1) / pad * pad;
  uint32_t scr = 0;
  for (int r = 0; r < p->nranks; r++) {
    const struct plan_rank* pr = &p->ranks[r];
    if (plan_chunk_off(l, PLAN_BUF_IN, pr->in_chunks) > in || plan_chunk_off(l, PLAN_BUF_OUT, pr->out_chunks) > out)
      return MPP_ERR(mscclppInvalidArgument,
                     "%s: gpu %d needs %llu input and %llu output bytes for its %u and %u chunks; the call has %llu "
                     "and %llu", p->file, r, (unsigned long long)plan_chunk_off(l, PLAN_BUF_IN, pr->in_chunks),
                     (unsigned long long)plan_chunk_off(l, PLAN_BUF_OUT, pr->out_chunks), pr->in_chunks,
                     pr->out_chunks, (unsigned long long)in, (unsigned long long)out);
    if (pr->scr_chunks > scr) scr = pr->scr_chunks;
  }
  l->scr_stride = plan_chunk_off(l, PLAN_BUF_SCR, scr) * (p->ll ? 2 : 1);
  l->scr_bytes = l->scr_stride * (p->double_scratch ? 2 : 1);
  return check_lengths(p, l);
}

mscclppResult_t plan_layout_get(struct mscclppPlan* p, uint64_t in_bytes, uint64_t out_bytes, struct plan_layout* out) {
  mscclppResult_t res = mscclppSuccess;
  pthread_mutex_lock(&p->cache_lock);
  for (int i = 0; i < p->ncache; i++)
    if (p->cache[i].in_bytes == in_bytes && p->cache[i].out_bytes == out_bytes) {
      *out = p->cache[i];
      pthread_mutex_unlock(&p->cache_lock);
      return mscclppSuccess;
    }
  res = make_layout(p, in_bytes, out_bytes, out);
  if (res == mscclppSuccess) {
    p->cache[p->cache_next] = *out;
    p->cache_next = (p->cache_next + 1) % PLAN_LAYOUT_CACHE;
    if (p->ncache < PLAN_LAYOUT_CACHE) p->ncache++;
  }
  pthread_mutex_unlock(&p->cache_lock);
  return res;
}
