/* select.h - the algorithm selection table (tuning/algo.tsv) as data, for select.c and its tests.
 *
 * File format: one rule per line, whitespace-separated, '#' starts a comment:
 *   collective  kind  min_ranks  max_ranks  min_bytes  max_bytes  algorithm  [dtypes]
 * collective: allreduce allgather reducescatter broadcast reduce alltoall; kind: cpu or gpu; the
 * bounds are inclusive, '*' is unbounded, sizes take K, M or G (powers of 1024); dtypes (optional,
 * default '*'): the datatypes the rule serves, a comma list of mscclpp-perf's names (int8 uint8
 * int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2) or '*'. bytes is the
 * message size as nccl-tests counts it: the buffer of allreduce, broadcast and reduce, the whole
 * output of allgather, the whole input of reducescatter, a rank's whole buffer of alltoall. The
 * first rule that matches a call wins; no match: the first registered algorithm of the collective
 * and kind. Every algorithm named must exist for the rule's collective and kind. A rule naming a
 * graph-only (zero-copy) algorithm matches only calls captured into a CUDA graph; other calls go
 * on to the next rules. */
#ifndef MPP_ALGO_SELECT_H_
#define MPP_ALGO_SELECT_H_

#include <stddef.h>
#include <stdint.h>

#include "algo/algo.h"

#define ALGO_TABLE_MAX_RULES 512

struct algo_rule {
  enum algo_coll coll;
  int kind;
  int64_t min_ranks, max_ranks;
  uint64_t min_bytes, max_bytes;
  uint32_t dtypes; /* bit d: datatype d (elem_dtype_name) */
  const struct algo_desc* algo;
};

struct algo_table {
  struct algo_rule rules[ALGO_TABLE_MAX_RULES];
  int nrules;
};

/* Parses text (the contents of a table file named `name` in messages) into t. An error is
 * InvalidArgument "name:line: what is wrong". */
mscclppResult_t algo_table_parse(const char* text, const char* name, struct algo_table* t);

/* The first rule of t for the call, or NULL; rules naming a graph-only algorithm match only when
 * captured (the call is being captured into a CUDA graph). */
const struct algo_desc* algo_table_lookup(const struct algo_table* t, enum algo_coll coll, int kind, int nranks,
                                          size_t bytes, int dtype, int captured);

/* Where the process's table came from ("built-in" when no file was found). */
const char* algo_table_source(void);

#endif /* MPP_ALGO_SELECT_H_ */
