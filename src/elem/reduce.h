/* reduce.h - element-wise reductions of host buffers for the CPU ranks (reduce.c), with the
 * operator semantics of redop.h. */
#ifndef MPP_ELEM_REDUCE_H_
#define MPP_ELEM_REDUCE_H_

#include <stddef.h>

#include "elem/redop.h"

/* dst[i] = the reduction op over s = 0..nsrc-1 of srcs[s][i], for i < count, in that order of s;
 * dtype is an mscclppDataType_t value, nsrc >= 1 (a single source still gets avg's division and
 * premulsum's scaling). avg divides by `divisor` (the number of ranks). premulsum multiplies source
 * s by scalars[s] (each rank's own scalar, in the accumulator family of dtype) and rounds the
 * product to dtype, as if the source's owner had scaled its input in place, then sums; scalars is
 * ignored for other ops. dst may be any of the sources (each block of elements is read from every
 * source before it is written) but must not overlap one partially. Never fails. */
void elem_reduce(void* dst, const void* const* srcs, int nsrc, size_t count, int dtype, enum elem_op op, int divisor,
                 const elem_scalar* scalars);

/* Converts one value of dtype at src into the accumulator family's scalar (premulsum scalars). */
elem_scalar elem_scalar_from(const void* src, int dtype);

#endif /* MPP_ELEM_REDUCE_H_ */
