/* xml_sim.c - see xml_sim.h. */
#include "xml_sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXG 16
#define MAXT 64
#define MAXC 64

struct simg {
  json_t* g;
  double* buf[3]; /* i, o, s */
  int n[3];
  double* pkt;    /* packets by scratch index */
  int* pvalid;
  int sig[MAXC];  /* arrived signals per channel */
  int sem[256];
  int pc[MAXT];
  int bar_count, bar_gen;
  int bar_seen[MAXT];
};

static struct simg G[MAXG];
static int NG;

static int bidx(const char* t) { return t[0] == 'i' ? 0 : t[0] == 'o' ? 1 : 2; }

/* Pointer to chunk `index` of a local buffer ref, or of the remote one named by buffer_id. */
static double* ref_ptr(int g, json_t* tb, json_t* ref, int* owner, int* btype) {
  json_t* t = json_object_get(ref, "type");
  int idx = (int)json_integer_value(json_object_get(ref, "index"));
  int size = (int)json_integer_value(json_object_get(ref, "size"));
  if (t) {
    *owner = g, *btype = bidx(json_string_value(t));
  } else {
    int bid = (int)json_integer_value(json_object_get(ref, "buffer_id"));
    json_t* refs = json_array_get(json_object_get(tb, "remote_buffer_refs"), 0);
    int rid = (int)json_integer_value(json_array_get(json_object_get(refs, "remote_buffer_ids"), (size_t)bid));
    json_t* rb = json_array_get(json_object_get(G[g].g, "remote_buffers"), (size_t)rid);
    *owner = (int)json_integer_value(json_object_get(rb, "rank"));
    *btype = bidx(json_string_value(json_object_get(rb, "type")));
  }
  if (idx < 0 || size < 0 || idx + size > G[*owner].n[*btype]) return NULL;
  return G[*owner].buf[*btype] + idx;
}

/* GPU channel index of block-local channel k. */
static int gchan(json_t* tb, json_t* op) {
  int k = (int)json_integer_value(json_array_get(json_object_get(op, "channel_ids"), 0));
  json_t* c = json_array_get(json_object_get(tb, "channels"), 0);
  return (int)json_integer_value(json_array_get(json_object_get(c, "channel_ids"), (size_t)k));
}

/* The channel on the peer that pairs with channel ch of gpu g (k-th occurrence matching). */
static int peer_chan(int g, int ch, int* peer) {
  json_t* to = json_object_get(json_array_get(json_object_get(G[g].g, "channels"), 0), "connected_to");
  *peer = (int)json_integer_value(json_array_get(to, (size_t)ch));
  int occ = 0;
  for (int i = 0; i < ch; i++) occ += json_integer_value(json_array_get(to, (size_t)i)) == *peer;
  json_t* pto = json_object_get(json_array_get(json_object_get(G[*peer].g, "channels"), 0), "connected_to");
  for (size_t i = 0; i < json_array_size(pto); i++)
    if (json_integer_value(json_array_get(pto, i)) == g && occ-- == 0) return (int)i;
  return -1;
}

/* Executes op if it can run: 1 ran, 0 blocked, -1 error. */
static int run_op(int g, int t, json_t* tb, json_t* op, char* err, size_t el) {
  const char* name = json_string_value(json_object_get(op, "name"));
  json_t *src = json_object_get(op, "src_buff"), *dst = json_object_get(op, "dst_buff");
  int o1, b1, o2, b2, peer;
  if (!strcmp(name, "wait")) {
    int ch = gchan(tb, op);
    if (G[g].sig[ch] == 0) return 0;
    G[g].sig[ch]--;
    return 1;
  }
  if (!strcmp(name, "signal")) {
    int pc = peer_chan(g, gchan(tb, op), &peer);
    if (pc < 0) return snprintf(err, el, "gpu %d: signal channel has no peer end", g), -1;
    G[peer].sig[pc]++;
    return 1;
  }
  if (!strcmp(name, "sem_acquire") || !strcmp(name, "sem_release")) {
    json_t* ids = json_object_get(op, "semaphore_ids");
    int acq = name[4] == 'a';
    for (size_t i = 0; acq && i < json_array_size(ids); i++)
      if (G[g].sem[json_integer_value(json_array_get(ids, i))] == 0) return 0;
    for (size_t i = 0; i < json_array_size(ids); i++) G[g].sem[json_integer_value(json_array_get(ids, i))] += acq ? -1 : 1;
    return 1;
  }
  if (!strcmp(name, "barrier")) {
    int n = (int)json_integer_value(json_object_get(op, "num_threadblocks"));
    if (!G[g].bar_seen[t]) G[g].bar_seen[t] = 1, G[g].bar_count++;
    if (G[g].bar_count < n) return 0;
    return 1; /* everyone arrived (single-use barrier in these plans) */
  }
  json_t *s0 = json_array_get(src, 0), *d0 = json_array_get(dst, 0);
  int n = (int)json_integer_value(json_object_get(d0, "size"));
  double *sp = ref_ptr(g, tb, s0, &o1, &b1), *dp = ref_ptr(g, tb, d0, &o2, &b2);
  if (!sp || !dp) return snprintf(err, el, "gpu %d tb %d: %s buffer out of range", g, t, name), -1;
  if (!strcmp(name, "put") || !strcmp(name, "copy")) {
    memmove(dp, sp, (size_t)n * sizeof(double));
  } else if (!strcmp(name, "re")) {
    int o3, b3;
    double* sp2 = ref_ptr(g, tb, json_array_get(src, 1), &o3, &b3);
    if (!sp2) return snprintf(err, el, "gpu %d: re second source out of range", g), -1;
    for (int i = 0; i < n; i++) dp[i] = sp[i] + sp2[i];
  } else if (!strcmp(name, "res")) {
    int o3, b3;
    double* sp2 = ref_ptr(g, tb, json_array_get(src, 1), &o3, &b3);
    if (!sp2) return snprintf(err, el, "gpu %d: res second source out of range", g), -1;
    for (int i = 0; i < n; i++) dp[i] = sp[i] + sp2[i];
    for (size_t d = 1; d < json_array_size(dst); d++) {
      double* rp = ref_ptr(g, tb, json_array_get(dst, d), &o3, &b3);
      if (!rp) return snprintf(err, el, "gpu %d: res destination %zu out of range", g, d), -1;
      memcpy(rp, dp, (size_t)n * sizeof(double));
    }
  } else if (!strcmp(name, "repkt") || !strcmp(name, "respkt")) {
    int o3, b3;
    double* pp = ref_ptr(g, tb, json_array_get(src, 1), &o3, &b3);
    if (!pp || b3 != 2) return snprintf(err, el, "gpu %d: %s packet source out of range", g, name), -1;
    int base = (int)(pp - G[g].buf[2]);
    for (int i = 0; i < n; i++)
      if (!G[g].pvalid[base + i]) return 0;
    for (int i = 0; i < n; i++) dp[i] = sp[i] + G[g].pkt[base + i];
    for (size_t d = 1; d < json_array_size(dst); d++) {
      double* rp = ref_ptr(g, tb, json_array_get(dst, d), &o3, &b3);
      if (!rp || b3 != 2) return snprintf(err, el, "gpu %d: respkt destination %zu out of range", g, d), -1;
      int rb = (int)(rp - G[o3].buf[2]);
      for (int i = 0; i < n; i++) G[o3].pkt[rb + i] = dp[i], G[o3].pvalid[rb + i] = 1;
    }
  } else if (!strcmp(name, "ppkt")) {
    int base = (int)(dp - G[o2].buf[2]);
    for (int i = 0; i < n; i++) G[o2].pkt[base + i] = sp[i], G[o2].pvalid[base + i] = 1;
  } else if (!strcmp(name, "upkt")) {
    int base = (int)(sp - G[g].buf[2]);
    for (int i = 0; i < n; i++)
      if (!G[g].pvalid[base + i]) return 0;
    for (int i = 0; i < n; i++) dp[i] = G[g].pkt[base + i];
  } else {
    return snprintf(err, el, "gpu %d: op %s not simulated", g, name), -1;
  }
  return 1;
}

static int setup(json_t* plan, double** in) {
  NG = (int)json_array_size(json_object_get(plan, "gpus"));
  int inplace = json_is_true(json_object_get(plan, "inplace"));
  if (NG > MAXG) return -1;
  for (int g = 0; g < NG; g++) {
    memset(&G[g], 0, sizeof(G[g]));
    G[g].g = json_array_get(json_object_get(plan, "gpus"), (size_t)g);
    G[g].n[0] = (int)json_integer_value(json_object_get(G[g].g, "input_chunks"));
    G[g].n[1] = (int)json_integer_value(json_object_get(G[g].g, "output_chunks"));
    G[g].n[2] = (int)json_integer_value(json_object_get(G[g].g, "scratch_chunks"));
    for (int b = 0; b < 3; b++) G[g].buf[b] = calloc((size_t)G[g].n[b] + 1, sizeof(double));
    if (inplace && G[g].n[1] == 0) G[g].n[1] = G[g].n[0], free(G[g].buf[1]), G[g].buf[1] = G[g].buf[0];
    G[g].pkt = calloc((size_t)G[g].n[2] + 1, sizeof(double));
    G[g].pvalid = calloc((size_t)G[g].n[2] + 1, sizeof(int));
    memcpy(G[g].buf[0], in[g], (size_t)G[g].n[0] * sizeof(double));
  }
  return 0;
}

static void teardown(double** out) {
  for (int g = 0; g < NG; g++) {
    int ob = G[g].n[1] ? 1 : 0;
    memcpy(out[g], G[g].buf[ob], (size_t)G[g].n[ob] * sizeof(double));
    if (G[g].buf[1] != G[g].buf[0]) free(G[g].buf[1]);
    free(G[g].buf[0]), free(G[g].buf[2]), free(G[g].pkt), free(G[g].pvalid);
  }
}

int xml_sim_run(json_t* plan, double** in, double** out, unsigned seed, char* err, size_t el) {
  if (setup(plan, in) != 0) return snprintf(err, el, "too many gpus"), -1;
  srand(seed);
  int rc = 0;
  for (;;) {
    int runnable = 0, progressed = 0;
    for (int tries = 0; tries < 4 * NG * MAXT && rc == 0; tries++) {
      int g = rand() % NG;
      json_t* tbs = json_object_get(G[g].g, "threadblocks");
      if (json_array_size(tbs) == 0) continue;
      int t = rand() % (int)json_array_size(tbs);
      json_t *tb = json_array_get(tbs, (size_t)t), *ops = json_object_get(tb, "ops");
      if (G[g].pc[t] >= (int)json_array_size(ops)) continue;
      int r = run_op(g, t, tb, json_array_get(ops, (size_t)G[g].pc[t]), err, el);
      if (r < 0) rc = -1;
      if (r > 0) G[g].pc[t]++, progressed = 1;
    }
    if (rc) break;
    /* A full sweep in order decides between "done", "progress" and "deadlock". */
    for (int g = 0; g < NG; g++) {
      json_t* tbs = json_object_get(G[g].g, "threadblocks");
      for (size_t t = 0; t < json_array_size(tbs); t++) {
        json_t *tb = json_array_get(tbs, t), *ops = json_object_get(tb, "ops");
        if (G[g].pc[t] >= (int)json_array_size(ops)) continue;
        runnable = 1;
        int r = run_op(g, (int)t, tb, json_array_get(ops, (size_t)G[g].pc[t]), err, el);
        if (r < 0) rc = -1;
        if (r > 0) G[g].pc[t]++, progressed = 1;
      }
    }
    if (rc || !runnable) break;
    if (!progressed) {
      snprintf(err, el, "deadlock: no threadblock can run");
      rc = -1;
      break;
    }
  }
  teardown(out);
  return rc;
}
