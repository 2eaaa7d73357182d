/* names.c - names of collectives, datatypes and operators (messages, the tuning table, tools). */
#include "algo/algo.h"

const char* algo_coll_name(enum algo_coll coll) {
  static const char* const names[ALGO_COLL_COUNT] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                                     "reduce",    "alltoall",  "sendrecv"};
  return (int)coll >= 0 && coll < ALGO_COLL_COUNT ? names[coll] : "collective";
}

const char* algo_dtype_name(int dtype) {
  static const char* const names[ALGO_DTYPE_COUNT] = {"int8",  "uint8",  "int32",    "uint32", "int64",  "uint64",
                                                      "half",  "float",  "double",   "bfloat16", "f8e4m3", "f8e5m2"};
  return dtype >= 0 && dtype < ALGO_DTYPE_COUNT ? names[dtype] : "?";
}

const char* algo_op_name(enum algo_op op) {
  static const char* const names[ALGO_OP_COUNT] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return (int)op >= 0 && op < ALGO_OP_COUNT ? names[op] : "?";
}

size_t mscclppDataTypeSize(mscclppDataType_t datatype) { return algo_dtype_size((int)datatype); }
