/* mscclpp-perf: times and checks the built-in collectives, in the manner of nccl-tests, one process
 * per rank (mscclpp-run -n N, torchrun, mpirun; mscclppCommInitFromEnv).
 *
 *   mscclpp-perf COLLECTIVE [-b MINBYTES] [-e MAXBYTES] [-f FACTOR | -i STEPBYTES] [-n ITERS]
 *                [-w WARMUP] [-c 0|1] [-d DTYPE|all] [-o OP|all] [-r ROOT] [-G GRAPHS] [-s SIZE,...]
 *                [--json FILE] [--cpu | --gpu] [--nccl]
 *
 * COLLECTIVE: allreduce allgather reducescatter broadcast reduce alltoall sendrecv (sendrecv: every
 * rank sends to rank+1 and receives from rank-1 in one group). Sizes as nccl-tests counts them:
 * the buffer of allreduce, broadcast, reduce and sendrecv, the whole output of allgather, the whole
 * input of reducescatter, a rank's whole buffer of alltoall. Times are the largest over ranks of
 * each rank's average; busbw = algbw * 2(n-1)/n (allreduce), (n-1)/n (allgather, reducescatter,
 * alltoall), 1 (broadcast, reduce, sendrecv). The check (-c 1) runs each size once more on fresh
 * inputs, the way the timing ran (captured and replayed under -G), (src/algo/verify.h: exact in every order and datatype, 2 ulp for avg and premulsum) and
 * counts wrong elements over all ranks; any wrong element makes the exit status 1.
 * -d all / -o all run every datatype / every operator (as nccl-tests: datatypes outer, operators
 * inner, the sizes for each pair; collectives without an operator run once per datatype); "mulsum"
 * (nccl-tests' name) is taken for premulsum, which the rows still print.
 *
 * GPU ranks: buffers from cudaMalloc, calls on a non-blocking stream; -G N captures the -n calls
 * of a size in a CUDA graph and replays it N times (eager launches otherwise). --nccl runs NCCL
 * (dlopen: MSCCLPP_NCCL_LIB_PATH, else libnccl.so.2, else PyTorch's nvidia-nccl wheel) on the same
 * buffers in the same run, with NCCL_NVLS_ENABLE=0 unless set, and prints a "ratio" row per size:
 * NCCL's time / ours (above 1: ours is faster). -s 8,1K,1G runs exactly those sizes. */
#include <dlfcn.h>
#include <getopt.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mscclpp/mscclpp.h>

#include "algo/algo.h"
#include "algo/verify.h"
#include "util/param.h"
#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>
#endif

struct opts {
  int coll;
  size_t minb, maxb, stepb;
  double factor;
  int iters, warmup, check, root, graphs, kind, nccl;
  int dtype, op;        /* the pair being run */
  unsigned dtypes, ops; /* -d, -o: bit masks of the datatypes and operators to run */
  const char* json;
  size_t sizes[64]; /* -s: an explicit list instead of -b/-e/-f */
  int nsizes;
};

/* ---- options ---------------------------------------------------------------------------------- */

static void usage(void) {
  fprintf(stderr,
          "usage: mscclpp-perf COLLECTIVE [-b MINBYTES] [-e MAXBYTES] [-f FACTOR | -i STEPBYTES] [-n ITERS] [-w WARMUP]\n"
          "                    [-c 0|1] [-d DTYPE|all] [-o OP|all] [-r ROOT] [-G GRAPHS] [-s SIZE,SIZE,...]\n"
          "                    [--json FILE] [--cpu|--gpu] [--nccl]\n"
          "  COLLECTIVE  allreduce allgather reducescatter broadcast reduce alltoall sendrecv\n"
          "  DTYPE       int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2\n"
          "  OP          sum prod max min avg premulsum (mulsum: the same)\n"
          "  sizes take K, M, G (powers of 1024); defaults -b 8 -e 32M -f 2 -n 20 -w 5 -c 1 -d float -o sum -r 0\n");
  exit(2);
}

static size_t parse_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  double mult = *end == 'K' || *end == 'k' ? 1024.0 : *end == 'M' || *end == 'm' ? 1048576.0 : *end == 'G' || *end == 'g' ? 1073741824.0 : 1.0;
  if (end == s || v < 0 || (mult > 1.0 && *++end != '\0') || (mult == 1.0 && *end != '\0')) {
    fprintf(stderr, "mscclpp-perf: '%s' is not a size\n", s);
    exit(2);
  }
  return (size_t)(v * mult);
}

/* -s 8,1K,64K: the sizes to run, in order. */
static void parse_sizes(const char* list, struct opts* o) {
  char buf[1024];
  snprintf(buf, sizeof(buf), "%s", list);
  o->nsizes = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
    if (o->nsizes == (int)(sizeof(o->sizes) / sizeof(o->sizes[0]))) {
      fprintf(stderr, "mscclpp-perf: -s takes at most 64 sizes\n");
      exit(2);
    }
    o->sizes[o->nsizes++] = parse_size(t);
  }
  if (o->nsizes > 0) o->minb = o->sizes[0], o->maxb = o->sizes[0];
  for (int i = 0; i < o->nsizes; i++) o->maxb = o->sizes[i] > o->maxb ? o->sizes[i] : o->maxb;
}

static int lookup(const char* s, int n, const char* (*name)(int), const char* what) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, name(i)) == 0) return i;
  fprintf(stderr, "mscclpp-perf: unknown %s '%s'\n", what, s);
  usage();
  return -1;
}

static const char* coll_name(int i) { return algo_coll_name((enum algo_coll)i); }
static const char* op_name(int i) { return elem_op_name((enum elem_op)i); }

/* -d/-o's argument as a bit mask over n names: "all" is every bit, otherwise one name's bit. */
static unsigned lookup_mask(const char* s, int n, const char* (*name)(int), const char* what) {
  return strcmp(s, "all") == 0 ? (1u << n) - 1 : 1u << lookup(s, n, name, what);
}

/* The operators -o takes: our names, "all", and nccl-tests' "mulsum" for premulsum. */
static unsigned parse_ops(const char* s) {
  return strcmp(s, "mulsum") == 0 ? 1u << ELEM_OP_PREMUL : lookup_mask(s, ELEM_OP_COUNT, op_name, "op");
}

static void parse(int argc, char** argv, struct opts* o) {
  *o = (struct opts){.minb = 8, .maxb = 32u << 20, .factor = 2, .iters = 20, .warmup = 5, .check = 1,
                     .dtypes = 1u << 7 /* float */, .ops = 1u << ELEM_OP_SUM, .kind = mscclppRankAuto};
  static const struct option longs[] = {{"json", required_argument, 0, 'J'}, {"cpu", no_argument, 0, 'C'},
                                        {"gpu", no_argument, 0, 'U'},        {"nccl", no_argument, 0, 'N'},
                                        {"help", no_argument, 0, 'h'},       {0, 0, 0, 0}};
  for (int c; (c = getopt_long(argc, argv, "b:e:f:i:n:w:c:d:o:r:G:s:h", longs, NULL)) != -1;) {
    switch (c) {
      case 'b': o->minb = parse_size(optarg); break;
      case 'e': o->maxb = parse_size(optarg); break;
      case 'f': o->factor = atof(optarg), o->stepb = 0; break;
      case 'i': o->stepb = parse_size(optarg), o->factor = 0; break;
      case 'n': o->iters = atoi(optarg); break;
      case 'w': o->warmup = atoi(optarg); break;
      case 'c': o->check = atoi(optarg); break;
      case 'd': o->dtypes = lookup_mask(optarg, ELEM_DTYPE_COUNT, elem_dtype_name, "datatype"); break;
      case 'o': o->ops = parse_ops(optarg); break;
      case 'r': o->root = atoi(optarg); break;
      case 's': parse_sizes(optarg, o); break;
      case 'G': o->graphs = atoi(optarg); break;
      case 'J': o->json = optarg; break;
      case 'C': o->kind = mscclppRankCpu; break;
      case 'U': o->kind = mscclppRankGpu; break;
      case 'N': o->nccl = 1; break;
      default: usage();
    }
  }
  if (optind != argc - 1) usage();
  o->coll = lookup(argv[optind], ALGO_COLL_COUNT, coll_name, "collective");
  if (o->nsizes > 0) { /* buffers are sized for maxb; the loop walks the list */
    o->minb = o->maxb;
    for (int i = 0; i < o->nsizes; i++) o->minb = o->sizes[i] < o->minb ? o->sizes[i] : o->minb;
  }
  if (o->iters < 1 || o->warmup < 0 || o->minb > o->maxb || (o->factor <= 1.0 && o->stepb == 0)) {
    fprintf(stderr, "mscclpp-perf: need -n >= 1, -w >= 0, -b <= -e, and -f > 1 or -i > 0\n");
    exit(2);
  }
}

/* ---- what one size moves ---------------------------------------------------------------------- */

static int is_reduction(int coll) {
  return coll == ALGO_COLL_ALLREDUCE || coll == ALGO_COLL_REDUCESCATTER || coll == ALGO_COLL_REDUCE;
}
static int is_rooted(int coll) { return coll == ALGO_COLL_BROADCAST || coll == ALGO_COLL_REDUCE; }

struct shape {
  size_t count;          /* the API's count */
  size_t in, out;        /* elements of this rank's input and output */
  size_t bytes;          /* the size as nccl-tests counts it */
};

static struct shape shape_of(int coll, size_t bytes, size_t es, int n) {
  int multi = coll == ALGO_COLL_ALLGATHER || coll == ALGO_COLL_REDUCESCATTER || coll == ALGO_COLL_ALLTOALL;
  size_t per = bytes / es / (multi ? (size_t)n : 1);
  if (per == 0) per = 1;
  struct shape s = {.count = per, .in = per, .out = per, .bytes = per * es * (multi ? (size_t)n : 1)};
  if (coll == ALGO_COLL_ALLGATHER || coll == ALGO_COLL_ALLTOALL) s.out = per * (size_t)n;
  if (coll == ALGO_COLL_REDUCESCATTER || coll == ALGO_COLL_ALLTOALL) s.in = per * (size_t)n;
  return s;
}

static double bus_factor(int coll, int n) {
  if (coll == ALGO_COLL_ALLREDUCE) return 2.0 * (n - 1) / n;
  if (coll == ALGO_COLL_ALLGATHER || coll == ALGO_COLL_REDUCESCATTER || coll == ALGO_COLL_ALLTOALL) return (double)(n - 1) / n;
  return 1.0;
}

/* ---- the benchmark's state -------------------------------------------------------------------- */

enum impl { IMPL_MSCCLPP = 0, IMPL_NCCL = 1 };

typedef struct {
  char internal[128];
} nccl_id;

/* The NCCL functions the comparison needs, from dlopen (same enum values as ours). */
struct nccl_api {
  const char* (*GetErrorString)(int);
  int (*GetUniqueId)(nccl_id*);
  int (*CommInitRank)(void**, int, nccl_id, int);
  int (*CommDestroy)(void*);
  int (*AllReduce)(const void*, void*, size_t, int, int, void*, void*);
  int (*AllGather)(const void*, void*, size_t, int, void*, void*);
  int (*ReduceScatter)(const void*, void*, size_t, int, int, void*, void*);
  int (*Broadcast)(const void*, void*, size_t, int, int, void*, void*);
  int (*Reduce)(const void*, void*, size_t, int, int, int, void*, void*);
  int (*Send)(const void*, size_t, int, int, void*, void*);
  int (*Recv)(void*, size_t, int, int, void*, void*);
  int (*GroupStart)(void);
  int (*GroupEnd)(void);
  int (*RedOpCreatePreMulSum)(int*, void*, int, int, void*);
  int (*RedOpDestroy)(int, void*);
};

struct bench {
  struct opts o;
  mscclppComm_t comm;
  int rank, n, gpu;
  size_t es;
  char *send, *recv; /* device memory on GPU ranks */
  char *hin, *hout;  /* host staging */
  size_t cap;        /* bytes of each buffer */
  void* stream;
  struct nccl_api nc;
  void* ncomm;
  int mscclpp_broken; /* GPU: our collectives failed (not built yet); NCCL rows only */
  FILE* json;
  int json_rows;
  double busbw_sum[2]; /* per impl */
  int busbw_n[2];
  size_t wrong_total;
};

static void die(struct bench* b, const char* what, const char* why) {
  fprintf(stderr, "mscclpp-perf: rank %d: %s: %s\n", b ? b->rank : -1, what, why);
  exit(1);
}

#define MPP_OK(b, call)                                                          \
  do {                                                                           \
    mscclppResult_t r_ = (call);                                                 \
    if (r_ != mscclppSuccess) die((b), #call, mscclppGetLastError());            \
  } while (0)

/* ---- buffers (host memory on CPU ranks, device memory on GPU ranks) ---------------------------- */

#if MSCCLPP_HAVE_CUDA
#define CUDA_OK(b, call)                                                         \
  do {                                                                           \
    cudaError_t e_ = (call);                                                     \
    if (e_ != cudaSuccess) die((b), #call, cudaGetErrorString(e_));              \
  } while (0)
#endif

static void* buf_alloc(struct bench* b, size_t bytes) {
  void* p = NULL;
  if (!b->gpu) p = malloc(bytes);
#if MSCCLPP_HAVE_CUDA
  else CUDA_OK(b, cudaMalloc(&p, bytes));
#endif
  if (p == NULL) die(b, "allocating buffers", "out of memory");
  return p;
}

static void buf_put(struct bench* b, void* dst, const void* src, size_t bytes) {
  if (!b->gpu) memcpy(dst, src, bytes);
#if MSCCLPP_HAVE_CUDA
  else {
    CUDA_OK(b, cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    /* from pageable memory the copy may return before its DMA landed: a peer may write here next */
    CUDA_OK(b, cudaDeviceSynchronize());
  }
#endif
}

static void buf_get(struct bench* b, void* dst, const void* src, size_t bytes) {
  if (!b->gpu) memcpy(dst, src, bytes);
#if MSCCLPP_HAVE_CUDA
  else CUDA_OK(b, cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
#endif
}

static void buf_garbage(struct bench* b, void* dst, size_t bytes) {
  if (!b->gpu) memset(dst, 0xa5, bytes);
#if MSCCLPP_HAVE_CUDA
  else CUDA_OK(b, cudaMemset(dst, 0xa5, bytes));
#endif
}

/* Waits until the rank's work is done (GPU: the stream drained). */
static void sync_rank(struct bench* b) {
#if MSCCLPP_HAVE_CUDA
  if (b->gpu) CUDA_OK(b, cudaStreamSynchronize((cudaStream_t)b->stream));
#else
  (void)b;
#endif
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- NCCL (GPU ranks only) -------------------------------------------------------------------- */

/* Opens the real NCCL: MSCCLPP_NCCL_LIB_PATH (default libnccl.so.2 on the loader's path), else the
 * nvidia-nccl wheel that PyTorch installs (site-packages/nvidia/nccl/lib/libnccl.so.2). */
static void* nccl_open(const char** used) {
  const char* path = param_str(PARAM_NCCL_LIB_PATH);
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  *used = path;
  if (lib != NULL || getenv("MSCCLPP_NCCL_LIB_PATH") != NULL) return lib;
  static const char* const pats[] = {"/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
                                     "/usr/local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
                                     "/usr/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
                                     "/opt/*/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
                                     "/root/.local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2"};
  static char found[4096];
  for (size_t i = 0; i < sizeof(pats) / sizeof(pats[0]) && lib == NULL; i++) {
    glob_t gl;
    if (glob(pats[i], 0, NULL, &gl) == 0 && gl.gl_pathc > 0) {
      snprintf(found, sizeof(found), "%s", gl.gl_pathv[0]);
      lib = dlopen(found, RTLD_NOW | RTLD_LOCAL);
      if (lib != NULL) *used = found;
    }
    globfree(&gl);
  }
  return lib;
}

static void nccl_load(struct bench* b) {
  /* Never let NCCL create NVLink multicast objects on the shared machines (design.md). */
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  const char* path = NULL;
  void* lib = nccl_open(&path);
  if (lib == NULL) die(b, "--nccl: dlopen (set MSCCLPP_NCCL_LIB_PATH)", dlerror());
  if (b->rank == 0) printf("# NCCL: %s (NCCL_NVLS_ENABLE=%s)\n", path, getenv("NCCL_NVLS_ENABLE"));
#define SYM(name)                                                               \
  do {                                                                          \
    *(void**)&b->nc.name = dlsym(lib, "nccl" #name);                            \
    if (b->nc.name == NULL) die(b, "--nccl: dlsym nccl" #name, path);           \
  } while (0)
  SYM(GetErrorString);
  SYM(GetUniqueId);
  SYM(CommInitRank);
  SYM(CommDestroy);
  SYM(AllReduce);
  SYM(AllGather);
  SYM(ReduceScatter);
  SYM(Broadcast);
  SYM(Reduce);
  SYM(Send);
  SYM(Recv);
  SYM(GroupStart);
  SYM(GroupEnd);
  SYM(RedOpCreatePreMulSum);
  SYM(RedOpDestroy);
#undef SYM
  nccl_id* ids = calloc((size_t)b->n, sizeof(nccl_id));
  if (b->rank == 0 && b->nc.GetUniqueId(&ids[0]) != 0) die(b, "ncclGetUniqueId", "failed");
  MPP_OK(b, mscclppBootstrapAllGather(b->comm, ids, sizeof(nccl_id)));
  int r = b->nc.CommInitRank(&b->ncomm, b->n, ids[0], b->rank);
  if (r != 0) die(b, "ncclCommInitRank", b->nc.GetErrorString(r));
  free(ids);
}

/* ---- one call ---------------------------------------------------------------------------------- */

/* Input and output pointers of a call (in place: NCCL's conventions). */
static void placement(const struct bench* b, const struct shape* s, int inplace, char** in, char** out) {
  size_t block = s->count * b->es;
  *in = b->send, *out = b->recv;
  if (!inplace) return;
  *in = *out = b->recv;
  if (b->o.coll == ALGO_COLL_ALLGATHER) *in = b->recv + (size_t)b->rank * block;
  if (b->o.coll == ALGO_COLL_REDUCESCATTER) *out = b->recv + (size_t)b->rank * block;
}

static int run_nccl(struct bench* b, const struct shape* s, const char* in, char* out, int op) {
  struct nccl_api* nc = &b->nc;
  int t = b->o.dtype, root = b->o.root, next = (b->rank + 1) % b->n, prev = (b->rank + b->n - 1) % b->n;
  switch (b->o.coll) {
    case ALGO_COLL_ALLREDUCE: return nc->AllReduce(in, out, s->count, t, op, b->ncomm, b->stream);
    case ALGO_COLL_ALLGATHER: return nc->AllGather(in, out, s->count, t, b->ncomm, b->stream);
    case ALGO_COLL_REDUCESCATTER: return nc->ReduceScatter(in, out, s->count, t, op, b->ncomm, b->stream);
    case ALGO_COLL_BROADCAST: return nc->Broadcast(in, out, s->count, t, root, b->ncomm, b->stream);
    case ALGO_COLL_REDUCE: return nc->Reduce(in, out, s->count, t, op, root, b->ncomm, b->stream);
    default: break;
  }
  int r = nc->GroupStart();
  for (int q = 0; q < b->n && r == 0; q++) {
    if (b->o.coll == ALGO_COLL_SENDRECV && q != next && q != prev) continue;
    size_t at = b->o.coll == ALGO_COLL_ALLTOALL ? (size_t)q * s->count * b->es : 0;
    if (q == next || b->o.coll == ALGO_COLL_ALLTOALL) r = nc->Send(in + at, s->count, t, q, b->ncomm, b->stream);
    if (r == 0 && (q == prev || b->o.coll == ALGO_COLL_ALLTOALL)) r = nc->Recv(out + at, s->count, t, q, b->ncomm, b->stream);
  }
  int r2 = nc->GroupEnd();
  return r != 0 ? r : r2;
}

static mscclppResult_t run_mscclpp(struct bench* b, const struct shape* s, const char* in, char* out, int op) {
  mscclppDataType_t t = (mscclppDataType_t)b->o.dtype;
  mscclppRedOp_t rop = (mscclppRedOp_t)op;
  mscclppComm_t c = b->comm;
  void* st = b->stream;
  switch (b->o.coll) {
    case ALGO_COLL_ALLREDUCE: return mscclppAllReduce(in, out, s->count, t, rop, c, st);
    case ALGO_COLL_ALLGATHER: return mscclppAllGather(in, out, s->count, t, c, st);
    case ALGO_COLL_REDUCESCATTER: return mscclppReduceScatter(in, out, s->count, t, rop, c, st);
    case ALGO_COLL_BROADCAST: return mscclppBroadcast(in, out, s->count, t, b->o.root, c, st);
    case ALGO_COLL_REDUCE: return mscclppReduce(in, out, s->count, t, rop, b->o.root, c, st);
    case ALGO_COLL_ALLTOALL: return mscclppAllToAll(in, out, s->count, t, c, st);
    default: break;
  }
  MPP_OK(b, mscclppGroupStart());
  MPP_OK(b, mscclppSend(in, s->count, t, (b->rank + 1) % b->n, c, st));
  MPP_OK(b, mscclppRecv(out, s->count, t, (b->rank + b->n - 1) % b->n, c, st));
  return mscclppGroupEnd();
}

/* Runs the call once; an error ends the program (GPU ranks without GPU collectives: returns -1). */
static int run_once(struct bench* b, int impl, const struct shape* s, int inplace, int op) {
  char *in, *out;
  placement(b, s, inplace, &in, &out);
  if (impl == IMPL_NCCL) {
    int r = run_nccl(b, s, in, out, op);
    if (r != 0) die(b, "NCCL collective", b->nc.GetErrorString(r));
    return 0;
  }
  mscclppResult_t r = run_mscclpp(b, s, in, out, op);
  if (r == mscclppInvalidUsage && b->gpu && b->o.nccl && strstr(mscclppGetLastError(), "not built yet")) {
    if (!b->mscclpp_broken && b->rank == 0) printf("# mscclpp: %s; NCCL rows only\n", mscclppGetLastError());
    b->mscclpp_broken = 1;
    return -1;
  }
  if (r != mscclppSuccess) die(b, coll_name(b->o.coll), mscclppGetLastError());
  return 0;
}

/* ---- inputs, operators, checks ----------------------------------------------------------------- */

/* The reduction operator of a measurement (a pre-multiplied sum gets this rank's verify scalar). */
static int make_op(struct bench* b, int impl, const struct verify_spec* spec) {
  if (!is_reduction(b->o.coll) || b->o.op != ELEM_OP_PREMUL) return b->o.op;
  unsigned char scalar[8] = {0};
  verify_scalar(spec, b->rank, scalar);
  if (impl == IMPL_NCCL) {
    int op, r = b->nc.RedOpCreatePreMulSum(&op, scalar, b->o.dtype, mscclppScalarHostImmediate, b->ncomm);
    if (r != 0) die(b, "ncclRedOpCreatePreMulSum", b->nc.GetErrorString(r));
    return op;
  }
  mscclppRedOp_t op;
  MPP_OK(b, mscclppRedOpCreatePreMulSum(&op, scalar, (mscclppDataType_t)b->o.dtype, mscclppScalarHostImmediate, b->comm));
  return (int)op;
}

static void drop_op(struct bench* b, int impl, int op) {
  if (op < (int)mscclppNumOps) return;
  if (impl == IMPL_NCCL) b->nc.RedOpDestroy(op, b->ncomm);
  else MPP_OK(b, mscclppRedOpDestroy((mscclppRedOp_t)op, b->comm));
}

/* Output region to garbage, then this rank's input in place (broadcast: the root's only). */
static void prepare_data(struct bench* b, const struct shape* s, int inplace, const struct verify_spec* spec) {
  char *in, *out;
  placement(b, s, inplace, &in, &out);
  buf_garbage(b, out, s->out * b->es);
  if (b->o.coll != ALGO_COLL_BROADCAST || b->rank == b->o.root) {
    verify_fill(spec, b->rank, 0, s->in, b->hin);
    buf_put(b, in, b->hin, s->in * b->es);
  }
#if MSCCLPP_HAVE_CUDA
  /* cudaMemset and a cudaMemcpy from pageable memory may still be running on the legacy stream
   * when they return, and the collectives' non-blocking stream does not wait for it: in place,
   * the call then raced the refill of its own buffer (wrong results at 1-4 MiB on 2x H200). */
  if (b->gpu) CUDA_OK(b, cudaDeviceSynchronize());
#endif
}

/* Wrong elements of this rank's output. */
static size_t check_data(struct bench* b, const struct shape* s, int inplace, const struct verify_spec* spec) {
  char *in, *out;
  placement(b, s, inplace, &in, &out);
  if (b->o.coll == ALGO_COLL_REDUCE && b->rank != b->o.root) return 0;
  buf_get(b, b->hout, out, s->out * b->es);
  size_t c = s->count, block = c * b->es, wrong = 0;
  switch (b->o.coll) {
    case ALGO_COLL_ALLREDUCE:
    case ALGO_COLL_REDUCE: return verify_check_reduced(spec, 0, c, b->hout);
    case ALGO_COLL_REDUCESCATTER: return verify_check_reduced(spec, (size_t)b->rank * c, c, b->hout);
    case ALGO_COLL_BROADCAST: return verify_check_copy(spec, b->o.root, 0, c, b->hout);
    case ALGO_COLL_SENDRECV: return verify_check_copy(spec, (b->rank + b->n - 1) % b->n, 0, c, b->hout);
    case ALGO_COLL_ALLGATHER:
      for (int q = 0; q < b->n; q++) wrong += verify_check_copy(spec, q, 0, c, b->hout + (size_t)q * block);
      return wrong;
    default:
      for (int q = 0; q < b->n; q++) wrong += verify_check_copy(spec, q, (size_t)b->rank * c, c, b->hout + (size_t)q * block);
      return wrong;
  }
}

/* ---- timing ------------------------------------------------------------------------------------ */

struct result {
  int valid;
  double time_us; /* largest over ranks of each rank's average */
  size_t wrong;   /* over all ranks; (size_t)-1: not checked */
};

#if MSCCLPP_HAVE_CUDA
/* `calls` calls captured into one CUDA graph, instantiated and run once (then synchronized); the
 * caller replays and destroys the returned executable graph. */
static cudaGraphExec_t capture_and_run(struct bench* b, int impl, const struct shape* s, int inplace, int op, int calls) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  cudaStream_t st = (cudaStream_t)b->stream;
  CUDA_OK(b, cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; i++) run_once(b, impl, s, inplace, op);
  CUDA_OK(b, cudaStreamEndCapture(st, &graph));
  CUDA_OK(b, cudaGraphInstantiate(&exec, graph, 0));
  cudaGraphDestroy(graph); /* the executable graph does not need it */
  CUDA_OK(b, cudaGraphLaunch(exec, st));
  sync_rank(b);
  return exec;
}
#endif

/* Seconds per call of iters timed calls (GPU with -G: captured in a graph, replayed G times). */
static double timed_loop(struct bench* b, int impl, const struct shape* s, int inplace, int op) {
#if MSCCLPP_HAVE_CUDA
  if (b->gpu && b->o.graphs > 0) {
    cudaGraphExec_t exec = capture_and_run(b, impl, s, inplace, op, b->o.iters);
    MPP_OK(b, mscclppBootstrapBarrier(b->comm));
    double t0 = now_s();
    for (int g = 0; g < b->o.graphs; g++) CUDA_OK(b, cudaGraphLaunch(exec, (cudaStream_t)b->stream));
    sync_rank(b);
    double t = (now_s() - t0) / ((double)b->o.graphs * b->o.iters);
    cudaGraphExecDestroy(exec);
    return t;
  }
#endif
  MPP_OK(b, mscclppBootstrapBarrier(b->comm));
  double t0 = now_s();
  for (int i = 0; i < b->o.iters; i++) run_once(b, impl, s, inplace, op);
  sync_rank(b);
  return (now_s() - t0) / b->o.iters;
}

/* One call for the check, the way the timing ran it: captured into a graph and run once under -G
 * (captured calls may take other algorithms, e.g. zero copy), else directly. */
static void run_checked(struct bench* b, int impl, const struct shape* s, int inplace, int op) {
#if MSCCLPP_HAVE_CUDA
  if (b->gpu && b->o.graphs > 0) {
    cudaGraphExecDestroy(capture_and_run(b, impl, s, inplace, op, 1));
    return;
  }
#endif
  run_once(b, impl, s, inplace, op);
  sync_rank(b);
}

static struct result measure(struct bench* b, int impl, const struct shape* s, int inplace, uint64_t seed) {
  struct result res = {.valid = 1, .wrong = (size_t)-1};
  if (impl == IMPL_NCCL && inplace && b->o.coll == ALGO_COLL_ALLTOALL) return (struct result){0}; /* see the header */
  struct verify_spec spec = {.dtype = b->o.dtype, .op = is_reduction(b->o.coll) ? b->o.op : -1, .nranks = b->n, .seed = seed};
  int op = make_op(b, impl, &spec);
  prepare_data(b, s, inplace, &spec);
  if (run_once(b, impl, s, inplace, op) != 0) { /* GPU collectives missing: every rank fails alike */
    drop_op(b, impl, op);
    return (struct result){0};
  }
  for (int i = 1; i < b->o.warmup; i++) run_once(b, impl, s, inplace, op);
  sync_rank(b);
  double t = timed_loop(b, impl, s, inplace, op);
  uint64_t wrong = 0;
  if (b->o.check) {
    prepare_data(b, s, inplace, &spec);
    run_checked(b, impl, s, inplace, op);
    wrong = check_data(b, s, inplace, &spec);
  }
  drop_op(b, impl, op);
  struct {
    double t;
    uint64_t wrong;
  }* all = calloc((size_t)b->n, sizeof(*all));
  all[b->rank].t = t, all[b->rank].wrong = wrong;
  MPP_OK(b, mscclppBootstrapAllGather(b->comm, all, (int)sizeof(*all)));
  res.time_us = 0, wrong = 0;
  for (int r = 0; r < b->n; r++) {
    if (all[r].t * 1e6 > res.time_us) res.time_us = all[r].t * 1e6;
    wrong += all[r].wrong;
  }
  free(all);
  if (b->o.check) res.wrong = (size_t)wrong;
  return res;
}

/* ---- output ------------------------------------------------------------------------------------- */

/* What a -d/-o mask selects, for the header and the json: the one name, or "all". */
static const char* mask_name(unsigned mask, int n, const char* (*name)(int)) {
  for (int i = 0; i < n; i++)
    if (mask == 1u << i) return name(i);
  return "all";
}
static const char* dtypes_name(const struct opts* o) { return mask_name(o->dtypes, ELEM_DTYPE_COUNT, elem_dtype_name); }
static const char* ops_name(const struct opts* o) {
  return is_reduction(o->coll) ? mask_name(o->ops, ELEM_OP_COUNT, op_name) : "none";
}

static void print_header(struct bench* b) {
  const struct opts* o = &b->o;
  printf("# mscclpp-perf %s: %d %s ranks, datatype %s, op %s, root %d\n", coll_name(o->coll), b->n, b->gpu ? "GPU" : "CPU",
         dtypes_name(o), ops_name(o), is_rooted(o->coll) ? o->root : -1);
  printf("# sizes %zu..%zu bytes, %s %g, iters %d, warmup %d, check %s\n", o->minb, o->maxb, o->stepb ? "step" : "factor",
         o->stepb ? (double)o->stepb : o->factor, o->iters, o->warmup, o->check ? "on" : "off");
  if (o->graphs > 0 && !b->gpu) printf("# -G %d: CUDA graphs are for GPU ranks; ignored on CPU ranks\n", o->graphs);
  if (o->nccl && !b->gpu) printf("# --nccl: the NCCL comparison needs GPU ranks; these are CPU ranks, so mscclpp only\n");
  if (o->coll == ALGO_COLL_SENDRECV) printf("# sendrecv: rank r sends to r+1 and receives from r-1; no in-place variant\n");
  if (o->nccl && b->gpu && o->coll == ALGO_COLL_ALLTOALL)
    printf("# NCCL alltoall runs as grouped send/recv, which has no in-place form: its in-place columns are N/A\n");
  printf("#\n# %10s %12s %9s %9s %5s  %-33s  %-33s\n", "", "", "", "", "", "            out-of-place", "              in-place");
  printf("# %10s %12s %9s %9s %5s  %8s %7s %7s %8s  %8s %7s %7s %8s%s\n", "size", "count", "type", "redop", "root", "time",
         "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", b->o.nccl && b->gpu ? "  impl" : "");
  printf("# %10s %12s %9s %9s %5s  %8s %7s %7s %8s  %8s %7s %7s %8s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
         "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  fflush(stdout);
}

/* Formats one placement's columns and adds its bus bandwidth to impl's average. */
static void fmt_result(struct bench* b, const struct shape* s, const struct result* r, char* buf, size_t len, int impl) {
  if (!r->valid) {
    snprintf(buf, len, "%8s %7s %7s %8s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  double algbw = (double)s->bytes / (r->time_us * 1e-6) / 1e9, busbw = algbw * bus_factor(b->o.coll, b->n);
  char wrong[24];
  if (r->wrong == (size_t)-1) snprintf(wrong, sizeof(wrong), "N/A");
  else snprintf(wrong, sizeof(wrong), "%zu", r->wrong);
  snprintf(buf, len, "%8.2f %7.3f %7.3f %8s", r->time_us, algbw, busbw, wrong);
  b->busbw_sum[impl] += busbw, b->busbw_n[impl]++;
}

static void json_result(FILE* f, const char* key, const struct bench* b, const struct shape* s, const struct result* r) {
  if (!r->valid) {
    fprintf(f, "\"%s\": null", key);
    return;
  }
  double algbw = (double)s->bytes / (r->time_us * 1e-6) / 1e9;
  /* Significant digits, not fixed decimals: a slow CPU-rank row keeps its precision. */
  fprintf(f, "\"%s\": {\"time_us\": %.9g, \"algbw_gbs\": %.9g, \"busbw_gbs\": %.9g, \"wrong\": ", key, r->time_us, algbw,
          algbw * bus_factor(b->o.coll, b->n));
  if (r->wrong == (size_t)-1) fprintf(f, "null}");
  else fprintf(f, "%zu}", r->wrong);
}

static void report_row(struct bench* b, int impl, const struct shape* s, const struct result* oop, const struct result* ip) {
  if (b->rank != 0) return;
  char a[64], c[64];
  int mine = impl == IMPL_MSCCLPP;
  fmt_result(b, s, oop, a, sizeof(a), impl);
  fmt_result(b, s, ip, c, sizeof(c), impl);
  printf("  %10zu %12zu %9s %9s %5d  %s  %s%s\n", s->bytes, s->bytes / b->es, elem_dtype_name(b->o.dtype),
         is_reduction(b->o.coll) ? op_name(b->o.op) : "none", is_rooted(b->o.coll) ? b->o.root : -1, a, c,
         b->o.nccl && b->gpu ? (mine ? "  mscclpp" : "  nccl") : "");
  fflush(stdout);
  if (b->json == NULL) return;
  fprintf(b->json, "%s\n    {\"impl\": \"%s\", \"datatype\": \"%s\", \"op\": \"%s\", \"bytes\": %zu, \"count\": %zu, ",
          b->json_rows++ ? "," : "", mine ? "mscclpp" : "nccl", elem_dtype_name(b->o.dtype),
          is_reduction(b->o.coll) ? op_name(b->o.op) : "none", s->bytes, s->bytes / b->es);
  json_result(b->json, "out_of_place", b, s, oop);
  fprintf(b->json, ", ");
  json_result(b->json, "in_place", b, s, ip);
  fprintf(b->json, "}");
}

/* "NCCL time / our time" per placement (above 1: we are faster), from the same run. */
static void report_ratio(struct bench* b, const struct shape* s, struct result got[2][2]) {
  if (b->rank != 0) return;
  char r[2][16];
  for (int k = 0; k < 2; k++) {
    const struct result *m = &got[IMPL_MSCCLPP][k], *n = &got[IMPL_NCCL][k];
    if (m->valid && n->valid && m->time_us > 0) snprintf(r[k], sizeof(r[k]), "%.2fx", n->time_us / m->time_us);
    else snprintf(r[k], sizeof(r[k]), "N/A");
  }
  printf("  %10zu %12s %9s %9s %5s  %-33s  %-33s  ratio\n", s->bytes, "nccl/ours", "", "", "", r[0], r[1]);
  fflush(stdout);
}

static void json_open(struct bench* b) {
  if (b->rank != 0 || b->o.json == NULL) return;
  b->json = fopen(b->o.json, "w");
  if (b->json == NULL) die(b, "--json", b->o.json);
  fprintf(b->json, "{\"tool\": \"mscclpp-perf\", \"collective\": \"%s\", \"nranks\": %d, \"rank_kind\": \"%s\", ",
          coll_name(b->o.coll), b->n, b->gpu ? "gpu" : "cpu");
  fprintf(b->json, "\"datatype\": \"%s\", \"op\": \"%s\", \"root\": %d, \"iters\": %d, \"warmup\": %d, \"graphs\": %d, ",
          dtypes_name(&b->o), ops_name(&b->o), is_rooted(b->o.coll) ? b->o.root : -1, b->o.iters, b->o.warmup,
          b->gpu ? b->o.graphs : 0);
  fprintf(b->json, "\"check\": %s, \"rows\": [", b->o.check ? "true" : "false");
}

static void print_footer(struct bench* b) {
  if (b->rank != 0) return;
  double avg = b->busbw_n[IMPL_MSCCLPP] ? b->busbw_sum[IMPL_MSCCLPP] / b->busbw_n[IMPL_MSCCLPP] : 0.0;
  printf("# Out of bounds values : %zu %s\n", b->wrong_total, b->wrong_total == 0 ? "OK" : "FAILED");
  printf("# Avg bus bandwidth    : %g\n", avg);
  if (b->busbw_n[IMPL_NCCL] > 0)
    printf("# NCCL avg bus bandwidth : %g\n", b->busbw_sum[IMPL_NCCL] / b->busbw_n[IMPL_NCCL]);
  printf("#\n");
  if (b->json == NULL) return;
  fprintf(b->json, "\n  ], \"wrong_total\": %zu, \"ok\": %s, \"avg_busbw_gbs\": %.4f", b->wrong_total,
          b->wrong_total == 0 ? "true" : "false", avg);
  if (b->busbw_n[IMPL_NCCL] > 0) fprintf(b->json, ", \"nccl_avg_busbw_gbs\": %.4f", b->busbw_sum[IMPL_NCCL] / b->busbw_n[IMPL_NCCL]);
  fprintf(b->json, "}\n");
  fclose(b->json);
}

/* ---- main ---------------------------------------------------------------------------------------- */

static void setup(struct bench* b) {
  mscclppConfig_t cfg = MSCCLPP_CONFIG_INITIALIZER;
  cfg.rankKind = b->o.kind;
  MPP_OK(b, mscclppCommInitFromEnv(&b->comm, &cfg));
  MPP_OK(b, mscclppCommRank(b->comm, &b->rank));
  MPP_OK(b, mscclppCommSize(b->comm, &b->n));
  mscclppRankKind_t kind;
  MPP_OK(b, mscclppCommRankKind(b->comm, b->rank, &kind));
  b->gpu = kind == mscclppRankGpu;
  if (is_rooted(b->o.coll) && (b->o.root < 0 || b->o.root >= b->n)) die(b, "-r", "root is not a rank");
  for (int t = 0; t < ELEM_DTYPE_COUNT; t++) { /* room for the largest size in every datatype run */
    if (!(b->o.dtypes >> t & 1)) continue;
    size_t es = mscclppDataTypeSize((mscclppDataType_t)t);
    struct shape big = shape_of(b->o.coll, b->o.maxb, es, b->n);
    size_t cap = (big.in > big.out ? big.in : big.out) * es + 64;
    b->cap = cap > b->cap ? cap : b->cap;
  }
  b->send = buf_alloc(b, b->cap);
  b->recv = buf_alloc(b, b->cap);
  b->hin = malloc(b->cap);
  b->hout = malloc(b->cap);
  if (!b->hin || !b->hout) die(b, "allocating host buffers", "out of memory");
#if MSCCLPP_HAVE_CUDA
  if (b->gpu) CUDA_OK(b, cudaStreamCreateWithFlags((cudaStream_t*)&b->stream, cudaStreamNonBlocking));
#endif
  if (b->o.nccl && b->gpu) nccl_load(b);
}

static void teardown(struct bench* b) {
#if MSCCLPP_HAVE_CUDA
  if (b->gpu) {
    cudaFree(b->send), cudaFree(b->recv);
    cudaStreamDestroy((cudaStream_t)b->stream);
  } else
#endif
  {
    free(b->send), free(b->recv);
  }
  free(b->hin), free(b->hout);
  if (b->ncomm) b->nc.CommDestroy(b->ncomm);
  MPP_OK(b, mscclppBootstrapBarrier(b->comm));
  MPP_OK(b, mscclppCommDestroy(b->comm));
}

/* Every size for the current datatype and operator (b->o.dtype, b->o.op): one row per size and
 * implementation, wrong elements added to b->wrong_total. */
static void run_sizes(struct bench* b, uint64_t* seed) {
  int list_i = 0;
  for (size_t size = b->o.nsizes ? b->o.sizes[0] : b->o.minb; b->o.nsizes ? list_i < b->o.nsizes : size <= b->o.maxb;) {
    struct shape s = shape_of(b->o.coll, size, b->es, b->n);
    struct result got[2][2] = {{{0}}};
    for (int impl = IMPL_MSCCLPP; impl <= (b->o.nccl && b->gpu ? IMPL_NCCL : IMPL_MSCCLPP); impl++) {
      if (impl == IMPL_MSCCLPP && b->mscclpp_broken) continue;
      struct result oop = measure(b, impl, &s, 0, (*seed)++), ip = {0};
      if (b->o.coll != ALGO_COLL_SENDRECV) ip = measure(b, impl, &s, 1, (*seed)++);
      got[impl][0] = oop, got[impl][1] = ip;
      if (oop.valid || ip.valid) report_row(b, impl, &s, &oop, &ip);
      if (impl == IMPL_NCCL) report_ratio(b, &s, got);
      for (int k = 0; k < 2; k++) { /* every rank knows the sums over ranks */
        const struct result* r = k ? &ip : &oop;
        if (r->valid && r->wrong != (size_t)-1) b->wrong_total += r->wrong;
      }
    }
    if (b->o.nsizes) {
      if (++list_i < b->o.nsizes) size = b->o.sizes[list_i];
      continue;
    }
    size_t next = b->o.stepb ? size + b->o.stepb : (size_t)((double)size * b->o.factor);
    size = next > size ? next : size + 1;
  }
}

int main(int argc, char** argv) {
  struct bench b = {.rank = -1};
  parse(argc, argv, &b.o);
  setup(&b);
  if (b.rank == 0) print_header(&b);
  json_open(&b);
  uint64_t seed = 1;
  for (int t = 0; t < ELEM_DTYPE_COUNT; t++) { /* nccl-tests' order: datatypes, then operators */
    if (!(b.o.dtypes >> t & 1)) continue;
    for (int op = 0; op < ELEM_OP_COUNT; op++) {
      if (!(b.o.ops >> op & 1)) continue;
      b.o.dtype = t, b.o.op = op, b.es = mscclppDataTypeSize((mscclppDataType_t)t);
      run_sizes(&b, &seed);
      if (!is_reduction(b.o.coll)) break; /* no operator: once per datatype */
    }
  }
  print_footer(&b);
  teardown(&b);
  return b.wrong_total == 0 ? 0 : 1;
}
