/* api.c - the public collectives and send/recv: every argument checked (an error names the function
 * and the argument), then queued in a group or run through the dispatch point. */
#include <stdint.h>
#include <string.h>

#include "coll/coll.h"
#include "core/comm.h"
#include "util/err.h"

/* Every public call here begins with this: comm checked against the registry of live communicators
 * (a destroyed or garbage handle is an error, never read) and held exclusively until the call
 * returns (mscclppCommAbort waits for it; another thread's call on comm is refused). */
#define COLL_ENTER(fn, comm)                              \
  MPP_CHECK_ARG((comm) != NULL, "%s: comm is NULL", (fn)); \
  COMM_HOLD(comm, fn)

/* Checks datatype and count (comm is held) and fills the common fields of *a. blocks: how many count-sized
 * blocks the larger of the two buffers holds (nranks for allgather, reducescatter, alltoall). */
static mscclppResult_t prepare(const char* fn, mscclppComm_t comm, enum algo_coll coll, size_t count,
                               mscclppDataType_t dtype, int multi, struct algo_comm** ac, struct algo_args* a) {
  size_t es = elem_dtype_size((int)dtype);
  MPP_CHECK_ARG(es != 0, "%s: datatype %d is not a valid mscclppDataType_t (0..%d)", fn, (int)dtype, ELEM_DTYPE_COUNT - 1);
  size_t blocks = multi ? (size_t)comm->nranks : 1;
  MPP_CHECK_ARG(count <= (SIZE_MAX / 4) / es / blocks, "%s: count %zu is too large: %zu blocks of %zu %zu-byte elements overflow",
                fn, count, blocks, count, es);
  MPP_CHECK(algo_comm_get(comm, ac));
  memset(a, 0, sizeof(*a));
  a->coll = coll;
  a->count = count;
  a->dtype = (int)dtype;
  a->es = es;
  a->root = -1;
  a->bytes = count * es * blocks;
  return mscclppSuccess;
}

static mscclppResult_t check_root(const char* fn, mscclppComm_t comm, int root) {
  MPP_CHECK_ARG(root >= 0 && root < comm->nranks, "%s: root %d is not a rank of this communicator [0, %d)", fn, root,
                comm->nranks);
  return mscclppSuccess;
}

/* The two buffers may be disjoint, or exactly in place: send at address inplace_send. */
static mscclppResult_t check_overlap(const char* fn, const void* send, size_t sbytes, const void* recv, size_t rbytes,
                                     uintptr_t inplace_send) {
  uintptr_t s = (uintptr_t)send, r = (uintptr_t)recv;
  if (send == NULL || recv == NULL || s + sbytes <= r || r + rbytes <= s || s == inplace_send) return mscclppSuccess;
  return MPP_ERR(mscclppInvalidArgument,
                 "%s: sendbuff [%p, +%zu bytes) and recvbuff [%p, +%zu bytes) overlap but the call is not in place "
                 "(in place: sendbuff == %p)",
                 fn, send, sbytes, recv, rbytes, (void*)inplace_send);
}

static mscclppResult_t check_bufs(const char* fn, const void* send, int need_send, const void* recv, int need_recv) {
  MPP_CHECK_ARG(!need_send || send != NULL, "%s: sendbuff is NULL", fn);
  MPP_CHECK_ARG(!need_recv || recv != NULL, "%s: recvbuff is NULL", fn);
  return mscclppSuccess;
}

static mscclppResult_t run(struct algo_comm* ac, const struct algo_args* a) {
  if (a->count == 0) return mscclppSuccess;
  return coll_in_group() ? coll_group_add(ac, a) : coll_dispatch(ac, a);
}

/* The common path of the reductions: op resolved, buffers checked, run. */
static mscclppResult_t reduction(const char* fn, struct algo_comm* ac, struct algo_args* a, mscclppRedOp_t op, int need_recv) {
  a->user_op = op;
  MPP_CHECK(algo_resolve_op(fn, ac, op, a->dtype, &a->op, &a->scalar));
  a->scalar_dev = algo_premul_device_scalar(ac, op);
  if (a->count == 0) return mscclppSuccess;
  MPP_CHECK(check_bufs(fn, a->send, 1, a->recv, need_recv));
  return run(ac, a);
}

mscclppResult_t mscclppAllReduce(const void* sendbuff, void* recvbuff, size_t count, mscclppDataType_t datatype,
                                 mscclppRedOp_t op, mscclppComm_t comm, void* stream) {
  static const char fn[] = "mscclppAllReduce";
  err_clear();
  COLL_ENTER(fn, comm);
  struct algo_comm* ac;
  struct algo_args a;
  MPP_CHECK(prepare(fn, comm, ALGO_COLL_ALLREDUCE, count, datatype, 0, &ac, &a));
  a.send = sendbuff, a.recv = recvbuff, a.stream = stream;
  MPP_CHECK(check_overlap(fn, sendbuff, a.bytes, recvbuff, a.bytes, (uintptr_t)recvbuff));
  return reduction(fn, ac, &a, op, 1);
}

mscclppResult_t mscclppReduce(const void* sendbuff, void* recvbuff, size_t count, mscclppDataType_t datatype,
                              mscclppRedOp_t op, int root, mscclppComm_t comm, void* stream) {
  static const char fn[] = "mscclppReduce";
  err_clear();
  COLL_ENTER(fn, comm);
  struct algo_comm* ac;
  struct algo_args a;
  MPP_CHECK(prepare(fn, comm, ALGO_COLL_REDUCE, count, datatype, 0, &ac, &a));
  MPP_CHECK(check_root(fn, comm, root));
  int is_root = comm->rank == root;
  a.send = sendbuff, a.recv = is_root ? recvbuff : NULL, a.stream = stream, a.root = root;
  if (is_root) MPP_CHECK(check_overlap(fn, sendbuff, a.bytes, recvbuff, a.bytes, (uintptr_t)recvbuff));
  return reduction(fn, ac, &a, op, is_root);
}

mscclppResult_t mscclppReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, mscclppDataType_t datatype,
                                     mscclppRedOp_t op, mscclppComm_t comm, void* stream) {
  static const char fn[] = "mscclppReduceScatter";
  err_clear();
  COLL_ENTER(fn, comm);
  struct algo_comm* ac;
  struct algo_args a;
  MPP_CHECK(prepare(fn, comm, ALGO_COLL_REDUCESCATTER, recvcount, datatype, 1, &ac, &a));
  a.send = sendbuff, a.recv = recvbuff, a.stream = stream;
  size_t block = recvcount * a.es;
  MPP_CHECK(check_overlap(fn, sendbuff, a.bytes, recvbuff, block, (uintptr_t)recvbuff - (uintptr_t)comm->rank * block));
  return reduction(fn, ac, &a, op, 1);
}

mscclppResult_t mscclppAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, mscclppDataType_t datatype,
                                 mscclppComm_t comm, void* stream) {
  static const char fn[] = "mscclppAllGather";
  err_clear();
  COLL_ENTER(fn, comm);
  struct algo_comm* ac;
  struct algo_args a;
  MPP_CHECK(prepare(fn, comm, ALGO_COLL_ALLGATHER, sendcount, datatype, 1, &ac, &a));
  a.send = sendbuff, a.recv = recvbuff, a.stream = stream;
  size_t block = sendcount * a.es;
  MPP_CHECK(check_overlap(fn, sendbuff, block, recvbuff, a.bytes, (uintptr_t)recvbuff + (uintptr_t)comm->rank * block));
  if (a.count > 0) MPP_CHECK(check_bufs(fn, sendbuff, 1, recvbuff, 1));
  return run(ac, &a);
}

mscclppResult_t mscclppAllToAll(const void* sendbuff, void* recvbuff, size_t count, mscclppDataType_t datatype,
                                mscclppComm_t comm, void* stream) {
  static const char fn[] = "mscclppAllToAll";
  err_clear();
  COLL_ENTER(fn, comm);
  struct algo_comm* ac;
  struct algo_args a;
  MPP_CHECK(prepare(fn, comm, ALGO_COLL_ALLTOALL, count, datatype, 1, &ac, &a));
  a.send = sendbuff, a.recv = recvbuff, a.stream = stream;
  MPP_CHECK(check_overlap(fn, sendbuff, a.bytes, recvbuff, a.bytes, (uintptr_t)recvbuff));
  if (a.count > 0) MPP_CHECK(check_bufs(fn, sendbuff, 1, recvbuff, 1));
  return run(ac, &a);
}

mscclppResult_t mscclppBroadcast(const void* sendbuff, void* recvbuff, size_t count, mscclppDataType_t datatype, int root,
                                 mscclppComm_t comm, void* stream) {
  static const char fn[] = "mscclppBroadcast";
  err_clear();
  COLL_ENTER(fn, comm);
  struct algo_comm* ac;
  struct algo_args a;
  MPP_CHECK(prepare(fn, comm, ALGO_COLL_BROADCAST, count, datatype, 0, &ac, &a));
  MPP_CHECK(check_root(fn, comm, root));
  int is_root = comm->rank == root;
  a.send = is_root ? sendbuff : NULL, a.recv = recvbuff, a.stream = stream, a.root = root;
  if (is_root) MPP_CHECK(check_overlap(fn, sendbuff, a.bytes, recvbuff, a.bytes, (uintptr_t)recvbuff));
  if (a.count > 0) MPP_CHECK(check_bufs(fn, a.send, is_root, recvbuff, 1));
  return run(ac, &a);
}

/* Send and receive: count elements of datatype to or from peer. */
static mscclppResult_t p2p(const char* fn, int is_send, void* buf, size_t count, mscclppDataType_t datatype, int peer,
                           mscclppComm_t comm, void* stream) {
  COLL_ENTER(fn, comm);
  struct algo_comm* ac;
  struct algo_args a;
  MPP_CHECK(prepare(fn, comm, ALGO_COLL_SENDRECV, count, datatype, 0, &ac, &a));
  MPP_CHECK_ARG(peer >= 0 && peer < comm->nranks, "%s: peer %d is not a rank of this communicator [0, %d)", fn, peer,
                comm->nranks);
  if (count == 0) return mscclppSuccess;
  MPP_CHECK(check_bufs(fn, buf, is_send, buf, !is_send));
  return coll_group_add_p2p(ac, is_send, buf, a.bytes, peer, stream);
}

mscclppResult_t mscclppSend(const void* sendbuff, size_t count, mscclppDataType_t datatype, int peer, mscclppComm_t comm,
                            void* stream) {
  err_clear();
  return p2p("mscclppSend", 1, (void*)(uintptr_t)sendbuff, count, datatype, peer, comm, stream);
}

mscclppResult_t mscclppRecv(void* recvbuff, size_t count, mscclppDataType_t datatype, int peer, mscclppComm_t comm,
                            void* stream) {
  err_clear();
  return p2p("mscclppRecv", 0, recvbuff, count, datatype, peer, comm, stream);
}
