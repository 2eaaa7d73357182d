/* plan_registry.c - the plan registry end to end on CPU ranks (run under mscclpp-run -n 4):
 *
 *   plan_registry select   registered plans are chosen by the collectives for the calls they serve
 *                          and only those (size range, in-place-ness, operator, ranks per node,
 *                          root), in priority order; a selector callback overrides, declines or
 *                          answers nonsense (an error); allgather, reducescatter, alltoall and
 *                          broadcast plans; groups; every result checked
 *   plan_registry env      MSCCLPP_PLAN_DIR: a directory's *.json plans (plan_registry_env.c)
 *   plan_registry baddir   a bad file in MSCCLPP_PLAN_DIR: every collective fails naming it
 *   plan_registry xml      MSCCL_XML_FILES: MSCCL algorithms selected by MSCCL's rule
 *   plan_registry badxml   a bad file in MSCCL_XML_FILES: every collective fails naming it
 *
 * Which plan ran is observed through the registry's use counters and, for priorities, through a
 * fake "allreduce" plan that only copies the input (its output differs from a real allreduce). */
#include "plan_registry_mp.h"

int g_rank, g_n;
mscclppComm_t g_comm;

static float in_val(int rank, size_t i) { return (float)(rank * 10 + (int)(i % 7) + 1); }

static float reduce_val(mscclppRedOp_t op, size_t i) {
  float v = in_val(0, i);
  for (int r = 1; r < g_n; r++) {
    float x = in_val(r, i);
    v = op == mscclppSum ? v + x : op == mscclppProd ? v * x : op == mscclppMax ? (x > v ? x : v) : (x < v ? x : v);
  }
  return op == mscclppAvg ? v / (float)g_n : v;
}

void preg_allreduce(size_t count, int inplace, mscclppRedOp_t op, int fake) {
  float* in = malloc(count * sizeof(float));
  float* out = malloc(count * sizeof(float));
  CHECK(in && out);
  for (size_t i = 0; i < count; i++) in[i] = in_val(g_rank, i), out[i] = -1.0f;
  if (inplace) memcpy(out, in, count * sizeof(float));
  mscclppRedOp_t rop = op == mscclppAvg ? mscclppSum : op; /* avg: the sum, divided below */
  CHECK_OK(mscclppAllReduce(inplace ? out : in, out, count, mscclppFloat, op, g_comm, NULL));
  for (size_t i = 0; i < count; i++) {
    float want = fake ? in_val(g_rank, i) : reduce_val(rop, i);
    if (op == mscclppAvg) want /= (float)g_n;
    CHECK_MSG(out[i] == want, "allreduce count %zu inplace %d op %d: out[%zu] = %g, want %g", count, inplace, (int)op, i,
              out[i], want);
  }
  free(in), free(out);
}

void preg_allgather(size_t count, int inplace) {
  float* in = malloc(count * sizeof(float));
  float* out = malloc(count * (size_t)g_n * sizeof(float));
  CHECK(in && out);
  for (size_t i = 0; i < count * (size_t)g_n; i++) out[i] = -1.0f;
  for (size_t i = 0; i < count; i++) in[i] = in_val(g_rank, i);
  float* send = inplace ? out + (size_t)g_rank * count : in;
  if (inplace) memcpy(send, in, count * sizeof(float));
  CHECK_OK(mscclppAllGather(send, out, count, mscclppFloat, g_comm, NULL));
  for (size_t i = 0; i < count * (size_t)g_n; i++)
    CHECK_MSG(out[i] == in_val((int)(i / count), i % count), "allgather count %zu: out[%zu] = %g", count, i, out[i]);
  free(in), free(out);
}

uint64_t preg_uses(int id) {
  mscclppPlanEntryInfo_t info;
  CHECK_OK(mscclppPlanRegistryQuery(id, &info));
  return info.uses;
}

int preg_register(const struct preg_spec* spec, int priority, int rpn, int root) {
  char* text = preg_plan(spec);
  mscclppPlan_t plan;
  CHECK_OK(mscclppPlanLoadString(text, strlen(text), spec->name, &plan));
  free(text);
  mscclppPlanRegOptions_t o = MSCCLPP_PLAN_REG_OPTIONS_INITIALIZER;
  o.priority = priority, o.ranksPerNode = rpn, o.root = root;
  int id = 0;
  CHECK_OK(mscclppPlanRegister(plan, &o, &id));
  CHECK(id > 0);
  return id;
}

int preg_find(const char* suffix) {
  int ids[64], n;
  CHECK_OK(mscclppPlanRegistryList(ids, 64, &n));
  for (int i = 0; i < n && i < 64; i++) {
    mscclppPlanEntryInfo_t info;
    CHECK_OK(mscclppPlanRegistryQuery(ids[i], &info));
    size_t ls = strlen(info.source), lx = strlen(suffix);
    if (ls >= lx && strcmp(info.source + ls - lx, suffix) == 0) return ids[i];
  }
  TEST_FAIL("no registration from *%s", suffix);
}

/* ---- select --------------------------------------------------------------------------------- */

/* A plan of the registry serves exactly the sizes, placements and operators it names. */
static int size_range(void) {
  struct preg_spec s = {PREG_ALLREDUCE, g_n, "allpairs_1k_64k", 0, NULL, 1024, 65536, 0, 0, -1};
  int a = preg_register(&s, 0, 0, -1);
  preg_allreduce(256, 0, mscclppSum, 0); /* 1024 bytes: the plan's minimum */
  CHECK(preg_uses(a) == 1);
  preg_allreduce(255, 0, mscclppSum, 0); /* below */
  CHECK(preg_uses(a) == 1);
  preg_allreduce(16384, 0, mscclppSum, 0); /* 65536 bytes: the maximum, inclusive */
  preg_allreduce(257, 0, mscclppSum, 0);   /* an odd size inside */
  CHECK(preg_uses(a) == 3);
  preg_allreduce(16385, 0, mscclppSum, 0); /* above */
  preg_allreduce(256, 1, mscclppSum, 0);   /* in place: the plan is out of place */
  preg_allreduce(256, 0, mscclppMax, 0);   /* max: the plan sums */
  preg_allreduce(256, 0, mscclppAvg, 0);   /* avg: no plan form */
  CHECK(preg_uses(a) == 3);
  int32_t xi[256], yi[256]; /* any datatype */
  for (int i = 0; i < 256; i++) xi[i] = g_rank * 1000 + i;
  CHECK_OK(mscclppAllReduce(xi, yi, 256, mscclppInt32, mscclppSum, g_comm, NULL));
  for (int i = 0; i < 256; i++) CHECK(yi[i] == 1000 * g_n * (g_n - 1) / 2 + g_n * i);
  CHECK(preg_uses(a) == 4);
  return a;
}

/* Higher priority first; equal priorities: earlier registration first. */
static int priorities(int a) {
  struct preg_spec f = {PREG_FAKE_COPY, g_n, "fake_copy", 0, NULL, 0, 0, 0, 0, -1};
  int hi = preg_register(&f, 5, 0, -1);
  preg_allreduce(256, 0, mscclppSum, 1); /* the fake ran: this rank's own input */
  CHECK(preg_uses(hi) == 1 && preg_uses(a) == 4);
  preg_allreduce(64, 0, mscclppSum, 1); /* outside a's range: still the fake */
  CHECK_OK(mscclppPlanUnregister(hi));
  CHECK_RES(mscclppPlanUnregister(hi), mscclppInvalidArgument);
  preg_allreduce(256, 0, mscclppSum, 0);
  CHECK(preg_uses(a) == 5);
  int same = preg_register(&f, 0, 0, -1); /* same priority as a, registered later */
  preg_allreduce(256, 0, mscclppSum, 0);
  CHECK(preg_uses(a) == 6 && preg_uses(same) == 0);
  int ids[8], n;
  CHECK_OK(mscclppPlanRegistryList(ids, 8, &n));
  CHECK(n == 2 && ids[0] == a && ids[1] == same);
  return same;
}

struct sel_state {
  int answer, calls, n;
  int ids[4];
  mscclppPlanQuery_t q;
};

static int selector(const mscclppPlanQuery_t* q, const mscclppPlanCandidate_t* c, int n, void* user) {
  struct sel_state* s = user;
  s->calls++;
  s->q = *q;
  s->n = n;
  for (int i = 0; i < n && i < 4; i++) s->ids[i] = c[i].id;
  return s->answer;
}

/* The selector sees the call and the candidates, and picks, declines or answers out of range. */
static void selectors(int a, int fake) {
  struct sel_state st = {1, 0, 0, {0}, {0}};
  CHECK_OK(mscclppPlanSelectorSet(selector, &st));
  preg_allreduce(256, 0, mscclppSum, 1); /* candidate 1: the fake */
  CHECK(st.calls == 1 && st.n == 2 && st.ids[0] == a && st.ids[1] == fake && preg_uses(fake) == 1);
  CHECK(strcmp(st.q.collective, "allreduce") == 0 && st.q.count == 256 && st.q.bytes == 1024);
  CHECK(st.q.datatype == mscclppFloat && st.q.op == mscclppSum && st.q.root == -1 && st.q.inplace == 0);
  CHECK(st.q.worldSize == g_n && st.q.ranksPerNode == g_n && st.q.rank == g_rank);
  st.answer = MSCCLPP_PLAN_SELECT_BUILTIN;
  preg_allreduce(256, 0, mscclppSum, 0);
  CHECK(preg_uses(a) == 6 && preg_uses(fake) == 1);
  st.answer = MSCCLPP_PLAN_SELECT_DEFAULT;
  preg_allreduce(256, 0, mscclppSum, 0);
  CHECK(preg_uses(a) == 7);
  preg_allreduce(64, 0, mscclppSum, 1); /* one candidate (the fake, a's range starts at 1024) */
  CHECK(st.n == 1 && st.ids[0] == fake);
  preg_allreduce(64, 0, mscclppAvg, 0); /* no candidate: the selector is not asked */
  CHECK(st.calls == 4);
  st.answer = 7;
  float x[256] = {0}, y[256];
  CHECK_RES(mscclppAllReduce(x, y, 256, mscclppFloat, mscclppSum, g_comm, NULL), mscclppInvalidUsage);
  CHECK_ERR_MENTIONS("the plan selector returned 7");
  CHECK_OK(mscclppPlanSelectorSet(NULL, NULL));
  preg_allreduce(256, 0, mscclppSum, 0);
  CHECK(preg_uses(a) == 8);
}

/* A registration's ranks per node must equal the communicator's (all ranks on one host here). */
static void ranks_per_node(void) {
  struct preg_spec s = {PREG_FAKE_COPY, g_n, "fake_rpn", 0, NULL, 0, 0, 0, 0, -1};
  int two = preg_register(&s, 10, 1, -1); /* one rank per node */
  preg_allreduce(64, 0, mscclppSum, 0);
  CHECK(preg_uses(two) == 0);
  int all = preg_register(&s, 10, g_n, -1);
  preg_allreduce(64, 0, mscclppSum, 1);
  CHECK(preg_uses(all) == 1);
  CHECK_OK(mscclppPlanUnregister(two));
  CHECK_OK(mscclppPlanUnregister(all));
}

/* reducescatter and alltoall plans, float sums checked. */
static void reducescatter_alltoall(void) {
  const size_t c = 300;
  struct preg_spec rs = {PREG_REDUCESCATTER, g_n, "rs", 0, NULL, 0, 0, 0, 0, -1};
  struct preg_spec aa = {PREG_ALLTOALL, g_n, "a2a", 0, NULL, 0, 0, 0, 0, -1};
  int irs = preg_register(&rs, 0, 0, -1), iaa = preg_register(&aa, 0, 0, -1);
  float* in = malloc(c * (size_t)g_n * sizeof(float));
  float* out = malloc(c * (size_t)g_n * sizeof(float));
  CHECK(in && out);
  for (size_t i = 0; i < c * (size_t)g_n; i++) in[i] = in_val(g_rank, i);
  CHECK_OK(mscclppReduceScatter(in, out, c, mscclppFloat, mscclppSum, g_comm, NULL));
  for (size_t i = 0; i < c; i++) CHECK(out[i] == reduce_val(mscclppSum, (size_t)g_rank * c + i));
  CHECK_OK(mscclppAllToAll(in, out, c, mscclppFloat, g_comm, NULL));
  for (size_t i = 0; i < c * (size_t)g_n; i++) CHECK(out[i] == in_val((int)(i / c), (size_t)g_rank * c + i % c));
  CHECK(preg_uses(irs) == 1 && preg_uses(iaa) == 1);
  free(in), free(out);
}

/* A broadcast plan serves its root only; reduce has no plan form. */
static void broadcast_reduce(void) {
  struct preg_spec b = {PREG_BROADCAST, g_n, "bcast_root1", 0, NULL, 0, 0, 1, 0, -1};
  int ib = preg_register(&b, 0, 0, 1);
  for (int k = 0; k < 2; k++) {
    int root = k == 0 ? 1 : 0;
    float x[100], y[100];
    for (int i = 0; i < 100; i++) x[i] = in_val(g_rank, (size_t)i), y[i] = -1.0f;
    CHECK_OK(mscclppBroadcast(x, y, 100, mscclppFloat, root, g_comm, NULL));
    for (int i = 0; i < 100; i++) CHECK(y[i] == in_val(root, (size_t)i));
    CHECK(preg_uses(ib) == 1); /* root 1 by the plan, root 0 by a built-in */
    CHECK_OK(mscclppReduce(x, y, 100, mscclppFloat, mscclppSum, root, g_comm, NULL));
    if (g_rank == root)
      for (int i = 0; i < 100; i++) CHECK(y[i] == reduce_val(mscclppSum, (size_t)i));
  }
}

/* A group's collectives consult the registry too (run at GroupEnd). */
static void group_calls(void) {
  float x[256], y[256], g[64 * 64];
  for (int i = 0; i < 256; i++) x[i] = in_val(g_rank, (size_t)i);
  CHECK(g_n <= 64);
  CHECK_OK(mscclppGroupStart());
  CHECK_OK(mscclppAllReduce(x, y, 256, mscclppFloat, mscclppSum, g_comm, NULL));
  CHECK_OK(mscclppAllGather(x, g, 64, mscclppFloat, g_comm, NULL));
  CHECK_OK(mscclppGroupEnd());
  for (int i = 0; i < 256; i++) CHECK(y[i] == reduce_val(mscclppSum, (size_t)i));
  for (int i = 0; i < 64 * g_n; i++) CHECK(g[i] == in_val(i / 64, (size_t)(i % 64)));
}

static void mode_select(void) {
  int a = size_range();
  int fake = priorities(a);
  selectors(a, fake);
  CHECK_OK(mscclppPlanUnregister(fake));
  ranks_per_node();
  struct preg_spec g = {PREG_ALLGATHER, g_n, "ag", 0, NULL, 0, 0, 0, 0, -1};
  int ig = preg_register(&g, 0, 0, -1);
  preg_allgather(200, 0);
  preg_allgather(200, 1); /* in place: the plan is out of place */
  CHECK(preg_uses(ig) == 1);
  reducescatter_alltoall();
  broadcast_reduce();
  group_calls();
  CHECK(preg_uses(ig) == 2 && preg_uses(a) == 9);
  CHECK_OK(mscclppPlanRegistryClear());
  int n;
  CHECK_OK(mscclppPlanRegistryList(NULL, 0, &n));
  CHECK(n == 0);
  preg_allreduce(256, 0, mscclppSum, 0);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "select";
  char dir[256] = "";
  if (strcmp(mode, "env") == 0 || strcmp(mode, "baddir") == 0) preg_make_dir(dir, sizeof(dir), mode[0] == 'b');
  g_comm = tmp_init(&g_rank, &g_n);
  if (strcmp(mode, "select") == 0) mode_select();
  else if (strcmp(mode, "env") == 0) mode_env();
  else if (strcmp(mode, "baddir") == 0) mode_baddir();
  else if (strcmp(mode, "xml") == 0) mode_xml();
  else if (strcmp(mode, "badxml") == 0) mode_badxml();
  else TEST_FAIL("unknown mode %s", mode);
  if (dir[0]) preg_remove_dir(dir);
  CHECK_OK(mscclppCommDestroy(g_comm));
  if (g_rank == 0) printf("plan_registry %s: ok\n", mode);
  return 0;
}
