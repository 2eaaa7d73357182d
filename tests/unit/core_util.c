/* Unit test of the core runtime: result strings, the per-thread last error, the parameter
 * registry and the log handler. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

static char last_line[2048];
static int lines;
static void capture(const char* msg) {
  snprintf(last_line, sizeof(last_line), "%s", msg);
  lines++;
}

static void* other_thread(void* arg) {
  (void)arg;
  CHECK(mscclppGetLastError()[0] == '\0'); /* last error is per thread */
  (void)MPP_ERR(mscclppTimeout, "thread error");
  CHECK(strstr(mscclppGetLastError(), "thread error") != NULL);
  return NULL;
}

static void test_errors(void) {
  for (int r = 0; r < mscclppNumResults; r++) {
    const char* s = mscclppGetErrorString((mscclppResult_t)r);
    CHECK(s != NULL && s[0] != '\0' && strcmp(s, "unknown result code") != 0);
  }
  CHECK(strcmp(mscclppGetErrorString((mscclppResult_t)999), "unknown result code") == 0);
  CHECK(mscclppRemoteError == 6 && mscclppInProgress == 7 && mscclppTimeout == 8); /* seed order */
  CHECK(MPP_ERRNO(mscclppSystemError, 2, "opening %s", "x.json") == mscclppSystemError);
  const char* e = mscclppGetLastError();
  CHECK_MSG(strstr(e, "core_util.c:") && strstr(e, "opening x.json") && strstr(e, "No such file"), "got \"%s\"", e);
  pthread_t t;
  pthread_create(&t, NULL, other_thread, NULL);
  pthread_join(t, NULL);
  CHECK(strstr(mscclppGetLastError(), "opening x.json") != NULL);
  CHECK_RES(mscclppGetVersion(NULL), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "version is NULL") != NULL);
  int v = 0;
  CHECK_OK(mscclppGetVersion(&v));
  CHECK(v == MSCCLPP_VERSION && mscclppGetLastError()[0] == '\0');
}

static void test_params(void) {
  CHECK(param_int(PARAM_FLUSH_TIMEOUT) == 1234);     /* set in main before first use */
  CHECK(param_int(PARAM_SEMAPHORE_TIMEOUT) == 60000); /* malformed: default kept */
  CHECK(strcmp(param_str(PARAM_RANK_KIND), "cpu") == 0);
  CHECK(param_is_set(PARAM_FLUSH_TIMEOUT) && !param_is_set(PARAM_BOOTSTRAP_TIMEOUT));
  char buf[64];
  param_value_text(PARAM_BOOTSTRAP_TIMEOUT, buf, sizeof(buf));
  CHECK(strcmp(buf, "120") == 0);
  for (int i = 0; i < PARAM_COUNT; i++) CHECK(param_name(i)[0] && param_help(i)[0]);
}

static void test_log(void) {
  CHECK_OK(mscclppSetLogHandler(capture));
  lines = 0;
  log_msg(LOG_INFO, LOG_SUB_NET, "hello %d", 42);
  CHECK_MSG(lines == 1 && strstr(last_line, "INFO net hello 42"), "got \"%s\"", last_line);
  log_msg(LOG_TRACE, LOG_SUB_NET, "too detailed"); /* level is info */
  log_msg(LOG_INFO, LOG_SUB_BOOTSTRAP, "excluded subsystem");
  CHECK(lines == 1);
  (void)MPP_ERR(mscclppInvalidUsage, "visible warning");
  CHECK(lines == 2 && strstr(last_line, "WARN") && strstr(last_line, "visible warning"));
  CHECK_OK(mscclppSetLogHandler(NULL));
}

int main(void) {
  setenv("MSCCLPP_FLUSH_TIMEOUT", "1234", 1);
  setenv("MSCCLPP_SEMAPHORE_TIMEOUT", "12x", 1);
  setenv("MSCCLPP_RANK_KIND", "cpu", 1);
  setenv("MSCCLPP_LOG_LEVEL", "info", 1);
  setenv("MSCCLPP_LOG_SUBSYS", "^bootstrap", 1);
  mscclppSetLogHandler(capture); /* keep the malformed-parameter warning off stderr */
  test_errors();
  test_params();
  test_log();
  printf("core_util: ok\n");
  return 0;
}
