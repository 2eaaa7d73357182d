/* param.h - the parameter registry: named settings with defaults, read once from MSCCLPP_<NAME>.
 * The list lives in params.def. */
#ifndef MPP_UTIL_PARAM_H_
#define MPP_UTIL_PARAM_H_

#include <stddef.h>
#include <stdint.h>

typedef enum {
#define PARAM_INT(name, def, help) PARAM_##name,
#define PARAM_STR(name, def, help) PARAM_##name,
#define PARAM_ENUM(name, def, choices, help) PARAM_##name,
#include "util/params.def"
#undef PARAM_INT
#undef PARAM_STR
#undef PARAM_ENUM
  PARAM_COUNT
} param_id_t;

/* The value of an INT parameter: the default when unset; malformed text is warned about once and
 * the default used. */
int64_t param_int(param_id_t id);
/* The value of a STR or ENUM parameter (never NULL). An ENUM's value outside its choices is warned
 * about once (naming them) and returned as set: its user refuses it or falls back, as it says. */
const char* param_str(param_id_t id);

/* For listing (index in [0, PARAM_COUNT)): name without the MSCCLPP_ prefix, help text, whether
 * the environment set it, and the value in effect as text. */
const char* param_name(int index);
const char* param_help(int index);
int param_is_set(int index);
void param_value_text(int index, char* buf, size_t len);
/* "int", "string" or "enum"; an enum's choices ("a|b|c", an empty first one meaning unset), else NULL;
 * the default as text. */
const char* param_kind(int index);
const char* param_choices(int index);
void param_default_text(int index, char* buf, size_t len);

#endif /* MPP_UTIL_PARAM_H_ */
