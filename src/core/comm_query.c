/* comm_query.c - small accessors and the bootstrap collectives of the public API. */
#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "sys/gpu.h"
#include "util/err.h"

mscclppResult_t mscclppCommRank(mscclppComm_t comm, int* rank) {
  err_clear();
  COMM_CHECK_SHARED(comm); /* reads what never changes: any thread */
  MPP_CHECK_ARG(rank != NULL, "mscclppCommRank: rank is NULL");
  *rank = comm->rank;
  return mscclppSuccess;
}

mscclppResult_t mscclppCommSize(mscclppComm_t comm, int* size) {
  err_clear();
  COMM_CHECK_SHARED(comm); /* reads what never changes: any thread */
  MPP_CHECK_ARG(size != NULL, "mscclppCommSize: size is NULL");
  *size = comm->nranks;
  return mscclppSuccess;
}

mscclppResult_t mscclppCommLocalRank(mscclppComm_t comm, int* localRank, int* localSize) {
  err_clear();
  COMM_CHECK_SHARED(comm); /* reads what never changes: any thread */
  if (localRank) *localRank = comm->local_rank;
  if (localSize) *localSize = comm->local_size;
  return mscclppSuccess;
}

mscclppResult_t mscclppCommRankKind(mscclppComm_t comm, int rank, mscclppRankKind_t* kind) {
  err_clear();
  COMM_CHECK_SHARED(comm); /* reads what never changes: any thread */
  MPP_CHECK_ARG(rank >= 0 && rank < comm->nranks, "mscclppCommRankKind: rank %d is outside 0..%d", rank,
                comm->nranks - 1);
  MPP_CHECK_ARG(kind != NULL, "mscclppCommRankKind: kind is NULL");
  *kind = (mscclppRankKind_t)comm->peers[rank].kind;
  return mscclppSuccess;
}

mscclppResult_t mscclppCommCudaDevice(mscclppComm_t comm, int* device) {
  err_clear();
  COMM_CHECK_SHARED(comm); /* reads what never changes: any thread */
  MPP_CHECK_ARG(device != NULL, "mscclppCommCudaDevice: device is NULL");
  *device = comm->cuda_dev;
  return mscclppSuccess;
}

mscclppResult_t mscclppGetCudaDevice(int* device) {
  err_clear();
  MPP_CHECK_ARG(device != NULL, "mscclppGetCudaDevice: device is NULL");
  *device = -1;
  if (gpu_count() > 0 && gpu_current_device(device) != mscclppSuccess) *device = -1;
  err_clear(); /* no current device is an answer (-1), not a failure */
  return mscclppSuccess;
}

mscclppResult_t mscclppSetCudaDevice(int device) {
  err_clear();
  if (device == -1) return mscclppSuccess;
  int n = gpu_count();
  MPP_CHECK_ARG(device >= 0 && device < n, "mscclppSetCudaDevice: device %d is not one of this machine's %d GPUs", device, n);
  return gpu_set_device(device);
}

mscclppResult_t mscclppBootstrapAllGather(mscclppComm_t comm, void* data, int size) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(size >= 0, "mscclppBootstrapAllGather: size %d is negative", size);
  MPP_CHECK_ARG(data != NULL || size == 0, "mscclppBootstrapAllGather: data is NULL");
  return bootstrap_allgather(comm->boot, data, (size_t)size);
}

mscclppResult_t mscclppBootstrapBarrier(mscclppComm_t comm) {
  err_clear();
  COMM_CHECK(comm);
  return bootstrap_barrier(comm->boot);
}

mscclppResult_t mscclppBootstrapSend(mscclppComm_t comm, int peer, int tag, const void* data, size_t size) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(peer >= 0 && peer < comm->nranks && peer != comm->rank,
                "mscclppBootstrapSend: peer %d is not another rank of 0..%d", peer, comm->nranks - 1);
  MPP_CHECK_ARG(tag >= 0, "mscclppBootstrapSend: tag %d is negative (negative tags are the library's own)", tag);
  MPP_CHECK_ARG(data != NULL || size == 0, "mscclppBootstrapSend: data is NULL");
  return bootstrap_send(comm->boot, peer, tag, data, size);
}

mscclppResult_t mscclppBootstrapRecv(mscclppComm_t comm, int peer, int tag, void* data, size_t size) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(peer >= 0 && peer < comm->nranks && peer != comm->rank,
                "mscclppBootstrapRecv: peer %d is not another rank of 0..%d", peer, comm->nranks - 1);
  MPP_CHECK_ARG(tag >= 0, "mscclppBootstrapRecv: tag %d is negative (negative tags are the library's own)", tag);
  MPP_CHECK_ARG(data != NULL || size == 0, "mscclppBootstrapRecv: data is NULL");
  return bootstrap_recv(comm->boot, peer, tag, data, size);
}
