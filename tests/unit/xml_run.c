/* xml_run.c - end to end on CPU ranks: each MSCCL XML sample given on the command line is converted
 * (mscclppMscclXmlToPlanJson), loaded (mscclppPlanLoadString) and executed (mscclppExecutePlan)
 * a few times at several sizes; allreduce results are checked against the exact sums, allgather
 * against every rank's input. Run under mscclpp-run -n 4. */
#include <stdlib.h>
#include <string.h>

#include <mscclpp/executor.h>
#include <mscclpp/msccl_xml.h>

#include "helpers.h"

static float input_of(int rank, size_t i, int iter) { return (float)(rank * 1000 + (int)(i % 977) + iter); }

static void run_one(mscclppComm_t comm, mscclppPlan_t plan, int rank, int nranks, size_t count, int iter) {
  mscclppPlanInfo_t info;
  CHECK_OK(mscclppPlanInfo(plan, &info));
  int gather = strcmp(info.collective, "allgather") == 0;
  size_t out_count = gather ? count * (size_t)nranks : count;
  float* in = malloc(count * sizeof(float));
  float* out = malloc(out_count * sizeof(float));
  CHECK(in && out);
  for (size_t i = 0; i < count; i++) in[i] = input_of(rank, i, iter);
  for (size_t i = 0; i < out_count; i++) out[i] = -1.0f;
  if (info.inplace) memcpy(out, in, count * sizeof(float));
  const void* src = info.inplace ? out : in;
  if (iter == 0) { /* a packet format that does not exist fails before anything collective */
    CHECK(mscclppExecutePlanPacket(comm, plan, src, out, count * sizeof(float), out_count * sizeof(float), mscclppFloat32,
                                   (mscclppPacketType_t)7, NULL) == mscclppInvalidArgument);
    CHECK_MSG(strstr(mscclppGetLastError(), "packet format 7") != NULL, "got: %s", mscclppGetLastError());
  }
  /* odd iterations ask for LL8 (CPU ranks keep their own packets: the same results) */
  CHECK_OK(mscclppExecutePlanPacket(comm, plan, src, out, count * sizeof(float), out_count * sizeof(float), mscclppFloat32,
                                    iter & 1 ? mscclppPacketLL8 : mscclppPacketLL16, NULL));
  for (size_t i = 0; i < out_count; i++) {
    float want = 0;
    if (gather) want = input_of((int)(i / count), i % count, iter);
    else for (int r = 0; r < nranks; r++) want += input_of(r, i, iter);
    CHECK_MSG(out[i] == want, "%s rank %d count %zu iter %d: out[%zu] = %g, want %g", info.name, rank, count, iter, i,
              out[i], want);
  }
  free(in), free(out);
}

int main(int argc, char** argv) {
  mscclppConfig_t cfg = MSCCLPP_CONFIG_INITIALIZER;
  cfg.rankKind = mscclppRankCpu;
  mscclppComm_t comm = NULL;
  int rank, nranks;
  CHECK_OK(mscclppCommInitFromEnv(&comm, &cfg));
  CHECK_OK(mscclppCommRank(comm, &rank));
  CHECK_OK(mscclppCommSize(comm, &nranks));
  static const size_t counts[] = {64, 1000, 4096};
  for (int f = 1; f < argc; f++) {
    char* json;
    size_t len;
    mscclppPlan_t plan;
    CHECK_OK(mscclppMscclXmlToPlanJson(argv[f], &json, &len));
    CHECK_OK(mscclppPlanLoadString(json, len, argv[f], &plan));
    free(json);
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
      for (int iter = 0; iter < 3; iter++) run_one(comm, plan, rank, nranks, counts[c], iter);
    CHECK_OK(mscclppPlanDestroy(plan));
    if (rank == 0) printf("xml_run: %s ok\n", argv[f]);
  }
  CHECK_OK(mscclppCommDestroy(comm));
  return 0;
}
