/* check.c - whole-algorithm checks of a parsed MSCCL XML file: chunk ranges against the owning
 * GPU's buffers, one threadblock per (peer, channel, direction), matching send and receive
 * sequences, dependencies that exist and are announced (hasdep), and no cycle in the graph of
 * "must happen before" edges (program order, deps, send -> matching receive): a cycle would hang.
 * Also that each GPU's scratch in the converted plan (its landing slots) fits an int. */
#include <stdlib.h>

#include "plan/xml/xml.h"

static const char* const kStepNames[] = {"s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop"};
static const char kBufChar[] = {'i', 'o', 's'};

const char* xml_step_name(int type) { return type >= 0 && type <= XML_STEP_NOP ? kStepNames[type] : "?"; }

int xml_step_recvs(int type) {
  return type == XML_STEP_R || type == XML_STEP_RCS || type == XML_STEP_RRS || type == XML_STEP_RRC ||
         type == XML_STEP_RRCS;
}

int xml_step_sends(int type) {
  return type == XML_STEP_S || type == XML_STEP_RCS || type == XML_STEP_RRS || type == XML_STEP_RRCS;
}

int xml_find_tb(const struct xml_algo* a, int gpu, int peer, int chan, int as_recv) {
  const struct xml_gpu* g = &a->gpus[gpu];
  for (int t = 0; t < g->ntbs; t++)
    if ((as_recv ? g->tbs[t].recv : g->tbs[t].send) == peer && g->tbs[t].chan == chan) return t;
  return -1;
}

/* Which GPU owns the step's source and destination chunks (the other side's for the remote end). */
static void step_owners(const struct xml_tb* t, int self, int type, int* src, int* dst) {
  *src = *dst = self;
  if (type == XML_STEP_R || type == XML_STEP_RCS) *src = t->recv;
  if (type == XML_STEP_S || type == XML_STEP_RRS) *dst = t->send;
}

static mscclppResult_t check_ranges(const struct xml_algo* a, int g, const struct xml_tb* t) {
  for (int s = 0; s < t->nsteps; s++) {
    const struct xml_step* st = &t->steps[s];
    if (st->type == XML_STEP_NOP) continue;
    int so, dO;
    step_owners(t, g, st->type, &so, &dO);
    int sc = a->gpus[so].chunks[st->srcbuf], dc = a->gpus[dO].chunks[st->dstbuf];
    if ((int64_t)st->srcoff + st->cnt > sc)
      return MPP_ERR(mscclppInvalidArgument,
                     "%s:%d: <step> attribute 'srcoff': chunks [%d, %d) of buffer %c of gpu %d (gpu %d tb %d "
                     "step %d) are out of range (%d chunks)",
                     a->path, st->line, st->srcoff, st->srcoff + st->cnt, kBufChar[st->srcbuf], so, g, t->id, s, sc);
    if ((int64_t)st->dstoff + st->cnt > dc)
      return MPP_ERR(mscclppInvalidArgument,
                     "%s:%d: <step> attribute 'dstoff': chunks [%d, %d) of buffer %c of gpu %d (gpu %d tb %d "
                     "step %d) are out of range (%d chunks)",
                     a->path, st->line, st->dstoff, st->dstoff + st->cnt, kBufChar[st->dstbuf], dO, g, t->id, s, dc);
  }
  return mscclppSuccess;
}

static mscclppResult_t check_deps(const struct xml_algo* a, int g, const struct xml_tb* t) {
  const struct xml_gpu* gp = &a->gpus[g];
  for (int s = 0; s < t->nsteps; s++) {
    const struct xml_step* st = &t->steps[s];
    if (st->depid < 0) continue;
    if (st->depid >= gp->ntbs)
      return MPP_ERR(mscclppInvalidArgument, "%s:%d: <step> attribute 'depid': tb %d does not exist on gpu %d (%d tbs)",
                     a->path, st->line, st->depid, g, gp->ntbs);
    const struct xml_tb* dt = &gp->tbs[st->depid];
    if (st->deps >= dt->nsteps)
      return MPP_ERR(mscclppInvalidArgument, "%s:%d: <step> attribute 'deps': step %d does not exist in gpu %d tb %d "
                     "(%d steps)", a->path, st->line, st->deps, g, st->depid, dt->nsteps);
    if (!dt->steps[st->deps].hasdep)
      return MPP_ERR(mscclppInvalidArgument, "%s:%d: <step> attribute 'hasdep': gpu %d tb %d step %d is a dependency "
                     "of tb %d step %d but says hasdep=\"0\"", a->path, dt->steps[st->deps].line, g, st->depid,
                     st->deps, t->id, s);
  }
  return mscclppSuccess;
}

/* The receiving tb on the peer exists, is unique, and its receive sequence matches this send one. */
static mscclppResult_t check_pairing(const struct xml_algo* a, int g, int ti) {
  const struct xml_tb* t = &a->gpus[g].tbs[ti];
  for (int dir = 0; dir < 2; dir++) {
    int peer = dir ? t->recv : t->send;
    if (peer < 0) continue;
    if (xml_find_tb(a, g, peer, t->chan, dir) != ti)
      return MPP_ERR(mscclppInvalidArgument, "%s:%d: <tb> attribute '%s': gpu %d has two tbs %s gpu %d on channel %d",
                     a->path, t->line, dir ? "recv" : "send", g, dir ? "receiving from" : "sending to", peer, t->chan);
  }
  if (t->send < 0) return mscclppSuccess;
  int pt = xml_find_tb(a, t->send, g, t->chan, 1);
  if (pt < 0)
    return MPP_ERR(mscclppInvalidArgument, "%s:%d: <tb> attribute 'send': gpu %d sends to gpu %d on channel %d but "
                   "no tb of gpu %d receives from gpu %d on that channel", a->path, t->line, g, t->send, t->chan,
                   t->send, g);
  const struct xml_tb* r = &a->gpus[t->send].tbs[pt];
  int i = 0, j = 0;
  for (;; i++, j++) {
    while (i < t->nsteps && !xml_step_sends(t->steps[i].type)) i++;
    while (j < r->nsteps && !xml_step_recvs(r->steps[j].type)) j++;
    if (i == t->nsteps || j == r->nsteps) break;
    if (t->steps[i].cnt != r->steps[j].cnt)
      return MPP_ERR(mscclppInvalidArgument, "%s:%d: <step> attribute 'cnt': gpu %d tb %d step %d sends %d chunks but "
                     "the matching receive (gpu %d tb %d step %d, line %d) takes %d", a->path, t->steps[i].line, g,
                     t->id, i, t->steps[i].cnt, t->send, pt, j, r->steps[j].line, r->steps[j].cnt);
  }
  if (i != t->nsteps || j != r->nsteps)
    return MPP_ERR(mscclppInvalidArgument, "%s:%d: <tb>: gpu %d tb %d and gpu %d tb %d (channel %d) have different "
                   "numbers of sends and receives", a->path, t->line, g, t->id, t->send, pt, t->chan);
  return mscclppSuccess;
}

/* A receiving tb must have a sender: its receives would wait forever otherwise. */
static mscclppResult_t check_has_sender(const struct xml_algo* a, int g, struct xml_tb* t) {
  t->src_tb = t->recv < 0 ? -1 : xml_find_tb(a, t->recv, g, t->chan, 0);
  if (t->recv < 0 || t->src_tb >= 0) return mscclppSuccess;
  return MPP_ERR(mscclppInvalidArgument, "%s:%d: <tb> attribute 'recv': gpu %d receives from gpu %d on channel %d but "
                 "no tb of gpu %d sends to it there", a->path, t->line, g, t->recv, t->chan, t->recv);
}

/* The scratch gpu g gets in the converted plan (plan/xml/convert.c): its own s_chunks plus a landing
 * slot per received chunk (LL: three, a data slot and two for its packets). The converter's slot
 * indices and the plan's scratch_chunks are ints, so that total must fit one. */
static mscclppResult_t check_scratch(const struct xml_algo* a, int g) {
  const struct xml_gpu* gp = &a->gpus[g];
  int64_t received = 0;
  for (int t = 0; t < gp->ntbs; t++)
    for (int s = 0; s < gp->tbs[t].nsteps; s++)
      if (xml_step_recvs(gp->tbs[t].steps[s].type)) received += gp->tbs[t].steps[s].cnt;
  int64_t per = a->proto == XML_PROTO_SIMPLE ? 1 : 3, total = gp->chunks[XML_BUF_S] + per * received;
  if (total > INT32_MAX)
    return MPP_ERR(mscclppInvalidArgument, "%s:%d: <gpu>: gpu %d receives %lld chunks in all, which need %lld scratch "
                   "chunks in the converted plan (s_chunks %d + %lld per chunk received); at most %d",
                   a->path, gp->line, g, (long long)received, (long long)total, gp->chunks[XML_BUF_S], (long long)per,
                   INT32_MAX);
  return mscclppSuccess;
}

mscclppResult_t xml_check(struct xml_algo* a) {
  for (int g = 0; g < a->ngpus; g++) {
    struct xml_gpu* gp = &a->gpus[g];
    for (int t = 0; t < gp->ntbs; t++) {
      MPP_CHECK(check_ranges(a, g, &gp->tbs[t]));
      MPP_CHECK(check_deps(a, g, &gp->tbs[t]));
      MPP_CHECK(check_has_sender(a, g, &gp->tbs[t]));
      MPP_CHECK(check_pairing(a, g, t));
    }
    MPP_CHECK(check_scratch(a, g));
  }
  return xml_check_acyclic(a);
}
