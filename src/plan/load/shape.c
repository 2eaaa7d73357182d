/* shape.c - what each op code needs (lower.h: lw_shape): its channel type, how many sources and
 * destinations of which kind (local, remote, switch), scratch for packets, and chunk counts that
 * agree between the references of one op. */
#include "plan/load/lower.h"
#include "plan/order/order.h"

/* Kind masks for a reference rule. */
#define K_L (1u << PLAN_REF_LOCAL)
#define K_R (1u << PLAN_REF_REMOTE)
#define K_S (1u << PLAN_REF_SWITCH)

struct rule {
  uint8_t ch;        /* 0: no channels, 1: memory or port, 2: switch, 3: semaphore ids */
  uint8_t smin, smax;   /* source count range (255 = any) */
  uint8_t s0, sn;       /* kinds allowed for src[0] and src[1..] */
  uint8_t dmin, dmax;
  uint8_t d0, dn;
  uint8_t pkt_src, pkt_dst; /* bit 0: ref 0 must be scratch, bit 1: refs 1.. must be scratch */
  uint8_t need_remote_src;
};

static const struct rule rules[PLAN_OP_COUNT] = {
    [PLAN_OP_NOP] = {0},
    [PLAN_OP_BARRIER] = {0},
    [PLAN_OP_PUT] = {1, 1, 255, K_L, K_L, 1, 255, K_R, K_R, 0, 0, 0},
    [PLAN_OP_PWS] = {1, 1, 255, K_L, K_L, 1, 255, K_R, K_R, 0, 0, 0},
    [PLAN_OP_PWSF] = {1, 1, 255, K_L, K_L, 1, 255, K_R, K_R, 0, 0, 0},
    [PLAN_OP_GET] = {1, 1, 255, K_R, K_R, 1, 255, K_L, K_L, 0, 0, 0},
    [PLAN_OP_COPY] = {0, 1, 1, K_L, 0, 1, 1, K_L, 0, 0, 0, 0},
    [PLAN_OP_SIGNAL] = {1},
    [PLAN_OP_WAIT] = {1},
    [PLAN_OP_RLXSIGNAL] = {1},
    [PLAN_OP_RLXWAIT] = {1},
    [PLAN_OP_FLUSH] = {1},
    [PLAN_OP_RE] = {0, 1, 255, K_L, K_L, 1, 1, K_L, 0, 0, 0, 0},
    [PLAN_OP_RES] = {1, 1, 255, K_L, K_L, 2, 255, K_L, K_R, 0, 0, 0},
    [PLAN_OP_RRE] = {1, 1, 255, K_L | K_R, K_L | K_R, 1, 1, K_L, 0, 0, 0, 1},
    [PLAN_OP_RRES] = {1, 1, 255, K_L | K_R, K_L | K_R, 2, 255, K_L, K_R, 0, 0, 1},
    [PLAN_OP_PPKT] = {1, 1, 1, K_L, 0, 1, 255, K_R, K_R, 0, 3, 0},
    [PLAN_OP_RPPKT] = {1, 1, 1, K_L, 0, 1, 255, K_R, K_R, 1, 3, 0},
    [PLAN_OP_CPKT] = {0, 1, 1, K_L, 0, 1, 255, K_L, K_L, 0, 3, 0},
    [PLAN_OP_UPKT] = {0, 1, 1, K_L, 0, 1, 1, K_L, 0, 1, 0, 0},
    [PLAN_OP_REPKT] = {0, 2, 255, K_L, K_L, 1, 1, K_L, 0, 2, 0, 0},
    [PLAN_OP_RESPKT] = {1, 2, 255, K_L, K_L, 2, 255, K_L, K_R, 2, 2, 0},
    [PLAN_OP_RECPKT] = {0, 2, 255, K_L, K_L, 2, 255, K_L, K_L, 2, 2, 0},
    [PLAN_OP_RECSPKT] = {1, 2, 255, K_L, K_L, 2, 255, K_L, K_L | K_R, 2, 2, 0},
    [PLAN_OP_GLRE] = {2, 1, 1, K_S, 0, 1, 1, K_L, 0, 0, 0, 0},
    [PLAN_OP_GLRES] = {2, 1, 1, K_S, 0, 1, 255, K_S, K_S, 0, 0, 0},
    [PLAN_OP_GSTORE] = {2, 1, 1, K_L, 0, 1, 255, K_S, K_S, 0, 0, 0},
    [PLAN_OP_GSTOREPKT] = {2, 1, 1, K_L, 0, 1, 255, K_S, K_S, 0, 3, 0},
    [PLAN_OP_PIPELINE] = {0},
    [PLAN_OP_SEM_ACQUIRE] = {3},
    [PLAN_OP_SEM_RELEASE] = {3},
};

static const char* const kind_names[] = {"a local buffer (type)", "a remote buffer (buffer_id)",
                                         "a switch channel (switch_channel_id)"};

static mscclppResult_t check_refs(struct pj_where* w, const struct lw_block* b, const struct plan_op* op, int dst) {
  const struct rule* r = &rules[op->code];
  const char* key = dst ? "dst_buff" : "src_buff";
  uint16_t n = dst ? op->ndst : op->nsrc;
  uint32_t first = op->first_ref + (dst ? op->nsrc : 0);
  unsigned min = dst ? r->dmin : r->smin, max = dst ? r->dmax : r->smax;
  unsigned k0 = dst ? r->d0 : r->s0, kn = dst ? r->dn : r->sn, pkt = dst ? r->pkt_dst : r->pkt_src;
  if (n < min || (max != 255 && n > max)) {
    if (max == 255) return pj_fail(w, key, "%s needs at least %u entries, has %u", plan_op_name(op->code), min, n);
    return pj_fail(w, key, "%s needs %u to %u entries, has %u", plan_op_name(op->code), min, max, n);
  }
  for (uint16_t i = 0; i < n; i++) {
    const struct plan_ref* ref = &b->refs[first + i];
    unsigned allowed = i ? kn : k0;
    if (!(allowed & (1u << ref->kind)))
      return pj_fail(w, key, "entry %u of %s is %s, which this op does not take here", i, plan_op_name(op->code),
                     kind_names[ref->kind]);
    if ((pkt & (i ? 2u : 1u)) && ref->btype != PLAN_BUF_SCR)
      return pj_fail(w, key, "entry %u of %s holds packets and must be scratch (type s)", i, plan_op_name(op->code));
    if (ref->size != b->refs[op->first_ref].size)
      return pj_fail(w, key, "entry %u has size %u chunks, the op's first reference %u", i, ref->size,
                     b->refs[op->first_ref].size);
  }
  return mscclppSuccess;
}

mscclppResult_t lw_shape(struct pj_where* w, const struct mscclppPlan* p, const struct lw_block* b,
                         const struct plan_op* op) {
  const struct rule* r = &rules[op->code];
  int ct = op->chan_type;
  if (r->ch == 1 && (ct != PLAN_CH_MEMORY && ct != PLAN_CH_PORT))
    return pj_fail(w, "channel_type", "%s needs memory or port channels", plan_op_name(op->code));
  if (r->ch == 2 && ct != PLAN_CH_SWITCH) return pj_fail(w, "channel_type", "%s needs a switch channel", plan_op_name(op->code));
  if ((r->ch == 1 || r->ch == 2) && op->nchan == 0)
    return pj_fail(w, "channel_ids", "%s needs at least one channel", plan_op_name(op->code));
  if (r->ch == 3 && op->nchan == 0) return pj_fail(w, "semaphore_ids", "%s needs semaphore ids", plan_op_name(op->code));
  if (r->ch == 0 && op->nchan && op->code != PLAN_OP_NOP)
    return pj_fail(w, "channel_ids", "%s takes no channels", plan_op_name(op->code));
  MPP_CHECK(check_refs(w, b, op, 0));
  MPP_CHECK(check_refs(w, b, op, 1));
  if (r->need_remote_src) {
    int remote = 0;
    for (uint16_t i = 0; i < op->nsrc; i++) remote |= b->refs[op->first_ref + i].kind == PLAN_REF_REMOTE;
    if (!remote) return pj_fail(w, "src_buff", "%s reads at least one remote buffer", plan_op_name(op->code));
  }
  int pkt = r->pkt_src || r->pkt_dst;
  if (pkt && !p->ll) return pj_fail(w, "name", "packet op %s in a plan whose protocol is Simple", plan_op_name(op->code));
  if (op->code == PLAN_OP_FLUSH && ct != PLAN_CH_PORT && ct != PLAN_CH_MEMORY)
    return pj_fail(w, "channel_type", "flush needs port channels");
  if (op->code == PLAN_OP_PIPELINE && (op->nsrc || op->ndst))
    return pj_fail(w, "src_buff", "a pipeline op has no buffers of its own");
  return mscclppSuccess;
}

int plan_ref_is_packet(int code, int dst, int i) {
  if (code < 0 || code >= PLAN_OP_COUNT) return 0;
  unsigned pkt = dst ? rules[code].pkt_dst : rules[code].pkt_src;
  return (pkt & (i ? 2u : 1u)) != 0;
}
