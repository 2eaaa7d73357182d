/* coll.c - the collectives and point-to-point calls: NCCL's types and values are the library's
 * (collectives.h keeps NCCL's numbering), so each call checks its communicator and forwards.
 * Gather and Scatter are grouped sends and receives. */
#include "shim.h"

/* Checks comm, then runs expr (a library call) and maps its result, naming call. */
#define FORWARD(comm, call, expr)                             \
  do {                                                        \
    ncclResult_t res_ = shim_ready((comm), (call));           \
    if (res_ != ncclSuccess) return res_;                     \
    return shim_fail_lib((comm), (expr), (call));             \
  } while (0)

NCCL_API(ncclResult_t, AllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  FORWARD(comm, "ncclAllReduce",
          mscclppAllReduce(sendbuff, recvbuff, count, (mscclppDataType_t)datatype, (mscclppRedOp_t)op, comm->c, stream));
}

NCCL_API(ncclResult_t, AllGather, const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream) {
  FORWARD(comm, "ncclAllGather",
          mscclppAllGather(sendbuff, recvbuff, sendcount, (mscclppDataType_t)datatype, comm->c, stream));
}

NCCL_API(ncclResult_t, ReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  FORWARD(comm, "ncclReduceScatter",
          mscclppReduceScatter(sendbuff, recvbuff, recvcount, (mscclppDataType_t)datatype, (mscclppRedOp_t)op, comm->c,
                               stream));
}

NCCL_API(ncclResult_t, Broadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream) {
  FORWARD(comm, "ncclBroadcast",
          mscclppBroadcast(sendbuff, recvbuff, count, (mscclppDataType_t)datatype, root, comm->c, stream));
}

/* The in-place broadcast of older NCCL. */
NCCL_API(ncclResult_t, Bcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
         cudaStream_t stream) {
  FORWARD(comm, "ncclBcast", mscclppBroadcast(buff, buff, count, (mscclppDataType_t)datatype, root, comm->c, stream));
}

NCCL_API(ncclResult_t, Reduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  FORWARD(comm, "ncclReduce",
          mscclppReduce(sendbuff, recvbuff, count, (mscclppDataType_t)datatype, (mscclppRedOp_t)op, root, comm->c,
                        stream));
}

NCCL_API(ncclResult_t, AlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream) {
  FORWARD(comm, "ncclAlltoAll", mscclppAllToAll(sendbuff, recvbuff, count, (mscclppDataType_t)datatype, comm->c, stream));
}

NCCL_API(ncclResult_t, Send, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream) {
  FORWARD(comm, "ncclSend", mscclppSend(sendbuff, count, (mscclppDataType_t)datatype, peer, comm->c, stream));
}

NCCL_API(ncclResult_t, Recv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream) {
  FORWARD(comm, "ncclRecv", mscclppRecv(recvbuff, count, (mscclppDataType_t)datatype, peer, comm->c, stream));
}

/* Gather (gather == 1: every rank's count elements to root's recvbuff, rank r's at r * count) or
 * scatter (root's recvbuff-sized sendbuff slice r to rank r), as one group of sends and receives. */
static ncclResult_t rooted(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream, int gather, const char* call) {
  ncclResult_t res = shim_ready(comm, call);
  if (res != ncclSuccess) return res;
  size_t es = mscclppDataTypeSize((mscclppDataType_t)datatype);
  if (es == 0) return shim_fail(comm, ncclInvalidArgument, "%s: datatype %d is not an ncclDataType_t", call, (int)datatype);
  if (root < 0 || root >= comm->nranks)
    return shim_fail(comm, ncclInvalidArgument, "%s: root %d is not a rank of this %d-rank communicator", call, root,
                     comm->nranks);
  mscclppDataType_t dt = (mscclppDataType_t)datatype;
  mscclppResult_t r = mscclppGroupStart();
  for (int p = 0; r == mscclppSuccess && comm->rank == root && p < comm->nranks; p++)
    r = gather ? mscclppRecv((char*)recvbuff + (size_t)p * count * es, count, dt, p, comm->c, stream)
               : mscclppSend((const char*)sendbuff + (size_t)p * count * es, count, dt, p, comm->c, stream);
  if (r == mscclppSuccess)
    r = gather ? mscclppSend(sendbuff, count, dt, root, comm->c, stream) : mscclppRecv(recvbuff, count, dt, root, comm->c, stream);
  mscclppResult_t e = mscclppGroupEnd();
  return shim_fail_lib(comm, r != mscclppSuccess ? r : e, call);
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

/* The 2.28 device API (device communicators for kernels of the user's) is not provided. */
NCCL_API(ncclResult_t, DevCommCreate, ncclComm_t comm, const ncclDevCommRequirements_t* reqs, ncclDevComm_t* outDevComm) {
  (void)reqs, (void)outDevComm;
  return shim_fail(shim_live(comm) ? comm : NULL, ncclInvalidUsage,
                   "ncclDevCommCreate: the NCCL device API is not provided by this library");
}

NCCL_API(ncclResult_t, DevCommDestroy, ncclComm_t comm, const ncclDevComm_t* devComm) {
  (void)devComm;
  return shim_fail(shim_live(comm) ? comm : NULL, ncclInvalidUsage,
                   "ncclDevCommDestroy: the NCCL device API is not provided by this library");
}
