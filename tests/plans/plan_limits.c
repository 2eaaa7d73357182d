/* Plan and MSCCL XML loading: memory proportional to the plan and limits that refuse early.
 * Generated files (in TMPDIR), each loaded through the public API, the elapsed time and this
 * process's peak RSS (getrusage) checked after each:
 *   - 70,000 threadblocks in one gpu (11 MB): refused naming the limit, peak RSS + < 48 MB;
 *   - an XML algorithm of 130,000 steps (14 MB): refused while read, peak RSS + < 64 MB;
 *   - a 100 MB plan: refused by the scan of its text (MSCCLPP_PLAN_MAX_VALUES) within 5 s,
 *     peak RSS < 400 MB (the file's own buffer is 100 MB of it);
 *   - a plan of about 1.3 million JSON values (9 MB, under the limit): loads, peak RSS < 400 MB.
 * Slack: the bounds are 3-10x what a quiet machine needs (0.2 s and 93 MB for the 100 MB plan,
 * 1.2 s for the largest accepted one), for a loaded 2-core machine; RSS does not depend on load. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

/* Under AddressSanitizer (its shadow memory and quarantine of freed blocks inflate RSS, its checks
 * slow everything) the RSS bounds are reported but not asserted and time bounds are 4x: the plain
 * build asserts them. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif
#define RSS_OK(cond) (SANITIZED || (cond))
#define SLOW (SANITIZED ? 4.0 : 1.0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double peak_mb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0; /* Linux: kilobytes */
}

/* A plan of nranks gpus, ntb blocks each, nops local copies per block (block t copies chunk t % 4:
 * ordered within its block, so the order check finds nothing). */
static void write_plan(const char* path, int nranks, int ntb, int nops) {
  FILE* f = fopen(path, "w");
  CHECK(f != NULL);
  fprintf(f, "{\"name\":\"big\",\"collective\":\"allreduce\",\"protocol\":\"Simple\",\"inplace\":false,"
             "\"num_threads_per_block\":1024,\"gpus\":[");
  for (int r = 0; r < nranks; r++) {
    fprintf(f, "%s{\"id\":%d,\"input_chunks\":4,\"output_chunks\":4,\"scratch_chunks\":0,\"channels\":[],"
               "\"remote_buffers\":[],\"semaphores\":[],\"threadblocks\":[", r ? "," : "", r);
    for (int t = 0; t < ntb; t++) {
      fprintf(f, "%s{\"id\":%d,\"channels\":[],\"remote_buffer_refs\":[],\"ops\":[", t ? "," : "", t);
      for (int k = 0; k < nops; k++)
        fprintf(f, "%s{\"name\":\"copy\",\"src_buff\":[{\"type\":\"i\",\"index\":%d,\"size\":1}],"
                   "\"dst_buff\":[{\"type\":\"o\",\"index\":%d,\"size\":1}]}", k ? "," : "", t % 4, t % 4);
      fprintf(f, "]}");
    }
    fprintf(f, "]}");
  }
  fprintf(f, "]}\n");
  CHECK(fclose(f) == 0);
}

/* An MSCCL allgather on 2 gpus whose one tb per gpu alternates nsteps sends and receives. */
static void write_xml(const char* path, int nsteps) {
  FILE* f = fopen(path, "w");
  CHECK(f != NULL);
  fprintf(f, "<algo name=\"big\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" coll=\"allgather\" "
             "inplace=\"0\" minBytes=\"0\">\n");
  for (int g = 0; g < 2; g++) {
    fprintf(f, "<gpu id=\"%d\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\">\n<copy i_off=\"0\" o_off=\"%d\"/>\n"
               "<tb id=\"0\" send=\"%d\" recv=\"%d\" chan=\"0\">\n", g, g, 1 - g, 1 - g);
    for (int s = 0; s < nsteps; s++) {
      int send = s % 2 == 0, off = send ? g : 1 - g;
      fprintf(f, "<step s=\"%d\" type=\"%s\" srcbuf=\"o\" srcoff=\"%d\" dstbuf=\"o\" dstoff=\"%d\" cnt=\"1\" depid=\"-1\" "
                 "deps=\"-1\" hasdep=\"0\"/>\n", s, send ? "s" : "r", off, off);
    }
    fprintf(f, "</tb>\n</gpu>\n");
  }
  fprintf(f, "</algo>\n");
  CHECK(fclose(f) == 0);
}

static void expect_refused(mscclppResult_t r, const char* what) {
  CHECK_MSG(r == mscclppInvalidArgument, "expected InvalidArgument, got %d: %s", (int)r, mscclppGetLastError());
  CHECK_MSG(strstr(mscclppGetLastError(), what) != NULL, "the error does not say '%s': %s", what, mscclppGetLastError());
}

int main(void) {
  const char* tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char path[512];
  snprintf(path, sizeof(path), "%s/mpp_plan_limits_%d", tmp, (int)getpid());
  mscclppPlan_t plan = NULL;
  double base = peak_mb(), t0;

  write_plan(path, 1, 70000, 1);
  t0 = now_s();
  expect_refused(mscclppPlanLoadFile(path, &plan), "'threadblocks': more than 65536 blocks");
  printf("70000 blocks: refused in %.2f s, peak RSS +%.0f MB\n", now_s() - t0, peak_mb() - base);
  CHECK_MSG(RSS_OK(peak_mb() - base < 48), "peak RSS grew by %.0f MB", peak_mb() - base);
  CHECK(plan == NULL);

  write_xml(path, 65000);
  t0 = now_s();
  expect_refused(mscclppPlanRegisterMscclXml(path, NULL, NULL), "<step> and <copy> elements");
  printf("XML of 130000 steps: refused in %.2f s, peak RSS +%.0f MB\n", now_s() - t0, peak_mb() - base);
  CHECK_MSG(RSS_OK(peak_mb() - base < 64), "peak RSS grew by %.0f MB", peak_mb() - base);

  write_plan(path, 2, 4, 110000); /* 93 MB */
  t0 = now_s();
  expect_refused(mscclppPlanLoadFile(path, &plan), "MSCCLPP_PLAN_MAX_VALUES");
  double dt = now_s() - t0;
  printf("93 MB plan: refused in %.2f s, peak RSS %.0f MB\n", dt, peak_mb());
  CHECK_MSG(dt < 5.0 * SLOW, "refusing took %.1f s", dt);
  CHECK_MSG(RSS_OK(peak_mb() < 400), "peak RSS %.0f MB", peak_mb());

  write_plan(path, 2, 4, 11000); /* about 1.3 million values, 9 MB: under the limit */
  t0 = now_s();
  CHECK_OK(mscclppPlanLoadFile(path, &plan));
  dt = now_s() - t0;
  printf("9 MB plan: loaded in %.2f s, peak RSS %.0f MB\n", dt, peak_mb());
  CHECK_MSG(dt < 15.0 * SLOW, "loading took %.1f s", dt);
  CHECK_MSG(RSS_OK(peak_mb() < 400), "peak RSS %.0f MB", peak_mb());
  CHECK_OK(mscclppPlanDestroy(plan));
  unlink(path);
  printf("plan_limits: OK\n");
  return 0;
}
