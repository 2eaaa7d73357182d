/* mscclpp-plan - execution plans from the command line.
 *
 *   mscclpp-plan validate [--strict] [--json] FILE...
 *                                             loads every plan: "FILE: OK" or the error (exit 1),
 *                                             then runs the order check (mscclppPlanCheckOrder) and
 *                                             lists what it finds ("FILE: order: ..."; --strict:
 *                                             a finding fails the plan too); --json: all of it as
 *                                             one JSON document instead
 *   mscclpp-plan run FILE... -n RANKS [--size BYTES[,BYTES...]] [--dtype T[,T...]|all] [--cpu|--gpu]
 *                    [--ll8] [--iters N] [--hosts H]
 *                                             runs the plans (in turn, one communicator) on RANKS
 *                                             ranks (mscclpp-run beside this program) and checks
 *                                             each result against the plan's collective; prints
 *                                             the mean time per call. --dtype: each datatype in
 *                                             turn (default float; all: every one the executors
 *                                             take, int8 .. f8e5m2). --gpu: GPU ranks (one GPU
 *                                             per local rank; buffers from cudaMalloc, calls on a
 *                                             stream, timed to the stream's end); --ll8: LL plans
 *                                             with LL8 packets (GPU ranks); --hosts H: CPU rank r
 *                                             acts as a rank of host r % H (ranks of different
 *                                             hosts reach each other over tcp)
 *   mscclpp-plan draw FILE [--dot]            the plan step by step, or a graphviz graph
 *
 * --size is the per-rank input in bytes (reducescatter: the per-rank output). Checked
 * collectives: allreduce, allgather, reducescatter, alltoall, sendrecv (rank r sends to r+1),
 * broadcast (root 0); others only run. A reduction is checked against the plan's reduce_op, which
 * every reduce op of the plan must name alike (a plan without reduce ops: sum). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include <mscclpp/mscclpp.h>

#include "algo/algo.h"
#include "algo/verify.h"
#include "exec/gpu/gpu.h"
#include "plan/draw.h"
#include "plan/plan.h"
#include "plan/xml/xml.h"

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define MAX_FILES 16

struct opts {
  const char* file; /* the one being run */
  const char* files[MAX_FILES];
  int nfiles;
  int n, gpu, iters, dtype, dot, ll8, hosts;
  int dtypes[ELEM_DTYPE_COUNT], ndtypes; /* --dtype, in the order given; dtype: the one being run */
  char sizes[512];
  void* stream; /* GPU ranks: the calls' stream */
};

static int usage(void) {
  fprintf(stderr, "usage: mscclpp-plan validate [--strict] [--json] FILE... | run FILE -n RANKS [--size B[,B...]] [--dtype T[,T...]|all] "
                  "[--cpu|--gpu] [--ll8] [--iters N] [--hosts H] | draw FILE [--dot] | convert FILE.xml [-o OUT.json]\n");
  return 2;
}

/* What validate found for one plan: load error (NULL: loaded), the order check's findings (one per
 * line of text) or why it did not run, and whether the load turned double scratch on. */
struct verdict {
  const char* file;
  char error[1024], skipped[1024];
  char* text;
  int findings, double_by_check;
};

/* Loads v->file and runs the order check on it. */
static void judge(struct verdict* v) {
  static char text[1 << 16];
  mscclppPlan_t p;
  v->text = text, text[0] = '\0', v->error[0] = v->skipped[0] = '\0', v->findings = v->double_by_check = 0;
  if (mscclppPlanLoadFile(v->file, &p) != mscclppSuccess) {
    snprintf(v->error, sizeof(v->error), "%s", mscclppGetLastError());
    return;
  }
  mscclppPlanInfo_t info;
  v->double_by_check = mscclppPlanInfo(p, &info) == mscclppSuccess && info.doubleScratchByCheck;
  if (mscclppPlanCheckOrder(p, &v->findings, text, sizeof(text)) != mscclppSuccess)
    snprintf(v->skipped, sizeof(v->skipped), "%s", mscclppGetLastError()), text[0] = '\0';
  mscclppPlanDestroy(p);
}

static void print_text(const struct verdict* v, int strict) {
  if (v->error[0]) {
    printf("%s: %s\n", v->file, v->error);
    return;
  }
  if (v->double_by_check) printf("%s: use_double_scratch_buffer turned on at load (MSCCLPP_PLAN_ORDER_CHECK=fix)\n", v->file);
  if (v->skipped[0]) printf("%s: order check skipped: %s\n", v->file, v->skipped);
  for (char *save = NULL, *line = strtok_r(v->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
    printf("%s: order: %s\n", v->file, line);
  if (v->findings > 64) printf("%s: order: ... %d findings in all\n", v->file, v->findings);
  printf("%s: %s\n", v->file, v->findings ? (strict ? "FAILED (order)" : "OK (with order findings)") : "OK");
}

/* {"file", "ok", "error", "double_scratch_by_check", "order": {"checked", "skipped", "count",
 * "findings": [...]}} */
static json_t* verdict_json(const struct verdict* v, int ok) {
  json_t* found = json_array();
  for (char *save = NULL, *line = strtok_r(v->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
    json_array_append_new(found, json_string(line));
  json_t* order = json_pack("{s:b, s:s?, s:i, s:o}", "checked", !v->error[0] && !v->skipped[0], "skipped",
                            v->skipped[0] ? v->skipped : NULL, "count", v->findings, "findings", found);
  return json_pack("{s:s, s:b, s:s?, s:b, s:o}", "file", v->file, "ok", ok, "error", v->error[0] ? v->error : NULL,
                   "double_scratch_by_check", v->double_by_check, "order", order);
}

static int cmd_validate(int argc, char** argv) {
  int bad = 0, strict = 0, as_json = 0, i = 0;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (!strcmp(argv[i], "--strict")) strict = 1;
    else if (!strcmp(argv[i], "--json")) as_json = 1;
    else return usage();
  }
  json_t* plans = json_array();
  for (; i < argc; i++) {
    struct verdict v = {.file = argv[i]};
    judge(&v);
    int ok = !v.error[0] && !(strict && v.findings);
    bad |= !ok;
    if (as_json) json_array_append_new(plans, verdict_json(&v, ok));
    else print_text(&v, strict);
  }
  if (as_json) {
    json_t* root = json_pack("{s:o, s:b}", "plans", plans, "ok", !bad);
    char* out = json_dumps(root, JSON_INDENT(1));
    if (out) puts(out);
    free(out);
    json_decref(root);
  } else {
    json_decref(plans);
  }
  return bad;
}

static int cmd_draw(int argc, char** argv) {
  if (argc < 1) return usage();
  mscclppPlan_t p;
  if (mscclppPlanLoadFile(argv[0], &p) != mscclppSuccess) {
    fprintf(stderr, "%s\n", mscclppGetLastError());
    return 1;
  }
  plan_draw(stdout, p, argc > 1 && strcmp(argv[1], "--dot") == 0);
  mscclppPlanDestroy(p);
  return 0;
}

/* --dtype's value: datatype names (elem_dtype_name), comma-separated, or "all". 0 or -1 (said why). */
static int parse_dtypes(const char* v, struct opts* o) {
  o->ndtypes = 0;
  if (!strcmp(v, "all")) {
    for (int d = 0; d < ELEM_DTYPE_COUNT; d++) o->dtypes[o->ndtypes++] = d;
    return 0;
  }
  char list[256];
  snprintf(list, sizeof(list), "%s", v);
  for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int dt = -1;
    for (int d = 0; d < ELEM_DTYPE_COUNT; d++)
      if (!strcmp(t, elem_dtype_name(d))) dt = d;
    if (dt < 0) return fprintf(stderr, "unknown datatype %s\n", t), -1;
    if (o->ndtypes == ELEM_DTYPE_COUNT) return fprintf(stderr, "--dtype %s: too many datatypes\n", v), -1;
    o->dtypes[o->ndtypes++] = dt;
  }
  return o->ndtypes ? 0 : (fprintf(stderr, "--dtype: no datatype\n"), -1);
}

static int parse_run(int argc, char** argv, struct opts* o) {
  memset(o, 0, sizeof(*o));
  o->iters = 3, o->dtypes[0] = o->dtype = mscclppFloat32, o->ndtypes = 1;
  snprintf(o->sizes, sizeof(o->sizes), "4096");
  for (int i = 0; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-n") && v) o->n = atoi(v), i++;
    else if (!strcmp(a, "--size") && v) snprintf(o->sizes, sizeof(o->sizes), "%s", v), i++;
    else if (!strcmp(a, "--iters") && v) o->iters = atoi(v), i++;
    else if (!strcmp(a, "--cpu")) o->gpu = 0;
    else if (!strcmp(a, "--gpu")) o->gpu = 1;
    else if (!strcmp(a, "--ll8")) o->ll8 = 1;
    else if (!strcmp(a, "--hosts") && v) o->hosts = atoi(v), i++;
    else if (!strcmp(a, "--dtype") && v) {
      if (parse_dtypes(v, o)) return -1;
      i++;
    } else if (o->nfiles < MAX_FILES && a[0] != '-') o->files[o->nfiles++] = a;
    else return fprintf(stderr, "unknown argument %s\n", a), -1;
  }
  if (!o->nfiles || o->iters < 1) return -1;
  if (o->ll8 && !o->gpu) return fprintf(stderr, "--ll8 is for GPU ranks (--gpu)\n"), -1;
  if (o->hosts < 0 || (o->hosts && o->gpu)) return fprintf(stderr, "--hosts H (H >= 1) is for CPU ranks\n"), -1;
  o->file = o->files[0];
  return 0;
}

/* The reduce_op the plan's reductions all name (enum elem_op; sum when it has none), or -1 when
 * two of them differ: such a plan computes no collective this tool can check. */
static int plan_redop(const struct mscclppPlan* p) {
  int found = -1;
  for (int r = 0; r < p->nranks; r++)
    for (int b = 0; b < p->ranks[r].nblocks; b++)
      for (uint32_t i = 0; i < p->ranks[r].blocks[b].nops; i++) {
        const struct plan_op* op = &p->ranks[r].blocks[b].ops[i];
        int c = op->code;
        if (c == PLAN_OP_RE || c == PLAN_OP_RES || c == PLAN_OP_RRE || c == PLAN_OP_RRES || c == PLAN_OP_REPKT ||
            c == PLAN_OP_RESPKT || c == PLAN_OP_RECPKT || c == PLAN_OP_RECSPKT || c == PLAN_OP_GLRE || c == PLAN_OP_GLRES) {
          if (found >= 0 && found != op->redop) return -1;
          found = op->redop;
        }
      }
  return found < 0 ? ELEM_OP_SUM : found;
}

/* One rank's buffers for a call of S bytes (per-rank input; reducescatter: per-rank output). */
struct bufs {
  char *send, *recv, *mem;
  char* dmem; /* GPU ranks: the device copy of mem (same layout), where the plan runs */
  uint64_t sb, rb;
};

/* Whether the tool knows what a plan of this collective computes (test and custom plans: no). */
static int checkable(const char* coll) {
  return !strcmp(coll, "allreduce") || !strcmp(coll, "reducescatter") || !strcmp(coll, "allgather") ||
         !strcmp(coll, "alltoall") || !strcmp(coll, "sendrecv") || !strcmp(coll, "broadcast");
}

/* Buffers of this rank for S bytes of input. A collective's sizes follow from it; a test or custom
 * plan's output has the size its chunk counts give (S / input_chunks * output_chunks). */
static int make_bufs(const struct mscclppPlan* p, int n, int rank, uint64_t S, struct bufs* b) {
  const char* coll = p->collective;
  int inplace = p->inplace;
  memset(b, 0, sizeof(*b));
  b->sb = S, b->rb = S;
  if (!strcmp(coll, "allgather")) b->rb = S * (uint64_t)n;
  if (!strcmp(coll, "reducescatter")) b->sb = S * (uint64_t)n;
  const struct plan_rank* pr = &p->ranks[rank];
  if (!checkable(coll) && pr->in_chunks && pr->out_chunks) {
    if (S % pr->in_chunks) return fprintf(stderr, "size %llu does not split into the plan's %u input chunks\n",
                                          (unsigned long long)S, pr->in_chunks), -1;
    b->rb = S / pr->in_chunks * pr->out_chunks;
  }
  if (!checkable(coll) && inplace) b->sb = b->rb = b->sb > b->rb ? b->sb : b->rb;
  uint64_t total = b->sb + b->rb;
  b->mem = malloc(total + 64);
  if (!b->mem) return -1;
  memset(b->mem, 0xab, total + 64);
  b->send = b->mem, b->recv = b->mem + b->sb;
  if (inplace) {
    if (!strcmp(coll, "allgather")) b->recv = b->mem, b->send = b->mem + (uint64_t)rank * S;
    else if (!strcmp(coll, "reducescatter")) b->send = b->mem, b->recv = b->mem + (uint64_t)rank * S;
    else b->send = b->recv = b->mem;
  }
  return 0;
}

/* Wrong elements of this rank's result. */
static size_t check(const char* coll, const struct verify_spec* s, int rank, uint64_t S, size_t es, const struct bufs* b) {
  size_t cnt = S / es, bad = 0;
  int n = s->nranks;
  if (!strcmp(coll, "allreduce")) return verify_check_reduced(s, 0, cnt, b->recv);
  if (!strcmp(coll, "reducescatter")) return verify_check_reduced(s, (size_t)rank * cnt, cnt, b->recv);
  if (!strcmp(coll, "allgather")) {
    for (int r = 0; r < n; r++) bad += verify_check_copy(s, r, 0, cnt, b->recv + (uint64_t)r * S);
    return bad;
  }
  if (!strcmp(coll, "alltoall")) {
    size_t cb = cnt / (size_t)n;
    for (int p = 0; p < n; p++) bad += verify_check_copy(s, p, (size_t)rank * cb, cb, b->recv + (uint64_t)p * cb * es);
    return bad;
  }
  if (!strcmp(coll, "sendrecv")) return verify_check_copy(s, (rank + n - 1) % n, 0, cnt, b->recv);
  if (!strcmp(coll, "broadcast")) return verify_check_copy(s, 0, 0, cnt, b->recv);
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define TRY(call, what)                                                                  \
  do {                                                                                   \
    if ((call) != mscclppSuccess) {                                                      \
      fprintf(stderr, "rank %d: %s: %s\n", rank, what, mscclppGetLastError());           \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

/* GPU ranks: the device copy of the buffers (CPU ranks: nothing to do). */
static int dev_alloc(const struct opts* o, struct bufs* b) {
  if (!o->gpu) return 0;
#if MSCCLPP_HAVE_CUDA
  cudaError_t e = cudaMalloc((void**)&b->dmem, b->sb + b->rb + 64);
  if (e == cudaSuccess) return 0;
  return fprintf(stderr, "cudaMalloc of %llu bytes: %s\n", (unsigned long long)(b->sb + b->rb + 64), cudaGetErrorString(e)), 1;
#else
  (void)b;
  return fprintf(stderr, "--gpu: this build has no CUDA\n"), 1;
#endif
}

static void dev_free(struct bufs* b) {
#if MSCCLPP_HAVE_CUDA
  if (b->dmem) cudaFree(b->dmem);
#endif
  b->dmem = NULL;
}

/* Copies host -> device (to_dev) or the output device -> host, on GPU ranks. */
static int dev_copy(const struct bufs* b, int to_dev) {
  if (!b->dmem) return 0;
#if MSCCLPP_HAVE_CUDA
  uint64_t ro = (uint64_t)(b->recv - b->mem);
  cudaError_t e = to_dev ? cudaMemcpy(b->dmem, b->mem, b->sb + b->rb + 64, cudaMemcpyHostToDevice)
                         : cudaMemcpy(b->mem + ro, b->dmem + ro, b->rb, cudaMemcpyDeviceToHost);
  /* from pageable memory the copy may return before its DMA landed: peers write into us next */
  if (e == cudaSuccess && to_dev) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return fprintf(stderr, "cudaMemcpy: %s\n", cudaGetErrorString(e)), 1;
#else
  (void)to_dev;
#endif
  return 0;
}

/* One call, complete when it returns: CPU ranks run it; GPU ranks enqueue it on the stream
 * (LL16, or LL8 with --ll8) and wait for the stream. */
static mscclppResult_t call(mscclppComm_t comm, mscclppPlan_t plan, const struct opts* o, const struct bufs* b) {
  mscclppPacketType_t pkt = o->ll8 ? mscclppPacketLL8 : mscclppPacketLL16;
  if (!b->dmem) return mscclppExecutePlanPacket(comm, plan, b->send, b->recv, b->sb, b->rb, (mscclppDataType_t)o->dtype, pkt, NULL);
  char *send = b->dmem + (b->send - b->mem), *recv = b->dmem + (b->recv - b->mem);
  mscclppResult_t r = mscclppExecutePlanPacket(comm, plan, send, recv, b->sb, b->rb, (mscclppDataType_t)o->dtype, pkt,
                                               o->stream);
#if MSCCLPP_HAVE_CUDA
  cudaError_t e = r == mscclppSuccess ? cudaStreamSynchronize((cudaStream_t)o->stream) : cudaSuccess;
  if (e != cudaSuccess) {
    fprintf(stderr, "the stream failed: %s\n", cudaGetErrorString(e));
    return mscclppUnhandledCudaError;
  }
#endif
  return r == mscclppSuccess ? exec_gpu_check(comm) : r;
}

/* One size: iters calls, each with fresh inputs, each checked. */
static int run_size(mscclppComm_t comm, mscclppPlan_t plan, const struct opts* o, int rank, int n, uint64_t S,
                    uint64_t* seed, double* secs) {
  size_t es = mscclppDataTypeSize((mscclppDataType_t)o->dtype);
  const char* coll = plan->collective;
  int reduce = !strcmp(coll, "allreduce") || !strcmp(coll, "reducescatter");
  struct verify_spec spec = {.dtype = o->dtype, .op = reduce ? plan_redop(plan) : -1, .nranks = n};
  struct bufs b;
  if (reduce && spec.op < 0)
    return fprintf(stderr, "%s: its reduce ops name different reduce_ops; cannot check the %s\n", o->file, coll), 1;
  if (S % es || (!strcmp(coll, "alltoall") && S % (es * (uint64_t)n)))
    return fprintf(stderr, "size %llu does not split into %s elements per rank\n", (unsigned long long)S,
                   elem_dtype_name(o->dtype)), 1;
  if (make_bufs(plan, n, rank, S, &b)) return fprintf(stderr, "rank %d: no buffers for size %llu\n", rank,
                                                       (unsigned long long)S), 1;
  int rc = dev_alloc(o, &b);
  *secs = 0;
  for (int it = 0; it < o->iters && !rc; it++) {
    spec.seed = (*seed)++;
    verify_fill(&spec, rank, 0, b.sb / es, b.send);
    if (dev_copy(&b, 1)) {
      rc = 1;
      break;
    }
    if (mscclppBootstrapBarrier(comm) != mscclppSuccess) {
      rc = fprintf(stderr, "rank %d: barrier: %s\n", rank, mscclppGetLastError()) > 0;
      break;
    }
    double t0 = now_s();
    if (call(comm, plan, o, &b) != mscclppSuccess) {
      rc = fprintf(stderr, "rank %d: execute: %s\n", rank, mscclppGetLastError()) > 0;
      break;
    }
    *secs += now_s() - t0;
    /* GPU ranks: peers may read our buffers until they are done too */
    if (dev_copy(&b, 0) || (b.dmem && mscclppBootstrapBarrier(comm) != mscclppSuccess)) {
      rc = fprintf(stderr, "rank %d: after the call: %s\n", rank, mscclppGetLastError()) > 0;
      break;
    }
    size_t bad = check(coll, &spec, rank, S, es, &b);
    if (bad) rc = fprintf(stderr, "rank %d: %s size %llu %s %s iteration %d: %zu wrong elements\n", rank, o->file,
                          (unsigned long long)S, elem_dtype_name(o->dtype), reduce ? elem_op_name((enum elem_op)spec.op) : "",
                          it, bad) > 0;
  }
  dev_free(&b);
  free(b.mem);
  *secs /= o->iters;
  return rc;
}

/* GPU ranks: the local rank's GPU (one per local rank) and a stream for the calls. */
static int gpu_setup(struct opts* o, mscclppConfig_t* cfg) {
#if MSCCLPP_HAVE_CUDA
  const char* v = getenv("MSCCLPP_LOCAL_RANK");
  int local = v ? atoi(v) : 0, ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) return fprintf(stderr, "--gpu: no usable GPU\n"), 1;
  cfg->cudaDevice = local % ndev;
  cudaError_t e = cudaSetDevice(cfg->cudaDevice);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags((cudaStream_t*)&o->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) return fprintf(stderr, "--gpu: GPU %d: %s\n", cfg->cudaDevice, cudaGetErrorString(e)), 1;
  return 0;
#else
  (void)o, (void)cfg;
  return fprintf(stderr, "--gpu: this build has no CUDA\n"), 1;
#endif
}

/* Every size, every plan in turn on one communicator (plans share its cached state). */
static int worker(struct opts* o) {
  mscclppConfig_t cfg = MSCCLPP_CONFIG_INITIALIZER;
  cfg.rankKind = o->gpu ? mscclppRankGpu : mscclppRankCpu;
  mscclppComm_t comm;
  mscclppPlan_t plans[MAX_FILES] = {0};
  int rank = -1, n = 0, rc = 0;
  if (o->gpu && gpu_setup(o, &cfg)) return 1;
  if (o->hosts > 0) { /* rank r acts as a rank of host r % H: ranks of different hosts meet over tcp */
    char id[64];
    const char* r = getenv("MSCCLPP_RANK");
    snprintf(id, sizeof(id), "plan-host-%d", (r ? atoi(r) : 0) % o->hosts);
    setenv("MSCCLPP_HOST_ID", id, 1);
  }
  TRY(mscclppCommInitFromEnv(&comm, &cfg), "communicator");
  mscclppCommRank(comm, &rank), mscclppCommSize(comm, &n);
  for (int i = 0; i < o->nfiles && !rc; i++)
    if (mscclppPlanLoadFile(o->files[i], &plans[i]) != mscclppSuccess)
      rc = fprintf(stderr, "rank %d: load: %s\n", rank, mscclppGetLastError()) > 0;
  uint64_t seed = 1;
  char sizes[512];
  snprintf(sizes, sizeof(sizes), "%s", o->sizes);
  for (char *save = NULL, *t = strtok_r(sizes, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
    uint64_t S = strtoull(t, NULL, 0);
    for (int i = 0; i < o->nfiles && !rc; i++)
      for (int d = 0; d < o->ndtypes && !rc; d++) {
        double secs = 0;
        o->file = o->files[i], o->dtype = o->dtypes[d];
        rc = run_size(comm, plans[i], o, rank, n, S, &seed, &secs);
        const char* coll = plans[i]->collective;
        int red = !strcmp(coll, "allreduce") || !strcmp(coll, "reducescatter") ? plan_redop(plans[i]) : -1;
        if (!rc && rank == 0)
          printf("%s: %d ranks, %llu bytes %s%s%s: %s, %.1f us per call (%d calls)\n", o->file, n,
                 (unsigned long long)S, elem_dtype_name(o->dtype), red >= 0 ? " " : "",
                 red >= 0 ? elem_op_name((enum elem_op)red) : "",
                 checkable(coll) ? "OK" : "ran (a test plan: no result to check)", secs * 1e6, o->iters);
      }
  }
  for (int i = 0; i < o->nfiles; i++) mscclppPlanDestroy(plans[i]);
  mscclppCommDestroy(comm);
  return rc;
}

/* Not a rank yet: start RANKS copies of this program through mscclpp-run beside it. */
static int launch(int argc, char** argv, const struct opts* o) {
  char self[4096], runner[4200];
  ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) return perror("readlink /proc/self/exe"), 1;
  self[len] = 0;
  char* slash = strrchr(self, '/');
  snprintf(runner, sizeof(runner), "%.*s/mscclpp-run", (int)(slash ? slash - self : 1), slash ? self : ".");
  char nbuf[16];
  snprintf(nbuf, sizeof(nbuf), "%d", o->n);
  char** args = calloc((size_t)argc + 8, sizeof(char*));
  if (!args) return 1;
  int k = 0;
  args[k++] = runner, args[k++] = "-n", args[k++] = nbuf, args[k++] = self, args[k++] = "run";
  for (int i = 0; i < argc; i++) args[k++] = argv[i];
  execv(runner, args);
  perror(runner);
  return 1;
}

static int cmd_run(int argc, char** argv) {
  struct opts o;
  if (parse_run(argc, argv, &o)) return usage();
  if (getenv("MSCCLPP_RANK")) return worker(&o);
  if (o.n < 1) return usage();
  return launch(argc, argv, &o);
}

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  if (!strcmp(argv[1], "validate")) return cmd_validate(argc - 2, argv + 2);
  if (!strcmp(argv[1], "run")) return cmd_run(argc - 2, argv + 2);
  if (!strcmp(argv[1], "draw")) return cmd_draw(argc - 2, argv + 2);
  if (!strcmp(argv[1], "convert")) return xml_convert_main(argc - 1, argv + 1);
  return usage();
}
