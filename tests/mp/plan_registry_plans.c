/* plan_registry_plans.c - see plan_registry_plans.h. Block-local channel and remote-buffer tables
 * list all of the rank's, so block-local ids equal the rank's ids. */
#include "plan_registry_plans.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define PREG_MAXR 64

struct gb {
  int rank, nch, nrb;
  int peer_ch[PREG_MAXR];
  int rb_rank[2 * PREG_MAXR];
  char rb_type[2 * PREG_MAXR];
  json_t *gpu, *ops, *chans, *rbufs;
};

static json_t* loc(const char* type, int index) { return json_pack("{s:s, s:i, s:i}", "type", type, "index", index, "size", 1); }

static void gb_init(struct gb* g, int rank, int ic, int oc, int sc) {
  memset(g, 0, sizeof(*g));
  g->rank = rank;
  for (int p = 0; p < PREG_MAXR; p++) g->peer_ch[p] = -1;
  g->ops = json_array(), g->chans = json_array(), g->rbufs = json_array();
  g->gpu = json_pack("{s:i, s:i, s:i, s:i, s:[]}", "id", rank, "input_chunks", ic, "output_chunks", oc, "scratch_chunks",
                     sc, "semaphores");
  CHECK(g->gpu && g->ops && g->chans && g->rbufs);
}

/* The rank's memory channel to peer p (made on first use). */
static int gb_ch(struct gb* g, int p) {
  if (g->peer_ch[p] < 0) {
    g->peer_ch[p] = g->nch++;
    json_array_append_new(g->chans, json_pack("{s:s, s:[i]}", "channel_type", "memory", "connected_to", p));
  }
  return g->peer_ch[p];
}

/* A reference to chunk index of rank's buffer type (a remote buffer of this rank, made on first use). */
static json_t* gb_rb(struct gb* g, int rank, char type, int index) {
  int id = -1;
  for (int i = 0; i < g->nrb && id < 0; i++)
    if (g->rb_rank[i] == rank && g->rb_type[i] == type) id = i;
  if (id < 0) {
    id = g->nrb++;
    g->rb_rank[id] = rank, g->rb_type[id] = type;
    char t[2] = {type, 0};
    json_array_append_new(g->rbufs, json_pack("{s:i, s:s, s:[s]}", "rank", rank, "type", t, "access_channel_types", "memory"));
  }
  return json_pack("{s:i, s:i, s:i}", "buffer_id", id, "index", index, "size", 1);
}

static void gb_op(struct gb* g, json_t* op) {
  CHECK(op != NULL);
  json_array_append_new(g->ops, op);
}

/* Every channel of the rank (wait/signal on all peers). */
static json_t* all_chans(const struct gb* g) {
  json_t* a = json_array();
  for (int i = 0; i < g->nch; i++) json_array_append_new(a, json_integer(i));
  return a;
}

static json_t* gb_finish(struct gb* g) {
  json_t* tb = json_pack("{s:i, s:o, s:[], s:[]}", "id", 0, "ops", g->ops, "channels", "remote_buffer_refs");
  if (g->nch) json_array_append_new(json_object_get(tb, "channels"), json_pack("{s:s, s:o}", "channel_type", "memory", "channel_ids", all_chans(g)));
  if (g->nrb) {
    json_t* ids = json_array();
    for (int i = 0; i < g->nrb; i++) json_array_append_new(ids, json_integer(i));
    json_array_append_new(json_object_get(tb, "remote_buffer_refs"),
                          json_pack("{s:s, s:o}", "access_channel_type", "memory", "remote_buffer_ids", ids));
  }
  json_object_set_new(g->gpu, "threadblocks", json_pack("[o]", tb));
  json_object_set_new(g->gpu, "channels", g->chans);
  json_object_set_new(g->gpu, "remote_buffers", g->rbufs);
  return g->gpu;
}

static json_t* put_op(const char* name, int ch, json_t* src, json_t* dst) {
  return json_pack("{s:s, s:s, s:[i], s:[o], s:[o]}", "name", name, "channel_type", "memory", "channel_ids", ch,
                   "src_buff", src, "dst_buff", dst);
}

static json_t* sync_op(const char* name, json_t* chans) {
  return json_pack("{s:s, s:s, s:o}", "name", name, "channel_type", "memory", "channel_ids", chans);
}

/* re: dst = redop over i[own] and s[p] of every peer. */
static json_t* reduce_op(const struct preg_spec* s, int r, int own, const char* dtype, int dindex) {
  json_t* src = json_array();
  json_array_append_new(src, loc("i", own));
  for (int p = 0; p < s->nranks; p++)
    if (p != r) json_array_append_new(src, loc("s", p));
  return json_pack("{s:s, s:s, s:o, s:[o]}", "name", "re", "reduce_op", s->redop ? s->redop : "sum", "src_buff", src,
                   "dst_buff", loc(dtype, dindex));
}

static json_t* rank_allreduce(const struct preg_spec* s, int r) {
  struct gb g;
  int n = s->nranks;
  gb_init(&g, r, n, n, n);
  for (int p = 0; p < n; p++)
    if (p != r) gb_op(&g, put_op("put", gb_ch(&g, p), loc("i", p), gb_rb(&g, p, 's', r)));
  gb_op(&g, sync_op("signal", all_chans(&g)));
  gb_op(&g, sync_op("wait", all_chans(&g)));
  gb_op(&g, reduce_op(s, r, r, "o", r));
  for (int p = 0; p < n; p++)
    if (p != r) gb_op(&g, put_op("pws", gb_ch(&g, p), loc("o", r), gb_rb(&g, p, 'o', r)));
  gb_op(&g, sync_op("wait", all_chans(&g)));
  return gb_finish(&g);
}

static json_t* rank_fake(const struct preg_spec* s, int r) {
  (void)s;
  struct gb g;
  gb_init(&g, r, 1, 1, 0);
  gb_op(&g, json_pack("{s:s, s:[o], s:[o]}", "name", "copy", "src_buff", loc("i", 0), "dst_buff", loc("o", 0)));
  return gb_finish(&g);
}

/* allgather (data in i[0]) and alltoall (data in i[p]): own part copied, the others' put to them. */
static json_t* rank_gather(const struct preg_spec* s, int r, int alltoall) {
  struct gb g;
  int n = s->nranks;
  gb_init(&g, r, alltoall ? n : 1, n, 0);
  gb_op(&g, json_pack("{s:s, s:[o], s:[o]}", "name", "copy", "src_buff", loc("i", alltoall ? r : 0), "dst_buff", loc("o", r)));
  for (int p = 0; p < n; p++)
    if (p != r) gb_op(&g, put_op("pws", gb_ch(&g, p), loc("i", alltoall ? p : 0), gb_rb(&g, p, 'o', r)));
  gb_op(&g, sync_op("wait", all_chans(&g)));
  return gb_finish(&g);
}

static json_t* rank_reducescatter(const struct preg_spec* s, int r) {
  struct gb g;
  int n = s->nranks;
  gb_init(&g, r, n, 1, n);
  for (int p = 0; p < n; p++)
    if (p != r) gb_op(&g, put_op("pws", gb_ch(&g, p), loc("i", p), gb_rb(&g, p, 's', r)));
  gb_op(&g, sync_op("wait", all_chans(&g)));
  gb_op(&g, reduce_op(s, r, r, "o", 0));
  return gb_finish(&g);
}

static json_t* rank_broadcast(const struct preg_spec* s, int r) {
  struct gb g;
  gb_init(&g, r, 1, 1, 0);
  if (r == s->root) {
    gb_op(&g, json_pack("{s:s, s:[o], s:[o]}", "name", "copy", "src_buff", loc("i", 0), "dst_buff", loc("o", 0)));
    for (int p = 0; p < s->nranks; p++)
      if (p != r) gb_op(&g, put_op("pws", gb_ch(&g, p), loc("i", 0), gb_rb(&g, p, 'o', 0)));
  } else {
    gb_ch(&g, s->root);
    gb_op(&g, sync_op("wait", all_chans(&g)));
  }
  return gb_finish(&g);
}

static json_t* rank_plan(const struct preg_spec* s, int r) {
  switch (s->kind) {
    case PREG_ALLREDUCE: return rank_allreduce(s, r);
    case PREG_FAKE_COPY: return rank_fake(s, r);
    case PREG_ALLGATHER: return rank_gather(s, r, 0);
    case PREG_ALLTOALL: return rank_gather(s, r, 1);
    case PREG_REDUCESCATTER: return rank_reducescatter(s, r);
    case PREG_BROADCAST: return rank_broadcast(s, r);
  }
  return NULL;
}

static const char* coll_of(enum preg_kind k) {
  static const char* const names[] = {"allreduce", "allreduce", "allgather", "reducescatter", "alltoall", "broadcast"};
  return names[k];
}

char* preg_plan(const struct preg_spec* s) {
  CHECK(s->nranks > 0 && s->nranks <= PREG_MAXR);
  json_t* gpus = json_array();
  for (int r = 0; r < s->nranks; r++) json_array_append_new(gpus, rank_plan(s, r));
  json_t* p = json_pack("{s:s, s:s, s:s, s:b, s:I, s:o}", "name", s->name, "collective", coll_of(s->kind), "protocol",
                        "Simple", "inplace", s->inplace, "min_message_size", (json_int_t)s->min, "gpus", gpus);
  CHECK(p != NULL);
  if (s->max) json_object_set_new(p, "max_message_size", json_integer((json_int_t)s->max));
  if (s->rpn_field > 0) json_object_set_new(p, "ranks_per_node", json_integer(s->rpn_field));
  if (s->root_field >= 0) json_object_set_new(p, "root", json_integer(s->root_field));
  char* text = json_dumps(p, JSON_COMPACT);
  json_decref(p);
  CHECK(text != NULL);
  return text;
}

void preg_write(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  CHECK_MSG(f != NULL, "cannot write %s", path);
  CHECK(fputs(text, f) >= 0);
  CHECK(fclose(f) == 0);
}
