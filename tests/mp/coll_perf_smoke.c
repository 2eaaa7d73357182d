/* mscclpp-perf on CPU ranks, end to end: every collective runs under mscclpp-run with checks on; the
 * output must have the header, one data row per size with 13 columns whose #wrong fields are 0 (or
 * N/A where there is no in-place variant), positive times, the "Out of bounds values : 0 OK" footer
 * and the average bus bandwidth; the --json file must say ok; the exit status must be 0. Bad command
 * lines must exit 2.
 *
 *   coll_perf_smoke MSCCLPP_RUN MSCCLPP_PERF */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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

/* Checks one data row; returns 1 if line is one. */
static int check_row(const char* line, const char* coll) {
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
  return 1;
}

static void run_case(int nranks, const char* coll, const char* flags, int expect_rows) {
  static char out[1 << 16];
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
  for (char* line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) rows += check_row(line, coll);
  CHECK_MSG(rows == expect_rows, "%s: %d data rows, expected %d", coll, rows, expect_rows);
  FILE* f = fopen(json, "r");
  CHECK_MSG(f != NULL, "%s: no json file %s", coll, json);
  size_t n = fread(out, 1, sizeof(out) - 1, f);
  fclose(f);
  out[n] = '\0';
  remove(json);
  CHECK_MSG(strstr(out, "\"ok\": true") && strstr(out, "\"wrong_total\": 0"), "%s: json says: %s", coll, out);
  printf("  %-14s %d ranks, %d sizes: OK\n", coll, nranks, rows);
}

int main(int argc, char** argv) {
  if (argc != 3) TEST_FAIL("usage: coll_perf_smoke MSCCLPP_RUN MSCCLPP_PERF");
  run_tool = argv[1], perf_tool = argv[2];
  /* 8 B .. 64 KiB by 4: 7 sizes (-b 8 -e 64K -f 4: 8 32 128 512 2K 8K 32K) */
  const char* sweep = "-b 8 -e 64K -f 4 -n 3 -w 1 -c 1";
  run_case(3, "allreduce", sweep, 7);
  run_case(2, "allgather", "-b 8 -e 64K -f 4 -n 3 -w 1 -d bfloat16", 7);
  run_case(3, "reducescatter", "-b 8 -e 64K -f 4 -n 3 -w 1 -d f8e4m3 -o premulsum", 7);
  run_case(2, "broadcast", "-b 100 -e 1100 -i 500 -n 2 -w 1 -r 1 -d int64", 3);
  run_case(3, "reduce", "-b 8 -e 64K -f 4 -n 3 -w 1 -r 2 -d half -o avg", 7);
  run_case(4, "alltoall", sweep, 7);
  run_case(2, "sendrecv", "-b 1K -e 1M -f 32 -n 3 -w 1 -G 5 --nccl", 3);
  static char out[4096];
  char cmd[1024];
  snprintf(cmd, sizeof(cmd), "%s allredcue 2>&1", perf_tool);
  CHECK_MSG(capture(cmd, out, sizeof(out)) == 2 && strstr(out, "unknown collective 'allredcue'"), "bad collective: %s", out);
  snprintf(cmd, sizeof(cmd), "%s allreduce -d float17 2>&1", perf_tool);
  CHECK_MSG(capture(cmd, out, sizeof(out)) == 2 && strstr(out, "unknown datatype 'float17'"), "bad datatype: %s", out);
  snprintf(cmd, sizeof(cmd), "%s allreduce -b 1X 2>&1", perf_tool);
  CHECK_MSG(capture(cmd, out, sizeof(out)) == 2 && strstr(out, "is not a size"), "bad size: %s", out);
  printf("coll_perf_smoke: OK\n");
  return 0;
}
