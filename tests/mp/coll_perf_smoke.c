/* mscclpp-perf on CPU ranks, end to end: every collective runs under mscclpp-run with checks on; the
 * output must have the header, one data row per size with 13 columns whose #wrong fields are 0 (or
 * N/A where there is no in-place variant), positive times, algbw = size / time and busbw = algbw
 * times nccl-tests' factor for the collective (to the printed precision), the "Out of bounds values
 * : 0 OK" footer and the average bus bandwidth; the --json file must say ok, hold the same rows, and
 * give algbw = bytes / time and busbw = algbw x the factor to 8 significant digits (however slow a
 * loaded machine makes the rows: the factor is checked there, not in the rounded columns); the
 * exit status must be 0. -d all / -o all must give a row per size for every datatype and operator; -o mulsum must run
 * premulsum. Bad command lines must exit 2.
 *
 *   coll_perf_smoke MSCCLPP_RUN MSCCLPP_PERF */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <jansson.h>

#include "helpers.h"

static const char *run_tool, *perf_tool;

/* Runs cmd, returns its exit status and its stdout in out (at most len bytes). */
static int capture(const char* cmd, char* out, size_t len) {
  FILE* p = popen(cmd, "r");
  CHECK_MSG(p != NULL, "cannot run %s", cmd);
  size_t n = fread(out, 1, len - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* nccl-tests' bus bandwidth factor of a collective on n ranks (busbw = algbw * factor). */
static double bus_factor(const char* coll, int n) {
  if (strcmp(coll, "allreduce") == 0) return 2.0 * (n - 1) / n;
  if (strcmp(coll, "allgather") == 0 || strcmp(coll, "reducescatter") == 0 || strcmp(coll, "alltoall") == 0)
    return (double)(n - 1) / n;
  return 1.0;
}

/* What the rows of one run showed: the names in the type and redop columns (" a b ... ", each once). */
struct seen {
  char types[256], ops[256];
};

/* Adds name to list (" a b ... ", starting as " ") unless it is there. */
static void note_name(char* list, size_t len, const char* name) {
  char key[40];
  snprintf(key, sizeof(key), " %s ", name);
  if (strstr(list, key) == NULL) snprintf(list + strlen(list), len - strlen(list), "%s ", name);
}

/* Half a unit in the last printed place of a number column ("12.34": 0.005, "123": 0.5; exponent
 * notation "1.2e+05": half a unit of its mantissa's last digit, scaled). */
static double half_ulp(const char* s) {
  const char* e = strpbrk(s, "eE");
  const char* dot = strchr(s, '.');
  int decimals = dot ? (int)((e ? e : s + strlen(s)) - dot - 1) : 0;
  return 0.5 * pow(10.0, -decimals) * (e ? pow(10.0, atof(e + 1)) : 1.0);
}

/* One placement's time, algbw and busbw columns (t, a, b) against each other: algbw is the size
 * over the time and busbw is algbw times the factor, each to the rounding of the printed digits
 * (nccl-tests' 2 decimals, fewer where the column is too narrow). */
static void check_bw(const char* coll, int nranks, double bytes, const char* t, const char* a, const char* b,
                     const char* line) {
  if (strcmp(t, "N/A") == 0) return;
  double time_us = atof(t), algbw = atof(a), busbw = atof(b), f = bus_factor(coll, nranks);
  double ut = half_ulp(t), ua = half_ulp(a), ub = half_ulp(b);
  /* The true time lies within ut of the printed one, and algbw between the bandwidths of those
   * two ends, give or take its own rounding ua. */
  double want_alg = bytes / (time_us * 1e3); /* GB/s */
  double lo = bytes / ((time_us + ut) * 1e3) - ua - 1e-9;
  double hi = time_us > ut ? bytes / ((time_us - ut) * 1e3) + ua + 1e-9 : HUGE_VAL;
  double tol_bus = ub + ua * f + 1e-9;
  CHECK_MSG(algbw >= lo && algbw <= hi, "%s: algbw %s is not size/time %.4f (%.4f..%.4f): %s", coll, a, want_alg, lo,
            hi, line);
  CHECK_MSG(fabs(busbw - algbw * f) <= tol_bus, "%s: busbw %s is not algbw x %.4f = %.4f: %s", coll, b, f, algbw * f, line);
  CHECK_MSG(!strchr(t, '.') || strlen(strchr(t, '.')) == 3 || (strlen(t) == 7 && strlen(strchr(t, '.')) == 2),
            "%s: time %s has not 2 decimals (fewer only where 7 columns are too few): %s", coll, t, line);
}

/* |got - want| within 1e-7 of want (the json's 9 significant digits, after one division). */
static int close_rel(double got, double want) { return fabs(got - want) <= 1e-7 * fabs(want) + 1e-300; }

/* One placement of a json row: algbw = bytes / time, busbw = algbw x factor (null: not run). */
static void check_json_result(const char* coll, int nranks, double bytes, json_t* r, const char* where) {
  if (json_is_null(r)) return;
  double t = json_number_value(json_object_get(r, "time_us")), a = json_number_value(json_object_get(r, "algbw_gbs"));
  double b = json_number_value(json_object_get(r, "busbw_gbs")), f = bus_factor(coll, nranks);
  CHECK_MSG(t > 0 && close_rel(a, bytes / (t * 1e3)), "%s json %s: algbw %.9g is not %.9g bytes / %.9g us", coll,
            where, a, bytes, t);
  CHECK_MSG(close_rel(b, a * f), "%s json %s: busbw %.9g is not algbw %.9g x %.6f", coll, where, b, a, f);
}

/* The --json file: ok, no wrong element, expect_rows rows whose bandwidths check out. */
static void check_json(const char* coll, int nranks, const char* path, int expect_rows) {
  json_error_t err;
  json_t* root = json_load_file(path, 0, &err);
  CHECK_MSG(root != NULL, "%s: %s is not json: %s (line %d)", coll, path, err.text, err.line);
  CHECK_MSG(json_is_true(json_object_get(root, "ok")) && json_integer_value(json_object_get(root, "wrong_total")) == 0,
            "%s: json says not ok", coll);
  json_t* rows = json_object_get(root, "rows");
  CHECK_MSG((int)json_array_size(rows) == expect_rows, "%s: %zu json rows, expected %d", coll, json_array_size(rows),
            expect_rows);
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t* row = json_array_get(rows, i);
    double bytes = (double)json_integer_value(json_object_get(row, "bytes"));
    check_json_result(coll, nranks, bytes, json_object_get(row, "out_of_place"), "out of place");
    check_json_result(coll, nranks, bytes, json_object_get(row, "in_place"), "in place");
  }
  json_decref(root);
}

/* Checks one data row; returns 1 if line is one. */
static int check_row(const char* line, const char* coll, int nranks, struct seen* seen) {
  char f[16][32];
  int nf = sscanf(line, "%31s %31s %31s %31s %31s %31s %31s %31s %31s %31s %31s %31s %31s %31s", f[0], f[1], f[2], f[3], f[4],
                  f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12], f[13]);
  if (nf <= 0 || f[0][0] == '#') return 0;
  CHECK_MSG(nf == 13, "%s: row with %d fields: %s", coll, nf, line);
  CHECK_MSG(atoll(f[0]) > 0 && atoll(f[1]) > 0, "%s: bad size/count: %s", coll, line);
  CHECK_MSG(atof(f[5]) > 0, "%s: out-of-place time not positive: %s", coll, line);
  CHECK_MSG(strcmp(f[8], "0") == 0, "%s: out-of-place #wrong is %s: %s", coll, f[8], line);
  int no_inplace = strcmp(coll, "sendrecv") == 0;
  CHECK_MSG(strcmp(f[12], no_inplace ? "N/A" : "0") == 0, "%s: in-place #wrong is %s: %s", coll, f[12], line);
  if (!no_inplace) CHECK_MSG(atof(f[9]) > 0, "%s: in-place time not positive: %s", coll, line);
  for (int k = 0; k < 2; k++) check_bw(coll, nranks, atof(f[0]), f[5 + 4 * k], f[6 + 4 * k], f[7 + 4 * k], line);
  note_name(seen->types, sizeof(seen->types), f[2]);
  note_name(seen->ops, sizeof(seen->ops), f[3]);
  return 1;
}

/* Every name of the space-separated list want appears in the column's names got. */
static void check_names(const char* coll, const char* column, const char* want, const char* got) {
  char buf[256], key[40];
  snprintf(buf, sizeof(buf), "%s", want);
  for (char *save = NULL, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
    snprintf(key, sizeof(key), " %s ", w);
    CHECK_MSG(strstr(got, key) != NULL, "%s: no row with %s %s (rows had:%s)", coll, column, w, got);
  }
}

#define ALL_TYPES "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2"
#define ALL_OPS "sum prod max min avg premulsum"

/* Runs mscclpp-perf COLL FLAGS on nranks and checks its output and json; types and ops (space
 * separated) must each appear in the rows' type and redop columns. */
static void run_case_names(int nranks, const char* coll, const char* flags, int expect_rows, const char* types,
                           const char* ops) {
  static char out[1 << 18];
  struct seen seen = {.types = " ", .ops = " "};
  char cmd[1024], json[256];
  snprintf(json, sizeof(json), "/tmp/mscclpp_perf_smoke_%d_%s.json", (int)getpid(), coll);
  snprintf(cmd, sizeof(cmd), "%s -n %d %s %s %s --json %s", run_tool, nranks, perf_tool, coll, flags, json);
  int st = capture(cmd, out, sizeof(out));
  CHECK_MSG(st == 0, "%s exited with %d:\n%s", cmd, st, out);
  CHECK_MSG(strstr(out, "# mscclpp-perf ") == out, "%s: no header:\n%s", coll, out);
  CHECK_MSG(strstr(out, "# Out of bounds values : 0 OK\n") != NULL, "%s: no OK footer:\n%s", coll, out);
  CHECK_MSG(strstr(out, "# Avg bus bandwidth    : ") != NULL, "%s: no bandwidth footer:\n%s", coll, out);
  int rows = 0;
  char* save = NULL;
  for (char* line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
    rows += check_row(line, coll, nranks, &seen);
  CHECK_MSG(rows == expect_rows, "%s: %d data rows, expected %d", coll, rows, expect_rows);
  check_names(coll, "type", types, seen.types);
  check_names(coll, "redop", ops, seen.ops);
  check_json(coll, nranks, json, expect_rows);
  remove(json);
  printf("  %-14s %d ranks, %d rows (%s): OK\n", coll, nranks, rows, flags);
}

static void run_case(int nranks, const char* coll, const char* flags, int expect_rows) {
  run_case_names(nranks, coll, flags, expect_rows, "", "");
}

int main(int argc, char** argv) {
  if (argc != 3) TEST_FAIL("usage: coll_perf_smoke MSCCLPP_RUN MSCCLPP_PERF");
  run_tool = argv[1], perf_tool = argv[2];
  /* 8 B .. 64 KiB by 4: 7 sizes (-b 8 -e 64K -f 4: 8 32 128 512 2K 8K 32K) */
  const char* sweep = "-b 8 -e 64K -f 4 -n 3 -w 1 -c 1";
  run_case(3, "allreduce", sweep, 7);
  run_case(2, "allgather", "-b 8 -e 64K -f 4 -n 3 -w 1 -d bfloat16", 7);
  /* up to 512 KiB: even under sanitizers some row is fast enough to tell busbw from algbw */
  run_case(3, "reducescatter", "-b 8 -e 512K -f 4 -n 3 -w 1 -d f8e4m3 -o premulsum", 9);
  run_case(2, "broadcast", "-b 100 -e 1100 -i 500 -n 2 -w 1 -r 1 -d int64", 3);
  run_case(3, "reduce", "-b 8 -e 64K -f 4 -n 3 -w 1 -r 2 -d half -o avg", 7);
  run_case(4, "alltoall", sweep, 7);
  run_case(2, "sendrecv", "-b 1K -e 1M -f 32 -n 3 -w 1 -G 5 --nccl", 3);
  /* every datatype x operator (3 sizes each: 8 512 32K); without an operator, once per datatype */
  const char* every = "-b 8 -e 32K -f 64 -n 2 -w 1 -d all -o all";
  run_case_names(3, "allreduce", every, 12 * 6 * 3, ALL_TYPES, ALL_OPS);
  run_case_names(2, "allgather", every, 12 * 3, ALL_TYPES, "none");
  run_case_names(4, "reducescatter", "-b 1K -e 64K -f 8 -n 2 -w 1 -d all -o mulsum", 12 * 3, ALL_TYPES, "premulsum");
  run_case_names(2, "reduce", "-b 8 -e 32K -f 64 -n 2 -w 1 -d int32 -o all", 6 * 3, "int32", ALL_OPS);
  static char out[4096];
  char cmd[1024];
  snprintf(cmd, sizeof(cmd), "%s allredcue 2>&1", perf_tool);
  CHECK_MSG(capture(cmd, out, sizeof(out)) == 2 && strstr(out, "unknown collective 'allredcue'"), "bad collective: %s", out);
  snprintf(cmd, sizeof(cmd), "%s allreduce -d float17 2>&1", perf_tool);
  CHECK_MSG(capture(cmd, out, sizeof(out)) == 2 && strstr(out, "unknown datatype 'float17'"), "bad datatype: %s", out);
  snprintf(cmd, sizeof(cmd), "%s allreduce -o mul 2>&1", perf_tool);
  CHECK_MSG(capture(cmd, out, sizeof(out)) == 2 && strstr(out, "unknown op 'mul'"), "bad op: %s", out);
  snprintf(cmd, sizeof(cmd), "%s allreduce -b 1X 2>&1", perf_tool);
  CHECK_MSG(capture(cmd, out, sizeof(out)) == 2 && strstr(out, "is not a size"), "bad size: %s", out);
  snprintf(cmd, sizeof(cmd), "%s allreduce -g 2 2>&1", perf_tool);
  CHECK_MSG(capture(cmd, out, sizeof(out)) == 2 && strstr(out, "-g 2: not supported"), "-g 2: %s", out);
  printf("coll_perf_smoke: OK\n");
  return 0;
}
