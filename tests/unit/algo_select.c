/* The selection table (src/algo/select.h): the repository's tuning/algo.tsv parses; rules match by
 * collective, kind, ranks, bytes, datatype and hosts (inclusive bounds, first match wins); every malformed rule is an
 * error naming the file, the line and what is wrong; the registry's names are unique and every
 * collective has a CPU algorithm; graph-only rules match captured calls only. */
#include <stdlib.h>
#include <string.h>

#include "algo/select.h"
#include "helpers.h"
#include "util/err.h"

static struct algo_table t;

static void expect_error(const char* text, const char* what) {
  mscclppResult_t res = algo_table_parse(text, "test.tsv", &t);
  CHECK_MSG(res == mscclppInvalidArgument, "'%s' parsed (%d)", text, (int)res);
  CHECK_MSG(strstr(err_last(), what) != NULL, "expected '%s' in: %s", what, err_last());
}

static const char* lookup(enum algo_coll c, int kind, int n, size_t bytes) {
  const struct algo_desc* d = algo_table_lookup(&t, c, kind, n, 1, bytes, 7, 0);
  return d ? d->name : "-";
}

int main(void) {
  const char* good =
      "# comment\n"
      "\n"
      "allreduce cpu 2 4 0 1K cpu_allreduce_allpairs   # trailing comment\n"
      "allreduce\tcpu\t1\t*\t1025\t*\tcpu_allreduce_rsag\n"
      "allreduce cpu 5 * 0 * cpu_allreduce_rsag\n"
      "broadcast cpu 1 * 0 1G cpu_broadcast_scatter_ag";
  CHECK_OK(algo_table_parse(good, "good.tsv", &t));
  CHECK(t.nrules == 4);
  CHECK(strcmp(lookup(ALGO_COLL_ALLREDUCE, mscclppRankCpu, 2, 0), "cpu_allreduce_allpairs") == 0);
  CHECK(strcmp(lookup(ALGO_COLL_ALLREDUCE, mscclppRankCpu, 4, 1024), "cpu_allreduce_allpairs") == 0);
  CHECK(strcmp(lookup(ALGO_COLL_ALLREDUCE, mscclppRankCpu, 4, 1025), "cpu_allreduce_rsag") == 0);
  CHECK(strcmp(lookup(ALGO_COLL_ALLREDUCE, mscclppRankCpu, 5, 8), "cpu_allreduce_rsag") == 0);
  CHECK(strcmp(lookup(ALGO_COLL_ALLREDUCE, mscclppRankCpu, 1, 8), "-") == 0);
  CHECK(strcmp(lookup(ALGO_COLL_ALLREDUCE, mscclppRankGpu, 2, 8), "-") == 0);
  CHECK(strcmp(lookup(ALGO_COLL_BROADCAST, mscclppRankCpu, 3, (size_t)1 << 30), "cpu_broadcast_scatter_ag") == 0);
  CHECK(strcmp(lookup(ALGO_COLL_BROADCAST, mscclppRankCpu, 3, ((size_t)1 << 30) + 1), "-") == 0);

  /* A graph-only (zero-copy) algorithm's rule matches captured calls only; others take the next. */
  CHECK_OK(algo_table_parse("allgather gpu 1 * 1K * gpu_allgather_zc\nallgather gpu 1 * 0 * gpu_allgather_bulk", "zc.tsv", &t));
  CHECK(strcmp(lookup(ALGO_COLL_ALLGATHER, mscclppRankGpu, 4, 4096), "gpu_allgather_bulk") == 0);
  CHECK(strcmp(algo_table_lookup(&t, ALGO_COLL_ALLGATHER, mscclppRankGpu, 4, 1, 4096, 7, 1)->name, "gpu_allgather_zc") == 0);
  CHECK(strcmp(algo_table_lookup(&t, ALGO_COLL_ALLGATHER, mscclppRankGpu, 4, 1, 512, 7, 1)->name, "gpu_allgather_bulk") == 0);

  /* The optional datatype column: a rule serves only the datatypes it lists ('*': all). */
  CHECK_OK(algo_table_parse("allreduce cpu 1 * 0 * cpu_allreduce_allpairs half,bfloat16\n"
                            "allreduce cpu 1 * 0 4K cpu_allreduce_allpairs *\n"
                            "allreduce cpu 1 * 0 * cpu_allreduce_rsag", "dt.tsv", &t));
  CHECK(t.nrules == 3);
  CHECK(strcmp(algo_table_lookup(&t, ALGO_COLL_ALLREDUCE, mscclppRankCpu, 4, 1, 1 << 20, 6, 0)->name, "cpu_allreduce_allpairs") == 0);
  CHECK(strcmp(algo_table_lookup(&t, ALGO_COLL_ALLREDUCE, mscclppRankCpu, 4, 1, 1 << 20, 9, 0)->name, "cpu_allreduce_allpairs") == 0);
  CHECK(strcmp(algo_table_lookup(&t, ALGO_COLL_ALLREDUCE, mscclppRankCpu, 4, 1, 1 << 20, 7, 0)->name, "cpu_allreduce_rsag") == 0);
  CHECK(strcmp(algo_table_lookup(&t, ALGO_COLL_ALLREDUCE, mscclppRankCpu, 4, 1, 4096, 7, 0)->name, "cpu_allreduce_allpairs") == 0);
  expect_error("allreduce cpu 1 * 0 * cpu_allreduce_rsag float,fp32", "test.tsv:1: unknown datatype 'fp32'");
  expect_error("allreduce cpu 1 * 0 * cpu_allreduce_rsag ,", "unknown datatype");
  expect_error("allreduce cpu 1 * 0 * cpu_allreduce_rsag * extra", "test.tsv:1: two datatype lists ('extra')");
  expect_error("allreduce cpu 1 * 0 * cpu_allreduce_rsag * hosts=2 extra", "10 fields");

  /* The optional hosts condition: hosts=N, MIN..MAX, MIN..*, before or after the datatypes; old
   * 7- and 8-field rules serve every host count. */
  CHECK_OK(algo_table_parse("allreduce cpu 1 * 0 * cpu_allreduce_hier hosts=2..*\n"
                            "allgather cpu 1 * 0 * cpu_allgather_hier hosts=3 float\n"
                            "allgather cpu 1 * 0 * cpu_allgather_hier int32 hosts=2..2\n"
                            "allreduce cpu 1 * 0 4K cpu_allreduce_allpairs\n"
                            "allreduce cpu 1 * 0 * cpu_allreduce_rsag *\n"
                            "allgather cpu 1 * 0 * cpu_allgather_direct", "hosts.tsv", &t));
  CHECK(t.nrules == 6);
#define PICK(c, hosts, dt) algo_table_lookup(&t, c, mscclppRankCpu, 8, hosts, 4096, dt, 0)->name
  CHECK(strcmp(PICK(ALGO_COLL_ALLREDUCE, 1, 7), "cpu_allreduce_allpairs") == 0);
  CHECK(strcmp(PICK(ALGO_COLL_ALLREDUCE, 2, 7), "cpu_allreduce_hier") == 0);
  CHECK(strcmp(PICK(ALGO_COLL_ALLREDUCE, 8, 7), "cpu_allreduce_hier") == 0);
  CHECK(strcmp(PICK(ALGO_COLL_ALLGATHER, 3, 7), "cpu_allgather_hier") == 0);    /* float on 3 hosts */
  CHECK(strcmp(PICK(ALGO_COLL_ALLGATHER, 3, 2), "cpu_allgather_direct") == 0);  /* int32 on 3 hosts */
  CHECK(strcmp(PICK(ALGO_COLL_ALLGATHER, 2, 2), "cpu_allgather_hier") == 0);    /* int32 on 2 hosts */
  CHECK(strcmp(PICK(ALGO_COLL_ALLGATHER, 2, 7), "cpu_allgather_direct") == 0);
  CHECK(strcmp(PICK(ALGO_COLL_ALLGATHER, 1, 2), "cpu_allgather_direct") == 0);
#undef PICK
  expect_error("allreduce cpu 1 * 0 * cpu_allreduce_hier hosts=0..2", "test.tsv:1: 'hosts=0..2' is not hosts=N");
  expect_error("\nallreduce cpu 1 * 0 * cpu_allreduce_hier hosts=3..2", "test.tsv:2: 'hosts=3..2'");
  expect_error("allreduce cpu 1 * 0 * cpu_allreduce_hier hosts=*", "'hosts=*'");
  expect_error("allreduce cpu 1 * 0 * cpu_allreduce_hier hosts=2..", "'hosts=2..'");
  expect_error("allreduce cpu 1 * 0 * cpu_allreduce_hier hosts=", "'hosts='");
  expect_error("allreduce cpu 1 * 0 * cpu_allreduce_hier hosts=two", "'hosts=two'");
  expect_error("allreduce cpu 1 * 0 * cpu_allreduce_hier hosts=2 hosts=3", "test.tsv:1: hosts= given twice");

  expect_error("allreduce cpu 1 * 0 *", "test.tsv:1: 6 fields");
  expect_error("\n\nallredcue cpu 1 * 0 * cpu_allreduce_rsag", "test.tsv:3: unknown collective 'allredcue'");
  expect_error("allreduce tpu 1 * 0 * cpu_allreduce_rsag", "kind 'tpu'");
  expect_error("allreduce cpu x * 0 * cpu_allreduce_rsag", "min_ranks 'x'");
  expect_error("allreduce cpu 1 * 0 12Q cpu_allreduce_rsag", "max_bytes '12Q'");
  expect_error("allreduce cpu 1 * 0 99999999999G cpu_allreduce_rsag", "max_bytes");
  expect_error("allreduce cpu 4 2 0 * cpu_allreduce_rsag", "minimum is above its maximum");
  expect_error("allreduce cpu 1 * 0 * cpu_nope", "'cpu_nope' cannot run allreduce on cpu ranks: no algorithm has that name");
  expect_error("allgather cpu 1 * 0 * cpu_allreduce_rsag", "implements another collective");
  expect_error("allreduce gpu 1 * 0 * cpu_allreduce_rsag", "other rank kind");
  expect_error("sendrecv cpu 1 * 0 * cpu_allreduce_rsag", "unknown collective 'sendrecv'");

  /* The repository's table. */
  char path[4096];
  snprintf(path, sizeof(path), "%s/tuning/algo.tsv", MPP_SOURCE_DIR);
  FILE* f = fopen(path, "r");
  CHECK_MSG(f != NULL, "cannot open %s", path);
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  text[n] = '\0';
  CHECK_OK(algo_table_parse(text, path, &t));

  int count;
  const struct algo_desc* r = algo_registry(&count);
  for (int i = 0; i < count; i++)
    for (int j = i + 1; j < count; j++) CHECK_MSG(strcmp(r[i].name, r[j].name) != 0, "duplicate %s", r[i].name);
  for (int c = 0; c < ALGO_COLL_SENDRECV; c++) {
    const struct algo_desc* d = NULL;
    CHECK_OK(algo_select((enum algo_coll)c, mscclppRankCpu, 4, 1, 4096, 7, 0, &d));
    CHECK_MSG(d != NULL && d->coll == (enum algo_coll)c, "no CPU algorithm for %s", algo_coll_name((enum algo_coll)c));
    CHECK_OK(algo_select((enum algo_coll)c, mscclppRankGpu, 4, 1, 4096, 7, 0, &d));
    CHECK_MSG(d != NULL && d->coll == (enum algo_coll)c && d->kind == mscclppRankGpu, "no GPU algorithm for %s",
              algo_coll_name((enum algo_coll)c));
    CHECK_OK(algo_select((enum algo_coll)c, mscclppRankGpu, 4, 1, (size_t)1 << 30, 7, 0, &d));
    CHECK_MSG(d != NULL && d->kind == mscclppRankGpu && (strstr(d->name, "_bulk") != NULL || strstr(d->name, "_stage") != NULL),
              "1 GiB %s on GPU ranks should be a bulk or staged algorithm, got %s", algo_coll_name((enum algo_coll)c),
              d ? d->name : "none");
    CHECK_OK(algo_select((enum algo_coll)c, mscclppRankGpu, 4, 1, 4096, 7, 1, &d)); /* captured: any GPU algorithm */
    CHECK(d != NULL && d->kind == mscclppRankGpu && d->coll == (enum algo_coll)c);
  }
  /* CPU ranks: the hierarchical algorithms across hosts (allreduce: above all-pairs' 8 KiB; alltoall:
   * up to 1 MiB), never on one host. */
  for (int c = 0; c < ALGO_COLL_SENDRECV; c++)
    for (size_t bytes = 8; bytes <= ((size_t)1 << 30); bytes <<= 4) {
      int has_hier = (c == ALGO_COLL_ALLREDUCE && bytes > 8192) || c == ALGO_COLL_ALLGATHER || c == ALGO_COLL_REDUCESCATTER ||
                     c == ALGO_COLL_BROADCAST || (c == ALGO_COLL_ALLTOALL && bytes <= ((size_t)1 << 20));
      const struct algo_desc* one = NULL, * two = NULL;
      CHECK_OK(algo_select((enum algo_coll)c, mscclppRankCpu, 4, 1, bytes, 7, 0, &one));
      CHECK_OK(algo_select((enum algo_coll)c, mscclppRankCpu, 8, 2, bytes, 7, 0, &two));
      CHECK_MSG(strstr(one->name, "_hier") == NULL, "%s on one host picked %s", algo_coll_name((enum algo_coll)c), one->name);
      CHECK_MSG((strstr(two->name, "_hier") != NULL) == has_hier, "%s of %zu bytes on 2 hosts picked %s",
                algo_coll_name((enum algo_coll)c), bytes, two->name);
    }
  /* 2 CPU ranks on 2 hosts: all-pairs (one exchange) up to 64 KiB, hierarchical above. */
  const struct algo_desc* two_hosts = NULL;
  CHECK_OK(algo_select(ALGO_COLL_ALLREDUCE, mscclppRankCpu, 2, 2, 4096, 7, 0, &two_hosts));
  CHECK(strcmp(two_hosts->name, "cpu_allreduce_allpairs") == 0);
  CHECK_OK(algo_select(ALGO_COLL_ALLREDUCE, mscclppRankCpu, 2, 2, (size_t)1 << 20, 7, 0, &two_hosts));
  CHECK(strcmp(two_hosts->name, "cpu_allreduce_hier") == 0);
  /* GPU ranks: on 2+ hosts every collective and size, eager or captured, takes a cross-host
   * algorithm (gpu/xhost.h: the hierarchical family where it exists, else the host family), on one
   * host never one. */
  for (int c = 0; c < ALGO_COLL_SENDRECV; c++)
    for (size_t bytes = 8; bytes <= ((size_t)1 << 30); bytes <<= 4)
      for (int captured = 0; captured < 2; captured++) {
        int hier = c != ALGO_COLL_REDUCE && c != ALGO_COLL_ALLTOALL;
        const struct algo_desc* one = NULL, * two = NULL;
        CHECK_OK(algo_select((enum algo_coll)c, mscclppRankGpu, 4, 1, bytes, 7, captured, &one));
        CHECK_OK(algo_select((enum algo_coll)c, mscclppRankGpu, 4, 2, bytes, 7, captured, &two));
        CHECK_MSG(strstr(one->name, "_hier") == NULL && strstr(one->name, "_host") == NULL, "GPU %s on one host picked %s",
                  algo_coll_name((enum algo_coll)c), one->name);
        CHECK_MSG(strstr(two->name, hier ? "_hier" : "_host") != NULL, "GPU %s of %zu bytes on 2 hosts picked %s",
                  algo_coll_name((enum algo_coll)c), bytes, two->name);
      }
  /* The shipped H100 overlay parses and names only known algorithms; eager 2-rank calls of the
   * stage range take the staged ones there. */
  snprintf(path, sizeof(path), "%s/tuning/algo.h100.tsv", MPP_SOURCE_DIR);
  f = fopen(path, "r");
  CHECK_MSG(f != NULL, "cannot open %s", path);
  n = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  text[n] = '\0';
  static struct algo_table h;
  CHECK_OK(algo_table_parse(text, path, &h));
  CHECK(strcmp(algo_table_lookup(&h, ALGO_COLL_ALLREDUCE, mscclppRankGpu, 2, 1, (size_t)16 << 20, 7, 0)->name,
               "gpu_allreduce_stage") == 0);
  CHECK(strcmp(algo_table_lookup(&h, ALGO_COLL_ALLREDUCE, mscclppRankGpu, 2, 1, (size_t)16 << 20, 7, 1)->name,
               "gpu_allreduce_zc") == 0);
  /* ... and only on one host: 2 hosts of one GPU each fall through to the cross-host rows */
  CHECK(algo_table_lookup(&h, ALGO_COLL_ALLREDUCE, mscclppRankGpu, 2, 2, (size_t)16 << 20, 7, 0) == NULL);
  printf("algo_select: OK (table from %s)\n", algo_table_source());
  return 0;
}
