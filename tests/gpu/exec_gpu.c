/* exec_gpu.c - the execution-plan corpus on GPU ranks (the GPU executor, src/exec/gpu/). Every plan
 * of tests/plans' corpus written for this many ranks runs at its listed sizes (float32, with fresh
 * inputs each call); every reduction plan also with each reduce_op (sum, prod, max, min) for every
 * datatype; LL plans also with LL8 packets; every plan three times back to back without a host
 * wait between (packet flags, scratch halves; run_back_to_back says which plans can) and captured
 * into a CUDA graph that is replayed with new inputs. Each plan's very first call is captured too
 * (its image, bindings and op tables, and for the first plan the executor's channels and scratch,
 * are made during the capture), on a blocking stream in global capture mode. Then the MSCCL XML samples for this many
 * ranks, converted and run. Results are copied back and checked exactly against every rank's
 * inputs (src/algo/verify.h).
 *
 *   exec_gpu GOOD.TSV [SAMPLE.xml ...]      under mscclpp-run -n N
 * Exits 77 without CUDA, without a GPU, or with fewer GPUs than local ranks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mscclpp/executor.h>
#include <mscclpp/msccl_xml.h>
#include <mscclpp/mscclpp.h>

#include "algo/algo.h"
#include "algo/verify.h"
#include "exec/gpu/gpu.h"
#include "plan/plan.h"
#include "helpers.h"

#if !MSCCLPP_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else
#include <cuda_runtime.h>

#include "gpu/gpu_rank.h"

#define CAP ((size_t)8 << 20)

static struct {
  mscclppComm_t comm;
  int rank, n;
  cudaStream_t stream;
  cudaStream_t blocking; /* a stream that waits for the legacy stream (first calls are captured on it) */
  char *dev, *host;
  uint64_t seed;
  long calls;
} g = {.rank = -1, .seed = 1};

/* One way of calling a plan: per-rank size S (reducescatter: the output), datatype, the reduce op
 * the plan uses (-1: data movement), packet format. */
struct job {
  mscclppPlan_t plan;
  const char* name;
  mscclppPlanInfo_t info;
  uint64_t S;
  int dtype, op, packet;
  uint64_t sb, rb, soff, roff; /* input and output bytes, their offsets in g.dev */
};

static void init(void) {
  gpu_rank_init(&g.comm, &g.rank, &g.n, &g.stream);
  CUDA_OK(cudaStreamCreate(&g.blocking));
  CUDA_OK(cudaMalloc((void**)&g.dev, CAP));
  g.host = malloc(CAP);
  CHECK(g.host != NULL);
}

/* Input and output of this rank inside g.dev (as mscclpp-plan run lays them out). */
static void layout(struct job* j) {
  const char* c = j->info.collective;
  uint64_t S = j->S, n = (uint64_t)g.n;
  j->sb = !strcmp(c, "reducescatter") ? S * n : S;
  j->rb = !strcmp(c, "allgather") ? S * n : S;
  const struct plan_rank* pr = &j->plan->ranks[g.rank];
  if ((!strcmp(c, "test") || !strcmp(c, "custom")) && pr->in_chunks && pr->out_chunks) /* its chunks say */
    j->rb = S / pr->in_chunks * pr->out_chunks;
  j->soff = 0, j->roff = j->sb;
  if (j->info.inplace) {
    j->soff = j->roff = 0;
    if (!strcmp(c, "allgather")) j->soff = (uint64_t)g.rank * S;
    if (!strcmp(c, "reducescatter")) j->roff = (uint64_t)g.rank * S;
  }
  CHECK_MSG(j->sb + j->rb + 64 <= CAP, "%s: %llu bytes do not fit the test's buffer", j->name, (unsigned long long)S);
}

static struct verify_spec spec_of(const struct job* j) {
  struct verify_spec s = {.dtype = j->dtype, .op = j->op, .nranks = g.n, .seed = g.seed++};
  return s;
}

/* Host: output region 0xab, this rank's input; then all of it to the device. */
static void prepare(const struct job* j, const struct verify_spec* s) {
  size_t es = mscclppDataTypeSize((mscclppDataType_t)j->dtype), total = j->sb + j->rb;
  memset(g.host, 0xab, total);
  verify_fill(s, g.rank, 0, j->sb / es, g.host + j->soff);
  CUDA_OK(cudaMemcpy(g.dev, g.host, total, cudaMemcpyHostToDevice));
  /* From pageable memory cudaMemcpy may return before its DMA has landed: without this a peer's
   * kernel could write our output first and the late fill overwrite it (seen with ranks sharing
   * a GPU). */
  CUDA_OK(cudaDeviceSynchronize());
  CHECK_OK(mscclppBootstrapBarrier(g.comm)); /* no peer writes into our buffers before they are filled */
}

static void execute(const struct job* j) {
  g.calls++;
  if (j->packet == EXEC_GPU_LL16)
    CHECK_OK(mscclppExecutePlan(g.comm, j->plan, g.dev + j->soff, g.dev + j->roff, j->sb, j->rb,
                                (mscclppDataType_t)j->dtype, g.stream));
  else
    CHECK_OK(mscclppExecutePlanPacket(g.comm, j->plan, g.dev + j->soff, g.dev + j->roff, j->sb, j->rb,
                                      (mscclppDataType_t)j->dtype, mscclppPacketLL8, g.stream));
}

/* Waits for the calls, checks the device's failure record, meets every rank (nobody refills
 * buffers a peer may still read). */
static void finish(const struct job* j) {
  cudaError_t e = cudaStreamSynchronize(g.stream);
  if (e != cudaSuccess) TEST_FAIL("rank %d: %s: the stream failed: %s", g.rank, j->name, cudaGetErrorString(e));
  CHECK_OK(exec_gpu_check(g.comm));
  CHECK_OK(mscclppBootstrapBarrier(g.comm));
}

/* Wrong elements of this rank's output (as mscclpp-plan run checks). */
static size_t wrong(const struct job* j, const struct verify_spec* s) {
  const char* c = j->info.collective;
  size_t es = mscclppDataTypeSize((mscclppDataType_t)j->dtype), cnt = j->S / es, bad = 0;
  const char* out = g.host + j->roff;
  CUDA_OK(cudaMemcpy(g.host + j->roff, g.dev + j->roff, j->rb, cudaMemcpyDeviceToHost));
  if (!strcmp(c, "allreduce")) return verify_check_reduced(s, 0, cnt, out);
  if (!strcmp(c, "reducescatter")) return verify_check_reduced(s, (size_t)g.rank * cnt, cnt, out);
  if (!strcmp(c, "allgather")) {
    for (int r = 0; r < g.n; r++) bad += verify_check_copy(s, r, 0, cnt, out + (uint64_t)r * j->S);
    return bad;
  }
  if (!strcmp(c, "alltoall")) {
    size_t cb = cnt / (size_t)g.n;
    for (int p = 0; p < g.n; p++) bad += verify_check_copy(s, p, (size_t)g.rank * cb, cb, out + (uint64_t)p * cb * es);
    return bad;
  }
  if (!strcmp(c, "sendrecv")) return verify_check_copy(s, (g.rank + g.n - 1) % g.n, 0, cnt, out);
  if (!strcmp(c, "broadcast")) return verify_check_copy(s, 0, 0, cnt, out);
  return 0;
}

static void verify(const struct job* j, const struct verify_spec* s, const char* how) {
  size_t bad = wrong(j, s);
  CHECK_MSG(bad == 0, "rank %d: %s %s, %llu bytes, %s, op %d, LL%d: %zu wrong elements", g.rank, j->name, how,
            (unsigned long long)j->S, elem_dtype_name(j->dtype), j->op, j->packet, bad);
}

static void run_once(const struct job* j) {
  struct verify_spec s = spec_of(j);
  prepare(j, &s);
  execute(j);
  finish(j);
  verify(j, &s, "call");
}

/* Three calls queued at once (same inputs: out-of-place plans give the same result each time).
 * Not for in-place plans (each call changes the next one's input), nor for LL plans without
 * double scratch: their packets may be overwritten by a fast rank's next call before a slow peer
 * read them unless the plan itself prevents it (allgather_ll_ring does not; the CPU executor
 * meets every rank between calls, the GPU executor does not). */
static void run_back_to_back(const struct job* j) {
  if (j->info.inplace || (j->info.protocolLL && !j->plan->double_scratch)) return;
  struct verify_spec s = spec_of(j);
  prepare(j, &s);
  for (int i = 0; i < 3; i++) execute(j);
  finish(j);
  verify(j, &s, "back to back");
}

/* One call captured into a graph (its setup was done by the eager calls before), replayed with
 * new inputs. */
static void run_graph_in(const struct job* j, enum cudaStreamCaptureMode mode) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(g.stream, mode));
  execute(j);
  CUDA_OK(cudaStreamEndCapture(g.stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; i++) {
    struct verify_spec s = spec_of(j);
    prepare(j, &s);
    CUDA_OK(cudaGraphLaunch(exec, g.stream));
    finish(j);
    verify(j, &s, "graph replay");
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
}

static void run_graph(const struct job* j) { run_graph_in(j, cudaStreamCaptureModeThreadLocal); }

/* The plan's first call captured (everything it sets up is made during the capture) on the
 * blocking stream in global mode, where setup work on the legacy stream, or a call capture
 * refuses, would break the capture. */
static void run_graph_first(struct job* j, uint64_t S) {
  j->S = S;
  layout(j);
  cudaStream_t keep = g.stream;
  g.stream = g.blocking;
  run_graph_in(j, cudaStreamCaptureModeGlobal);
  g.stream = keep;
}

/* ---- plans ----------------------------------------------------------------------------------- */

static const char* const op_names[4] = {"sum", "prod", "max", "min"}; /* enum elem_op 0..3 */
static const char reduce_key[] = "\"reduce_op\": \"";

static char* slurp(const char* path, size_t* len) {
  FILE* f = fopen(path, "rb");
  CHECK_MSG(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* t = malloc((size_t)n + 1);
  CHECK(t != NULL && n >= 0 && fread(t, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  t[n] = 0;
  *len = (size_t)n;
  return t;
}

/* The plan's first reduce_op (the loader's default, sum, when it names none). */
static int first_op(const char* text) {
  const char* p = strstr(text, reduce_key);
  for (int op = 0; p && op < 4; op++)
    if (!strncmp(p + sizeof(reduce_key) - 1, op_names[op], strlen(op_names[op]))) return op;
  return 0;
}

/* text with every reduce_op replaced by op (the corpus writes them as "reduce_op": "NAME"). */
static char* with_op(const char* text, int op, size_t* len) {
  size_t cap = strlen(text) * 2 + 16, at = 0;
  char* out = malloc(cap);
  CHECK(out != NULL);
  for (const char *p = text, *k; *p;) {
    k = strstr(p, reduce_key);
    size_t head = k ? (size_t)(k - p) + sizeof(reduce_key) - 1 : strlen(p);
    memcpy(out + at, p, head);
    at += head, p += head;
    if (!k) break;
    at += (size_t)sprintf(out + at, "%s", op_names[op]);
    p = strchr(p, '"');
    CHECK(p != NULL);
  }
  out[at] = 0;
  *len = at;
  return out;
}

static void load(const char* text, size_t len, const char* name, struct job* j) {
  CHECK_OK(mscclppPlanLoadString(text, len, name, &j->plan));
  CHECK_OK(mscclppPlanInfo(j->plan, &j->info));
}

static int is_reduction(const char* coll) { return !strcmp(coll, "allreduce") || !strcmp(coll, "reducescatter"); }

/* Calls at one size: two with LL16 (fresh inputs each), and one with LL8 for LL plans. */
static void run_size(struct job* j, uint64_t S) {
  j->S = S;
  layout(j);
  for (int it = 0; it < 2; it++) run_once(j);
  if (!j->info.protocolLL) return;
  j->packet = EXEC_GPU_LL8;
  run_once(j);
  j->packet = EXEC_GPU_LL16;
}

/* Every reduce_op x every datatype at 4096 bytes per rank (LL plans with both packet formats). */
static void sweep(const char* text, const char* path) {
  for (int op = 0; op < 4; op++) {
    size_t len;
    char* t = with_op(text, op, &len);
    struct job j = {.name = path, .op = op, .packet = EXEC_GPU_LL16};
    load(t, len, path, &j);
    for (int dt = 0; dt < ELEM_DTYPE_COUNT; dt++) {
      j.dtype = dt;
      run_size(&j, 4096);
    }
    CHECK_OK(mscclppPlanDestroy(j.plan));
    free(t);
  }
}

/* One plan of the corpus at its sizes (sizes: "4096,1000,..."). */
static void run_plan(const char* path, const char* sizes) {
  size_t len;
  char* text = slurp(path, &len);
  struct job j = {.name = path, .dtype = mscclppFloat32, .packet = EXEC_GPU_LL16};
  load(text, len, path, &j);
  j.op = is_reduction(j.info.collective) ? first_op(text) : -1;
  run_graph_first(&j, strtoull(sizes, NULL, 0));
  char list[256];
  snprintf(list, sizeof(list), "%s", sizes);
  for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
    run_size(&j, strtoull(t, NULL, 0));
  run_back_to_back(&j);
  run_graph(&j);
  CHECK_OK(mscclppPlanDestroy(j.plan));
  if (j.op >= 0) sweep(text, path);
  free(text);
}

/* An MSCCL XML sample (float32 sums at three sizes), skipped unless it is for this many ranks. */
static int run_xml(const char* path) {
  char* json = NULL;
  size_t len = 0;
  CHECK_OK(mscclppMscclXmlToPlanJson(path, &json, &len));
  struct job j = {.name = path, .dtype = mscclppFloat32, .packet = EXEC_GPU_LL16};
  load(json, len, path, &j);
  free(json);
  int ran = j.info.nranks == g.n;
  j.op = is_reduction(j.info.collective) ? 0 : -1;
  static const uint64_t counts[] = {64, 1000, 4096};
  for (size_t i = 0; ran && i < sizeof(counts) / sizeof(counts[0]); i++) run_size(&j, counts[i] * sizeof(float));
  if (ran) run_back_to_back(&j), run_graph(&j);
  CHECK_OK(mscclppPlanDestroy(j.plan));
  return ran;
}

int main(int argc, char** argv) {
  if (argc < 2) TEST_FAIL("usage: exec_gpu GOOD.TSV [SAMPLE.xml ...]");
  init();
  FILE* f = fopen(argv[1], "r");
  CHECK_MSG(f != NULL, "cannot open %s", argv[1]);
  char line[1024], path[768], sizes[256];
  int nplans = 0;
  while (fgets(line, sizeof(line), f)) {
    int n = 0;
    if (sscanf(line, "%767[^\t]\t%d\t%255s", path, &n, sizes) != 3 || n != g.n) continue;
    run_plan(path, sizes);
    nplans++;
    if (g.rank == 0) printf("exec_gpu: %s ok\n", path);
  }
  fclose(f);
  for (int i = 2; i < argc; i++)
    if (run_xml(argv[i])) {
      nplans++;
      if (g.rank == 0) printf("exec_gpu: %s ok\n", argv[i]);
    }
  if (nplans == 0) TEST_SKIP("no plan of the corpus is for %d ranks", g.n);
  if (g.rank == 0) printf("exec_gpu: %d plans, %ld calls per rank on %d GPU ranks: OK\n", nplans, g.calls, g.n);
  CHECK_OK(mscclppCommDestroy(g.comm));
  cudaFree(g.dev);
  free(g.host);
  return 0;
}
#endif
