/* The plan C API without ranks: loading from a string and a file, info, the order check, errors
 * that name the field, a size range, and arguments that are refused. */
#include <stdio.h>
#include <stdlib.h>
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

/* A one-rank plan of nblocks threadblocks; blocks 0 and 1 hold the ops given (JSON), the rest none.
 * Malloc'ed text. */
static char* blocks_plan(int nblocks, const char* ops0, const char* ops1) {
  size_t cap = 256 + strlen(ops0) + strlen(ops1) + (size_t)nblocks * 32, len = 0;
  char* s = malloc(cap);
  CHECK(s != NULL);
  len += snprintf(s + len, cap - len, "{\"collective\": \"test\", \"gpus\": [{\"id\": 0, \"input_chunks\": 0, "
                  "\"output_chunks\": 0, \"threadblocks\": [");
  for (int b = 0; b < nblocks; b++)
    len += snprintf(s + len, cap - len, "%s{\"id\": %d, \"ops\": [%s]}", b ? ", " : "", b, b == 0 ? ops0 : b == 1 ? ops1 : "");
  snprintf(s + len, cap - len, "]}]}");
  return s;
}

#define BAR(id, n) "{\"name\": \"barrier\", \"barrier_id\": " #id ", \"num_threadblocks\": " #n "}"

/* Loads blocks_plan(nblocks, ops0, ops1); want NULL: it loads, else the error contains want. */
static void barrier_case(int nblocks, const char* ops0, const char* ops1, const char* want) {
  char* text = blocks_plan(nblocks, ops0, ops1);
  mscclppPlan_t p = NULL;
  mscclppResult_t res = mscclppPlanLoadString(text, strlen(text), "bar", &p);
  if (!want) {
    CHECK_MSG(res == mscclppSuccess, "%d blocks: %s", nblocks, mscclppGetLastError());
    mscclppPlanInfo_t info;
    CHECK_OK(mscclppPlanInfo(p, &info));
    CHECK(info.maxBlocksPerRank == nblocks);
    mscclppPlanDestroy(p);
  } else {
    CHECK(res == mscclppInvalidArgument && p == NULL);
    CHECK_MSG(strstr(mscclppGetLastError(), want) != NULL, "want '%s', got: %s", want, mscclppGetLastError());
  }
  free(text);
}

/* Barrier checks. 32769 blocks with barrier id 65535: the check indexed an id x block table in an
 * int (65535 * 32769 overflows) after allocating 8.6 GB for it; it now needs memory per id only. */
static void barriers(void) {
  barrier_case(32769, BAR(65535, 1), "", NULL);
  barrier_case(2, BAR(0, 1), BAR(0, 2), "barrier 0 is given 2 blocks here and 1 elsewhere");
  barrier_case(2, BAR(3, 2), BAR(3, 2) ", " BAR(3, 2), "barrier 3 is met 2 times by this block and 1 times by another");
  barrier_case(2, BAR(1, 2), "", "barrier 1 names 2 blocks but 1 blocks use it");
  barrier_case(3, BAR(2, 2) ", " BAR(5, 1), BAR(2, 2), NULL);
}

/* One LL block of n copies into scratch chunk 0 as packets and n unpacks of it: n x n packet
 * edges for the order check, past its limit at load from n = 1025 (the load still succeeds,
 * quickly) and through the API from n = 2900 (an error saying so). */
static void order_budget(int n) {
  const char* cp = "{\"name\": \"cpkt\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], "
                   "\"dst_buff\": [{\"type\": \"s\", \"index\": 0, \"size\": 1}]}";
  const char* up = "{\"name\": \"upkt\", \"src_buff\": [{\"type\": \"s\", \"index\": 0, \"size\": 1}], "
                   "\"dst_buff\": [{\"type\": \"o\", \"index\": 0, \"size\": 1}]}";
  size_t cap = 512 + (size_t)n * (strlen(cp) + strlen(up) + 4), len = 0;
  char* s = malloc(cap);
  CHECK(s != NULL);
  len += snprintf(s + len, cap - len, "{\"collective\": \"test\", \"protocol\": \"LL\", \"gpus\": [{\"id\": 0, "
                  "\"input_chunks\": 1, \"output_chunks\": 1, \"scratch_chunks\": 1, \"threadblocks\": [{\"id\": 0, \"ops\": [");
  for (int k = 0; k < 2 * n; k++) len += snprintf(s + len, cap - len, "%s%s", k ? ", " : "", k < n ? cp : up);
  snprintf(s + len, cap - len, "]}]}]}");
  mscclppPlan_t p = NULL;
  int findings = -1;
  CHECK_OK(mscclppPlanLoadString(s, strlen(s), "budget", &p));
  CHECK(mscclppPlanCheckOrder(p, &findings, NULL, 0) == mscclppInvalidUsage);
  CHECK_MSG(strstr(mscclppGetLastError(), "too large for this check") != NULL, "got: %s", mscclppGetLastError());
  mscclppPlanDestroy(p);
  free(s);
}

int main(void) {
  barriers();
  order_budget(10000);
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
