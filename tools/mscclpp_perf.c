/* mscclpp-perf: times and checks the built-in collectives, in the manner of nccl-tests, one process
 * per rank (mscclpp-run -n N, torchrun, mpirun; mscclppCommInitFromEnv).
 *
 *   mscclpp-perf COLLECTIVE [nccl-tests' options] [-s SIZE,...] [--json FILE] [--plot OUT.png]
 *                [--cpu | --gpu] [--nccl] [--nccl-symm]
 *
 * Every option is in perf_opts below (--help prints them): nccl-tests' command lines run as they
 * are (-t 1 -g 1: one rank per process; options with no counterpart are taken at their default
 * value and refused otherwise, saying why), and the table is nccl-tests' (columns, 2 decimals).
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
 * NCCL's time / ours (above 1: ours is faster). --nccl-symm adds NCCL on its own buffers from
 * ncclMemAlloc registered as symmetric windows (ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC;
 * NCCL 2.27 and later, else the run says so and goes on without those rows) once for the largest
 * size: rows "nccl-symm" and a second ratio row (symm/ours). -s 8,1K,1G runs exactly those sizes. */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <unistd.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mscclpp/mscclpp.h>

#include "algo/algo.h"
#include "algo/verify.h"
#include "cli.h"
#include "perf_nccl.h"
#include "pyrun.h"
#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>
#endif

struct opts {
  int coll;
  size_t minb, maxb, stepb;
  double factor;
  int iters, warmup, check, root, graphs, kind, nccl;
  int cputime; /* -C 1: report the host time of issuing the calls */
  int nccl_symm; /* --nccl-symm: NCCL on symmetric windows too (sets nccl) */
  int average; /* -a: 0 rank 0's time, 1 the mean over ranks, 2 the least, 3 the largest (default) */
  int timeout; /* -T: seconds the whole run may take (0: no bound) */
  int dtype, op;        /* the pair being run */
  unsigned dtypes, ops; /* -d, -o: bit masks of the datatypes and operators to run */
  const char* json;
  const char* plot; /* --plot: a picture of the results (through a temporary json without --json) */
  size_t sizes[64]; /* -s: an explicit list instead of -b/-e/-f */
  int nsizes;
};

/* ---- options ---------------------------------------------------------------------------------- */

#define TOOL "mscclpp-perf"

static const struct cli_opt perf_opts[] = {
    {"-b, --minbytes", "SIZE", "smallest size (default 8)"},
    {"-e, --maxbytes", "SIZE", "largest size (default 32M)"},
    {"-f, --stepfactor", "F", "multiply the size by F (> 1) from one row to the next (default 2)"},
    {"-i, --stepbytes", "SIZE", "add SIZE from one row to the next instead of -f"},
    {"-s", "SIZE,SIZE,...", "exactly these sizes, in this order, instead of -b/-e/-f/-i (at most 64)"},
    {"-n, --iters", "N", "timed calls per size (default 20)"},
    {"-w, --warmup_iters", "N", "untimed calls before them (default 5)"},
    {"-c, --check", "N", "0: no check; N >= 1: check each size once on fresh inputs (default 1)"},
    {"-d, --datatype", "T|all", "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2\n"
                               "(char and int are taken for int8 and int32); all: each in turn (default float)"},
    {"-o, --op", "OP|all", "sum prod max min avg premulsum (mulsum: the same); all: each in turn (default sum)"},
    {"-r, --root", "R", "root rank of broadcast and reduce (default 0)"},
    {"-G, --cudagraph", "N", "GPU ranks: capture the -n calls of a size in a CUDA graph and replay it N times\n"
                            "(default 0: eager launches)"},
    {"-a, --average", "0|1|2|3", "the time reported: rank 0's (0), the mean over ranks (1), the least (2) or\n"
                                "the largest (3, the default here; nccl-tests' default is 1)"},
    {"-T, --timeout", "SECONDS", "give up (exit 1) when the run takes longer (default 0: no bound)"},
    {"-J, --output_file", "FILE", "the results as JSON too (the same as --json)"},
    {"-t, --nthreads", "1", "nccl-tests' threads per process: only 1 (one rank per process; start N\n"
                           "processes with mscclpp-run -n N, mpirun or torchrun)"},
    {"-g, --ngpus", "1", "nccl-tests' GPUs per thread: only 1 (one GPU per rank, as above)"},
    {"-m, --agg_iters", "1", "nccl-tests' calls aggregated per iteration: only 1"},
    {"-N, --run_cycles", "1", "nccl-tests' repetitions of the whole sweep: only 1"},
    {"-p, --parallel_init", "0|1", "taken and ignored (every process initializes its own rank)"},
    {"-z, --blocking", "0", "nccl-tests' blocking modes: only 0 (calls are timed back to back)"},
    {"-y, --stream_null", "0", "only 0 (calls go on the rank's own stream)"},
    {"-C, --report_cputime", "0|1", "1: the time reported is the host's, issuing the calls (eager: the calls\n"
                                    "alone; -G: the graph launches), not the wall clock to the calls' end"},
    {"-S, --report_timestamps", "0", "only 0"},
    {"-R, --local_register", "0", "only 0 (buffers are not registered; --nccl-symm is nccl-tests' -R 2 for NCCL)"},
    {"-M, --memory", "0", "only 0 (no memory report)"},
    {"-u, --unalign", "0", "only 0 (buffers are aligned)"},
    {"-I, --per_iter_timing", "0", "only 0 (no per-call times)"},
    {"-K, --per_iter_skip", "0", "only 0"},
    {"-x, --cta_policy / -D / -V", "...", "NCCL's CTA policy and device implementation: not supported"},
    {"--json", "FILE", "write the results as JSON (rank 0): the run's settings and one row per size and\n"
                      "implementation (python -m mscclpp.perfplot draws them)"},
    {"--plot", "OUT.png", "rank 0 draws busbw and time against size (ours, and NCCL's with --nccl[-symm]) into\n"
                         "OUT.png|svg|pdf through python -m mscclpp.perfplot (needs matplotlib:\n"
                         "`pip install .[draw]`; $PYTHON picks the interpreter)"},
    {"--cpu, --gpu", NULL, "CPU or GPU ranks (default: MSCCLPP_RANK_KIND, else GPU when one is visible)"},
    {"--nccl", NULL, "GPU ranks: time the real NCCL too (MSCCLPP_NCCL_LIB_PATH or libnccl.so.2) on the\n"
                     "same buffers and print a ratio row per size (NCCL time / ours: above 1, ours is faster)"},
    {"--nccl-symm", NULL, "GPU ranks: --nccl, and NCCL once more on its own buffers (ncclMemAlloc) registered\n"
                          "as symmetric windows (ncclCommWindowRegister, NCCL 2.27 or later): rows nccl-symm and\n"
                          "a second ratio row (symm/ours)"},
    {"-h, --help", NULL, "this help"},
    {NULL, NULL, NULL}};

static const struct cli_help perf_help = {
    TOOL, TOOL " COLLECTIVE [nccl-tests' options] [-s SIZE,...] [--json FILE] [--plot OUT.png] [--cpu|--gpu] [--nccl|--nccl-symm]",
    "Times and checks a collective the way nccl-tests does, one process per rank (mscclpp-run -n N,\n"
    "mpirun, torchrun): an nccl-tests command line runs as it is after `mscclpp-perf COLLECTIVE`.\n"
    "COLLECTIVE: allreduce allgather reducescatter broadcast reduce alltoall sendrecv (nccl-tests'\n"
    "program names such as all_reduce_perf are taken too). SIZE takes K, M, G, T (powers of 1024;\n"
    "KB, KiB, ... alike).",
    perf_opts,
    "Output: nccl-tests' table (size, count, type, redop, root, then time (us), algbw and busbw (GB/s)\n"
    "and #wrong out of place and in place), the \"# Out of bounds values\" and \"# Avg bus bandwidth\"\n"
    "lines. Exit status: 0 when every result was right, 1 when one was wrong or the run failed, 2 for\n"
    "a bad command line."};

/* The process's rank as the launcher set it (-1: none): only rank 0 explains a bad command line,
 * which every rank finds alike. */
static int env_rank(void) {
  const char* r = getenv("MSCCLPP_RANK");
  return r ? atoi(r) : -1;
}

/* A bad command line: one line from rank 0 (or a lone process), exit 2 on every rank. */
__attribute__((noreturn, format(printf, 1, 2))) static void bad_usage(const char* fmt, ...) {
  if (env_rank() <= 0) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cli_usage_error(TOOL, "%s", msg);
  }
  exit(2);
}

static size_t parse_size(const char* opt, const char* s) {
  uint64_t v = 0;
  char why[160];
  if (cli_parse_size(s, &v, why, sizeof(why)) != 0) bad_usage("%s: %s", opt, why);
  if (v > SIZE_MAX / 4) bad_usage("%s: '%s' is too large a size", opt, s);
  return (size_t)v;
}

/* An integer option's value in [lo, hi]. */
static int parse_int(const char* opt, const char* s, int lo, int hi) {
  long long v = 0;
  if (cli_parse_int(s, lo, hi, &v) != 0) bad_usage("%s must be an integer in [%d, %d], got '%s'", opt, lo, hi, s);
  return (int)v;
}

/* An nccl-tests option that only one value of makes sense here: that value passes, others are
 * refused saying why. */
static void only_value(const char* opt, const char* s, int want, const char* why) {
  long long v = 0;
  if (cli_parse_int(s, INT32_MIN, INT32_MAX, &v) != 0) bad_usage("%s must be an integer, got '%s'", opt, s);
  if (v != want) bad_usage("%s %s: not supported: %s", opt, s, why);
}

/* -s 8,1K,64K: the sizes to run, in order. */
static void parse_sizes(const char* list, struct opts* o) {
  char buf[1024];
  snprintf(buf, sizeof(buf), "%s", list);
  o->nsizes = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
    if (o->nsizes == (int)(sizeof(o->sizes) / sizeof(o->sizes[0]))) bad_usage("-s takes at most 64 sizes");
    o->sizes[o->nsizes++] = parse_size("-s", t);
  }
  if (o->nsizes == 0) bad_usage("-s: no size in '%s'", list);
  o->minb = o->maxb = o->sizes[0];
  for (int i = 0; i < o->nsizes; i++) o->maxb = o->sizes[i] > o->maxb ? o->sizes[i] : o->maxb;
}

/* The index of s among n names, else a usage error listing them. */
static int lookup(const char* s, int n, const char* (*name)(int), const char* what) {
  char names[256] = "";
  for (int i = 0; i < n; i++) {
    if (strcmp(s, name(i)) == 0) return i;
    snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? ", " : "", name(i));
  }
  bad_usage("unknown %s '%s' (one of %s)", what, s, names);
}

static const char* coll_name(int i) { return algo_coll_name((enum algo_coll)i); }
static const char* op_name(int i) { return elem_op_name((enum elem_op)i); }

/* The collective: ours (allreduce), or nccl-tests' program name (all_reduce_perf, all_reduce). */
static int parse_coll(const char* s) {
  char name[64];
  size_t k = 0;
  for (const char* p = s; *p && k + 1 < sizeof(name); p++)
    if (*p != '_') name[k++] = *p;
  name[k] = '\0';
  if (k > 4 && strcmp(name + k - 4, "perf") == 0) name[k - 4] = '\0';
  for (int i = 0; i < ALGO_COLL_COUNT; i++)
    if (strcmp(name, coll_name(i)) == 0) return i;
  return lookup(s, ALGO_COLL_COUNT, coll_name, "collective");
}

/* -d's argument as a bit mask: "all", one of ours, or nccl-tests' older char and int. */
static unsigned parse_dtypes(const char* s) {
  if (strcmp(s, "all") == 0) return (1u << ELEM_DTYPE_COUNT) - 1;
  if (strcmp(s, "char") == 0) s = "int8";
  if (strcmp(s, "int") == 0) s = "int32";
  return 1u << lookup(s, ELEM_DTYPE_COUNT, elem_dtype_name, "datatype");
}

/* The operators -o takes: our names, "all", and nccl-tests' "mulsum" for premulsum. */
static unsigned parse_ops(const char* s) {
  if (strcmp(s, "all") == 0) return (1u << ELEM_OP_COUNT) - 1;
  return strcmp(s, "mulsum") == 0 ? 1u << ELEM_OP_PREMUL : 1u << lookup(s, ELEM_OP_COUNT, op_name, "op");
}

#define ONE_RANK_PER_PROCESS "one rank per process here: start N processes with mscclpp-run -n N (or mpirun/torchrun)"

/* nccl-tests' options that only have their default meaning here. */
static void parse_compat(int c, const char* v) {
  switch (c) {
    case 't': only_value("-t", v, 1, ONE_RANK_PER_PROCESS); break;
    case 'g': only_value("-g", v, 1, ONE_RANK_PER_PROCESS); break;
    case 'm': only_value("-m", v, 1, "calls are not aggregated in groups; each is timed on its own"); break;
    case 'N': only_value("-N", v, 1, "the sweep runs once"); break;
    case 'p': parse_int("-p", v, 0, 1); break;
    case 'z': only_value("-z", v, 0, "calls are timed back to back (nccl-tests' -z 0)"); break;
    case 'y': only_value("-y", v, 0, "calls go on the rank's own stream"); break;
    case 'S': only_value("-S", v, 0, "no timestamps"); break;
    case 'R': only_value("-R", v, 0, "our buffers need no registration (--nccl-symm times NCCL on symmetric windows)"); break;
    case 'M': only_value("-M", v, 0, "no memory report"); break;
    case 'u': only_value("-u", v, 0, "buffers are aligned"); break;
    case 'I': only_value("-I", v, 0, "no per-call timing"); break;
    case 'K': only_value("-K", v, 0, "no per-call timing (-I)"); break;
    case 'x': bad_usage("-x %s: not supported: NCCL's CTA policy has no counterpart here", v);
    case 'D': bad_usage("-D %s: not supported: NCCL's device implementations have no counterpart here", v);
    case 'V': bad_usage("-V %s: not supported: NCCL's device implementations have no counterpart here", v);
    default: bad_usage("unknown option");
  }
}

/* One option of ours or nccl-tests'. */
static void parse_one(int c, const char* v, struct opts* o) {
  switch (c) {
    case 'b': o->minb = parse_size("-b", v); break;
    case 'e': o->maxb = parse_size("-e", v); break;
    case 'f':
      if (cli_parse_double(v, &o->factor) != 0 || o->factor <= 1.0) bad_usage("-f must be a number above 1, got '%s'", v);
      o->stepb = 0;
      break;
    case 'i':
      o->stepb = parse_size("-i", v), o->factor = 0;
      if (o->stepb == 0) bad_usage("-i must be at least 1 byte, got '%s'", v);
      break;
    case 'n': o->iters = parse_int("-n", v, 1, 1 << 30); break;
    case 'C': o->cputime = parse_int("-C", v, 0, 1); break;
    case 'w': o->warmup = parse_int("-w", v, 0, 1 << 30); break;
    case 'c': o->check = parse_int("-c", v, 0, 1 << 30) > 0; break;
    case 'd': o->dtypes = parse_dtypes(v); break;
    case 'o': o->ops = parse_ops(v); break;
    case 'r': o->root = parse_int("-r", v, 0, 1 << 20); break;
    case 's': parse_sizes(v, o); break;
    case 'G': o->graphs = parse_int("-G", v, 0, 1 << 20); break;
    case 'a': o->average = parse_int("-a", v, 0, 3); break;
    case 'T': o->timeout = parse_int("-T", v, 0, 1 << 24); break;
    case 'J': o->json = v; break;
    case 1: o->kind = mscclppRankCpu; break;
    case 2: o->kind = mscclppRankGpu; break;
    case 3: o->nccl = 1; break;
    case 5: o->nccl = o->nccl_symm = 1; break;
    case 4: o->plot = v; break;
    default: parse_compat(c, v);
  }
}

static const struct option longs[] = {
    {"json", required_argument, 0, 'J'},         {"cpu", no_argument, 0, 1},
    {"gpu", no_argument, 0, 2},                  {"nccl", no_argument, 0, 3},
    {"nccl-symm", no_argument, 0, 5},
    {"help", no_argument, 0, 'h'},               {"plot", required_argument, 0, 4},
    {"nthreads", required_argument, 0, 't'},
    {"ngpus", required_argument, 0, 'g'},        {"minbytes", required_argument, 0, 'b'},
    {"maxbytes", required_argument, 0, 'e'},     {"stepbytes", required_argument, 0, 'i'},
    {"stepfactor", required_argument, 0, 'f'},   {"iters", required_argument, 0, 'n'},
    {"agg_iters", required_argument, 0, 'm'},    {"warmup_iters", required_argument, 0, 'w'},
    {"run_cycles", required_argument, 0, 'N'},   {"parallel_init", required_argument, 0, 'p'},
    {"check", required_argument, 0, 'c'},        {"op", required_argument, 0, 'o'},
    {"datatype", required_argument, 0, 'd'},     {"root", required_argument, 0, 'r'},
    {"blocking", required_argument, 0, 'z'},     {"stream_null", required_argument, 0, 'y'},
    {"timeout", required_argument, 0, 'T'},      {"cudagraph", required_argument, 0, 'G'},
    {"report_cputime", required_argument, 0, 'C'}, {"report_timestamps", required_argument, 0, 'S'},
    {"output_file", required_argument, 0, 'J'},  {"average", required_argument, 0, 'a'},
    {"local_register", required_argument, 0, 'R'}, {"cta_policy", required_argument, 0, 'x'},
    {"device_implementation", required_argument, 0, 'D'}, {"device_cta_count", required_argument, 0, 'V'},
    {"memory", required_argument, 0, 'M'},       {"unalign", required_argument, 0, 'u'},
    {"per_iter_timing", required_argument, 0, 'I'}, {"per_iter_skip", required_argument, 0, 'K'},
    {0, 0, 0, 0}};

static void parse(int argc, char** argv, struct opts* o) {
  *o = (struct opts){.minb = 8, .maxb = 32u << 20, .factor = 2, .iters = 20, .warmup = 5, .check = 1, .average = 3,
                     .dtypes = 1u << 7 /* float */, .ops = 1u << ELEM_OP_SUM, .kind = mscclppRankAuto};
  if (cli_wants_help(argc, argv)) exit((cli_print_help(&perf_help), 0));
  opterr = 0; /* getopt's own message would come from every rank, unlike ours */
  for (int c; (c = getopt_long(argc, argv, ":b:e:f:i:n:w:c:d:o:r:G:s:a:T:J:t:g:m:N:p:z:y:C:S:R:M:u:I:K:x:D:V:h", longs,
                               NULL)) != -1;) {
    /* the option getopt stopped at: a short one's letter, else the word just passed */
    char shortname[3] = {'-', (char)optopt, 0};
    const char* last = argv[optind - 1];
    const char* at = !strncmp(last, "--", 2) || !optopt ? last : shortname;
    if (c == '?') bad_usage("unknown option '%s'", at);
    if (c == ':') bad_usage("%s needs a value", at);
    parse_one(c, optarg, o);
  }
  if (optind >= argc) bad_usage("no COLLECTIVE given (allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv)");
  if (optind < argc - 1) bad_usage("one COLLECTIVE at a time: '%s' and '%s'", argv[optind], argv[optind + 1]);
  o->coll = parse_coll(argv[optind]);
  if (o->nsizes > 0) { /* buffers are sized for maxb; the loop walks the list */
    o->minb = o->maxb;
    for (int i = 0; i < o->nsizes; i++) o->minb = o->sizes[i] < o->minb ? o->sizes[i] : o->minb;
  }
  if (o->minb > o->maxb) bad_usage("-b %zu is above -e %zu", o->minb, o->maxb);
}

/* ---- what one size moves ---------------------------------------------------------------------- */

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

enum impl { IMPL_MSCCLPP = 0, IMPL_NCCL = 1, IMPL_NCCL_SYMM = 2, IMPL_COUNT };

/* An implementation's name in the table's impl column and the json's "impl". */
static const char* impl_name(int impl) {
  return impl == IMPL_MSCCLPP ? "mscclpp" : impl == IMPL_NCCL ? "nccl" : "nccl-symm";
}

struct bench {
  struct opts o;
  mscclppComm_t comm;
  int rank, n, gpu;
  size_t es;
  char *send, *recv; /* device memory on GPU ranks */
  char *hin, *hout;  /* host staging */
  size_t cap;        /* bytes of each buffer */
  void* stream;
  struct perf_nccl nc;
  struct perf_nccl_symm symm; /* --nccl-symm: NCCL's windows (symm_ok: registered on every rank) */
  int symm_ok;
  int mscclpp_broken; /* GPU: our collectives failed (not built yet); NCCL rows only */
  FILE* json;
  int json_rows;
  double busbw_sum[IMPL_COUNT]; /* per impl */
  int busbw_n[IMPL_COUNT];
  size_t wrong_total;
};

/* Prints "mscclpp-perf: rank R: WHAT: WHY" once (WHAT: a call's text is cut to the function's
 * name) and exits 1. */
static void die(struct bench* b, const char* what, const char* why) {
  int len = (int)strcspn(what, "(");
  if (b && b->rank >= 0) fprintf(stderr, "%s: rank %d: %.*s: %s\n", TOOL, b->rank, len, what, why);
  else fprintf(stderr, "%s: %.*s: %s\n", TOOL, len, what, why);
  exit(1);
}

#define MPP_OK(b, call)                                                          \
  do {                                                                           \
    mscclppResult_t r_ = (call);                                                 \
    if (r_ != mscclppSuccess) die((b), #call, cli_last_error());                 \
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

/* ---- NCCL (GPU ranks only; tools/perf/perf_nccl.c) --------------------------------------------- */

static void nccl_load(struct bench* b) {
  char why[512];
  if (perf_nccl_load(&b->nc, why, sizeof(why)) != 0) die(b, "--nccl", why);
  if (b->rank == 0) printf("# NCCL: %s (NCCL_NVLS_ENABLE=%s)\n", b->nc.path, getenv("NCCL_NVLS_ENABLE"));
  if (perf_nccl_init(&b->nc, b->comm, b->rank, b->n, why, sizeof(why)) != 0) die(b, "--nccl", why);
}

/* --nccl-symm: NCCL's buffers of b->cap bytes registered as symmetric windows on every rank, or,
 * where one rank's NCCL lacks the functions or the memory, on none (rank 0 says why, and the run
 * goes on without nccl-symm rows). The registration is collective: every rank decides alike. */
static void symm_setup(struct bench* b) {
  struct {
    int ok;
    char why[248];
  }* all = calloc((size_t)b->n, sizeof(*all));
  if (all == NULL) die(b, "--nccl-symm", "out of memory");
  char* why = all[b->rank].why;
  size_t len = sizeof(all->why);
  all[b->rank].ok = perf_nccl_symm_supported(&b->nc, why, len) == 0 &&
                    perf_nccl_symm_alloc(&b->nc, &b->symm, b->cap, why, len) == 0;
  MPP_OK(b, mscclppBootstrapAllGather(b->comm, all, (int)sizeof(*all)));
  int bad = 0;
  while (bad < b->n && all[bad].ok) bad++;
  if (bad < b->n) {
    perf_nccl_symm_release(&b->nc, &b->symm); /* nothing registered: frees this rank's buffers */
    if (b->rank == 0) printf("# --nccl-symm: rank %d: %s; no nccl-symm rows\n", bad, all[bad].why);
  } else {
    char w[512];
    if (perf_nccl_symm_register(&b->nc, &b->symm, w, sizeof(w)) != 0) die(b, "--nccl-symm", w);
    b->symm_ok = 1;
    if (b->rank == 0)
      printf("# NCCL symmetric windows: send and receive buffers of %zu bytes each (ncclMemAlloc, "
             "ncclCommWindowRegister NCCL_WIN_COLL_SYMMETRIC)\n", b->symm.bytes);
  }
  free(all);
}

/* ---- one call ---------------------------------------------------------------------------------- */

/* Input and output pointers of impl's call (in place: NCCL's conventions). nccl-symm has its own
 * buffers (the windows), the others share b->send and b->recv. */
static void placement(const struct bench* b, int impl, const struct shape* s, int inplace, char** in, char** out) {
  size_t block = s->count * b->es;
  char* send = impl == IMPL_NCCL_SYMM ? (char*)b->symm.send : b->send;
  char* recv = impl == IMPL_NCCL_SYMM ? (char*)b->symm.recv : b->recv;
  *in = send, *out = recv;
  if (!inplace) return;
  *in = *out = recv;
  if (b->o.coll == ALGO_COLL_ALLGATHER) *in = recv + (size_t)b->rank * block;
  if (b->o.coll == ALGO_COLL_REDUCESCATTER) *out = recv + (size_t)b->rank * block;
}

static int run_nccl(struct bench* b, const struct shape* s, const char* in, char* out, int op) {
  struct perf_nccl_call c = {.coll = b->o.coll, .dtype = b->o.dtype, .op = op, .root = b->o.root, .rank = b->rank,
                             .nranks = b->n, .count = s->count, .es = b->es, .in = in, .out = out, .stream = b->stream};
  return perf_nccl_run(&b->nc, &c);
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
  placement(b, impl, s, inplace, &in, &out);
  if (impl != IMPL_MSCCLPP) {
    int r = run_nccl(b, s, in, out, op);
    if (r != 0) die(b, "NCCL collective", b->nc.api.GetErrorString(r));
    return 0;
  }
  mscclppResult_t r = run_mscclpp(b, s, in, out, op);
  if (r == mscclppInvalidUsage && b->gpu && b->o.nccl && strstr(mscclppGetLastError(), "not built yet")) {
    if (!b->mscclpp_broken && b->rank == 0) printf("# mscclpp: %s; NCCL rows only\n", mscclppGetLastError());
    b->mscclpp_broken = 1;
    return -1;
  }
  if (r != mscclppSuccess) die(b, coll_name(b->o.coll), cli_last_error());
  return 0;
}

/* ---- inputs, operators, checks ----------------------------------------------------------------- */

/* The reduction operator of a measurement (a pre-multiplied sum gets this rank's verify scalar). */
static int make_op(struct bench* b, int impl, const struct verify_spec* spec) {
  if (!algo_coll_reduces(b->o.coll) || b->o.op != ELEM_OP_PREMUL) return b->o.op;
  unsigned char scalar[8] = {0};
  verify_scalar(spec, b->rank, scalar);
  if (impl != IMPL_MSCCLPP) {
    int op, r = b->nc.api.RedOpCreatePreMulSum(&op, scalar, b->o.dtype, mscclppScalarHostImmediate, b->nc.comm);
    if (r != 0) die(b, "ncclRedOpCreatePreMulSum", b->nc.api.GetErrorString(r));
    return op;
  }
  mscclppRedOp_t op;
  MPP_OK(b, mscclppRedOpCreatePreMulSum(&op, scalar, (mscclppDataType_t)b->o.dtype, mscclppScalarHostImmediate, b->comm));
  return (int)op;
}

static void drop_op(struct bench* b, int impl, int op) {
  if (op < (int)mscclppNumOps) return;
  if (impl != IMPL_MSCCLPP) b->nc.api.RedOpDestroy(op, b->nc.comm);
  else MPP_OK(b, mscclppRedOpDestroy((mscclppRedOp_t)op, b->comm));
}

/* Output region to garbage, then this rank's input in place (broadcast: the root's only). */
static void prepare_data(struct bench* b, int impl, const struct shape* s, int inplace, const struct verify_spec* spec) {
  char *in, *out;
  placement(b, impl, s, inplace, &in, &out);
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
static size_t check_data(struct bench* b, int impl, const struct shape* s, int inplace, const struct verify_spec* spec) {
  char *in, *out;
  placement(b, impl, s, inplace, &in, &out);
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
  double time_us; /* over ranks of each rank's average, as -a says (default: the largest) */
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
    double issued = now_s();
    sync_rank(b);
    double t = ((b->o.cputime ? issued : now_s()) - t0) / ((double)b->o.graphs * b->o.iters);
    cudaGraphExecDestroy(exec);
    return t;
  }
#endif
  MPP_OK(b, mscclppBootstrapBarrier(b->comm));
  double t0 = now_s();
  for (int i = 0; i < b->o.iters; i++) run_once(b, impl, s, inplace, op);
  double issued = now_s();
  sync_rank(b);
  return ((b->o.cputime ? issued : now_s()) - t0) / b->o.iters;
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

/* -a's summary of n per-rank times (the doubles at t, stride bytes apart): rank 0's (0), the
 * mean (1), the least (2) or the largest (3). */
static double over_ranks(int mode, int n, const double* t, size_t stride) {
  double sum = 0, lo = t[0], hi = t[0];
  for (int r = 0; r < n; r++) {
    double v = *(const double*)((const char*)t + (size_t)r * stride);
    sum += v, lo = v < lo ? v : lo, hi = v > hi ? v : hi;
  }
  return mode == 0 ? t[0] : mode == 1 ? sum / n : mode == 2 ? lo : hi;
}

static struct result measure(struct bench* b, int impl, const struct shape* s, int inplace, uint64_t seed) {
  struct result res = {.valid = 1, .wrong = (size_t)-1};
  if (impl != IMPL_MSCCLPP && inplace && b->o.coll == ALGO_COLL_ALLTOALL) return (struct result){0}; /* see the header */
  struct verify_spec spec = {.dtype = b->o.dtype, .op = algo_coll_reduces(b->o.coll) ? b->o.op : -1, .nranks = b->n, .seed = seed};
  int op = make_op(b, impl, &spec);
  prepare_data(b, impl, s, inplace, &spec);
  if (run_once(b, impl, s, inplace, op) != 0) { /* GPU collectives missing: every rank fails alike */
    drop_op(b, impl, op);
    return (struct result){0};
  }
  /* Warm-up in two halves with every rank synchronized between: what the first calls set up for
   * their peers (e.g. eager zero copy's announcements of buffers) is taken up in the second. */
  for (int i = 1; i < b->o.warmup; i++) {
    if (i == (b->o.warmup + 1) / 2) sync_rank(b);
    run_once(b, impl, s, inplace, op);
  }
  sync_rank(b);
  double t = timed_loop(b, impl, s, inplace, op);
  uint64_t wrong = 0;
  if (b->o.check) {
    prepare_data(b, impl, s, inplace, &spec);
    run_checked(b, impl, s, inplace, op);
    wrong = check_data(b, impl, s, inplace, &spec);
  }
  drop_op(b, impl, op);
  struct {
    double t;
    uint64_t wrong;
  }* all = calloc((size_t)b->n, sizeof(*all));
  all[b->rank].t = t, all[b->rank].wrong = wrong;
  MPP_OK(b, mscclppBootstrapAllGather(b->comm, all, (int)sizeof(*all)));
  res.time_us = over_ranks(b->o.average, b->n, &all[0].t, sizeof(*all)) * 1e6, wrong = 0;
  for (int r = 0; r < b->n; r++) wrong += all[r].wrong;
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
  return algo_coll_reduces(o->coll) ? mask_name(o->ops, ELEM_OP_COUNT, op_name) : "none";
}

/* One rank's line of the "# Using devices" list. */
struct rank_line {
  int pid, dev;
  char host[64], name[96];
};

/* Every rank's process, host and device, gathered to rank 0 ("#  Rank  r Group  0 Pid ... on HOST
 * device D [BUS] NAME", nccl-tests' layout; CPU ranks: device -1 [cpu]). */
static void print_devices(struct bench* b) {
  struct rank_line* all = calloc((size_t)b->n, sizeof(*all));
  if (all == NULL) die(b, "listing devices", "out of memory");
  struct rank_line* me = &all[b->rank];
  me->pid = (int)getpid(), me->dev = -1;
  gethostname(me->host, sizeof(me->host) - 1);
  snprintf(me->name, sizeof(me->name), "[cpu] CPU rank");
#if MSCCLPP_HAVE_CUDA
  struct cudaDeviceProp prop;
  char bus[32] = "?";
  if (b->gpu && cudaGetDevice(&me->dev) == cudaSuccess && cudaGetDeviceProperties(&prop, me->dev) == cudaSuccess) {
    cudaDeviceGetPCIBusId(bus, sizeof(bus), me->dev);
    snprintf(me->name, sizeof(me->name), "[%.31s] %.60s", bus, prop.name);
  }
#endif
  MPP_OK(b, mscclppBootstrapAllGather(b->comm, all, (int)sizeof(*all)));
  if (b->rank == 0) {
    printf("#\n# Using devices\n");
    for (int r = 0; r < b->n; r++)
      printf("#  Rank %2d Group  0 Pid %6d on %10s device %2d %s\n", r, all[r].pid, all[r].host, all[r].dev, all[r].name);
  }
  free(all);
}

static void print_header(struct bench* b) {
  const struct opts* o = &b->o;
  printf("# mscclpp-perf %s: %d %s ranks, datatype %s, op %s, root %d\n", coll_name(o->coll), b->n, b->gpu ? "GPU" : "CPU",
         dtypes_name(o), ops_name(o), algo_coll_rooted(o->coll) ? o->root : -1);
  printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %g(%s) warmup iters: %d iters: %d agg iters: 1 "
         "validation: %d graph: %d unalign: 0\n", o->minb, o->maxb, o->stepb ? (double)o->stepb : o->factor,
         o->nsizes ? "list" : o->stepb ? "bytes" : "factor", o->warmup, o->iters, o->check, b->gpu ? o->graphs : 0);
  if (o->graphs > 0 && !b->gpu) printf("# -G %d: CUDA graphs are for GPU ranks; ignored on CPU ranks\n", o->graphs);
  if (o->nccl && !b->gpu)
    printf("# %s: the NCCL comparison needs GPU ranks; these are CPU ranks, so mscclpp only\n",
           o->nccl_symm ? "--nccl-symm" : "--nccl");
  if (o->coll == ALGO_COLL_SENDRECV) printf("# sendrecv: rank r sends to r+1 and receives from r-1; no in-place variant\n");
  if (o->nccl && b->gpu && o->coll == ALGO_COLL_ALLTOALL)
    printf("# NCCL alltoall runs as grouped send/recv, which has no in-place form: its in-place columns are N/A\n");
}

/* The table's column heads (after print_devices). */
static void print_columns(struct bench* b) {
  if (b->rank != 0) return;
  printf("#\n# %10s  %12s  %8s  %6s  %6s  %-31s  %-31s\n", "", "", "", "", "", "           out-of-place",
         "             in-place");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s\n", "size", "count", "type", "redop",
         "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", b->o.nccl && b->gpu ? "  impl" : "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "", "(us)",
         "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  fflush(stdout);
}

/* v right-aligned in width columns with 2 decimals, fewer when that does not fit (then
 * exponent notation), as nccl-tests prints its times and bandwidths. */
static void fmt_num(double v, int width, char* buf, size_t len) {
  for (int decimals = 2; decimals >= 0; decimals--)
    if (snprintf(buf, len, "%*.*f", width, decimals, v) <= width) return;
  snprintf(buf, len, "%*.1e", width, v);
}

/* Formats one placement's columns and adds its bus bandwidth to impl's average. */
static void fmt_result(struct bench* b, const struct shape* s, const struct result* r, char* buf, size_t len, int impl) {
  if (!r->valid) {
    snprintf(buf, len, "%7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  double algbw = (double)s->bytes / (r->time_us * 1e-6) / 1e9, busbw = algbw * bus_factor(b->o.coll, b->n);
  char wrong[24], t[24], ab[24], bb[24];
  if (r->wrong == (size_t)-1) snprintf(wrong, sizeof(wrong), "N/A");
  else snprintf(wrong, sizeof(wrong), "%zu", r->wrong);
  fmt_num(r->time_us, 7, t, sizeof(t));
  fmt_num(algbw, 6, ab, sizeof(ab));
  fmt_num(busbw, 6, bb, sizeof(bb));
  snprintf(buf, len, "%s  %s  %s  %6s", t, ab, bb, wrong);
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
  char a[160], c[160];
  fmt_result(b, s, oop, a, sizeof(a), impl);
  fmt_result(b, s, ip, c, sizeof(c), impl);
  printf("%12zu  %12zu  %8s  %6s  %6d  %s  %s%s%s\n", s->bytes, s->bytes / b->es, elem_dtype_name(b->o.dtype),
         algo_coll_reduces(b->o.coll) ? op_name(b->o.op) : "none", algo_coll_rooted(b->o.coll) ? b->o.root : -1, a, c,
         b->o.nccl && b->gpu ? "  " : "", b->o.nccl && b->gpu ? impl_name(impl) : "");
  fflush(stdout);
  if (b->json == NULL) return;
  fprintf(b->json, "%s\n    {\"impl\": \"%s\", \"datatype\": \"%s\", \"op\": \"%s\", \"bytes\": %zu, \"count\": %zu, ",
          b->json_rows++ ? "," : "", impl_name(impl), elem_dtype_name(b->o.dtype),
          algo_coll_reduces(b->o.coll) ? op_name(b->o.op) : "none", s->bytes, s->bytes / b->es);
  json_result(b->json, "out_of_place", b, s, oop);
  fprintf(b->json, ", ");
  json_result(b->json, "in_place", b, s, ip);
  fprintf(b->json, "}");
}

/* "NCCL time / our time" per placement (above 1: we are faster), from the same run; impl: NCCL's
 * row (nccl: "nccl/ours", nccl-symm: "symm/ours"). */
static void report_ratio(struct bench* b, const struct shape* s, struct result got[IMPL_COUNT][2], int impl) {
  if (b->rank != 0) return;
  char r[2][16];
  for (int k = 0; k < 2; k++) {
    const struct result *m = &got[IMPL_MSCCLPP][k], *n = &got[impl][k];
    if (m->valid && n->valid && m->time_us > 0) snprintf(r[k], sizeof(r[k]), "%.2fx", n->time_us / m->time_us);
    else snprintf(r[k], sizeof(r[k]), "N/A");
  }
  printf("%12zu  %12s  %8s  %6s  %6s  %-31s  %-31s  ratio\n", s->bytes, impl == IMPL_NCCL ? "nccl/ours" : "symm/ours", "", "", "", r[0], r[1]);
  fflush(stdout);
}

static char plot_json[] = "/tmp/mscclpp-perf-XXXXXX.json"; /* --plot without --json */

static void json_open(struct bench* b) {
  if (b->rank != 0 || (b->o.json == NULL && b->o.plot == NULL)) return;
  if (b->o.json == NULL) {
    int fd = mkstemps(plot_json, 5);
    if (fd < 0) die(b, "--plot", "cannot create a temporary file for the results");
    close(fd);
    b->o.json = plot_json;
  }
  b->json = fopen(b->o.json, "w");
  if (b->json == NULL) die(b, "--json", b->o.json);
  fprintf(b->json, "{\"tool\": \"mscclpp-perf\", \"collective\": \"%s\", \"nranks\": %d, \"rank_kind\": \"%s\", ",
          coll_name(b->o.coll), b->n, b->gpu ? "gpu" : "cpu");
  fprintf(b->json, "\"datatype\": \"%s\", \"op\": \"%s\", \"root\": %d, \"iters\": %d, \"warmup\": %d, \"graphs\": %d, ",
          dtypes_name(&b->o), ops_name(&b->o), algo_coll_rooted(b->o.coll) ? b->o.root : -1, b->o.iters, b->o.warmup,
          b->gpu ? b->o.graphs : 0);
  fprintf(b->json, "\"check\": %s, \"rows\": [", b->o.check ? "true" : "false");
}

static void print_footer(struct bench* b) {
  if (b->rank != 0) return;
  double avg = b->busbw_n[IMPL_MSCCLPP] ? b->busbw_sum[IMPL_MSCCLPP] / b->busbw_n[IMPL_MSCCLPP] : 0.0;
  printf("# %-20s : %zu %s\n", "Out of bounds values", b->wrong_total, b->wrong_total == 0 ? "OK" : "FAILED");
  printf("# %-20s : %g\n", "Avg bus bandwidth", avg);
  if (b->busbw_n[IMPL_NCCL] > 0)
    printf("# %-20s : %g\n", "NCCL avg bus bandwidth", b->busbw_sum[IMPL_NCCL] / b->busbw_n[IMPL_NCCL]);
  if (b->busbw_n[IMPL_NCCL_SYMM] > 0)
    printf("# %-20s : %g\n", "NCCL-symm avg bus bandwidth", b->busbw_sum[IMPL_NCCL_SYMM] / b->busbw_n[IMPL_NCCL_SYMM]);
  printf("#\n# Collective test concluded: mscclpp-perf %s\n", coll_name(b->o.coll));
  if (b->json == NULL) return;
  fprintf(b->json, "\n  ], \"wrong_total\": %zu, \"ok\": %s, \"avg_busbw_gbs\": %.4f", b->wrong_total,
          b->wrong_total == 0 ? "true" : "false", avg);
  if (b->busbw_n[IMPL_NCCL] > 0) fprintf(b->json, ", \"nccl_avg_busbw_gbs\": %.4f", b->busbw_sum[IMPL_NCCL] / b->busbw_n[IMPL_NCCL]);
  if (b->busbw_n[IMPL_NCCL_SYMM] > 0)
    fprintf(b->json, ", \"nccl_symm_avg_busbw_gbs\": %.4f", b->busbw_sum[IMPL_NCCL_SYMM] / b->busbw_n[IMPL_NCCL_SYMM]);
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
  if (algo_coll_rooted(b->o.coll) && (b->o.root < 0 || b->o.root >= b->n)) {
    if (b->rank == 0) cli_usage_error(TOOL, "-r %d: the root must be a rank, 0..%d", b->o.root, b->n - 1);
    exit(2);
  }
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
  if (b->o.nccl_symm && b->gpu) symm_setup(b);
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
  if (b->symm_ok) perf_nccl_symm_release(&b->nc, &b->symm); /* collective: every rank gets here */
  perf_nccl_destroy(&b->nc);
  MPP_OK(b, mscclppBootstrapBarrier(b->comm));
  MPP_OK(b, mscclppCommDestroy(b->comm));
}

/* Every size for the current datatype and operator (b->o.dtype, b->o.op): one row per size and
 * implementation, wrong elements added to b->wrong_total. */
static void run_sizes(struct bench* b, uint64_t* seed) {
  int list_i = 0;
  for (size_t size = b->o.nsizes ? b->o.sizes[0] : b->o.minb; b->o.nsizes ? list_i < b->o.nsizes : size <= b->o.maxb;) {
    struct shape s = shape_of(b->o.coll, size, b->es, b->n);
    struct result got[IMPL_COUNT][2] = {{{0}}};
    int last = b->symm_ok ? IMPL_NCCL_SYMM : b->o.nccl && b->gpu ? IMPL_NCCL : IMPL_MSCCLPP;
    for (int impl = IMPL_MSCCLPP; impl <= last; impl++) {
      if (impl == IMPL_MSCCLPP && b->mscclpp_broken) continue;
      struct result oop = measure(b, impl, &s, 0, (*seed)++), ip = {0};
      if (b->o.coll != ALGO_COLL_SENDRECV) ip = measure(b, impl, &s, 1, (*seed)++);
      got[impl][0] = oop, got[impl][1] = ip;
      if (oop.valid || ip.valid) report_row(b, impl, &s, &oop, &ip);
      if (impl != IMPL_MSCCLPP) report_ratio(b, &s, got, impl);
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

/* -T: the run took too long (async-signal-safe: write and _exit only). */
static void on_timeout(int sig) {
  (void)sig;
  static const char msg[] = "mscclpp-perf: the run took longer than -T allows; giving up\n";
  ssize_t w = write(2, msg, sizeof(msg) - 1);
  (void)w;
  _exit(1);
}

int main(int argc, char** argv) {
  struct bench b = {.rank = -1};
  cli_quiet_library_errors();
  parse(argc, argv, &b.o);
  if (b.o.timeout > 0) {
    signal(SIGALRM, on_timeout);
    alarm((unsigned)b.o.timeout);
  }
  setup(&b);
  if (b.rank == 0) print_header(&b);
  print_devices(&b);
  print_columns(&b);
  json_open(&b);
  uint64_t seed = 1;
  for (int t = 0; t < ELEM_DTYPE_COUNT; t++) { /* nccl-tests' order: datatypes, then operators */
    if (!(b.o.dtypes >> t & 1)) continue;
    for (int op = 0; op < ELEM_OP_COUNT; op++) {
      if (!(b.o.ops >> op & 1)) continue;
      b.o.dtype = t, b.o.op = op, b.es = mscclppDataTypeSize((mscclppDataType_t)t);
      run_sizes(&b, &seed);
      if (!algo_coll_reduces(b.o.coll)) break; /* no operator: once per datatype */
    }
  }
  print_footer(&b);
  teardown(&b);
  int rc = b.wrong_total == 0 ? 0 : 1;
  if (b.rank == 0 && b.o.plot) {
    const char* args[] = {b.o.json, "-o", b.o.plot};
    if (pyrun_module(TOOL " --plot", "mscclpp.perfplot", args, 3) != 0) rc = 1;
    if (b.o.json == plot_json) remove(plot_json);
  }
  return rc;
}
