/* ops.c - lowers one threadblock's ops: op names, channels, buffer references, reduce_op,
 * tbg_info, barriers, semaphores and pipelines, with the shape every op code needs. */
#include <stdlib.h>
#include <string.h>

#include "plan/load/lower.h"

#define PLAN_OP_NAME(e, s) s,
static const char* const op_names[] = {PLAN_OPS(PLAN_OP_NAME)};
#undef PLAN_OP_NAME

const char* plan_op_name(int code) { return code >= 0 && code < PLAN_OP_COUNT ? op_names[code] : "?"; }

static mscclppResult_t grow(void** a, uint32_t* cap, uint32_t need, size_t elem) {
  if (need <= *cap) return mscclppSuccess;
  uint32_t n = *cap ? *cap * 2 : 16;
  while (n < need) n *= 2;
  void* q = realloc(*a, (size_t)n * elem);
  if (!q) return MPP_ERR(mscclppSystemError, "plan: out of memory for %u entries", n);
  memset((char*)q + (size_t)*cap * elem, 0, (size_t)(n - *cap) * elem);
  *a = q, *cap = n;
  return mscclppSuccess;
}

/* One element of src_buff/dst_buff. */
static mscclppResult_t lw_ref(struct pj_where* w, const struct plan_rank* pr, const struct lw_gpu* g,
                              const struct lw_block* b, int chan_type, const json_t* e, const char* key,
                              struct plan_ref* r) {
  int64_t idx, size, id;
  MPP_CHECK(pj_int(w, e, "index", 0, 0, 0, UINT32_MAX, &idx));
  MPP_CHECK(pj_int(w, e, "size", 0, 0, 0, UINT32_MAX, &size));
  r->index = (uint32_t)idx, r->size = (uint32_t)size, r->rank = (int16_t)g->rank, r->sw = -1;
  const char* t;
  if (json_object_get(e, "type")) {
    int bt;
    MPP_CHECK(pj_str(w, e, "type", NULL, &t));
    MPP_CHECK(pj_enum(w, key, t, plan_buf_names, 3, &bt));
    r->kind = PLAN_REF_LOCAL, r->btype = (uint8_t)bt;
  } else if (json_object_get(e, "buffer_id")) {
    if (chan_type != PLAN_CH_MEMORY && chan_type != PLAN_CH_PORT)
      return pj_fail(w, key, "buffer_id needs an op channel_type of memory or port");
    MPP_CHECK(pj_int(w, e, "buffer_id", 0, 0, 0, INT32_MAX, &id));
    if (id >= b->nrb[chan_type])
      return pj_fail(w, key, "buffer_id %lld: the threadblock has %d remote buffer refs for %s channels", (long long)id,
                     b->nrb[chan_type], plan_chan_names[chan_type]);
    const struct lw_rbuf* rb = &g->rbufs[b->rb[chan_type][id]];
    r->kind = PLAN_REF_REMOTE, r->btype = (uint8_t)rb->btype, r->rank = (int16_t)rb->rank;
  } else if (json_object_get(e, "switch_channel_id")) {
    if (chan_type != PLAN_CH_SWITCH) return pj_fail(w, key, "switch_channel_id needs channel_type switch");
    MPP_CHECK(pj_int(w, e, "switch_channel_id", 0, 0, 0, INT32_MAX, &id));
    if (id >= b->nch[PLAN_CH_SWITCH])
      return pj_fail(w, key, "switch_channel_id %lld: the threadblock has %d switch channels", (long long)id,
                     b->nch[PLAN_CH_SWITCH]);
    r->kind = PLAN_REF_SWITCH, r->sw = g->chans[b->ch[PLAN_CH_SWITCH][id]].sw;
    r->btype = pr->sw[r->sw].btype;
  } else {
    return pj_fail(w, key, "a buffer reference needs one of type, buffer_id, switch_channel_id");
  }
  return mscclppSuccess;
}

static mscclppResult_t lw_refs(struct pj_where* w, const struct plan_rank* pr, const struct lw_gpu* g,
                               struct lw_block* b, int chan_type, const json_t* o, const char* key, uint16_t* n) {
  const json_t* a;
  size_t cnt;
  MPP_CHECK(pj_arr(w, o, key, 1, &a, &cnt));
  if (cnt > 1024) return pj_fail(w, key, "%zu buffer references; at most 1024 per op", cnt);
  MPP_CHECK(grow((void**)&b->refs, &b->caprefs, b->nrefs + (uint32_t)cnt, sizeof(*b->refs)));
  for (size_t i = 0; i < cnt; i++) {
    const json_t* e;
    MPP_CHECK(pj_elem_obj(w, a, i, key, &e));
    MPP_CHECK(lw_ref(w, pr, g, b, chan_type, e, key, &b->refs[b->nrefs++]));
  }
  *n = (uint16_t)cnt;
  return mscclppSuccess;
}

/* channel_ids (block-local) -> (peer, ordinal); semaphore_ids -> ord = id. */
static mscclppResult_t lw_chans(struct pj_where* w, const struct plan_rank* pr, const struct lw_gpu* g,
                                struct lw_block* b, const json_t* o, struct plan_op* op) {
  int sem = op->code == PLAN_OP_SEM_ACQUIRE || op->code == PLAN_OP_SEM_RELEASE;
  const char* key = sem ? "semaphore_ids" : "channel_ids";
  const json_t* a;
  size_t cnt;
  MPP_CHECK(pj_arr(w, o, key, 1, &a, &cnt));
  if (cnt > 4096) return pj_fail(w, key, "%zu entries; at most 4096 per op", cnt);
  MPP_CHECK(grow((void**)&b->chans, &b->capchans, b->nchans + (uint32_t)cnt, sizeof(*b->chans)));
  op->first_chan = b->nchans, op->nchan = (uint16_t)cnt;
  int t = op->chan_type;
  for (size_t i = 0; i < cnt; i++) {
    const json_t* v = json_array_get(a, i);
    if (!json_is_integer(v)) return pj_fail(w, key, "element %zu is not an integer", i);
    json_int_t k = json_integer_value(v);
    struct plan_chanref* c = &b->chans[b->nchans++];
    if (sem) {
      if (k < 0 || k >= pr->nsems) return pj_fail(w, key, "semaphore %lld: the gpu has %d semaphores", (long long)k, pr->nsems);
      c->peer = -1, c->ord = (int32_t)k;
      continue;
    }
    if (t == PLAN_CH_NONE) return pj_fail(w, key, "channel ids on an op with channel_type none");
    if (k < 0 || k >= b->nch[t])
      return pj_fail(w, key, "channel %lld: the threadblock has %d %s channels", (long long)k, b->nch[t], plan_chan_names[t]);
    const struct lw_chan* ch = &g->chans[b->ch[t][k]];
    c->peer = t == PLAN_CH_SWITCH ? -1 : ch->peer;
    c->ord = t == PLAN_CH_SWITCH ? ch->sw : ch->ord;
  }
  return mscclppSuccess;
}


/* reduce_op, tbg_info, barrier fields. */
static mscclppResult_t lw_extras(struct pj_where* w, const struct plan_rank* pr, const json_t* o, struct plan_op* op) {
  static const char* const redops[] = {"sum", "prod", "max", "min"};
  const char* s;
  int red = 0;
  MPP_CHECK(pj_str(w, o, "reduce_op", "sum", &s));
  MPP_CHECK(pj_enum(w, "reduce_op", s, redops, 4, &red));
  op->redop = (uint8_t)red;
  const json_t* tbg = json_object_get(o, "tbg_info");
  op->tbg_size = 1;
  if (tbg && !json_is_null(tbg)) {
    int64_t id, n;
    if (!json_is_object(tbg)) return pj_fail(w, "tbg_info", "not an object");
    MPP_CHECK(pj_int(w, tbg, "tbg_size", 0, 1, 1, 65535, &n));
    MPP_CHECK(pj_int(w, tbg, "tb_id", 0, 0, 0, n - 1, &id));
    op->tbg_id = (uint16_t)id, op->tbg_size = (uint16_t)n;
  }
  op->barrier_id = -1;
  if (op->code == PLAN_OP_BARRIER) {
    int64_t id, n;
    MPP_CHECK(pj_int(w, o, "barrier_id", 0, 0, 0, 65535, &id));
    MPP_CHECK(pj_int(w, o, "num_threadblocks", 0, 0, 1, pr->nblocks, &n));
    op->barrier_id = (int32_t)id, op->barrier_blocks = (int32_t)n;
  }
  return mscclppSuccess;
}

/* ppkt over a port channel copies scratch that already holds packets (the reference's meaning:
 * twice the bytes, no repacking): that is rppkt's job, which also waits for the packets, so the
 * op is lowered as rppkt once its sources are known to be scratch. */
static mscclppResult_t port_ppkt(struct pj_where* w, const struct lw_block* b, struct plan_op* op) {
  for (uint16_t i = 0; i < op->nsrc; i++)
    if (b->refs[op->first_ref + i].btype != PLAN_BUF_SCR)
      return pj_fail(w, "src_buff", "entry %u of ppkt over a port channel is not scratch: over port channels ppkt "
                     "copies packets already made in scratch (use cpkt first, or a memory channel)", i);
  op->code = PLAN_OP_RPPKT;
  return mscclppSuccess;
}

static mscclppResult_t lw_op(struct pj_where* w, const struct mscclppPlan* p, const struct plan_rank* pr,
                             const struct lw_gpu* g, const json_t* o, struct lw_block* b, int depth) {
  const char* s;
  int code, ct;
  MPP_CHECK(pj_str(w, o, "name", NULL, &s));
  MPP_CHECK(pj_enum(w, "name", s, op_names, PLAN_OP_COUNT, &code));
  MPP_CHECK(pj_str(w, o, "channel_type", "none", &s));
  MPP_CHECK(pj_enum(w, "channel_type", s, plan_chan_names, 4, &ct));
  MPP_CHECK(grow((void**)&b->ops, &b->capops, b->nops + 1, sizeof(*b->ops)));
  uint32_t at = b->nops++;
  struct plan_op op = {.code = (uint8_t)code, .chan_type = (uint8_t)ct, .first_ref = b->nrefs};
  MPP_CHECK(lw_chans(w, pr, g, b, o, &op));
  MPP_CHECK(lw_refs(w, pr, g, b, ct, o, "src_buff", &op.nsrc));
  MPP_CHECK(lw_refs(w, pr, g, b, ct, o, "dst_buff", &op.ndst));
  MPP_CHECK(lw_extras(w, pr, o, &op));
  if (code == PLAN_OP_PPKT && ct == PLAN_CH_PORT) MPP_CHECK(port_ppkt(w, b, &op));
  MPP_CHECK(lw_shape(w, p, b, &op));
  if (code == PLAN_OP_PIPELINE) {
    const json_t *ic = json_object_get(o, "iter_context"), *nested;
    size_t n;
    int64_t nc;
    if (depth > 0) return pj_fail(w, "ops", "a pipeline inside a pipeline");
    if (!json_is_object(ic)) return pj_fail(w, "iter_context", "missing or not an object");
    MPP_CHECK(pj_u64(w, ic, "unit_size", 0, &op.unit_size));
    if (op.unit_size == 0) return pj_fail(w, "iter_context", "unit_size must be > 0");
    if (p->ll && op.unit_size % 8) return pj_fail(w, "iter_context", "unit_size of an LL plan must be a multiple of 8");
    MPP_CHECK(pj_int(w, ic, "num_chunks", 0, 0, 1, UINT32_MAX, &nc));
    op.num_chunks = (uint32_t)nc;
    MPP_CHECK(pj_arr(w, o, "ops", 0, &nested, &n));
    b->ops[at] = op;
    MPP_CHECK(lw_ops(w, p, pr, g, nested, b, depth + 1));
    b->ops[at].nested = b->nops - at - 1;
    for (uint32_t i = at + 1; i < b->nops; i++) /* every nested op fits the pipeline's chunks */
      for (uint16_t k = 0; k < b->ops[i].nsrc + b->ops[i].ndst; k++)
        if (b->refs[b->ops[i].first_ref + k].size > op.num_chunks)
          return pj_fail(w, "iter_context", "nested op %u moves %u chunks, more than num_chunks %u", i - at - 1,
                         b->refs[b->ops[i].first_ref + k].size, op.num_chunks);
    return mscclppSuccess;
  }
  b->ops[at] = op;
  return mscclppSuccess;
}

mscclppResult_t lw_ops(struct pj_where* w, const struct mscclppPlan* p, const struct plan_rank* pr,
                       const struct lw_gpu* g, const json_t* ops, struct lw_block* b, int depth) {
  size_t n = json_array_size(ops);
  for (size_t i = 0; i < n; i++) {
    const json_t* o;
    if (depth) w->nested = (int)i; else w->op = (int)i;
    MPP_CHECK(pj_elem_obj(w, ops, i, "ops", &o));
    MPP_CHECK(lw_op(w, p, pr, g, o, b, depth));
  }
  if (depth) w->nested = -1;
  return mscclppSuccess;
}
