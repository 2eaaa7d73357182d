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
  uint8_t known;     /* 1: the op has its rule here (a new op without one is refused at load) */
  uint8_t ch;        /* 0: no channels, 1: memory or port, 2: switch, 3: semaphore ids */
  uint8_t smin, smax;   /* source count range (255 = any) */
  uint8_t s0, sn;       /* kinds allowed for src[0] and src[1..] */
  uint8_t dmin, dmax;
  uint8_t d0, dn;
  uint8_t pkt_src, pkt_dst; /* bit 0: ref 0 must be scratch, bit 1: refs 1.. must be scratch */
  uint8_t need_remote_src;
};

/* A rule with every field, in struct order after `known`, or with channels only (no buffers). */
#define RULE(ch_, smin_, smax_, s0_, sn_, dmin_, dmax_, d0_, dn_, pkt_src_, pkt_dst_, remote_)                      \
  {.known = 1, .ch = (ch_), .smin = (smin_), .smax = (smax_), .s0 = (s0_), .sn = (sn_), .dmin = (dmin_), .dmax = (dmax_), \
   .d0 = (d0_), .dn = (dn_), .pkt_src = (pkt_src_), .pkt_dst = (pkt_dst_), .need_remote_src = (remote_)}
#define CHANNELS_ONLY(ch_) {.known = 1, .ch = (ch_)}

static const struct rule rules[PLAN_OP_COUNT] = {
    [PLAN_OP_NOP] = CHANNELS_ONLY(0),
    [PLAN_OP_BARRIER] = CHANNELS_ONLY(0),
    [PLAN_OP_PUT] = RULE(1, 1, 255, K_L, K_L, 1, 255, K_R, K_R, 0, 0, 0),
    [PLAN_OP_PWS] = RULE(1, 1, 255, K_L, K_L, 1, 255, K_R, K_R, 0, 0, 0),
    [PLAN_OP_PWSF] = RULE(1, 1, 255, K_L, K_L, 1, 255, K_R, K_R, 0, 0, 0),
    [PLAN_OP_GET] = RULE(1, 1, 255, K_R, K_R, 1, 255, K_L, K_L, 0, 0, 0),
    [PLAN_OP_COPY] = RULE(0, 1, 1, K_L, 0, 1, 1, K_L, 0, 0, 0, 0),
    [PLAN_OP_SIGNAL] = CHANNELS_ONLY(1),
    [PLAN_OP_WAIT] = CHANNELS_ONLY(1),
    [PLAN_OP_RLXSIGNAL] = CHANNELS_ONLY(1),
    [PLAN_OP_RLXWAIT] = CHANNELS_ONLY(1),
    [PLAN_OP_FLUSH] = CHANNELS_ONLY(1),
    [PLAN_OP_RE] = RULE(0, 1, 255, K_L, K_L, 1, 1, K_L, 0, 0, 0, 0),
    [PLAN_OP_RES] = RULE(1, 1, 255, K_L, K_L, 2, 255, K_L, K_R, 0, 0, 0),
    [PLAN_OP_RRE] = RULE(1, 1, 255, K_L | K_R, K_L | K_R, 1, 1, K_L, 0, 0, 0, 1),
    [PLAN_OP_RRES] = RULE(1, 1, 255, K_L | K_R, K_L | K_R, 2, 255, K_L, K_R, 0, 0, 1),
    [PLAN_OP_PPKT] = RULE(1, 1, 255, K_L, K_L, 1, 255, K_R, K_R, 0, 3, 0),
    [PLAN_OP_RPPKT] = RULE(1, 1, 255, K_L, K_L, 1, 255, K_R, K_R, 3, 3, 0),
    [PLAN_OP_CPKT] = RULE(0, 1, 1, K_L, 0, 1, 255, K_L, K_L, 0, 3, 0),
    [PLAN_OP_UPKT] = RULE(0, 1, 1, K_L, 0, 1, 1, K_L, 0, 1, 0, 0),
    [PLAN_OP_REPKT] = RULE(0, 2, 255, K_L, K_L, 1, 1, K_L, 0, 2, 0, 0),
    [PLAN_OP_RESPKT] = RULE(1, 2, 255, K_L, K_L, 2, 255, K_L, K_R, 2, 2, 0),
    [PLAN_OP_RECPKT] = RULE(0, 2, 255, K_L, K_L, 2, 255, K_L, K_L, 2, 2, 0),
    [PLAN_OP_RECSPKT] = RULE(1, 2, 255, K_L, K_L, 2, 255, K_L, K_L | K_R, 2, 2, 0),
    [PLAN_OP_GLRE] = RULE(2, 1, 1, K_S, 0, 1, 1, K_L, 0, 0, 0, 0),
    [PLAN_OP_GLRES] = RULE(2, 1, 1, K_S, 0, 1, 255, K_S, K_S, 0, 0, 0),
    [PLAN_OP_GSTORE] = RULE(2, 1, 1, K_L, 0, 1, 255, K_S, K_S, 0, 0, 0),
    [PLAN_OP_GSTOREPKT] = RULE(2, 1, 1, K_L, 0, 1, 255, K_S, K_S, 1, 3, 0),
    [PLAN_OP_PIPELINE] = CHANNELS_ONLY(0),
    [PLAN_OP_SEM_ACQUIRE] = CHANNELS_ONLY(3),
    [PLAN_OP_SEM_RELEASE] = CHANNELS_ONLY(3),
};

/* Ops whose sources pair with their destinations when there are several (the DSL's fused puts:
 * source i to destination i); with one source, it goes to every destination. */
static int pairs_sources(int code) {
  return code == PLAN_OP_PUT || code == PLAN_OP_PWS || code == PLAN_OP_PWSF || code == PLAN_OP_GET ||
         code == PLAN_OP_PPKT || code == PLAN_OP_RPPKT;
}

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
  if (!r->known) return pj_fail(w, "name", "op %s has no shape rule in this library", plan_op_name(op->code));
  int ct = op->chan_type;
  if (r->ch == 1 && (ct != PLAN_CH_MEMORY && ct != PLAN_CH_PORT))
    return pj_fail(w, "channel_type", "%s needs memory or port channels", plan_op_name(op->code));
  if (r->ch == 2 && ct != PLAN_CH_SWITCH) return pj_fail(w, "channel_type", "%s needs a switch channel", plan_op_name(op->code));
  /* Channels are the op for signal/wait/flush, and the path for port data ops. A data op over
   * memory channels names its peers by its remote buffer refs, and a switch op by the
   * switch_channel_id of its refs: neither needs channel_ids (today's DSL writes none). */
  if (r->ch == 1 && op->nchan == 0 && (ct == PLAN_CH_PORT || r->dmax == 0))
    return pj_fail(w, "channel_ids", "%s over %s channels needs at least one channel", plan_op_name(op->code),
                   plan_chan_names[ct]);
  if (r->ch == 3 && op->nchan == 0) return pj_fail(w, "semaphore_ids", "%s needs semaphore ids", plan_op_name(op->code));
  if (r->ch == 0 && op->nchan && op->code != PLAN_OP_NOP)
    return pj_fail(w, "channel_ids", "%s takes no channels", plan_op_name(op->code));
  MPP_CHECK(check_refs(w, b, op, 0));
  MPP_CHECK(check_refs(w, b, op, 1));
  if (pairs_sources(op->code) && op->nsrc > 1 && op->nsrc != op->ndst)
    return pj_fail(w, "src_buff", "%s has %u sources and %u destinations: several sources pair with as many "
                   "destinations (source i to destination i)", plan_op_name(op->code), op->nsrc, op->ndst);
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
