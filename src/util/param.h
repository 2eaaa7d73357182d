/* param.h - the parameter registry: named settings with defaults, read once from MSCCLPP_<NAME>.
 * The list lives in params.def. */
#ifndef MPP_UTIL_PARAM_H_
#define MPP_UTIL_PARAM_H_

#include <stddef.h>
#include <stdint.h>

typedef enum {
#define PARAM_INT(name, def, help) PARAM_##name,
#define PARAM_STR(name, def, help) PARAM_##name,
#include "util/params.def"
#undef PARAM_INT
#undef PARAM_STR
  PARAM_COUNT
} param_id_t;

/* The value of an INT parameter: the default when unset; malformed text is warned about once and
 * the default used. */
int64_t param_int(param_id_t id);
/* The value of a STR parameter (never NULL). */
const char* param_str(param_id_t id);

/* For listing (index in [0, PARAM_COUNT)): name without the MSCCLPP_ prefix, help text, whether
 * the environment set it, and the value in effect as text. */
const char* param_name(int index);
const char* param_help(int index);
int param_is_set(int index);
void param_value_text(int index, char* buf, size_t len);

#endif /* MPP_UTIL_PARAM_H_ */
