/* coll.c - the collectives and point-to-point calls: NCCL's types and values are the library's
 * (collectives.h keeps NCCL's numbering), so each call becomes one shim_op, run at once or queued
 * in the thread's group (group.c). Gather and Scatter are groups of sends and receives. */
#include <stdlib.h>

#include "shim.h"

/* Checks comm, then runs expr (a library call) and maps its result, naming call. */
#define FORWARD(comm, call, expr)                             \
  do {                                                        \
    ncclResult_t res_ = shim_ready((comm), (call));           \
    if (res_ != ncclSuccess) return res_;                     \
    return shim_fail_lib((comm), (expr), (call));             \
  } while (0)

/* A call of kind k, run now or queued in the thread's group. */
#define SUBMIT(k, name, s, r, n, dt, op, p, cm, st)                                                          \
  return shim_submit(&(struct shim_op){.kind = (k), .call = (name), .send = (s), .recv = (r), .count = (n), \
                                       .dtype = (int)(dt), .redop = (int)(op), .peer = (p), .comm = (cm),   \
                                       .stream = (st)})

NCCL_API(ncclResult_t, AllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  SUBMIT(SHIM_ALLREDUCE, "ncclAllReduce", sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

NCCL_API(ncclResult_t, AllGather, const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream) {
  SUBMIT(SHIM_ALLGATHER, "ncclAllGather", sendbuff, recvbuff, sendcount, datatype, 0, 0, comm, stream);
}

NCCL_API(ncclResult_t, ReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  SUBMIT(SHIM_REDUCESCATTER, "ncclReduceScatter", sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream);
}

NCCL_API(ncclResult_t, Broadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream) {
  SUBMIT(SHIM_BROADCAST, "ncclBroadcast", sendbuff, recvbuff, count, datatype, 0, root, comm, stream);
}

/* The in-place broadcast of older NCCL. */
NCCL_API(ncclResult_t, Bcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
         cudaStream_t stream) {
  SUBMIT(SHIM_BROADCAST, "ncclBcast", buff, buff, count, datatype, 0, root, comm, stream);
}

NCCL_API(ncclResult_t, Reduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  SUBMIT(SHIM_REDUCE, "ncclReduce", sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

NCCL_API(ncclResult_t, AlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream) {
  SUBMIT(SHIM_ALLTOALL, "ncclAlltoAll", sendbuff, recvbuff, count, datatype, 0, 0, comm, stream);
}

NCCL_API(ncclResult_t, Send, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream) {
  SUBMIT(SHIM_SEND, "ncclSend", sendbuff, NULL, count, datatype, 0, peer, comm, stream);
}

NCCL_API(ncclResult_t, Recv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream) {
  SUBMIT(SHIM_RECV, "ncclRecv", NULL, recvbuff, count, datatype, 0, peer, comm, stream);
}

/* Gather (gather == 1: every rank's count elements to root's recvbuff, rank r's at r * count) or
 * scatter (root's sendbuff slice r to rank r), as one group of sends and receives. */
static ncclResult_t rooted(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream, int gather, const char* call) {
  if (!comm || !shim_live(comm))
    return shim_fail(NULL, ncclInvalidArgument, "%s: %p is not a communicator (never made, or destroyed)", call,
                     (void*)comm);
  size_t es = mscclppDataTypeSize((mscclppDataType_t)datatype);
  if (es == 0) return shim_fail(comm, ncclInvalidArgument, "%s: datatype %d is not an ncclDataType_t", call, (int)datatype);
  if (root < 0 || root >= comm->nranks)
    return shim_fail(comm, ncclInvalidArgument, "%s: root %d is not a rank of this %d-rank communicator", call, root,
                     comm->nranks);
  struct shim_op op = {.call = call, .count = count, .dtype = (int)datatype, .comm = comm, .stream = stream};
  ncclResult_t res = ncclGroupStart();
  for (int p = 0; res == ncclSuccess && comm->rank == root && p < comm->nranks; p++) {
    op.kind = gather ? SHIM_RECV : SHIM_SEND, op.peer = p;
    op.recv = gather ? (char*)recvbuff + (size_t)p * count * es : NULL;
    op.send = gather ? NULL : (const char*)sendbuff + (size_t)p * count * es;
    res = shim_submit(&op);
  }
  if (res == ncclSuccess) {
    op.kind = gather ? SHIM_SEND : SHIM_RECV, op.peer = root;
    op.send = gather ? sendbuff : NULL, op.recv = gather ? NULL : recvbuff;
    res = shim_submit(&op);
  }
  ncclResult_t end = ncclGroupEnd();
  return res != ncclSuccess ? res : end;
}

NCCL_API(ncclResult_t, Gather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream) {
  return rooted(sendbuff, recvbuff, count, datatype, root, comm, stream, 1, "ncclGather");
}

NCCL_API(ncclResult_t, Scatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream) {
  return rooted(sendbuff, recvbuff, count, datatype, root, comm, stream, 0, "ncclScatter");
}

NCCL_API(ncclResult_t, RedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
         ncclScalarResidence_t residence, ncclComm_t comm) {
  FORWARD(comm, "ncclRedOpCreatePreMulSum",
          mscclppRedOpCreatePreMulSum((mscclppRedOp_t*)op, scalar, (mscclppDataType_t)datatype,
                                      (mscclppScalarResidence_t)residence, comm->c));
}

NCCL_API(ncclResult_t, RedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  FORWARD(comm, "ncclRedOpDestroy", mscclppRedOpDestroy((mscclppRedOp_t)op, comm->c));
}

/* The 2.28 device API (device communicators for kernels of the user's): the real NCCL's, when one
 * is configured (fallback.c); otherwise not provided. */
static ncclResult_t devcomm(ncclComm_t comm, const void* reqs, void* out, int create) {
  const char* call = create ? "ncclDevCommCreate" : "ncclDevCommDestroy";
  ncclResult_t res = shim_ready(comm, call);
  if (res != ncclSuccess) return res;
  const char* path = getenv("MSCCLPP_NCCL_LIB_PATH");
  if (!path || !*path)
    return shim_fail(comm, ncclInvalidUsage, "%s: the NCCL device API is not provided by this library (set "
                     "MSCCLPP_NCCL_LIB_PATH to a real NCCL to use its)", call);
  return shim_fallback_devcomm(comm, reqs, out, create);
}

NCCL_API(ncclResult_t, DevCommCreate, ncclComm_t comm, const ncclDevCommRequirements_t* reqs, ncclDevComm_t* outDevComm) {
  return devcomm(comm, reqs, outDevComm, 1);
}

NCCL_API(ncclResult_t, DevCommDestroy, ncclComm_t comm, const ncclDevComm_t* devComm) {
  return devcomm(comm, devComm, NULL, 0);
}
