/* param.c - reads params.def's parameters from the environment once, on first use. */
#include "util/param.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/log.h"

struct param {
  const char* name;
  int is_int;
  int64_t def_int;
  const char* def_str;
  const char* help;
  int is_set;
  int64_t int_value;
  const char* str_value;
};

static struct param params[PARAM_COUNT] = {
#define PARAM_INT(name, def, help) {#name, 1, (def), "", (help), 0, 0, NULL},
#define PARAM_STR(name, def, help) {#name, 0, 0, (def), (help), 0, 0, NULL},
#include "util/params.def"
#undef PARAM_INT
#undef PARAM_STR
};

static pthread_once_t params_once = PTHREAD_ONCE_INIT;

/* Parses one parameter's environment variable into its value fields. */
static void param_load(struct param* p) {
  char var[96];
  snprintf(var, sizeof(var), "MSCCLPP_%s", p->name);
  const char* text = getenv(var);
  p->int_value = p->def_int;
  p->str_value = p->def_str;
  if (!text || !*text) return;
  p->is_set = 1;
  p->str_value = text;
  if (!p->is_int) return;
  char* end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0') {
    log_msg(LOG_WARN, LOG_SUB_INIT, "%s=\"%s\" is not an integer; using the default %" PRId64, var, text, p->def_int);
    return;
  }
  p->int_value = v;
}

static void params_load(void) {
  for (int i = 0; i < PARAM_COUNT; i++) param_load(&params[i]);
}

int64_t param_int(param_id_t id) {
  pthread_once(&params_once, params_load);
  return params[id].int_value;
}

const char* param_str(param_id_t id) {
  pthread_once(&params_once, params_load);
  return params[id].str_value;
}

const char* param_name(int index) { return params[index].name; }
const char* param_help(int index) { return params[index].help; }

int param_is_set(int index) {
  pthread_once(&params_once, params_load);
  return params[index].is_set;
}

void param_value_text(int index, char* buf, size_t len) {
  pthread_once(&params_once, params_load);
  if (params[index].is_int)
    snprintf(buf, len, "%" PRId64, params[index].int_value);
  else
    snprintf(buf, len, "%s", params[index].str_value);
}
