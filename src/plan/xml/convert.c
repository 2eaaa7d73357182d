/* convert.c - MSCCL XML algorithm -> our execution-plan JSON (docs/plan-format via
 * shared/reference/plan-format.md; the mapping is documented in docs/msccl-xml.md).
 *
 * MSCCL is two-sided: a tb sends to one peer and receives from one peer on its channel, and the
 * k-th send of gpu A's tb (send=B, chan=c) is the k-th receive of gpu B's tb (recv=A, chan=c).
 * Our plans are one-sided, so every message gets its own landing slot in the receiver's scratch,
 * laid out after MSCCL's own scratch chunks (slots are never reused within a launch, so senders
 * never wait for receivers):
 *
 *   Simple: sender   put src -> peer scratch[slot]; signal           (memory channel to B)
 *           receiver wait; then r: copy slot->dst; rcs: copy slot->dst, send dst;
 *                    rrc: re dst = src + slot; rrcs: that, send dst;
 *                    rrs: res (slot = src + slot, also written to the next peer's slot), signal
 *   LL/LL128 (-> our LL): sender ppkt src -> peer scratch packets[pslot] (no signal: flags);
 *           receiver r/rcs: upkt packets -> dst (rcs: ppkt dst on); rrc/rrcs: repkt dst = src +
 *           packets (rrcs: ppkt dst on); rrs: respkt (slot = src + packets, sent on as packets).
 *           Packet slots lie after all data slots, spaced 2 chunks per chunk, so they stay
 *           disjoint from the data slots whether the executor doubles packet offsets or not.
 *   Every op lists a data buffer (i/o) first where MSCCL's step has one, so the op's length is
 *           that chunk's even when chunk sizes differ (scratch slots are uniform; an op touching
 *           only scratch moves what the data grid has at the slot's index).
 *   Both protocols set use_double_scratch_buffer, so a sender one launch ahead of its receiver
 *           writes the other scratch half.
 *   buffer_alignment 16; with MSCCL scratch 1 (Simple) or 8 (LL), so that chunks are equal and
 *           steps on MSCCL scratch alone move a whole chunk (plan_alignment).
 *   cpy: copy src -> dst; re: re dst = src + dst; nop: no op (dependencies only).
 *   depid/deps: one intra-GPU semaphore per dependency edge between different tbs (init 0): the
 *           depended-on step ends with sem_release, the dependent step starts with sem_acquire.
 *           Dependencies inside one tb hold by program order.
 *   <copy i_off o_off cnt>: copies at the start of tb 0, then a barrier of all the GPU's tbs; a GPU
 *           with copies but no tb gets one tb that only copies.
 *   Channels: one memory channel per (peer, MSCCL channel) used in either direction, listed in
 *           (channel, peer) order on both ends, so the k-th channel to B on A is the k-th channel
 *           to A on B. Remote buffers: the scratch of each peer a GPU sends to.
 * Reductions are emitted as "sum" (MSCCL algorithms are op-agnostic). */
#include <stdlib.h>
#include <string.h>

#include "plan/xml/xml.h"

struct conv {
  const struct xml_algo* a;
  int *base, *rs, *ss, *total; /* step index base per (gpu,tb); recv/send data slot per step; per gpu */
  int* gbase;                  /* first (gpu,tb) of each gpu */
  int *acq, *rel_off, *rel_ids, *nedges; /* per step: semaphore acquired (-1: none), released (CSR) */
  int ok;
};

static const char* const kBuf[] = {"i", "o", "s"};

static void add(struct conv* c, json_t* arr, json_t* v) {
  if (!v || json_array_append_new(arr, v) != 0) c->ok = 0;
}

static json_t* lbuf(int type, int index, int size) {
  return json_pack("[{s:s,s:i,s:i}]", "type", kBuf[type], "index", index, "size", size);
}
static json_t* rbuf(int id, int index, int size) {
  return json_pack("[{s:i,s:i,s:i}]", "buffer_id", id, "index", index, "size", size);
}
static json_t* chan_op(const char* name, int ch) {
  return json_pack("{s:s,s:s,s:[i]}", "name", name, "channel_type", "memory", "channel_ids", ch);
}
static json_t* local_op(const char* name, json_t* src, json_t* dst) {
  return json_pack("{s:s,s:s,s:o,s:o}", "name", name, "channel_type", "none", "src_buff", src, "dst_buff", dst);
}
/* re: dst = a + b (reduce_op sum). */
static json_t* re_op(int ab, int ao, int bb, int bo, int db, int dof, int n) {
  return json_pack("{s:s,s:s,s:s,s:[{s:s,s:i,s:i},{s:s,s:i,s:i}],s:o}", "name", "re", "channel_type", "none",
                   "reduce_op", "sum", "src_buff", "type", kBuf[ab], "index", ao, "size", n, "type", kBuf[bb], "index",
                   bo, "size", n, "dst_buff", lbuf(db, dof, n));
}
static json_t* sem_op(const char* name, json_t* ids) {
  return json_pack("{s:s,s:s,s:o}", "name", name, "channel_type", "none", "semaphore_ids", ids);
}

/* Assigns every message a data slot in the receiver's scratch (after its MSCCL scratch chunks). */
static void assign_slots(struct conv* c) {
  const struct xml_algo* a = c->a;
  for (int b = 0; b < a->ngpus; b++) {
    int cur = a->gpus[b].chunks[XML_BUF_S];
    for (int pt = 0; pt < a->gpus[b].ntbs; pt++) {
      const struct xml_tb* r = &a->gpus[b].tbs[pt];
      if (r->recv < 0) continue;
      int t = r->src_tb;
      const struct xml_tb* s = &a->gpus[r->recv].tbs[t];
      for (int i = 0, j = 0;; i++, j++) {
        while (i < s->nsteps && !xml_step_sends(s->steps[i].type)) i++;
        while (j < r->nsteps && !xml_step_recvs(r->steps[j].type)) j++;
        if (i == s->nsteps || j == r->nsteps) break;
        c->rs[c->base[c->gbase[b] + pt] + j] = c->ss[c->base[c->gbase[r->recv] + t] + i] = cur;
        cur += r->steps[j].cnt;
      }
    }
    c->total[b] = cur - a->gpus[b].chunks[XML_BUF_S];
  }
}

/* Packet slot on gpu g for data slot d (LL only). */
static int pslot(const struct conv* c, int g, int d) {
  int s0 = c->a->gpus[g].chunks[XML_BUF_S];
  return s0 + c->total[g] + 2 * (d - s0);
}

static int is_ll(const struct conv* c) { return c->a->proto != XML_PROTO_SIMPLE; }

/* Sends n chunks of local (sb, so) to the peer's slot dslot: put + signal, or ppkt for LL. */
static void emit_send(struct conv* c, json_t* ops, const struct xml_tb* t, int n, int sb, int so, int dslot,
                      int sch) {
  int ll = is_ll(c);
  add(c, ops, json_pack("{s:s,s:s,s:[i],s:o,s:o}", "name", ll ? "ppkt" : "put", "channel_type", "memory",
                        "channel_ids", sch, "src_buff", lbuf(sb, so, n), "dst_buff",
                        rbuf(0, ll ? pslot(c, t->send, dslot) : dslot, n)));
  if (!ll) add(c, ops, chan_op("signal", sch));
}

/* rrs: reduce the arriving chunks with src into the local slot and send the result on, in one op
 * (res / respkt) so that the op's length comes from src, a data buffer. */
static void emit_rrs(struct conv* c, json_t* ops, const struct xml_tb* t, const struct xml_step* st, int in,
                     int slot, int dslot, int sch) {
  int n = st->cnt, ll = is_ll(c);
  json_t* src = json_pack("[{s:s,s:i,s:i},{s:s,s:i,s:i}]", "type", kBuf[st->srcbuf], "index", st->srcoff, "size", n,
                          "type", "s", "index", in, "size", n);
  json_t* dst = json_pack("[{s:s,s:i,s:i},{s:i,s:i,s:i}]", "type", "s", "index", slot, "size", n, "buffer_id", 0,
                          "index", ll ? pslot(c, t->send, dslot) : dslot, "size", n);
  add(c, ops, json_pack("{s:s,s:s,s:[i],s:s,s:o,s:o}", "name", ll ? "respkt" : "res", "channel_type", "memory",
                        "channel_ids", sch, "reduce_op", "sum", "src_buff", src, "dst_buff", dst));
  if (!ll) add(c, ops, chan_op("signal", sch));
}

/* A receiving step (r, rcs, rrc, rrcs, rrs) whose message sits in local slot `slot` (Simple: data;
 * LL: packets at pslot). Every op has a data-buffer reference first, which gives its length. */
static void emit_recv(struct conv* c, json_t* ops, int g, const struct xml_tb* t, const struct xml_step* st, int slot,
                      int dslot, int sch, int rch) {
  int ll = is_ll(c), n = st->cnt, in = ll ? pslot(c, g, slot) : slot;
  if (!ll) add(c, ops, chan_op("wait", rch));
  if (st->type == XML_STEP_RRS) { emit_rrs(c, ops, t, st, in, slot, dslot, sch); return; }
  if (st->type == XML_STEP_R || st->type == XML_STEP_RCS)
    add(c, ops, local_op(ll ? "upkt" : "copy", lbuf(XML_BUF_S, in, n), lbuf(st->dstbuf, st->dstoff, n)));
  else if (ll)
    add(c, ops, json_pack("{s:s,s:s,s:s,s:[{s:s,s:i,s:i},{s:s,s:i,s:i}],s:o}", "name", "repkt", "channel_type", "none",
                          "reduce_op", "sum", "src_buff", "type", kBuf[st->srcbuf], "index", st->srcoff, "size", n,
                          "type", "s", "index", in, "size", n, "dst_buff", lbuf(st->dstbuf, st->dstoff, n)));
  else
    add(c, ops, re_op(st->srcbuf, st->srcoff, XML_BUF_S, slot, st->dstbuf, st->dstoff, n));
  if (xml_step_sends(st->type)) emit_send(c, ops, t, n, st->dstbuf, st->dstoff, dslot, sch);
}

/* sem_acquire (the step's incoming dependency edge) or sem_release (its outgoing ones) of step k. */
static void emit_sems(struct conv* c, json_t* ops, int k, int release) {
  int from = release ? c->rel_off[k] : 0, to = release ? c->rel_off[k + 1] : (c->acq[k] >= 0);
  if (from == to) return;
  json_t* ids = json_array();
  for (int i = from; ids && i < to; i++) add(c, ids, json_integer(release ? c->rel_ids[i] : c->acq[k]));
  add(c, ops, ids ? sem_op(release ? "sem_release" : "sem_acquire", ids) : NULL);
}

static void emit_step(struct conv* c, json_t* ops, int g, int ti, int s, int sch, int rch) {
  const struct xml_tb* t = &c->a->gpus[g].tbs[ti];
  const struct xml_step* st = &t->steps[s];
  int k = c->base[c->gbase[g] + ti] + s;
  emit_sems(c, ops, k, 0);
  if (xml_step_recvs(st->type)) emit_recv(c, ops, g, t, st, c->rs[k], c->ss[k], sch, rch);
  else if (xml_step_sends(st->type)) emit_send(c, ops, t, st->cnt, st->srcbuf, st->srcoff, c->ss[k], sch);
  if (st->type == XML_STEP_CPY)
    add(c, ops, local_op("copy", lbuf(st->srcbuf, st->srcoff, st->cnt), lbuf(st->dstbuf, st->dstoff, st->cnt)));
  if (st->type == XML_STEP_RE)
    add(c, ops, re_op(st->srcbuf, st->srcoff, st->dstbuf, st->dstoff, st->dstbuf, st->dstoff, st->cnt));
  emit_sems(c, ops, k, 1);
}

/* One semaphore per dependency edge between different tbs of a GPU (numbered per GPU): acq[k] is
 * the one step k acquires, rel_ids[rel_off[k]..rel_off[k+1]) the ones it releases. */
static void build_edges(struct conv* c, int nst) {
  const struct xml_algo* a = c->a;
  for (int k = 0; k <= nst; k++) c->rel_off[k] = 0;
  for (int g = 0, k = 0; g < a->ngpus; g++) {
    int e = 0;
    for (int t = 0; t < a->gpus[g].ntbs; t++)
      for (int s = 0; s < a->gpus[g].tbs[t].nsteps; s++, k++) {
        const struct xml_step* st = &a->gpus[g].tbs[t].steps[s];
        c->acq[k] = -1;
        if (st->depid < 0 || st->depid == t) continue;
        c->acq[k] = e++;
        c->rel_off[c->base[c->gbase[g] + st->depid] + st->deps + 1]++;
      }
    c->nedges[g] = e;
  }
  for (int k = 0; k < nst; k++) c->rel_off[k + 1] += c->rel_off[k];
  int* pos = c->rs; /* scratch use before assign_slots fills rs */
  for (int k = 0; k < nst; k++) pos[k] = c->rel_off[k];
  for (int g = 0, k = 0; g < a->ngpus; g++)
    for (int t = 0; t < a->gpus[g].ntbs; t++)
      for (int s = 0; s < a->gpus[g].tbs[t].nsteps; s++, k++)
        if (c->acq[k] >= 0) {
          const struct xml_step* st = &a->gpus[g].tbs[t].steps[s];
          c->rel_ids[pos[c->base[c->gbase[g] + st->depid] + st->deps]++] = c->acq[k];
        }
}

/* The GPU's memory channels: unique (chan, peer) pairs of its tbs, sorted; n entries in ch[2*i]. */
static int gpu_channels(const struct xml_gpu* gp, int* ch) {
  int n = 0;
  for (int t = 0; t < gp->ntbs; t++)
    for (int d = 0; d < 2; d++) {
      int peer = d ? gp->tbs[t].recv : gp->tbs[t].send, chan = gp->tbs[t].chan, i = n;
      if (peer < 0) continue;
      while (i > 0 && (ch[2 * (i - 1)] > chan || (ch[2 * (i - 1)] == chan && ch[2 * (i - 1) + 1] > peer))) i--;
      if (i > 0 && ch[2 * (i - 1)] == chan && ch[2 * (i - 1) + 1] == peer) continue;
      memmove(&ch[2 * (i + 1)], &ch[2 * i], (size_t)(n - i) * 2 * sizeof(int));
      ch[2 * i] = chan, ch[2 * i + 1] = peer, n++;
    }
  return n;
}

static int chan_index(const int* ch, int n, int peer, int chan) {
  for (int i = 0; i < n; i++)
    if (ch[2 * i] == chan && ch[2 * i + 1] == peer) return i;
  return -1;
}

/* The GPU's <copy> elements as copy ops (input -> output). */
static void emit_copies(struct conv* c, json_t* ops, const struct xml_gpu* gp) {
  for (int i = 0; i < gp->ncopies; i++)
    add(c, ops, local_op("copy", lbuf(XML_BUF_I, gp->copies[i].i_off, gp->copies[i].cnt),
                         lbuf(XML_BUF_O, gp->copies[i].o_off, gp->copies[i].cnt)));
}

/* The one threadblock of a GPU that has <copy> elements but no <tb>: just the copies. */
static json_t* copies_tb_json(struct conv* c, const struct xml_gpu* gp) {
  json_t* ops = json_array();
  if (ops) emit_copies(c, ops, gp);
  json_t* out = json_pack("{s:i,s:o,s:[],s:[]}", "id", 0, "ops", ops, "channels", "remote_buffer_refs");
  if (!out) c->ok = 0;
  return out;
}

/* One threadblock: its block-local channel table ([send, recv], deduplicated), the remote buffer
 * ref of its send peer's scratch, and its ops. */
static json_t* tb_json(struct conv* c, int g, int ti, const int* ch, int nch, const int* rbuf_of) {
  const struct xml_gpu* gp = &c->a->gpus[g];
  const struct xml_tb* t = &gp->tbs[ti];
  json_t *ids = json_array(), *ops = json_array(), *rb = json_array();
  int sch = -1, rch = -1;
  if (t->send >= 0) add(c, ids, json_integer(chan_index(ch, nch, t->send, t->chan))), sch = 0;
  if (t->recv >= 0 && t->recv == t->send) rch = 0;
  else if (t->recv >= 0) add(c, ids, json_integer(chan_index(ch, nch, t->recv, t->chan))), rch = sch + 1;
  if (t->send >= 0)
    add(c, rb, json_pack("{s:s,s:[i]}", "access_channel_type", "memory", "remote_buffer_ids", rbuf_of[t->send]));
  if (ti == 0 && ops) emit_copies(c, ops, gp);
  if (gp->ncopies > 0 && gp->ntbs > 1)
    add(c, ops, json_pack("{s:s,s:s,s:i,s:i}", "name", "barrier", "channel_type", "none", "barrier_id", 0,
                          "num_threadblocks", gp->ntbs));
  for (int s = 0; ops && s < t->nsteps; s++) emit_step(c, ops, g, ti, s, sch, rch);
  json_t* chans = json_array();
  if (chans && json_array_size(ids) > 0)
    add(c, chans, json_pack("{s:s,s:O}", "channel_type", "memory", "channel_ids", ids));
  json_t* out = json_pack("{s:i,s:o,s:o,s:o}", "id", ti, "ops", ops, "channels", chans, "remote_buffer_refs", rb);
  json_decref(ids);
  if (!out) c->ok = 0;
  return out;
}

/* gpus[g]: chunk counts, channels, remote buffers (peer scratches), semaphores, threadblocks. */
static json_t* gpu_json_fill(struct conv* c, int g, int* ch, int* rbuf_of) {
  const struct xml_gpu* gp = &c->a->gpus[g];
  int nch = gpu_channels(gp, ch), nrb = 0;
  json_t *peers = json_array(), *rbs = json_array(), *sems = json_array(), *tbs = json_array();
  for (int i = 0; i < nch; i++) add(c, peers, json_integer(ch[2 * i + 1]));
  for (int p = 0; p < c->a->ngpus; p++) rbuf_of[p] = -1;
  for (int t = 0; t < gp->ntbs; t++) {
    int p = gp->tbs[t].send;
    if (p < 0 || rbuf_of[p] >= 0) continue;
    rbuf_of[p] = nrb++;
    add(c, rbs, json_pack("{s:i,s:s,s:[s]}", "rank", p, "type", "s", "access_channel_types", "memory"));
  }
  for (int e = 0; e < c->nedges[g]; e++) add(c, sems, json_pack("{s:i}", "init_value", 0));
  for (int t = 0; t < gp->ntbs; t++) add(c, tbs, tb_json(c, g, t, ch, nch, rbuf_of));
  if (gp->ntbs == 0 && gp->ncopies > 0) add(c, tbs, copies_tb_json(c, gp)); /* else its copies had no tb */
  int scratch = gp->chunks[XML_BUF_S] + c->total[g] * (is_ll(c) ? 3 : 1);
  json_t* chans = json_array();
  if (chans && nch > 0)
    add(c, chans, json_pack("{s:s,s:O}", "channel_type", "memory", "connected_to", peers));
  json_decref(peers);
  json_t* out = json_pack("{s:i,s:i,s:i,s:i,s:o,s:o,s:o,s:o}", "id", g, "input_chunks", gp->chunks[XML_BUF_I],
                          "output_chunks", gp->chunks[XML_BUF_O], "scratch_chunks", scratch, "threadblocks", tbs,
                          "channels", chans, "remote_buffers", rbs, "semaphores", sems);
  if (!out) c->ok = 0;
  return out;
}

static json_t* gpu_json(struct conv* c, int g) {
  const struct xml_gpu* gp = &c->a->gpus[g];
  int* ch = malloc((size_t)(2 * (2 * gp->ntbs + 1)) * sizeof(int));
  int* rbuf_of = malloc((size_t)c->a->ngpus * sizeof(int));
  json_t* out = ch && rbuf_of ? gpu_json_fill(c, g, ch, rbuf_of) : NULL;
  if (!out) c->ok = 0;
  free(ch), free(rbuf_of);
  return out;
}

/* Our collective name for MSCCL's (those we have no name for become "custom"). */
static const char* plan_coll(const char* coll) {
  static const char* const same[] = {"allreduce", "allgather", "reducescatter", "alltoall", "broadcast"};
  for (int i = 0; i < 5; i++)
    if (strcmp(coll, same[i]) == 0) return same[i];
  if (strcmp(coll, "send") == 0 || strcmp(coll, "recv") == 0) return "sendrecv";
  return "custom";
}

/* buffer_alignment: 16, or the smallest the protocol takes (Simple 1, LL 8) when the algorithm has
 * MSCCL scratch. A step on MSCCL scratch alone (e.g. r into s, cpy or re from s to s, s from s)
 * becomes an op with no input/output reference, which moves what the data grid has at its scratch
 * index (docs/plans.md, Sizes); that is the message's length only when all chunks are equal, as
 * MSCCL's are. With alignment 1 they are for every count MSCCL's rule accepts (a multiple of
 * nchunksperloop); LL needs 8: chunks of a multiple of 8 bytes. */
static int plan_alignment(const struct conv* c) {
  for (int g = 0; g < c->a->ngpus; g++)
    if (c->a->gpus[g].chunks[XML_BUF_S] > 0) return is_ll(c) ? 8 : 1;
  return 16;
}

static json_t* plan_json(struct conv* c) {
  const struct xml_algo* a = c->a;
  json_t* gpus = json_array();
  for (int g = 0; gpus && g < a->ngpus && c->ok; g++) add(c, gpus, gpu_json(c, g));
  json_t* p = json_pack("{s:s,s:s,s:s,s:b,s:b,s:o,s:i,s:b,s:i,s:I,s:I}", "name", a->name, "collective",
                        plan_coll(a->coll), "protocol", is_ll(c) ? "LL" : "Simple", "inplace", a->inplace,
                        "reuse_resources", 0, "gpus", gpus, "num_threads_per_block", a->nthreads,
                        "use_double_scratch_buffer", 1, "buffer_alignment", plan_alignment(c), "min_message_size",
                        (json_int_t)a->min_bytes, "max_message_size", (json_int_t)(a->max_bytes - 1));
  if (!p || !c->ok) {
    json_decref(p);
    return NULL;
  }
  return p;
}

mscclppResult_t xml_to_plan(const struct xml_algo* a, json_t** out) {
  if (!a || !out) return MPP_ERR(mscclppInvalidArgument, "xml_to_plan: NULL argument");
  struct conv c = {.a = a, .ok = 1};
  int ntb = 0, nst = 0;
  for (int g = 0; g < a->ngpus; g++)
    for (int t = 0; t < a->gpus[g].ntbs; t++) ntb++, nst += a->gpus[g].tbs[t].nsteps;
  c.gbase = calloc((size_t)a->ngpus + 1, sizeof(int));
  c.base = calloc((size_t)ntb + 1, sizeof(int));
  c.rs = calloc((size_t)nst + 1, sizeof(int));
  c.ss = calloc((size_t)nst + 1, sizeof(int));
  c.total = calloc((size_t)a->ngpus + 1, sizeof(int));
  c.nedges = calloc((size_t)a->ngpus + 1, sizeof(int));
  c.acq = calloc((size_t)nst + 1, sizeof(int));
  c.rel_off = calloc((size_t)nst + 1, sizeof(int));
  c.rel_ids = calloc((size_t)nst + 1, sizeof(int));
  *out = NULL;
  if (c.gbase && c.base && c.rs && c.ss && c.total && c.nedges && c.acq && c.rel_off && c.rel_ids) {
    for (int g = 0, k = 0, s = 0; g < a->ngpus; g++) {
      c.gbase[g] = k;
      for (int t = 0; t < a->gpus[g].ntbs; t++, k++) c.base[k] = s, s += a->gpus[g].tbs[t].nsteps;
    }
    build_edges(&c, nst);
    memset(c.rs, 0, (size_t)nst * sizeof(int));
    assign_slots(&c);
    *out = plan_json(&c);
  }
  free(c.gbase), free(c.base), free(c.rs), free(c.ss), free(c.total);
  free(c.nedges), free(c.acq), free(c.rel_off), free(c.rel_ids);
  if (!*out) return MPP_ERR(mscclppSystemError, "%s: out of memory building the plan JSON", a->path);
  return mscclppSuccess;
}

mscclppResult_t xml_to_plan_text(const struct xml_algo* a, char** json, size_t* len) {
  json_t* p;
  MPP_CHECK(xml_to_plan(a, &p));
  char* s = json_dumps(p, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  json_decref(p);
  if (!s) return MPP_ERR(mscclppSystemError, "%s: out of memory serializing the plan JSON", a->path);
  *json = s;
  if (len) *len = strlen(s);
  return mscclppSuccess;
}
