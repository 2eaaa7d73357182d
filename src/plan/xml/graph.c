/* graph.c - deadlock (cycle) detection for MSCCL XML algorithms by symbolic execution. */
#include <stdlib.h>

#include "plan/xml/xml.h"

struct sim {
  int *pc, *sent, *recvd; /* per (gpu, tb): next step, sends done, receives done */
  int* base;              /* first (gpu, tb) slot of each gpu */
};

/* Whether step pc of tb t on gpu g can run now. */
static int can_run(const struct xml_algo* a, const struct sim* m, int g, int t) {
  const struct xml_tb* tb = &a->gpus[g].tbs[t];
  const struct xml_step* st = &tb->steps[m->pc[m->base[g] + t]];
  if (st->depid >= 0 && m->pc[m->base[g] + st->depid] <= st->deps) return 0;
  if (xml_step_recvs(st->type)) {
    int pt = tb->src_tb;
    if (pt < 0 || m->sent[m->base[tb->recv] + pt] <= m->recvd[m->base[g] + t]) return 0;
  }
  return 1;
}

/* Runs every tb as far as it can; returns whether anything ran. */
static int sweep(const struct xml_algo* a, struct sim* m) {
  int progress = 0;
  for (int g = 0; g < a->ngpus; g++)
    for (int t = 0; t < a->gpus[g].ntbs; t++) {
      int k = m->base[g] + t;
      const struct xml_tb* tb = &a->gpus[g].tbs[t];
      while (m->pc[k] < tb->nsteps && can_run(a, m, g, t)) {
        int type = tb->steps[m->pc[k]].type;
        m->sent[k] += xml_step_sends(type);
        m->recvd[k] += xml_step_recvs(type);
        m->pc[k]++;
        progress = 1;
      }
    }
  return progress;
}

static mscclppResult_t report_stuck(const struct xml_algo* a, const struct sim* m) {
  for (int g = 0; g < a->ngpus; g++)
    for (int t = 0; t < a->gpus[g].ntbs; t++) {
      const struct xml_tb* tb = &a->gpus[g].tbs[t];
      int s = m->pc[m->base[g] + t];
      if (s == tb->nsteps) continue;
      const struct xml_step* st = &tb->steps[s];
      return MPP_ERR(mscclppInvalidArgument, "%s:%d: <step>: dependency cycle (deadlock): gpu %d tb %d step %d (%s) can "
                     "never run; it waits for %s", a->path, st->line, g, t, s, xml_step_name(st->type),
                     st->depid >= 0 ? "its dependency (depid/deps), which is part of the cycle"
                                    : "a send from its peer, which is part of the cycle");
    }
  return mscclppSuccess;
}

mscclppResult_t xml_check_acyclic(const struct xml_algo* a) {
  struct sim m = {0};
  int n = 0;
  m.base = calloc((size_t)a->ngpus + 1, sizeof(int));
  if (!m.base) return MPP_ERR(mscclppSystemError, "%s: out of memory", a->path);
  for (int g = 0; g < a->ngpus; g++) m.base[g] = n, n += a->gpus[g].ntbs;
  m.pc = calloc((size_t)n + 1, sizeof(int));
  m.sent = calloc((size_t)n + 1, sizeof(int));
  m.recvd = calloc((size_t)n + 1, sizeof(int));
  mscclppResult_t res = mscclppSuccess;
  if (!m.pc || !m.sent || !m.recvd) res = MPP_ERR(mscclppSystemError, "%s: out of memory", a->path);
  while (res == mscclppSuccess && sweep(a, &m)) {
  }
  if (res == mscclppSuccess) res = report_stuck(a, &m);
  free(m.pc), free(m.sent), free(m.recvd), free(m.base);
  return res;
}
