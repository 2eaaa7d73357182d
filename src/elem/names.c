/* names.c - names of datatypes and operators (messages, the tuning table, tools), and the public
 * datatype size. */
#include <mscclpp/collectives.h>

#include "elem/redop.h"

const char* elem_dtype_name(int dtype) {
  static const char* const names[ELEM_DTYPE_COUNT] = {"int8",  "uint8",  "int32",    "uint32", "int64",  "uint64",
                                                      "half",  "float",  "double",   "bfloat16", "f8e4m3", "f8e5m2"};
  return dtype >= 0 && dtype < ELEM_DTYPE_COUNT ? names[dtype] : "?";
}

const char* elem_op_name(enum elem_op op) {
  static const char* const names[ELEM_OP_COUNT] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return (int)op >= 0 && op < ELEM_OP_COUNT ? names[op] : "?";
}

size_t mscclppDataTypeSize(mscclppDataType_t datatype) { return elem_dtype_size((int)datatype); }
