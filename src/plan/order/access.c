/* access.c - the order check (plan/order/order.h): collects every access of every op (and of each rank's caller
 * between calls) to a rank's buffers, and reports each pair that touches the same bytes, one of
 * them a write, with neither happening before the other in the graph of plan/order/graph.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/load/lower.h"
#include "plan/order/edges.h"
#include "util/log.h"
#include "util/param.h"
#include "util/vec.h"

/* One access: op i of thread t (or the caller's turn of a rank: a caller thread, i = 0, ref NULL)
 * reads or writes span sp of buffer btype of rank owner (in place: as aliased, in_place_alias). */
struct acc {
  int owner, t;
  uint32_t i;
  int btype, write;
  const struct plan_ref* ref;
  struct rg_span sp;
};

struct accs {
  struct acc* a;
  size_t n, cap;
};

static int acc_add(struct accs* l, struct acc a) {
  if (vec_reserve((void**)&l->a, &l->cap, l->n + 1, sizeof(*l->a))) return -1;
  l->a[l->n++] = a;
  return 0;
}

/* An in-place plan's input is part of its output, as in NCCL's in-place calls (allgather: the
 * owner's slice of it; allreduce, alltoall: all of it; reducescatter: the output is the owner's
 * slice of the input): accesses to the one are checked as accesses to that part of the other.
 * Other collectives, and chunk counts that do not fit the form, are left apart. */
static void in_place_alias(const struct mscclppPlan* p, int owner, int* btype, struct rg_span* sp) {
  const struct plan_rank* pr = &p->ranks[owner];
  const char* c = p->collective;
  int from = !strcmp(c, "reducescatter") ? PLAN_BUF_OUT : PLAN_BUF_IN;
  double off = -1;
  if (!p->inplace || *btype != from) return;
  if (!strcmp(c, "allgather") && pr->out_chunks == (uint32_t)p->nranks * pr->in_chunks) off = (double)owner * pr->in_chunks;
  if (!strcmp(c, "reducescatter") && pr->in_chunks == (uint32_t)p->nranks * pr->out_chunks)
    off = (double)owner * pr->out_chunks;
  if ((!strcmp(c, "allreduce") || !strcmp(c, "alltoall")) && pr->in_chunks == pr->out_chunks) off = 0;
  if (off < 0) return;
  sp->lo += off, sp->hi += off;
  *btype = from == PLAN_BUF_IN ? PLAN_BUF_OUT : PLAN_BUF_IN;
}

/* Adds ref j of op i of block thread t, once per rank it names, as done by event (at, ai). */
static int add_ref(struct rg_graph* g, struct accs* l, int* own, int t, uint32_t i, int j, int at, uint32_t ai) {
  const struct plan_op* op = &g->blk[t]->ops[i];
  int wr = j >= op->nsrc;
  const struct plan_ref* ref = &g->blk[t]->refs[op->first_ref + j];
  struct rg_span sp = rg_ref_span(op, ref, plan_ref_is_packet(op->code, wr, wr ? j - op->nsrc : j));
  int n = rg_ref_owners(g->p, g->rank_of[t], ref, own, g->p->nranks);
  for (int o = 0; o < n; o++) {
    struct acc a = {own[o], at, ai, ref->btype, wr, ref, sp};
    in_place_alias(g->p, own[o], &a.btype, &a.sp);
    if (acc_add(l, a)) return -1;
  }
  return 0;
}

/* A port put's transfers, one per channel, on its proxies: each reads the sources and writes the
 * destinations of that channel's peer. */
static int add_port_refs(struct rg_graph* g, struct accs* l, int* own, int t, uint32_t i) {
  const struct plan_op* op = &g->blk[t]->ops[i];
  for (uint16_t c = 0; c < op->nchan; c++) {
    const struct plan_chanref* ch = &g->blk[t]->chans[op->first_chan + c];
    int pt;
    uint32_t k;
    if (rg_proxy_event(g, t, i, ch, &pt, &k)) return -1;
    for (int j = 0; j < op->nsrc + op->ndst; j++)
      if ((j < op->nsrc || g->blk[t]->refs[op->first_ref + j].rank == ch->peer) && add_ref(g, l, own, t, i, j, pt, k))
        return -1;
  }
  return 0;
}

/* Every reference of every op, once per rank it names (port transfers: on their proxies). */
static int collect_ops(struct rg_graph* g, struct accs* l, int* own) {
  for (int t = 0; t < g->nblock_threads; t++)
    for (uint32_t i = 0; i < g->blk[t]->nops; i++) {
      const struct plan_op* op = &g->blk[t]->ops[i];
      if (rg_port_async(op) && op->nsrc + op->ndst > 0) {
        if (add_port_refs(g, l, own, t, i)) return -1;
        continue;
      }
      for (int j = 0; j < op->nsrc + op->ndst; j++)
        if (add_ref(g, l, own, t, i, j, t, i)) return -1;
    }
  return 0;
}

/* The caller's turn between calls: it may read and write all of its input and output. */
static int collect_callers(const struct rg_graph* g, struct accs* l) {
  for (int r = 0; r < g->p->nranks; r++)
    for (int bt = PLAN_BUF_IN; bt <= PLAN_BUF_OUT; bt++)
      if (acc_add(l, (struct acc){r, g->nblock_threads + r, 0, bt, 1, NULL, {0, 1e300}})) return -1;
  /* (an in-place plan's aliased part is covered by the other buffer's whole span) */
  return 0;
}

static int acc_cmp(const void* a, const void* b) {
  const struct acc *x = a, *y = b;
  if (x->owner != y->owner) return x->owner < y->owner ? -1 : 1;
  if (x->btype != y->btype) return x->btype < y->btype ? -1 : 1;
  return x->sp.lo < y->sp.lo ? -1 : x->sp.lo > y->sp.lo;
}

/* What the check found so far: distinct (op, op, call distance, owner) keys, and the text. */
struct found {
  int (*keys)[6];
  size_t n, cap;
  int lines, max_lines;
  char* text;
  size_t len, used;
};

/* Records a finding (the same two ops the other way round, d negated, are the same finding); 0
 * if it was seen already, 1 if new, -1 out of memory. */
static int found_new(struct found* f, const struct acc* x, const struct acc* y, int d) {
  int swap = x->t > y->t || (x->t == y->t && x->i > y->i);
  if (swap) {
    const struct acc* z = x;
    x = y, y = z, d = -d;
  }
  int key[6] = {x->t, (int)x->i, y->t, (int)y->i, d, x->owner};
  for (size_t k = 0; k < f->n; k++)
    if (!memcmp(f->keys[k], key, sizeof(key))) return 0;
  if (vec_reserve((void**)&f->keys, &f->cap, f->n + 1, sizeof(*f->keys))) return -1;
  memcpy(f->keys[f->n++], key, sizeof(key));
  return 1;
}

static void emit(struct found* f, const char* line) {
  if (f->lines++ >= f->max_lines || !f->text || f->used + 1 >= f->len) return;
  int n = snprintf(f->text + f->used, f->len - f->used, "%s\n", line);
  if (n > 0) f->used += (size_t)n < f->len - f->used ? (size_t)n : f->len - f->used - 1;
}

static const char* buf_name(int bt) { return bt == PLAN_BUF_IN ? "input" : bt == PLAN_BUF_OUT ? "output" : "scratch"; }

/* "gpu R threadblock B op I (name) writes gpu O's output chunks [a, b)" */
static void describe(const struct rg_graph* g, const struct acc* a, char* buf, size_t len) {
  struct rg_pred op = rg_event_op(g, a->t, a->i);
  int r = g->rank_of[op.t];
  snprintf(buf, len, "gpu %d threadblock %d op %u (%s%s) %s gpu %d's %s chunks [%u, %u)", r, op.t - g->first_thread[r],
           op.i, plan_op_name(g->blk[op.t]->ops[op.i].code), a->t >= g->first_proxy ? ", by the proxy" : "",
           a->write ? "writes" : "reads", a->owner, buf_name(a->ref->btype), a->ref->index, a->ref->index + a->ref->size);
}

/* One unordered pair, op x d calls before op y (or the caller's turn and an op). */
static void report(const struct rg_graph* g, struct found* f, const struct acc* x, const struct acc* y, int d) {
  char a[256], b[256], line[640];
  if (!x->ref || !y->ref) { /* the caller's turn of x->owner and an op: same call (d 0) or the op's next */
    const struct acc* op = x->ref ? x : y;
    describe(g, op, a, sizeof(a));
    if (d == 0)
      snprintf(line, sizeof(line), "%s before that rank has started the call: nothing orders it after gpu %d's start "
               "(its caller may still be using the buffer)", a, op->owner);
    else
      snprintf(line, sizeof(line), "%s possibly after that rank's call has returned: gpu %d waits for nothing that "
               "comes after it (its caller may already be using the buffer)", a, op->owner);
    emit(f, line);
    return;
  }
  describe(g, x, a, sizeof(a)), describe(g, y, b, sizeof(b));
  const char* when = d == 0 ? "in the same call" : d == 1 || d == -1 ? "one call apart" : "two calls apart";
  int hint = x->btype == PLAN_BUF_SCR && !g->p->double_scratch && d != 0;
  snprintf(line, sizeof(line), "%s and %s %s, and nothing orders them%s", a, b, when,
           hint ? " (use_double_scratch_buffer, or a wait for the reader before the write, would)" : "");
  emit(f, line);
}

/* Checks x and y (same bytes, one a write) at every call distance that reaches the same memory. */
static int check_pair(const struct rg_graph* g, struct found* f, const struct acc* x, const struct acc* y) {
  int dbl = x->btype == PLAN_BUF_SCR && g->p->double_scratch;
  for (int d = dbl ? -2 : -1; d <= (dbl ? 2 : 1); d++) {
    if (dbl && (d & 1)) continue; /* the other scratch half */
    if ((!x->ref && d == 1) || (!y->ref && d == -1)) continue; /* a caller's turn vs its call's op or the previous */
    struct rg_ev ex = {x->t, d >= 0 ? 0 : -d, x->i}, ey = {y->t, (d >= 0 ? 0 : -d) + d, y->i};
    if (rg_before(g, ex, ey) || rg_before(g, ey, ex)) continue;
    int nw = found_new(f, x, y, d);
    if (nw < 0) return -1;
    if (nw) report(g, f, x, y, d);
  }
  return 0;
}

/* Distinct findings after which the check stops (a plan with more is thoroughly unordered). */
#define FOUND_MAX 4096

/* Every pair of accesses to the same bytes of a buffer, one of them a write, not of one op. */
static int check_all(struct rg_graph* g, struct accs* l, struct found* f) {
  if (l->n) qsort(l->a, l->n, sizeof(*l->a), acc_cmp);
  for (size_t a = 0; a < l->n && f->n < FOUND_MAX; a++)
    for (size_t b = a + 1; b < l->n; b++) {
      const struct acc *x = &l->a[a], *y = &l->a[b];
      if (y->owner != x->owner || y->btype != x->btype || y->sp.lo >= x->sp.hi) break;
      if (rg_spend(g, 1)) return -1;
      if (!(x->write || y->write) || (x->t == y->t && x->i == y->i) || y->sp.hi <= x->sp.lo) continue;
      if (check_pair(g, f, x, y)) return -1;
    }
  return 0;
}

int plan_race_check(const struct mscclppPlan* p, size_t max_clocks, int max_lines, char* text, size_t len, int* never) {
  struct rg_graph g;
  struct accs l = {0};
  struct found f = {.max_lines = max_lines, .text = text, .len = len};
  char why[512];
  if (text && len) text[0] = '\0';
  int res = rg_build(&g, p, max_clocks, why, sizeof(why));
  int* own = malloc((size_t)p->nranks * sizeof(int));
  if (res == 0 && own) res = collect_ops(&g, &l, own);
  if (res == 0 && own) res = collect_callers(&g, &l);
  if (res == 0 && own) res = check_all(&g, &l, &f);
  if (!own) res = -1;
  if (g.over && res != 1) /* the budget ran out while the accesses were collected or compared */
    res = 1, snprintf(why, sizeof(why), "the plan is too large for this check (past %zu steps)", rg_step_budget(max_clocks));
  if (never) *never = res == 2;
  if (res == 2) emit(&f, why), f.n = 1; /* a wait that can never be satisfied */
  if (res == 0 && f.n >= FOUND_MAX) f.max_lines = f.lines + 1, emit(&f, "(the check stopped there: too many findings)");
  if (res == 1 || res == -1) {
    if (text && len) snprintf(text, len, "%s", res == 1 ? why : "out of memory");
    res = -1;
  } else {
    res = (int)f.n;
  }
  free(own), free(l.a), free(f.keys);
  rg_free(&g);
  return res;
}

/* Clock entries the check may use while a plan loads (4 bytes each, 16 MiB). */
#define PLAN_ORDER_CLOCKS_LOAD (4u << 20)

/* The load-time check: its count, and its first line without the newline in text; *never as
 * plan_race_check's. */
static int check_first(const struct mscclppPlan* p, char* text, size_t len, int* never) {
  int n = plan_race_check(p, PLAN_ORDER_CLOCKS_LOAD, 1, text, len, never);
  text[strcspn(text, "\n")] = '\0';
  return n;
}

/* Turns double scratch on when the check then finds fewer than n problems (text gets the new
 * first finding); returns the count that stands. */
static int try_double_scratch(struct mscclppPlan* p, int n, char* text, size_t len) {
  char two[1024];
  p->double_scratch = 1;
  int m = check_first(p, two, sizeof(two), NULL);
  if (m < 0 || m >= n) {
    p->double_scratch = 0;
    return n;
  }
  p->double_by_check = 1;
  LOG_WARN_(LOG_SUB_EXEC, "%s: use_double_scratch_buffer turned on (MSCCLPP_PLAN_ORDER_CHECK=fix): with one scratch the "
            "order check finds %d problem%s, with two %d; the first was: %s", p->file, n, n > 1 ? "s" : "", m, text);
  snprintf(text, len, "%s", two);
  return m;
}

static int order_mode(const char* s) {
  static const char* const modes[] = {"off", "warn", "fix", "strict"};
  for (int k = 0; k < 4; k++)
    if (!strcmp(s, modes[k])) return k;
  return -1;
}

mscclppResult_t plan_order_at_load(struct mscclppPlan* p) {
  const char* ms = param_str(PARAM_PLAN_ORDER_CHECK);
  int mode = order_mode(ms);
  if (mode < 0)
    return MPP_ERR(mscclppInvalidArgument, "MSCCLPP_PLAN_ORDER_CHECK=%s: not one of off, warn, fix, strict", ms);
  if (mode == 0) return mscclppSuccess;
  char text[1024];
  int never = 0;
  int n = check_first(p, text, sizeof(text), &never);
  if (never) /* not a race that timing may hide: every call would hang until its timeout */
    return MPP_ERR(mscclppInvalidArgument, "%s: %s, so every call would hang: the plan is refused", p->file, text);
  if (n > 0 && mode == 2 && !p->double_scratch) n = try_double_scratch(p, n, text, sizeof(text));
  if (n > 0 && mode == 3)
    return MPP_ERR(mscclppInvalidArgument, "%s: the order check found %d problem%s for calls run back to back on GPU "
                   "ranks (MSCCLPP_PLAN_ORDER_CHECK=strict refuses it); the first: %s", p->file, n, n > 1 ? "s" : "", text);
  if (n > 0)
    LOG_WARN_(LOG_SUB_EXEC, "%s: the order check found %d problem%s for calls run back to back on GPU ranks; the first: "
              "%s (mscclpp-plan validate lists them; see docs/plans.md)", p->file, n, n > 1 ? "s" : "", text);
  else if (n < 0 && p->ll && !p->double_scratch) /* unchecked: say what usually goes wrong */
    LOG_WARN_(LOG_SUB_EXEC, "%s: an LL plan without use_double_scratch_buffer (the order check did not run: %s): "
              "called back to back, a rank one call ahead can overwrite packets its peer has not read yet",
              p->file, text);
  else if (n < 0)
    LOG_DEBUG_(LOG_SUB_EXEC, "%s: the order check did not run: %s", p->file, text);
  return mscclppSuccess;
}
