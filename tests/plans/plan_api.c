/* The plan C API without ranks: loading from a string and a file, info, the order check, errors
 * that name the field, a size range, and arguments that are refused. */
#include <stdio.h>
#include <string.h>

#include <mscclpp/mscclpp.h>

#include "helpers.h"

static const char* good =
    "{\"name\": \"sr\", \"collective\": \"sendrecv\", \"protocol\": \"Simple\", \"inplace\": false,\n"
    " \"min_message_size\": 16, \"max_message_size\": 18446744073709551615,\n"
    " \"gpus\": [\n"
    "  {\"id\": 0, \"input_chunks\": 1, \"output_chunks\": 1, \"scratch_chunks\": 0,\n"
    "   \"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [1]}],\n"
    "   \"remote_buffers\": [{\"rank\": 1, \"type\": \"o\", \"access_channel_types\": [\"memory\"]}],\n"
    "   \"threadblocks\": [{\"id\": 0, \"channels\": [{\"channel_type\": \"memory\", \"channel_ids\": [0]}],\n"
    "     \"remote_buffer_refs\": [{\"access_channel_type\": \"memory\", \"remote_buffer_ids\": [0]}],\n"
    "     \"ops\": [{\"name\": \"pws\", \"channel_type\": \"memory\", \"channel_ids\": [0],\n"
    "       \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], \"dst_buff\": [{\"buffer_id\": 0, \"index\": 0, \"size\": 1}]},\n"
    "      {\"name\": \"wait\", \"channel_type\": \"memory\", \"channel_ids\": [0]}]}]},\n"
    "  {\"id\": 1, \"input_chunks\": 1, \"output_chunks\": 1, \"scratch_chunks\": 0,\n"
    "   \"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [0]}],\n"
    "   \"remote_buffers\": [{\"rank\": 0, \"type\": \"o\", \"access_channel_types\": [\"memory\"]}],\n"
    "   \"threadblocks\": [{\"id\": 0, \"channels\": [{\"channel_type\": \"memory\", \"channel_ids\": [0]}],\n"
    "     \"remote_buffer_refs\": [{\"access_channel_type\": \"memory\", \"remote_buffer_ids\": [0]}],\n"
    "     \"ops\": [{\"name\": \"pws\", \"channel_type\": \"memory\", \"channel_ids\": [0],\n"
    "       \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], \"dst_buff\": [{\"buffer_id\": 0, \"index\": 0, \"size\": 1}]},\n"
    "      {\"name\": \"wait\", \"channel_type\": \"memory\", \"channel_ids\": [0]}]}]}]}\n";

int main(void) {
  mscclppPlan_t p = NULL;
  mscclppPlanInfo_t info;
  CHECK_OK(mscclppPlanLoadString(good, strlen(good), "good", &p));
  CHECK_OK(mscclppPlanInfo(p, &info));
  CHECK(strcmp(info.name, "sr") == 0 && strcmp(info.collective, "sendrecv") == 0);
  CHECK(info.nranks == 2 && info.protocolLL == 0 && info.inplace == 0 && info.maxBlocksPerRank == 1);
  CHECK(info.minMessageSize == 16 && info.maxMessageSize == UINT64_MAX);
  /* the order check: each rank writes the other's output before that rank started the call */
  int findings = -1;
  char text[2048];
  CHECK_OK(mscclppPlanCheckOrder(p, &findings, text, sizeof(text)));
  CHECK_MSG(findings == 2, "%d findings: %s", findings, text);
  CHECK_MSG(strstr(text, "gpu 0 threadblock 0 op 0 (pws) writes gpu 1's output chunks [0, 1) before that rank has "
                         "started the call") != NULL, "got: %s", text);
  findings = -1;
  CHECK_OK(mscclppPlanCheckOrder(p, &findings, NULL, 0));
  CHECK(findings == 2);
  CHECK(mscclppPlanCheckOrder(p, NULL, text, sizeof(text)) == mscclppInvalidArgument);
  CHECK(mscclppPlanCheckOrder(NULL, &findings, text, sizeof(text)) == mscclppInvalidArgument);
  CHECK_OK(mscclppPlanDestroy(p));

  /* the same text from a file */
  char path[] = "/tmp/plan_api_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  FILE* f = fdopen(fd, "w");
  fputs(good, f);
  fclose(f);
  CHECK_OK(mscclppPlanLoadFile(path, &p));
  mscclppPlanDestroy(p);
  remove(path);

  /* truncated text: an error with line and column */
  CHECK(mscclppPlanLoadString(good, strlen(good) / 2, "half", &p) == mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "half: line") != NULL);
  CHECK(p == NULL);
  /* a wait without its signal on the other side */
  char bad[4096];
  snprintf(bad, sizeof(bad), "%s", good);
  char* second = strstr(strstr(bad, "\"pws\"") + 1, "\"pws\"");
  memcpy(second, "\"put\"", 5);
  CHECK(mscclppPlanLoadString(bad, strlen(bad), "bad", &p) == mscclppInvalidArgument);
  CHECK_MSG(strstr(mscclppGetLastError(), "imbalance") != NULL, "got: %s", mscclppGetLastError());
  CHECK(mscclppPlanLoadFile("/nonexistent/plan.json", &p) == mscclppInvalidArgument);
  CHECK(mscclppPlanLoadString(NULL, 0, "x", &p) == mscclppInvalidArgument);
  CHECK(mscclppPlanInfo(NULL, &info) == mscclppInvalidArgument);
  CHECK_OK(mscclppPlanDestroy(NULL));
  CHECK(mscclppExecutePlan(NULL, NULL, NULL, NULL, 0, 0, mscclppFloat32, NULL) == mscclppInvalidArgument);
  printf("plan_api: OK\n");
  return 0;
}
