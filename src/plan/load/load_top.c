/* load_top.c - plan_parse: the top level, gpus[] and threadblocks[] of a JSON plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/handle_reg.h"
#include "plan/load/lower.h"
#include "plan/order/order.h"
#include "util/log.h"

/* Block-local tables: tb.channels and tb.remote_buffer_refs. */
static mscclppResult_t load_tb_tables(struct pj_where* w, const json_t* tb, const struct lw_gpu* g,
                                      int* const* bytype, struct lw_block* b) {
  const json_t* a;
  size_t n;
  MPP_CHECK(pj_arr(w, tb, "channels", 1, &a, &n));
  for (size_t i = 0; i < n; i++) {
    const json_t *e, *ids;
    const char* t;
    int type;
    size_t ni;
    MPP_CHECK(pj_elem_obj(w, a, i, "channels", &e));
    MPP_CHECK(pj_str(w, e, "channel_type", NULL, &t));
    MPP_CHECK(pj_enum(w, "channel_type", t, plan_chan_names, 4, &type));
    MPP_CHECK(pj_arr(w, e, "channel_ids", 0, &ids, &ni));
    if (b->ch[type]) return pj_fail(w, "channels", "two entries for channel_type %s", t);
    b->ch[type] = calloc(ni + 1, sizeof(int));
    if (!b->ch[type]) return MPP_ERR(mscclppSystemError, "plan: out of memory");
    for (size_t k = 0; k < ni; k++) {
      const json_t* v = json_array_get(ids, k);
      if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= g->count[type])
        return pj_fail(w, "channel_ids", "channels entry %zu (%s): id %zu is not below the gpu's %d %s channels", i, t,
                       k, g->count[type], t);
      b->ch[type][b->nch[type]++] = bytype[type][json_integer_value(v)];
    }
  }
  MPP_CHECK(pj_arr(w, tb, "remote_buffer_refs", 1, &a, &n));
  for (size_t i = 0; i < n; i++) {
    const json_t *e, *ids;
    const char* t;
    int type;
    size_t ni;
    MPP_CHECK(pj_elem_obj(w, a, i, "remote_buffer_refs", &e));
    MPP_CHECK(pj_str(w, e, "access_channel_type", NULL, &t));
    MPP_CHECK(pj_enum(w, "access_channel_type", t, plan_chan_names, 4, &type));
    MPP_CHECK(pj_arr(w, e, "remote_buffer_ids", 0, &ids, &ni));
    if (b->rb[type]) return pj_fail(w, "remote_buffer_refs", "two entries for access_channel_type %s", t);
    b->rb[type] = calloc(ni + 1, sizeof(int));
    if (!b->rb[type]) return MPP_ERR(mscclppSystemError, "plan: out of memory");
    for (size_t k = 0; k < ni; k++) {
      const json_t* v = json_array_get(ids, k);
      if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= g->nrbufs)
        return pj_fail(w, "remote_buffer_ids", "entry %zu is not below the gpu's %d remote_buffers", k, g->nrbufs);
      int id = (int)json_integer_value(v);
      if (!(g->rbufs[id].access & (1u << type)))
        return pj_fail(w, "remote_buffer_ids", "remote buffer %d is not accessed through %s channels", id, t);
      b->rb[type][b->nrb[type]++] = id;
    }
  }
  return mscclppSuccess;
}

static void free_lw_block(struct lw_block* b) {
  for (int t = 0; t < 4; t++) free(b->ch[t]), free(b->rb[t]);
  free(b->ops), free(b->refs), free(b->chans);
}

static mscclppResult_t load_tb(struct pj_where* w, const struct mscclppPlan* p, struct plan_rank* pr,
                               const struct lw_gpu* g, int* const* bytype, const json_t* tb, struct plan_block* out) {
  struct lw_block b;
  memset(&b, 0, sizeof(b));
  int64_t id;
  const json_t* ops;
  size_t n;
  mscclppResult_t res;
  MPP_CHECK_GOTO(pj_int(w, tb, "id", 0, 0, w->tb, w->tb, &id), res, fail);
  MPP_CHECK_GOTO(load_tb_tables(w, tb, g, bytype, &b), res, fail);
  MPP_CHECK_GOTO(pj_arr(w, tb, "ops", 0, &ops, &n), res, fail);
  MPP_CHECK_GOTO(lw_ops(w, p, pr, g, ops, &b, 0), res, fail);
  w->op = -1;
  out->id = (int)id, out->nops = b.nops, out->nrefs = b.nrefs, out->nchans = b.nchans;
  out->ops = b.ops, out->refs = b.refs, out->chans = b.chans;
  b.ops = NULL, b.refs = NULL, b.chans = NULL;
  free_lw_block(&b);
  return mscclppSuccess;
fail:
  free_lw_block(&b);
  return res;
}

static mscclppResult_t load_gpu(struct pj_where* w, struct mscclppPlan* p, int r, const json_t* gj) {
  struct plan_rank* pr = &p->ranks[r];
  struct lw_gpu g = {.rank = r, .nranks = p->nranks};
  int* bytype[4] = {0};
  int64_t v;
  const json_t* tbs;
  size_t ntb;
  mscclppResult_t res;
  MPP_CHECK(pj_int(w, gj, "id", 0, 0, r, r, &v));
  MPP_CHECK(pj_int(w, gj, "input_chunks", 0, 0, 0, UINT32_MAX, &v));
  pr->in_chunks = (uint32_t)v;
  MPP_CHECK(pj_int(w, gj, "output_chunks", 0, 0, 0, UINT32_MAX, &v));
  pr->out_chunks = (uint32_t)v;
  MPP_CHECK(pj_int(w, gj, "scratch_chunks", 1, 0, 0, UINT32_MAX, &v));
  pr->scr_chunks = (uint32_t)v;
  MPP_CHECK_GOTO(load_channels(w, gj, &g, pr), res, out);
  MPP_CHECK_GOTO(load_rbufs(w, gj, &g), res, out);
  MPP_CHECK_GOTO(load_sems(w, gj, pr), res, out);
  for (int t = 0; t < 4; t++) {
    bytype[t] = calloc((size_t)g.count[t] + 1, sizeof(int));
    if (!bytype[t]) { res = MPP_ERR(mscclppSystemError, "plan: out of memory"); goto out; }
    for (int i = 0, k = 0; i < g.nchans; i++)
      if (g.chans[i].type == t) bytype[t][k++] = i;
  }
  MPP_CHECK_GOTO(pj_arr(w, gj, "threadblocks", 0, &tbs, &ntb), res, out);
  if (ntb > PLAN_MAX_BLOCKS) { res = pj_fail(w, "threadblocks", "%zu blocks; at most %d", ntb, PLAN_MAX_BLOCKS); goto out; }
  pr->blocks = calloc(ntb + 1, sizeof(*pr->blocks));
  if (!pr->blocks) { res = MPP_ERR(mscclppSystemError, "plan: out of memory"); goto out; }
  pr->nblocks = (int)ntb;
  for (size_t i = 0; i < ntb; i++) {
    const json_t* tb;
    w->tb = (int)i;
    MPP_CHECK_GOTO(pj_elem_obj(w, tbs, i, "threadblocks", &tb), res, out);
    MPP_CHECK_GOTO(load_tb(w, p, pr, &g, bytype, tb, &pr->blocks[i]), res, out);
  }
  w->tb = -1;
  res = mscclppSuccess;
out:
  for (int t = 0; t < 4; t++) free(bytype[t]);
  free(g.chans), free(g.rbufs);
  return res;
}

/* "dir/plan.json" -> "plan" (malloc'd; NULL when out of memory). */
static char* name_from_file(const char* file) {
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  size_t n = strlen(base);
  if (n > 5 && !strcmp(base + n - 5, ".json")) n -= 5;
  return strndup(base, n);
}

static mscclppResult_t load_top(struct pj_where* w, const json_t* root, struct mscclppPlan* p) {
  static const char* const protos[] = {"Simple", "LL"};
  static const char* const colls[] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                      "sendrecv",  "broadcast", "test",          "custom"};
  const char* s;
  int k;
  int64_t v;
  if (!json_is_object(root)) return pj_fail(w, "(top level)", "not an object");
  /* The DSL writes "name": null for a program given no name: such a plan is named after its
   * file (the base name without .json), as one with no name field is. */
  const json_t* nm = json_object_get(root, "name");
  if (nm && json_is_null(nm)) s = "";
  else MPP_CHECK(pj_str(w, root, "name", "", &s));
  p->name = *s ? strdup(s) : name_from_file(p->file);
  MPP_CHECK(pj_str(w, root, "collective", NULL, &s));
  MPP_CHECK(pj_enum(w, "collective", s, colls, 8, &k));
  p->collective = strdup(s);
  MPP_CHECK(pj_str(w, root, "protocol", "Simple", &s));
  MPP_CHECK(pj_enum(w, "protocol", s, protos, 2, &p->ll));
  MPP_CHECK(pj_bool(w, root, "inplace", 0, &p->inplace));
  MPP_CHECK(pj_bool(w, root, "reuse_resources", 0, &p->reuse));
  MPP_CHECK(pj_bool(w, root, "use_double_scratch_buffer", 0, &p->double_scratch));
  MPP_CHECK(pj_int(w, root, "num_threads_per_block", 1, 1024, 1, 1024, &v));
  p->threads_per_block = (uint32_t)v;
  MPP_CHECK(pj_int(w, root, "buffer_alignment", 1, 16, 1, 1 << 20, &v));
  p->align = (uint32_t)v;
  if (p->align & (p->align - 1)) return pj_fail(w, "buffer_alignment", "%u is not a power of two", p->align);
  if (p->ll && p->align < 8) return pj_fail(w, "buffer_alignment", "LL plans need 8 or more (a packet carries 8 bytes)");
  MPP_CHECK(pj_u64(w, root, "min_message_size", 0, &p->min_size));
  MPP_CHECK(pj_u64(w, root, "max_message_size", UINT64_MAX, &p->max_size));
  if (p->min_size > p->max_size) return pj_fail(w, "min_message_size", "above max_message_size");
  if (!p->name || !p->collective) return MPP_ERR(mscclppSystemError, "plan: out of memory");
  return mscclppSuccess;
}

/* Integer literals (outside strings) of 2^63 and more, which jansson refuses: plans write
 * max_message_size as 2^64-1. Returns a copy of the text with each such literal replaced by -1
 * and spaces (same length: line and column numbers stay right; pj_u64 reads -1 as 2^64-1, other
 * fields reject it), or NULL when there is none (or no memory: jansson then reports it). */
static char* big_ints(const char* s, size_t len) {
  char* copy = NULL;
  int in_str = 0;
  for (size_t i = 0; i < len; i++) {
    char ch = s[i];
    if (in_str) {
      if (ch == '\\') i++;
      else if (ch == '"') in_str = 0;
      continue;
    }
    if (ch == '"') { in_str = 1; continue; }
    if (ch < '0' || ch > '9' || (i && strchr("0123456789.eE+-", s[i - 1]))) continue;
    size_t j = i;
    while (j < len && s[j] >= '0' && s[j] <= '9') j++;
    int frac = j < len && strchr(".eE", s[j]);
    int big = j - i > 19 || (j - i == 19 && memcmp(s + i, "9223372036854775807", 19) > 0);
    if (big && !frac) {
      if (!copy && (copy = malloc(len)) != NULL) memcpy(copy, s, len);
      if (!copy) return NULL;
      memcpy(copy + i, "-1", 2);
      memset(copy + i + 2, ' ', j - i - 2);
    }
    i = j - 1;
  }
  return copy;
}

mscclppResult_t plan_parse(const char* json, size_t len, const char* name, struct mscclppPlan** out) {
  struct pj_where w = {.plan = name, .gpu = -1, .tb = -1, .op = -1, .nested = -1};
  json_error_t jerr;
  mscclppResult_t res;
  MPP_CHECK(plan_prescan(json, len, name)); /* counts refused before jansson allocates by them */
  char* fixed = big_ints(json, len);
  json_t* root = json_loadb(fixed ? fixed : json, len, JSON_REJECT_DUPLICATES, &jerr);
  free(fixed);
  if (!root)
    return MPP_ERR(mscclppInvalidArgument, "%s: line %d column %d: %s", name, jerr.line, jerr.column, jerr.text);
  struct mscclppPlan* p = calloc(1, sizeof(*p));
  if (!p) { json_decref(root); return MPP_ERR(mscclppSystemError, "plan: out of memory"); }
  static uint64_t _Atomic next_id = 1;
  p->id = next_id++;
  p->file = strdup(name);
  pthread_mutex_init(&p->cache_lock, NULL);
  MPP_CHECK_GOTO(load_top(&w, root, p), res, fail);
  const json_t* gpus;
  size_t n;
  MPP_CHECK_GOTO(pj_arr(&w, root, "gpus", 0, &gpus, &n), res, fail);
  if (n < 1 || n > 1024) { res = pj_fail(&w, "gpus", "%zu entries; 1 to 1024 ranks", n); goto fail; }
  p->nranks = (int)n;
  p->ranks = calloc(n, sizeof(*p->ranks));
  if (!p->ranks) { res = MPP_ERR(mscclppSystemError, "plan: out of memory"); goto fail; }
  for (size_t r = 0; r < n; r++) {
    const json_t* gj;
    w.gpu = (int)r;
    MPP_CHECK_GOTO(pj_elem_obj(&w, gpus, r, "gpus", &gj), res, fail);
    MPP_CHECK_GOTO(load_gpu(&w, p, (int)r, gj), res, fail);
  }
  json_decref(root);
  MPP_CHECK_GOTO(plan_check(p), res, fail_plan);
  MPP_CHECK_GOTO(plan_order_at_load(p), res, fail_plan);
  MPP_CHECK_GOTO(handle_add(HANDLE_PLAN, p, NULL), res, fail_plan); /* every plan is a handle (handle_reg.h) */
  *out = p;
  return mscclppSuccess;
fail:
  json_decref(root);
fail_plan:
  plan_free(p);
  return res;
}

void plan_free(struct mscclppPlan* p) {
  if (!p) return;
  handle_remove(HANDLE_PLAN, p);
  for (int r = 0; p->ranks && r < p->nranks; r++) {
    struct plan_rank* pr = &p->ranks[r];
    for (int b = 0; pr->blocks && b < pr->nblocks; b++)
      free(pr->blocks[b].ops), free(pr->blocks[b].refs), free(pr->blocks[b].chans);
    for (int s = 0; pr->sw && s < pr->nswitch; s++) free(pr->sw[s].ranks);
    free(pr->blocks), free(pr->sem_init), free(pr->barrier_blocks), free(pr->sw), free(pr->pair_count);
  }
  free(p->ranks), free(p->name), free(p->file), free(p->collective);
  pthread_mutex_destroy(&p->cache_lock);
  free(p);
}
