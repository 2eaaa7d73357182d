/* premul.c - pre-multiplied-sum operators: a per-communicator table; op values mscclppNumOps + index,
 * as NCCL numbers them. */
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "elem/reduce.h"
#include "core/comm.h"
#include "util/err.h"

#define MAX_PREMUL 1024

mscclppResult_t mscclppRedOpCreatePreMulSum(mscclppRedOp_t* op, void* scalar, mscclppDataType_t datatype,
                                            mscclppScalarResidence_t residence, mscclppComm_t comm) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(op != NULL, "mscclppRedOpCreatePreMulSum: op is NULL");
  MPP_CHECK_ARG(scalar != NULL, "mscclppRedOpCreatePreMulSum: scalar is NULL");
  MPP_CHECK_ARG(elem_dtype_size((int)datatype) != 0,
                "mscclppRedOpCreatePreMulSum: datatype %d is not a valid mscclppDataType_t (0..%d)", (int)datatype,
                ELEM_DTYPE_COUNT - 1);
  MPP_CHECK_ARG(residence == mscclppScalarDevice || residence == mscclppScalarHostImmediate,
                "mscclppRedOpCreatePreMulSum: residence %d is neither mscclppScalarDevice (0) nor mscclppScalarHostImmediate (1)",
                (int)residence);
  struct algo_comm* ac;
  MPP_CHECK(algo_comm_get(comm, &ac));
  int idx = 0;
  while (idx < ac->npremul && ac->premul[idx].used) idx++;
  if (idx == ac->npremul) {
    if (ac->npremul == MAX_PREMUL)
      return MPP_ERR(mscclppInvalidUsage, "mscclppRedOpCreatePreMulSum: %d operators exist on this communicator already", MAX_PREMUL);
    struct algo_premul* p = realloc(ac->premul, (size_t)(ac->npremul + 1) * sizeof(*p));
    if (p == NULL) return MPP_ERR(mscclppSystemError, "mscclppRedOpCreatePreMulSum: out of host memory");
    ac->premul = p;
    ac->npremul++;
  }
  struct algo_premul* e = &ac->premul[idx];
  memset(e, 0, sizeof(*e));
  e->used = 1;
  e->dtype = (int)datatype;
  e->residence = (int)residence;
  e->ptr = scalar;
  /* A host-immediate scalar is copied now; a device-resident one is read at each call (by the
   * kernel on GPU ranks, where it is GPU memory the host must not dereference). */
  if (residence == mscclppScalarHostImmediate) memcpy(e->value, scalar, elem_dtype_size((int)datatype));
  *op = (mscclppRedOp_t)(mscclppNumOps + idx);
  return mscclppSuccess;
}

/* The premulsum entry of op on ac, or NULL. */
static struct algo_premul* premul_find(struct algo_comm* ac, mscclppRedOp_t op) {
  if ((int)op < (int)mscclppNumOps) return NULL;
  int idx = (int)op - (int)mscclppNumOps;
  return idx < ac->npremul && ac->premul[idx].used ? &ac->premul[idx] : NULL;
}

mscclppResult_t mscclppRedOpDestroy(mscclppRedOp_t op, mscclppComm_t comm) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG((int)op >= (int)mscclppNumOps, "mscclppRedOpDestroy: op %d is a built-in operator", (int)op);
  struct algo_comm* ac;
  MPP_CHECK(algo_comm_get(comm, &ac));
  struct algo_premul* e = premul_find(ac, op);
  MPP_CHECK_ARG(e != NULL, "mscclppRedOpDestroy: op %d was not created on this communicator (or is destroyed)", (int)op);
  e->used = 0;
  return mscclppSuccess;
}

mscclppResult_t algo_resolve_op(const char* fn, struct algo_comm* ac, mscclppRedOp_t op, int dtype, enum elem_op* kind,
                                elem_scalar* scalar) {
  memset(scalar, 0, sizeof(*scalar));
  if ((int)op >= 0 && (int)op < (int)mscclppNumOps) {
    *kind = (enum elem_op)op;
    return mscclppSuccess;
  }
  struct algo_premul* e = premul_find(ac, op);
  if (e == NULL)
    return MPP_ERR(mscclppInvalidArgument,
                   "%s: op %d is neither a built-in operator (0..4: sum prod max min avg) nor a live "
                   "mscclppRedOpCreatePreMulSum operator of this communicator",
                   fn, (int)op);
  if (e->dtype != dtype)
    return MPP_ERR(mscclppInvalidArgument, "%s: op %d was created for datatype %s, the call uses %s", fn, (int)op,
                   elem_dtype_name(e->dtype), elem_dtype_name(dtype));
  *kind = ELEM_OP_PREMUL;
  if (e->residence == mscclppScalarDevice && ac->kind == mscclppRankGpu) return mscclppSuccess; /* the kernel reads it */
  *scalar = elem_scalar_from(e->residence == mscclppScalarDevice ? e->ptr : e->value, dtype);
  return mscclppSuccess;
}

const void* algo_premul_device_scalar(struct algo_comm* ac, mscclppRedOp_t op) {
  if ((int)op >= 0 && (int)op < (int)mscclppNumOps) return NULL;
  struct algo_premul* e = premul_find(ac, op);
  return e != NULL && e->residence == mscclppScalarDevice && ac->kind == mscclppRankGpu ? e->ptr : NULL;
}
