/* The machine kind and its selection-table overlay (src/algo/machine.c, select.c): GPU names map to
 * short model names; MSCCLPP_MACHINE is checked (it names a file); with MSCCLPP_ALGO_TABLE=dir/algo.tsv
 * and MSCCLPP_MACHINE=fake, dir/algo.fake.tsv's rules come first and algo.tsv serves what they do
 * not match; the source names both files. A bad MSCCLPP_MACHINE fails selection naming it (a second
 * process, since the table is read once per process). */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "algo/select.h"
#include "helpers.h"
#include "util/err.h"

static void expect_machine(const char* gpu, const char* want) {
  char got[ALGO_MACHINE_MAX + 1];
  algo_machine_from_gpu_name(gpu, got, sizeof(got));
  CHECK_MSG(strcmp(got, want) == 0, "'%s' gave machine '%s', expected '%s'", gpu, got, want);
}

static void write_file(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  CHECK(f != NULL);
  fputs(text, f);
  fclose(f);
}

static const char* pick(size_t bytes) {
  const struct algo_desc* d = NULL;
  CHECK_OK(algo_select(ALGO_COLL_ALLREDUCE, mscclppRankCpu, 4, 1, bytes, 7, 0, &d));
  return d->name;
}

/* In a child: selection with MSCCLPP_MACHINE=bad fails naming the variable; exit 0 when it does. */
static int bad_machine_child(const char* bad) {
  setenv("MSCCLPP_MACHINE", bad, 1);
  const struct algo_desc* d = NULL;
  mscclppResult_t r = algo_select(ALGO_COLL_ALLREDUCE, mscclppRankCpu, 4, 1, 64, 7, 0, &d);
  return r == mscclppInvalidArgument && strstr(err_last(), "MSCCLPP_MACHINE") != NULL ? 0 : 1;
}

int main(void) {
  expect_machine("NVIDIA H100 80GB HBM3", "h100");
  expect_machine("NVIDIA H200", "h200");
  expect_machine("NVIDIA A100-SXM4-80GB", "a100");
  expect_machine("Tesla V100-SXM2-16GB", "v100");
  expect_machine("NVIDIA GeForce RTX 4090", "4090");
  expect_machine("NVIDIA GH200 480GB", "gh200");
  expect_machine("NVIDIA", "");
  expect_machine("", "");
  CHECK_OK(algo_machine_check("h100"));
  CHECK_OK(algo_machine_check("h200-nvl_4"));
  CHECK(algo_machine_check("../etc") == mscclppInvalidArgument);
  CHECK(algo_machine_check("H100") == mscclppInvalidArgument);
  CHECK(algo_machine_check("a234567890123456789012345678901234") == mscclppInvalidArgument);

  for (int i = 0; i < 2; i++) { /* a bad value fails selection, in a child process each */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) _exit(bad_machine_child(i == 0 ? "../x" : "H100"));
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "MSCCLPP_MACHINE bad value %d was not refused", i);
  }

  char dir[] = "/tmp/mpp_algo_machine_XXXXXX", table[128], overlay[128];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(table, sizeof(table), "%s/algo.tsv", dir);
  snprintf(overlay, sizeof(overlay), "%s/algo.fake.tsv", dir);
  write_file(table, "allreduce cpu 1 * 0 * cpu_allreduce_rsag\n");
  write_file(overlay, "allreduce cpu 1 * 0 1K cpu_allreduce_allpairs\n");
  setenv("MSCCLPP_ALGO_TABLE", table, 1);
  setenv("MSCCLPP_MACHINE", "fake", 1);
  CHECK(strcmp(pick(512), "cpu_allreduce_allpairs") == 0); /* the overlay's rule */
  CHECK(strcmp(pick(4096), "cpu_allreduce_rsag") == 0);     /* past it: the generic table */
  const char* src = algo_table_source();
  CHECK_MSG(strstr(src, "algo.fake.tsv") != NULL && strstr(src, "/algo.tsv") != NULL, "source: %s", src);
  unlink(overlay);
  unlink(table);
  rmdir(dir);
  printf("algo_machine: OK (%s)\n", src);
  return 0;
}
