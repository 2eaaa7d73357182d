/* load.c - JSON plan -> lowered form (plan.h): the top level and each gpus[r] (channels, remote
 * buffers, semaphores, threadblocks); ops.c lowers the ops. Cross-rank checks are in check.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/load/lower.h"

const char* const plan_chan_names[4] = {"none", "memory", "port", "switch"};
const char* const plan_buf_names[3] = {"i", "o", "s"};


/* A switch channel: its buffer type and the rank group that holds this rank. */
static mscclppResult_t load_switch(struct pj_where* w, const json_t* c, size_t i, struct lw_gpu* g, struct plan_rank* pr) {
  struct plan_switch* sw = &pr->sw[pr->nswitch];
  const char* bt;
  const json_t *groups, *grp = NULL, *ranks;
  size_t ng, nr;
  int b;
  MPP_CHECK(pj_str(w, c, "buffer_type", NULL, &bt));
  MPP_CHECK(pj_enum(w, "buffer_type", bt, plan_buf_names, 3, &b));
  MPP_CHECK(pj_arr(w, c, "rank_groups", 0, &groups, &ng));
  for (size_t k = 0; k < ng && !grp; k++) { /* the group with this rank */
    const json_t* gg = json_array_get(groups, k);
    MPP_CHECK(pj_arr(w, gg, "ranks", 0, &ranks, &nr));
    for (size_t j = 0; j < nr; j++)
      if (json_integer_value(json_array_get(ranks, j)) == g->rank) grp = gg;
  }
  if (!grp) return pj_fail(w, "rank_groups", "channels[%zu]: no group contains rank %d", i, g->rank);
  MPP_CHECK(pj_arr(w, grp, "ranks", 0, &ranks, &nr));
  sw->btype = (uint8_t)b, sw->nranks = (int)nr, sw->ranks = calloc(nr + 1, sizeof(int));
  if (!sw->ranks) return MPP_ERR(mscclppSystemError, "plan: out of memory");
  int index = pr->nswitch++; /* counted now so that plan_free frees ranks on failure below */
  for (size_t j = 0; j < nr; j++) {
    const json_t* v = json_array_get(ranks, j);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= g->nranks)
      return pj_fail(w, "rank_groups", "channels[%zu]: rank entry %zu is not a rank below %d", i, j, g->nranks);
    sw->ranks[j] = (int)json_integer_value(v);
  }
  g->chans[g->nchans++] = (struct lw_chan){.type = PLAN_CH_SWITCH, .peer = -1, .sw = index};
  g->count[PLAN_CH_SWITCH]++;
  return mscclppSuccess;
}

/* gpus[r].channels -> g->chans (peers and pair ordinals), switch channels into pr->sw. */
mscclppResult_t load_channels(struct pj_where* w, const json_t* gj, struct lw_gpu* g, struct plan_rank* pr) {
  const json_t* a;
  size_t n;
  MPP_CHECK(pj_arr(w, gj, "channels", 1, &a, &n));
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    const json_t *c, *peers;
    size_t np;
    MPP_CHECK(pj_elem_obj(w, a, i, "channels", &c));
    MPP_CHECK(pj_arr(w, c, "connected_to", 1, &peers, &np));
    total += np ? np : 1;
  }
  g->chans = calloc(total + 1, sizeof(*g->chans));
  pr->sw = calloc(n + 1, sizeof(*pr->sw));
  if (!g->chans || !pr->sw) return MPP_ERR(mscclppSystemError, "plan: out of memory");
  int* ordcount = calloc((size_t)g->nranks * 4, sizeof(int));
  if (!ordcount) return MPP_ERR(mscclppSystemError, "plan: out of memory");
  mscclppResult_t res = mscclppSuccess;
  for (size_t i = 0; i < n && res == mscclppSuccess; i++) {
    const json_t* c = json_array_get(a, i);
    const char* t;
    int type;
    MPP_CHECK_GOTO(pj_str(w, c, "channel_type", NULL, &t), res, out);
    MPP_CHECK_GOTO(pj_enum(w, "channel_type", t, plan_chan_names, 4, &type), res, out);
    if (type == PLAN_CH_NONE) { res = pj_fail(w, "channel_type", "channels[%zu] of type none", i); break; }
    if (type == PLAN_CH_SWITCH) {
      MPP_CHECK_GOTO(load_switch(w, c, i, g, pr), res, out);
      continue;
    }
    const json_t* peers;
    size_t np;
    MPP_CHECK_GOTO(pj_arr(w, c, "connected_to", 0, &peers, &np), res, out);
    for (size_t j = 0; j < np; j++) {
      const json_t* v = json_array_get(peers, j);
      if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= g->nranks ||
          json_integer_value(v) == g->rank) {
        res = pj_fail(w, "connected_to", "channels[%zu] entry %zu is not another rank below %d", i, j, g->nranks);
        goto out;
      }
      int peer = (int)json_integer_value(v);
      g->chans[g->nchans++] = (struct lw_chan){.type = type, .peer = peer, .ord = ordcount[peer * 4 + type]++};
      g->count[type]++;
      if (ordcount[peer * 4 + type] > pr->max_ord) pr->max_ord = ordcount[peer * 4 + type];
    }
  }
out:
  pr->pair_count = ordcount; /* channels per (peer, type): check.c pairs them across ranks */
  return res;
}

mscclppResult_t load_rbufs(struct pj_where* w, const json_t* gj, struct lw_gpu* g) {
  const json_t* a;
  size_t n;
  MPP_CHECK(pj_arr(w, gj, "remote_buffers", 1, &a, &n));
  g->rbufs = calloc(n + 1, sizeof(*g->rbufs));
  if (!g->rbufs) return MPP_ERR(mscclppSystemError, "plan: out of memory");
  for (size_t i = 0; i < n; i++) {
    const json_t *e, *acc;
    const char* t;
    int64_t r;
    int bt;
    size_t na;
    MPP_CHECK(pj_elem_obj(w, a, i, "remote_buffers", &e));
    MPP_CHECK(pj_int(w, e, "rank", 0, 0, 0, g->nranks - 1, &r));
    if (r == g->rank) return pj_fail(w, "remote_buffers", "entry %zu names this gpu's own rank %d", i, g->rank);
    MPP_CHECK(pj_str(w, e, "type", NULL, &t));
    MPP_CHECK(pj_enum(w, "type", t, plan_buf_names, 3, &bt));
    MPP_CHECK(pj_arr(w, e, "access_channel_types", 1, &acc, &na));
    g->rbufs[i].rank = (int)r, g->rbufs[i].btype = bt;
    for (size_t k = 0; k < na; k++) {
      const char* s = json_string_value(json_array_get(acc, k));
      int ct;
      if (!s) return pj_fail(w, "access_channel_types", "entry %zu is not a string", k);
      MPP_CHECK(pj_enum(w, "access_channel_types", s, plan_chan_names, 4, &ct));
      g->rbufs[i].access |= 1u << ct;
    }
    g->nrbufs++;
  }
  return mscclppSuccess;
}

mscclppResult_t load_sems(struct pj_where* w, const json_t* gj, struct plan_rank* pr) {
  const json_t* a;
  size_t n;
  MPP_CHECK(pj_arr(w, gj, "semaphores", 1, &a, &n));
  pr->sem_init = calloc(n + 1, sizeof(int64_t));
  if (!pr->sem_init) return MPP_ERR(mscclppSystemError, "plan: out of memory");
  for (size_t i = 0; i < n; i++) {
    const json_t* e;
    MPP_CHECK(pj_elem_obj(w, a, i, "semaphores", &e));
    MPP_CHECK(pj_int(w, e, "init_value", 1, 0, 0, INT32_MAX, &pr->sem_init[i]));
  }
  pr->nsems = (int)n;
  return mscclppSuccess;
}

