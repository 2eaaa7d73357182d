/* mscclpp-plan - execution plans from the command line: validate, run (and check), draw and
 * convert plans. `mscclpp-plan --help` and `mscclpp-plan COMMAND --help` describe every option
 * (the tables below); docs/tools.md has examples.
 *
 * run: --size is the per-rank input in bytes (reducescatter: the per-rank output). Checked
 * collectives: allreduce, allgather, reducescatter, alltoall, sendrecv (rank r sends to r+1),
 * broadcast (root 0); others only run. A reduction is checked against the plan's reduce_op, which
 * every reduce op of the plan must name alike (a plan without reduce ops: sum). Every command
 * takes MSCCL XML algorithms too, converted in memory (as `convert` would). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include <mscclpp/mscclpp.h>

#include "algo/algo.h"
#include "algo/verify.h"
#include "cli.h"
#include "pyrun.h"
#include "exec/gpu/gpu.h"
#include "plan/draw.h"
#include "plan/plan.h"
#include <mscclpp/msccl_xml.h>

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define MAX_FILES 16
#define MAX_SIZES 64
#define TOOL "mscclpp-plan"

struct opts {
  const char* file; /* the one being run */
  const char* files[MAX_FILES];
  int nfiles;
  int n, gpu, iters, dtype, dot, ll8, hosts;
  int dtypes[ELEM_DTYPE_COUNT], ndtypes; /* --dtype, in the order given; dtype: the one being run */
  uint64_t sizes[MAX_SIZES];
  int nsizes;
  void* stream; /* GPU ranks: the calls' stream */
  /* GPU ranks: the device buffers, grown and never freed before the end: a peer keeps what it
   * imported of ours (the executor's buffer contexts live until teardown), and CUDA refuses to
   * map a freed buffer's successor at the same address while that import is open */
  char* dpool;
  size_t dcap;
  char* dold[64];
  int nold;
};

static const struct cli_opt validate_opts[] = {
    {"--strict", NULL, "an order-check finding fails the plan too (exit 1)"},
    {"--json", NULL, "print every verdict as one JSON document instead of text"},
    {"-h, --help", NULL, "this help"},
    {NULL, NULL, NULL}};
static const struct cli_opt run_opts[] = {
    {"-n", "RANKS", "ranks to run on (required; started through mscclpp-run beside this program)"},
    {"--size", "B[,B...]", "per-rank input sizes in bytes, each in turn (default 4K); K, M, G, T\n"
                          "(powers of 1024, also KB, KiB, ...) are taken"},
    {"--dtype", "T[,T...]|all", "datatypes, each in turn (default float; all: int8 .. f8e5m2)"},
    {"--iters", "N", "calls per size, each on fresh inputs and checked (default 3)"},
    {"--cpu", NULL, "CPU ranks (the default)"},
    {"--gpu", NULL, "GPU ranks: one GPU per local rank, buffers from cudaMalloc, calls on a stream"},
    {"--ll8", NULL, "LL plans with LL8 packets (GPU ranks)"},
    {"--hosts", "H", "stand-in hosts (MSCCLPP_HOSTID): CPU rank r acts as a rank of host r % H, GPU ranks\n"
                     "fill hosts in consecutive blocks of RANKS/H (a multi-node plan's layout); ranks of\n"
                     "different hosts meet over tcp (net with MSCCLPP_NET_TRANSPORT=on), GPU ranks through\n"
                     "port channels only"},
    {"-h, --help", NULL, "this help"},
    {NULL, NULL, NULL}};
static const struct cli_opt draw_opts[] = {
    {"-o, --output", "OUT", "write a picture: OUT.svg, OUT.png or OUT.pdf (lanes per rank and threadblock,\n"
                           "ops in step order, transfers between lanes; needs Python with the mscclpp\n"
                           "package and matplotlib: `pip install .[draw]`; $PYTHON picks the interpreter)"},
    {"--max-ops", "N", "with -o: at most N ops per threadblock"},
    {"--title", "TEXT", "with -o: the picture's title"},
    {"--dot", NULL, "print a graphviz graph of the transfers, edges in step then rank order"},
    {"-h, --help", NULL, "this help"},
    {NULL, NULL, NULL}};
static const struct cli_opt convert_opts[] = {
    {"-o", "OUT.json", "write the plan here instead of stdout"},
    {"-h, --help", NULL, "this help"},
    {NULL, NULL, NULL}};
static const struct cli_opt no_opts[] = {{"-h, --help", NULL, "this help"}, {NULL, NULL, NULL}};

static const struct cli_help helps[] = {
    {TOOL " validate", TOOL " validate [--strict] [--json] FILE...",
     "Loads every plan and prints \"FILE: OK\" or why not (exit 1), then runs the order check\n"
     "(mscclppPlanCheckOrder) and lists what it finds (\"FILE: order: ...\").", validate_opts, NULL},
    {TOOL " run", TOOL " run FILE... -n RANKS [--size B[,B...]] [--dtype T[,T...]|all] [--cpu|--gpu] [--ll8]\n"
                     "                        [--iters N] [--hosts H]",
     "Runs the plans in turn on one communicator of RANKS ranks, checks every result against the\n"
     "plan's collective and prints the mean time per call.", run_opts, NULL},
    {TOOL " draw", TOOL " draw FILE [-o OUT.svg|OUT.png|OUT.pdf [--max-ops N] [--title TEXT] | --dot]",
     "Without options: the plan step by step as text.", draw_opts, NULL},
    {TOOL " convert", TOOL " convert FILE.xml [-o OUT.json]",
     "Converts an MSCCL XML algorithm into an execution plan (JSON).", convert_opts, NULL},
};

static const struct cli_help main_help = {
    TOOL, TOOL " COMMAND [OPTIONS] FILE...\n       " TOOL " COMMAND --help",
    "Commands:\n"
    "  validate   load plans and run the order check on them\n"
    "  run        run plans on CPU or GPU ranks and check their results\n"
    "  draw       print a plan step by step, draw it as a picture (-o) or as a graphviz graph (--dot)\n"
    "  convert    convert an MSCCL XML algorithm into a plan\n"
    "FILE is a plan (JSON) or an MSCCL XML algorithm (converted in memory).",
    no_opts, NULL};

/* The help of a command by name, or NULL. */
static const struct cli_help* command_help(const char* cmd) {
  for (size_t i = 0; i < sizeof(helps) / sizeof(helps[0]); i++)
    if (!strcmp(helps[i].tool + strlen(TOOL) + 1, cmd)) return &helps[i];
  return NULL;
}

/* Whether the file's first non-blank byte opens an XML element: an MSCCL algorithm. */
static int is_xml(const char* path) {
  FILE* f = fopen(path, "r");
  int c = EOF;
  if (f == NULL) return 0;
  while ((c = fgetc(f)) != EOF && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
  }
  fclose(f);
  return c == '<';
}

/* Loads a plan file, converting an MSCCL XML algorithm in memory. The library's error otherwise. */
static mscclppResult_t load_plan(const char* path, mscclppPlan_t* p) {
  if (!is_xml(path)) return mscclppPlanLoadFile(path, p);
  char* json = NULL;
  size_t len = 0;
  mscclppResult_t r = mscclppMscclXmlToPlanJson(path, &json, &len);
  if (r == mscclppSuccess) r = mscclppPlanLoadString(json, len, path, p);
  free(json);
  return r;
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
  if (load_plan(v->file, &p) != mscclppSuccess) {
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
    else return cli_usage_error(TOOL " validate", "unknown option '%s'", argv[i]);
  }
  if (i == argc) return cli_usage_error(TOOL " validate", "no plan FILE given");
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

/* The (step, from rank, to rank, threadblock) an edge line of plan_draw's dot output names, for
 * sorting ("  rA -> rB [...label=\"tbT#S ..."); other lines give -1s. */
struct dot_edge {
  int step, from, to, tb;
  char* line;
};

static struct dot_edge dot_edge_of(char* line) {
  struct dot_edge e = {-1, -1, -1, -1, line};
  const char* label = strstr(line, "label=\"tb");
  if (sscanf(line, " r%d -> r%d", &e.from, &e.to) != 2 || label == NULL ||
      sscanf(label, "label=\"tb%d#%d", &e.tb, &e.step) != 2)
    e.from = -1;
  return e;
}

static int dot_edge_cmp(const void* a, const void* b) {
  const struct dot_edge *x = a, *y = b;
  int k[4] = {x->step - y->step, x->from - y->from, x->to - y->to, x->tb - y->tb};
  for (int i = 0; i < 4; i++)
    if (k[i]) return k[i];
  return strcmp(x->line, y->line);
}

/* plan_draw's dot graph with its edges sorted by step, then sending rank, receiving rank and
 * threadblock (plan_draw lists them rank by rank): the same picture, in a stable, readable order. */
static int print_dot(const struct mscclppPlan* p) {
  char* text = NULL;
  size_t len = 0;
  FILE* mem = open_memstream(&text, &len);
  if (mem == NULL) return cli_fail(TOOL, "out of memory");
  plan_draw(mem, p, 1);
  fclose(mem);
  size_t n = 0, cap = 64;
  struct dot_edge* edges = malloc(cap * sizeof(*edges));
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && edges; line = strtok_r(NULL, "\n", &save)) {
    struct dot_edge e = dot_edge_of(line);
    if (e.from < 0) {
      if (strcmp(line, "}") != 0) puts(line);
      continue;
    }
    if (n == cap) edges = realloc(edges, (cap *= 2) * sizeof(*edges));
    if (edges) edges[n++] = e;
  }
  if (edges) qsort(edges, n, sizeof(*edges), dot_edge_cmp);
  for (size_t i = 0; edges && i < n; i++) puts(edges[i].line);
  puts("}");
  int ok = edges != NULL;
  free(edges);
  free(text);
  return ok ? 0 : cli_fail(TOOL, "out of memory");
}

/* A picture of the plan through `python -m mscclpp.draw` (an XML algorithm goes through a temporary
 * JSON file). */
static int draw_picture(const char* file, const char* const* extra, int nextra) {
  char tmp[] = "/tmp/mscclpp-plan-draw-XXXXXX.json";
  const char* json = file;
  if (is_xml(file)) {
    char* text = NULL;
    size_t len = 0;
    if (mscclppMscclXmlToPlanJson(file, &text, &len) != mscclppSuccess) return cli_fail(TOOL, "%s", cli_last_error());
    int fd = mkstemps(tmp, 5);
    FILE* f = fd >= 0 ? fdopen(fd, "w") : NULL;
    int ok = f && fwrite(text, 1, len, f) == len;
    if (f) ok = fclose(f) == 0 && ok;
    free(text);
    if (!ok) return cli_fail(TOOL, "cannot write a temporary file for %s", file);
    json = tmp;
  }
  const char* args[8] = {json};
  int k = 1;
  for (int i = 0; i < nextra && k < 8; i++) args[k++] = extra[i];
  int rc = pyrun_module(TOOL " draw", "mscclpp.draw", args, k);
  if (json == tmp) remove(tmp);
  return rc;
}

static int cmd_draw(int argc, char** argv) {
  const char* file = NULL;
  const char* extra[6];
  int nextra = 0, dot = 0, has_out = 0;
  for (int i = 0; i < argc; i++) {
    const char* a = argv[i];
    int takes = !strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--max-ops") || !strcmp(a, "--title");
    if (takes && i + 1 >= argc) return cli_usage_error(TOOL " draw", "%s needs a value", a);
    if (takes) {
      long long n = 0;
      if (!strcmp(a, "--max-ops") && cli_parse_int(argv[i + 1], 1, 1 << 20, &n))
        return cli_usage_error(TOOL " draw", "--max-ops must be a positive integer, got '%s'", argv[i + 1]);
      has_out |= a[1] == 'o' || !strcmp(a, "--output");
      extra[nextra++] = a, extra[nextra++] = argv[++i];
    } else if (!strcmp(a, "--dot")) {
      dot = 1;
    } else if (a[0] == '-') {
      return cli_usage_error(TOOL " draw", "unknown option '%s'", a);
    } else if (file) {
      return cli_usage_error(TOOL " draw", "one FILE at a time ('%s' and '%s')", file, a);
    } else {
      file = a;
    }
  }
  if (!file) return cli_usage_error(TOOL " draw", "no plan FILE given");
  if (dot && nextra) return cli_usage_error(TOOL " draw", "--dot prints text; it does not go with -o, --max-ops or --title");
  if (nextra && !has_out) return cli_usage_error(TOOL " draw", "--max-ops and --title are for pictures (-o OUT)");
  mscclppPlan_t p;
  if (load_plan(file, &p) != mscclppSuccess) return cli_fail(TOOL, "%s", cli_last_error());
  int rc = 0;
  if (nextra) rc = draw_picture(file, extra, nextra);
  else if (dot) rc = print_dot(p);
  else plan_draw(stdout, p, 0);
  mscclppPlanDestroy(p);
  return rc;
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
    if (dt < 0) {
      char names[256] = "";
      for (int d = 0; d < ELEM_DTYPE_COUNT; d++)
        snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", d ? ", " : "", elem_dtype_name(d));
      return cli_usage_error(TOOL " run", "unknown datatype '%s' (one of %s, or all)", t, names), -1;
    }
    if (o->ndtypes == ELEM_DTYPE_COUNT) return cli_usage_error(TOOL " run", "--dtype %s: too many datatypes", v), -1;
    o->dtypes[o->ndtypes++] = dt;
  }
  return o->ndtypes ? 0 : (cli_usage_error(TOOL " run", "--dtype: no datatype in '%s'", v), -1);
}

/* --size's value: sizes separated by commas, each > 0. 0 or -1 (said why). */
static int parse_size_list(const char* v, struct opts* o) {
  char list[1024], why[160];
  snprintf(list, sizeof(list), "%s", v);
  o->nsizes = 0;
  for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    uint64_t b = 0;
    if (cli_parse_size(t, &b, why, sizeof(why))) return cli_usage_error(TOOL " run", "--size: %s", why), -1;
    if (b == 0) return cli_usage_error(TOOL " run", "--size: a size must be at least 1 byte, got '%s'", t), -1;
    if (o->nsizes == MAX_SIZES) return cli_usage_error(TOOL " run", "--size: at most %d sizes", MAX_SIZES), -1;
    o->sizes[o->nsizes++] = b;
  }
  return o->nsizes ? 0 : (cli_usage_error(TOOL " run", "--size: no size in '%s'", v), -1);
}

/* An integer option's value in [lo, hi] into *out. 0 or -1 (said why). */
static int int_opt(const char* name, const char* v, int lo, int hi, int* out) {
  long long x = 0;
  if (cli_parse_int(v, lo, hi, &x)) return cli_usage_error(TOOL " run", "%s must be an integer in [%d, %d], got '%s'", name, lo, hi, v), -1;
  *out = (int)x;
  return 0;
}

/* One option of run at argv[*i] (its value after it); 0 or -1 (said why). */
static int run_option(int argc, char** argv, int* i, struct opts* o) {
  const char* a = argv[*i];
  static const char* const flags[] = {"--cpu", "--gpu", "--ll8"};
  for (int f = 0; f < 3; f++)
    if (!strcmp(a, flags[f])) {
      if (f < 2) o->gpu = f;
      else o->ll8 = 1;
      return 0;
    }
  int valued = !strcmp(a, "-n") || !strcmp(a, "--size") || !strcmp(a, "--iters") || !strcmp(a, "--hosts") || !strcmp(a, "--dtype");
  if (!valued) return cli_usage_error(TOOL " run", "unknown option '%s'", a), -1;
  if (*i + 1 >= argc) return cli_usage_error(TOOL " run", "%s needs a value", a), -1;
  const char* v = argv[++*i];
  if (!strcmp(a, "-n")) return int_opt("-n", v, 1, 1024, &o->n);
  if (!strcmp(a, "--iters")) return int_opt("--iters", v, 1, 1000000, &o->iters);
  if (!strcmp(a, "--hosts")) return int_opt("--hosts", v, 1, 1024, &o->hosts);
  if (!strcmp(a, "--size")) return parse_size_list(v, o);
  return parse_dtypes(v, o);
}

static int parse_run(int argc, char** argv, struct opts* o) {
  memset(o, 0, sizeof(*o));
  o->iters = 3, o->dtypes[0] = o->dtype = mscclppFloat32, o->ndtypes = 1;
  o->sizes[0] = 4096, o->nsizes = 1;
  for (int i = 0; i < argc; i++) {
    if (argv[i][0] == '-') {
      if (run_option(argc, argv, &i, o)) return -1;
    } else if (o->nfiles == MAX_FILES) {
      return cli_usage_error(TOOL " run", "at most %d plan files", MAX_FILES), -1;
    } else {
      o->files[o->nfiles++] = argv[i];
    }
  }
  if (!o->nfiles) return cli_usage_error(TOOL " run", "no plan FILE given"), -1;
  if (o->ll8 && !o->gpu) return cli_usage_error(TOOL " run", "--ll8 is for GPU ranks (--gpu)"), -1;
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
      fprintf(stderr, TOOL ": rank %d: %s: %s\n", rank, what, cli_last_error());           \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

/* GPU ranks: the device copy of the buffers (CPU ranks: nothing to do). */
static int dev_alloc(struct opts* o, struct bufs* b) {
  if (!o->gpu) return 0;
#if MSCCLPP_HAVE_CUDA
  size_t need = b->sb + b->rb + 64;
  if (need > o->dcap) {
    size_t cap = need > 2 * o->dcap ? need : 2 * o->dcap;
    char* p = NULL;
    cudaError_t e = o->nold < 64 ? cudaMalloc((void**)&p, cap) : cudaErrorMemoryAllocation;
    if (e != cudaSuccess) return fprintf(stderr, "cudaMalloc of %zu bytes: %s\n", cap, cudaGetErrorString(e)), 1;
    if (o->dpool) o->dold[o->nold++] = o->dpool;
    o->dpool = p, o->dcap = cap;
  }
  b->dmem = o->dpool;
  return 0;
#else
  (void)b;
  return fprintf(stderr, "--gpu: this build has no CUDA\n"), 1;
#endif
}

static void dev_free(struct bufs* b) { b->dmem = NULL; /* the pool's: dev_release frees it at the end */ }

static void dev_release(struct opts* o) {
#if MSCCLPP_HAVE_CUDA
  for (int i = 0; i < o->nold; i++) cudaFree(o->dold[i]);
  if (o->dpool) cudaFree(o->dpool);
#endif
  o->dpool = NULL, o->dcap = 0, o->nold = 0;
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
static int run_size(mscclppComm_t comm, mscclppPlan_t plan, struct opts* o, int rank, int n, uint64_t S,
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
  if (make_bufs(plan, n, rank, S, &b)) return fprintf(stderr, TOOL ": rank %d: no buffers for size %llu\n", rank,
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
      rc = fprintf(stderr, TOOL ": rank %d: barrier: %s\n", rank, cli_last_error()) > 0;
      break;
    }
    double t0 = now_s();
    if (call(comm, plan, o, &b) != mscclppSuccess) {
      rc = fprintf(stderr, TOOL ": rank %d: execute: %s\n", rank, cli_last_error()) > 0;
      break;
    }
    *secs += now_s() - t0;
    /* GPU ranks: peers may read our buffers until they are done too */
    if (dev_copy(&b, 0) || (b.dmem && mscclppBootstrapBarrier(comm) != mscclppSuccess)) {
      rc = fprintf(stderr, TOOL ": rank %d: after the call: %s\n", rank, cli_last_error()) > 0;
      break;
    }
    size_t bad = check(coll, &spec, rank, S, es, &b);
    if (bad) rc = fprintf(stderr, TOOL ": rank %d: %s size %llu %s %s iteration %d: %zu wrong elements\n", rank, o->file,
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
  if (o->hosts > 0) { /* stand-in hosts: ranks of different hosts meet over tcp (or net) */
    char id[64];
    const char* r = getenv("MSCCLPP_RANK");
    const char* ws = getenv("MSCCLPP_WORLD_SIZE");
    int me = r ? atoi(r) : 0, n = ws ? atoi(ws) : o->n, per = n >= o->hosts ? n / o->hosts : 1;
    /* CPU ranks: host r % H (neighbours apart); GPU ranks: consecutive blocks, as a multi-node
     * plan lays out its gpus (gpus_per_node on each node) */
    int host = o->gpu ? (me / per < o->hosts ? me / per : o->hosts - 1) : me % o->hosts;
    snprintf(id, sizeof(id), "plan-host-%d", host);
    setenv("MSCCLPP_HOSTID", id, 1);
  }
  TRY(mscclppCommInitFromEnv(&comm, &cfg), "communicator");
  mscclppCommRank(comm, &rank), mscclppCommSize(comm, &n);
  for (int i = 0; i < o->nfiles && !rc; i++)
    if (load_plan(o->files[i], &plans[i]) != mscclppSuccess)
      rc = fprintf(stderr, TOOL ": rank %d: load: %s\n", rank, cli_last_error()) > 0;
  uint64_t seed = 1;
  for (int si = 0; si < o->nsizes && !rc; si++) {
    uint64_t S = o->sizes[si];
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
  dev_release(o);
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

/* Before starting ranks: every plan loads (else one error, not one per rank). */
static int preflight(const struct opts* o) {
  for (int i = 0; i < o->nfiles; i++) {
    mscclppPlan_t p;
    if (load_plan(o->files[i], &p) != mscclppSuccess) return cli_fail(TOOL, "%s", cli_last_error());
    mscclppPlanDestroy(p);
  }
  return 0;
}

static int cmd_run(int argc, char** argv) {
  struct opts o;
  if (parse_run(argc, argv, &o)) return 2;
  if (getenv("MSCCLPP_RANK")) return worker(&o);
  if (o.n < 1) return cli_usage_error(TOOL " run", "-n RANKS is required");
  if (preflight(&o)) return 1;
  return launch(argc, argv, &o);
}

/* convert FILE.xml [-o OUT.json]: the plan JSON on stdout or in OUT. */
static int cmd_convert(int argc, char** argv) {
  const char *in = NULL, *out = NULL;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "-o")) {
      if (i + 1 >= argc) return cli_usage_error(TOOL " convert", "-o needs a file name");
      out = argv[++i];
    } else if (argv[i][0] == '-') {
      return cli_usage_error(TOOL " convert", "unknown option '%s'", argv[i]);
    } else if (in) {
      return cli_usage_error(TOOL " convert", "one FILE.xml at a time ('%s' and '%s')", in, argv[i]);
    } else {
      in = argv[i];
    }
  }
  if (!in) return cli_usage_error(TOOL " convert", "no FILE.xml given");
  char* json = NULL;
  size_t len = 0;
  if (mscclppMscclXmlToPlanJson(in, &json, &len) != mscclppSuccess) return cli_fail(TOOL, "%s", cli_last_error());
  FILE* f = out ? fopen(out, "w") : stdout;
  int ok = f && fwrite(json, 1, len, f) == len && fputc('\n', f) != EOF;
  if (f && out) ok = (fclose(f) == 0) && ok;
  free(json);
  return ok ? 0 : cli_fail(TOOL, "cannot write %s", out ? out : "stdout");
}

int main(int argc, char** argv) {
  cli_quiet_library_errors();
  if (argc < 2) return cli_usage_error(TOOL, "no COMMAND given (validate, run, draw or convert)");
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    const struct cli_help* h = argc > 2 ? command_help(argv[2]) : NULL;
    return cli_print_help(h ? h : &main_help), 0;
  }
  const struct cli_help* h = command_help(argv[1]);
  if (h == NULL) return cli_usage_error(TOOL, "unknown command '%s' (validate, run, draw or convert)", argv[1]);
  if (cli_wants_help(argc - 1, argv + 1)) return cli_print_help(h), 0;
  if (!strcmp(argv[1], "validate")) return cmd_validate(argc - 2, argv + 2);
  if (!strcmp(argv[1], "run")) return cmd_run(argc - 2, argv + 2);
  if (!strcmp(argv[1], "draw")) return cmd_draw(argc - 2, argv + 2);
  return cmd_convert(argc - 2, argv + 2);
}
