/* plan_registry_match.c - the plan registry's matching rules without ranks: which entries serve
 * which calls (plan rule field by field, MSCCL's rule on the XML samples with one plan per reduce
 * operator), the pick with and without a selector, the plan file's ranks_per_node and root fields,
 * and the executor's rank-kind query. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "exec/supports.h"
#include "helpers.h"
#include "plan/plan.h"
#include "coll/registry/registry.h"
#include "mp/plan_registry_plans.h"

#define XML_DIR MPP_SOURCE_DIR "/tests/xml/"

static struct planreg_query call(int coll, size_t count, size_t es, int nranks, int inplace, int op) {
  int multi = coll == ALGO_COLL_ALLGATHER || coll == ALGO_COLL_REDUCESCATTER || coll == ALGO_COLL_ALLTOALL;
  struct planreg_query q = {coll, count, es, count * es * (multi ? (size_t)nranks : 1), 7, op, op, -1,
                            nranks, nranks, 0, inplace};
  return q;
}

/* An allreduce entry of 4 ranks for [1024, 65536] bytes, out of place, sum. */
static struct planreg_entry plan_entry(void) {
  struct planreg_entry e;
  memset(&e, 0, sizeof(e));
  e.rule = PLANREG_RULE_PLAN, e.coll = ALGO_COLL_ALLREDUCE, e.nranks = 4, e.root = 0;
  e.min_bytes = 1024, e.max_bytes = 65536, e.redops = 1u << ELEM_OP_SUM;
  e.plan[0] = (mscclppPlan_t)&e; /* never run here */
  return e;
}

static void plan_rule(void) {
  struct planreg_entry e = plan_entry();
  struct planreg_query q = call(ALGO_COLL_ALLREDUCE, 256, 4, 4, 0, ELEM_OP_SUM);
  CHECK(planreg_serves(&e, &q));
  q.bytes = 1023;
  CHECK(!planreg_serves(&e, &q));
  q.bytes = 65536;
  CHECK(planreg_serves(&e, &q));
  q.bytes = 65537;
  CHECK(!planreg_serves(&e, &q));
  q = call(ALGO_COLL_ALLREDUCE, 256, 4, 4, 1, ELEM_OP_SUM); /* in place */
  CHECK(!planreg_serves(&e, &q));
  q = call(ALGO_COLL_ALLREDUCE, 256, 4, 2, 0, ELEM_OP_SUM); /* world size */
  CHECK(!planreg_serves(&e, &q));
  q = call(ALGO_COLL_ALLGATHER, 64, 4, 4, 0, -1); /* collective */
  CHECK(!planreg_serves(&e, &q));
  for (int op = ELEM_OP_PROD; op <= ELEM_OP_PREMUL; op++) {
    q = call(ALGO_COLL_ALLREDUCE, 256, 4, 4, 0, op);
    CHECK_MSG(!planreg_serves(&e, &q), "op %d", op);
  }
  e.redops = 0; /* no reduce ops: any of sum, prod, max, min */
  q = call(ALGO_COLL_ALLREDUCE, 256, 4, 4, 0, ELEM_OP_MIN);
  CHECK(planreg_serves(&e, &q));
  q.op = ELEM_OP_AVG;
  CHECK(!planreg_serves(&e, &q));
  e.redops = (1u << ELEM_OP_SUM) | (1u << ELEM_OP_MAX); /* mixed: none */
  q.op = ELEM_OP_SUM;
  CHECK(!planreg_serves(&e, &q));
  e.redops = 1u << ELEM_OP_SUM;
  e.rpn = 2; /* ranks per node */
  CHECK(!planreg_serves(&e, &q));
  q.rpn = 2;
  CHECK(planreg_serves(&e, &q));
  e.coll = -1; /* custom plans serve nothing */
  CHECK(!planreg_serves(&e, &q));
}

static void broadcast_rule(void) {
  struct planreg_entry e = plan_entry();
  e.coll = ALGO_COLL_BROADCAST, e.root = 2, e.redops = 0;
  struct planreg_query q = call(ALGO_COLL_BROADCAST, 256, 4, 4, 0, -1);
  q.root = 2;
  CHECK(planreg_serves(&e, &q));
  q.inplace = 1; /* the root's in-place-ness does not count */
  CHECK(planreg_serves(&e, &q));
  q.root = 1;
  CHECK(!planreg_serves(&e, &q));
  e.inplace = 1, q.root = 2; /* in-place broadcast plans serve nothing */
  CHECK(!planreg_serves(&e, &q));
}

/* The reduce operator of every reduce op of p. */
static int plan_redop(const struct mscclppPlan* p) {
  int seen = -1;
  for (int r = 0; r < p->nranks; r++)
    for (int b = 0; b < p->ranks[r].nblocks; b++)
      for (uint32_t i = 0; i < p->ranks[r].blocks[b].nops; i++) {
        const struct plan_op* op = &p->ranks[r].blocks[b].ops[i];
        if (op->code != PLAN_OP_RE && op->code != PLAN_OP_REPKT && op->code != PLAN_OP_RESPKT && op->code != PLAN_OP_RES)
          continue;
        CHECK(seen < 0 || seen == op->redop);
        seen = op->redop;
      }
  return seen;
}

static void msccl_rule(void) {
  struct planreg_entry* e;
  CHECK_OK(planreg_entry_from_xml(XML_DIR "ring_allreduce.xml", NULL, &e)); /* in place, 8 chunks, < 1 GiB */
  CHECK(e->rule == PLANREG_RULE_MSCCL && e->coll == ALGO_COLL_ALLREDUCE && e->nranks == 4);
  struct planreg_query q = call(ALGO_COLL_ALLREDUCE, 1000, 4, 4, 1, ELEM_OP_SUM);
  CHECK(planreg_serves(e, &q));
  for (int op = ELEM_OP_SUM; op <= ELEM_OP_MIN; op++) { /* one plan per operator, each naming it */
    q.op = op;
    CHECK(planreg_serves(e, &q));
    mscclppPlan_t p = planreg_plan_for(e, &q);
    CHECK(p == e->plan[op] && plan_redop(p) == op);
  }
  q.op = ELEM_OP_AVG;
  CHECK(!planreg_serves(e, &q));
  q = call(ALGO_COLL_ALLREDUCE, 1004, 4, 4, 1, ELEM_OP_SUM); /* not divisible by 8 */
  CHECK(!planreg_serves(e, &q));
  q = call(ALGO_COLL_ALLREDUCE, 1000, 4, 4, 0, ELEM_OP_SUM); /* out of place */
  CHECK(!planreg_serves(e, &q));
  q = call(ALGO_COLL_ALLREDUCE, (1u << 28), 4, 4, 1, ELEM_OP_SUM); /* 1 GiB: maxBytes is exclusive */
  CHECK(!planreg_serves(e, &q));
  q = call(ALGO_COLL_ALLREDUCE, (1u << 28) - 8, 4, 4, 1, ELEM_OP_SUM);
  CHECK(planreg_serves(e, &q));
  planreg_entry_free(e);
  CHECK_OK(planreg_entry_from_xml(XML_DIR "ring_allgather.xml", NULL, &e)); /* out of place, 4 chunks */
  CHECK(e->plan[1] == NULL);                                              /* no reduction: one plan */
  q = call(ALGO_COLL_ALLGATHER, 3, 4, 4, 0, -1);                          /* 3 x 4 ranks divides by 4 */
  CHECK(planreg_serves(e, &q) && planreg_plan_for(e, &q) == e->plan[0]);
  q.inplace = 1;
  CHECK(!planreg_serves(e, &q));
  planreg_entry_free(e);
  CHECK_RES(planreg_entry_from_xml(XML_DIR "bad_cycle.xml", NULL, &e), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "bad_cycle.xml") != NULL);
}

struct sel {
  int answer, calls, n, first_id;
};

static int selector(const mscclppPlanQuery_t* q, const mscclppPlanCandidate_t* c, int n, void* user) {
  struct sel* s = user;
  CHECK(strcmp(q->collective, "allreduce") == 0 && q->bytes == 1024 && q->worldSize == 4);
  s->calls++, s->n = n, s->first_id = c[0].id;
  return s->answer;
}

static void pick(void) {
  struct planreg_entry a = plan_entry(), b = plan_entry(), c = plan_entry();
  a.id = 1, b.id = 2, c.id = 3;
  b.min_bytes = 0, b.max_bytes = 512; /* serves small calls only */
  struct planreg_entry* list[3] = {&a, &b, &c};
  struct planreg_query q = call(ALGO_COLL_ALLREDUCE, 256, 4, 4, 0, ELEM_OP_SUM);
  struct planreg_entry* out;
  CHECK_OK(planreg_pick(list, 3, &q, NULL, NULL, &out));
  CHECK(out == &a); /* the first that serves */
  struct sel s = {1, 0, 0, 0};
  CHECK_OK(planreg_pick(list, 3, &q, selector, &s, &out));
  CHECK(out == &c && s.calls == 1 && s.n == 2 && s.first_id == 1); /* candidates a, c */
  s.answer = MSCCLPP_PLAN_SELECT_DEFAULT;
  CHECK_OK(planreg_pick(list, 3, &q, selector, &s, &out));
  CHECK(out == &a);
  s.answer = MSCCLPP_PLAN_SELECT_BUILTIN;
  CHECK_OK(planreg_pick(list, 3, &q, selector, &s, &out));
  CHECK(out == NULL);
  s.answer = 2;
  CHECK_RES(planreg_pick(list, 3, &q, selector, &s, &out), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "selector returned 2; expected a candidate index 0..1") != NULL);
  q.op = ELEM_OP_AVG; /* no candidate: the selector is not asked */
  CHECK_OK(planreg_pick(list, 3, &q, selector, &s, &out));
  CHECK(out == NULL && s.calls == 4);
}

/* A plan file's ranks_per_node and root fields, and their checks. */
static void file_fields(void) {
  char path[] = "/tmp/mpp_planreg_unit_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  struct preg_spec s = {PREG_BROADCAST, 4, "bc", 0, NULL, 0, 0, 3, 2, 3};
  char* text = preg_plan(&s);
  preg_write(path, text);
  struct planreg_entry* e;
  CHECK_OK(planreg_entry_from_file(path, NULL, &e));
  CHECK(e->coll == ALGO_COLL_BROADCAST && e->rpn == 2 && e->root == 3 && e->redops == 0);
  planreg_entry_free(e);
  mscclppPlanRegOptions_t o = {0, 4, 1}; /* options win over the file */
  CHECK_OK(planreg_entry_from_file(path, &o, &e));
  CHECK(e->rpn == 4 && e->root == 1);
  planreg_entry_free(e);
  s.root_field = 4; /* not a rank */
  free(text);
  text = preg_plan(&s);
  preg_write(path, text);
  CHECK_RES(planreg_entry_from_file(path, NULL, &e), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "field 'root'") != NULL && strstr(mscclppGetLastError(), path) != NULL);
  s.root_field = 3, s.rpn_field = 9; /* more than the plan's ranks */
  free(text);
  text = preg_plan(&s);
  preg_write(path, text);
  CHECK_RES(planreg_entry_from_file(path, NULL, &e), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "field 'ranks_per_node'") != NULL);
  free(text);
  close(fd);
  unlink(path);
}

static void kinds_and_names(void) {
  struct mscclppComm comm;
  memset(&comm, 0, sizeof(comm));
  comm.kind = mscclppRankCpu;
  CHECK(exec_supports_kind(&comm));
  comm.kind = mscclppRankGpu;
#if MSCCLPP_HAVE_CUDA
  CHECK(exec_supports_kind(&comm));
#else
  CHECK(!exec_supports_kind(&comm));
#endif
  CHECK(planreg_coll_of("allreduce") == ALGO_COLL_ALLREDUCE && planreg_coll_of("broadcast") == ALGO_COLL_BROADCAST);
  CHECK(planreg_coll_of("alltoall") == ALGO_COLL_ALLTOALL && planreg_coll_of("reducescatter") == ALGO_COLL_REDUCESCATTER);
  CHECK(planreg_coll_of("reduce") == -1 && planreg_coll_of("sendrecv") == -1 && planreg_coll_of("custom") == -1);
}

int main(void) {
  plan_rule();
  broadcast_rule();
  msccl_rule();
  pick();
  file_fields();
  kinds_and_names();
  printf("plan_registry_match: ok\n");
  return 0;
}
