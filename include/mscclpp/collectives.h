/* mscclpp/collectives.h - built-in collectives and point-to-point operations with NCCL's
 * signatures, datatypes and reduction operators. Compiles as C11 and as C++ (no CUDA needed: streams
 * are passed as void*, any cudaStream_t fits).
 *
 * Rank kinds. On CPU ranks every buffer is host memory (any: malloc, stack, mmap) and every call is
 * blocking: it returns once this rank's part is complete and its output is in place; the stream is
 * ignored. On GPU ranks buffers are device memory and calls are ordered on the stream (a
 * cudaStream_t) and may be captured into CUDA graphs, the communicator's first one included, also
 * when a registered execution plan serves it (setup enqueues nothing on the caller's stream or on
 * the legacy default stream, so any capture mode works).
 *
 * Every rank of the communicator calls the same collectives in the same order with matching
 * arguments (count, datatype, op, root); a mismatch detected on the wire is an error naming the
 * peer and both sides' values. In-place operation follows NCCL:
 *   AllReduce, Broadcast, Reduce, AllToAll: sendbuff == recvbuff
 *   AllGather:     sendbuff == recvbuff + rank * sendcount * typesize
 *   ReduceScatter: recvbuff == sendbuff + rank * recvcount * typesize
 * Any other overlap of the two buffers is InvalidArgument. A count of zero does nothing. */
#ifndef MSCCLPP_COLLECTIVES_H_
#define MSCCLPP_COLLECTIVES_H_

#include <mscclpp/comm.h>

#ifdef __cplusplus
extern "C" {
#endif

/* NCCL's values. */
typedef enum {
  mscclppInt8 = 0,
  mscclppChar = 0,
  mscclppUint8 = 1,
  mscclppInt32 = 2,
  mscclppInt = 2,
  mscclppUint32 = 3,
  mscclppInt64 = 4,
  mscclppUint64 = 5,
  mscclppFloat16 = 6,
  mscclppHalf = 6,
  mscclppFloat32 = 7,
  mscclppFloat = 7,
  mscclppFloat64 = 8,
  mscclppDouble = 8,
  mscclppBfloat16 = 9,
  mscclppFloat8e4m3 = 10,
  mscclppFloat8e5m2 = 11,
  mscclppNumTypes = 12
} mscclppDataType_t;

/* Built-in reduction operators (NCCL's values). Avg is the sum divided by the number of ranks
 * (integers: C integer division of the wrapped sum). Pre-multiplied sums made by
 * mscclppRedOpCreatePreMulSum take values from mscclppNumOps upward. */
typedef enum {
  mscclppSum = 0,
  mscclppProd = 1,
  mscclppMax = 2,
  mscclppMin = 3,
  mscclppAvg = 4,
  mscclppNumOps = 5,
  mscclppMaxRedOp = 0x7fffffff
} mscclppRedOp_t;

/* Where the scalar of a pre-multiplied sum lives. Device: *scalar is read by every collective that
 * uses the op (device memory on GPU ranks, host memory on CPU ranks; it must stay valid until the
 * op is destroyed). HostImmediate: the value is copied when the op is created. */
typedef enum { mscclppScalarDevice = 0, mscclppScalarHostImmediate = 1 } mscclppScalarResidence_t;

/* Creates a reduction operator that multiplies every input by *scalar (a value of datatype) and
 * then sums: out = sum over ranks r of scalar_r * in_r (each rank may pass its own scalar). The op
 * belongs to comm and is valid only with datatype. */
mscclppResult_t mscclppRedOpCreatePreMulSum(mscclppRedOp_t* op, void* scalar, mscclppDataType_t datatype,
                                            mscclppScalarResidence_t residence, mscclppComm_t comm);
/* Destroys an op made by mscclppRedOpCreatePreMulSum (built-in ops are InvalidArgument). */
mscclppResult_t mscclppRedOpDestroy(mscclppRedOp_t op, mscclppComm_t comm);

/* Element size in bytes of a datatype (0 for an unknown one). */
size_t mscclppDataTypeSize(mscclppDataType_t datatype);

/* recvbuff[i] = op over ranks of sendbuff[i], i < count, on every rank. */
mscclppResult_t mscclppAllReduce(const void* sendbuff, void* recvbuff, size_t count, mscclppDataType_t datatype,
                                 mscclppRedOp_t op, mscclppComm_t comm, void* stream);
/* recvbuff[r * sendcount + i] = rank r's sendbuff[i] on every rank. */
mscclppResult_t mscclppAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, mscclppDataType_t datatype,
                                 mscclppComm_t comm, void* stream);
/* recvbuff[i] = op over ranks of sendbuff[rank * recvcount + i] (sendbuff holds nranks blocks). */
mscclppResult_t mscclppReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     mscclppDataType_t datatype, mscclppRedOp_t op, mscclppComm_t comm, void* stream);
/* recvbuff = root's sendbuff on every rank (sendbuff is read on root only and may be NULL elsewhere). */
mscclppResult_t mscclppBroadcast(const void* sendbuff, void* recvbuff, size_t count, mscclppDataType_t datatype,
                                 int root, mscclppComm_t comm, void* stream);
/* root's recvbuff[i] = op over ranks of sendbuff[i] (recvbuff is written on root only and may be
 * NULL elsewhere). */
mscclppResult_t mscclppReduce(const void* sendbuff, void* recvbuff, size_t count, mscclppDataType_t datatype,
                              mscclppRedOp_t op, int root, mscclppComm_t comm, void* stream);
/* recvbuff[r * count + i] = rank r's sendbuff[rank * count + i]: block r of every rank's sendbuff
 * goes to rank r. */
mscclppResult_t mscclppAllToAll(const void* sendbuff, void* recvbuff, size_t count, mscclppDataType_t datatype,
                                mscclppComm_t comm, void* stream);

/* Point to point: count elements to or from peer (which may be this rank). The k-th send from A to
 * B matches the k-th receive at B from A, and both must move the same number of bytes. Outside a
 * group each call is a group of its own. */
mscclppResult_t mscclppSend(const void* sendbuff, size_t count, mscclppDataType_t datatype, int peer,
                            mscclppComm_t comm, void* stream);
mscclppResult_t mscclppRecv(void* recvbuff, size_t count, mscclppDataType_t datatype, int peer, mscclppComm_t comm,
                            void* stream);

/* A registered window: a buffer that every rank of the communicator registered together. */
typedef struct mscclppWindow* mscclppWindow_t;

/* Collective: every rank registers its own buffer [buff, buff + size), the same size on every rank
 * (GPU ranks: device memory peers can map, e.g. from mscclppMemAlloc). Peers map each other's
 * buffers once, here, so GPU collectives whose send and receive buffers both lie in windows take
 * the zero-copy algorithms also outside CUDA graphs, with no exchange per call. The rule (NCCL's
 * for its symmetric windows): such a call's buffers lie in windows on every rank, at the same
 * offsets from the windows' starts; MSCCLPP_WINDOW_CHECK=1 checks it at every call (an exchange per
 * call, for debugging). On CPU ranks windows are recorded and change nothing. InvalidArgument when
 * the sizes differ between ranks (on every rank, naming them) or the buffer overlaps a window. */
mscclppResult_t mscclppCommWindowRegister(mscclppComm_t comm, void* buff, size_t size, mscclppWindow_t* win);
/* Local: calls made after it no longer treat the window's buffer as registered (mappings of it
 * stay until the communicator is destroyed: captured graphs may still name them). */
mscclppResult_t mscclppCommWindowDeregister(mscclppComm_t comm, mscclppWindow_t win);

/* A buffer registered by one rank for the collectives (local, unlike a window). */
typedef struct mscclppBufferReg* mscclppBufferReg_t;

/* Local: records [buff, buff + size) as a buffer the collectives will see again (NCCL's
 * ncclCommRegister). On GPU ranks, an eager allreduce of at least MSCCLPP_REGISTERED_ZC_MIN bytes
 * (16 MiB; allgather, reducescatter and alltoall: four times that, their larger buffer) whose send
 * and receive buffers both lie in registered buffers (or windows) takes the zero-copy algorithms,
 * swapping the buffers' registrations with every peer for that call, as a captured call does;
 * below that size the swap would cost more than it saves. The rule (NCCL's for registered
 * buffers): such a call's buffers are registered on every rank (a rank that disagrees makes the
 * call fail on every rank after the bootstrap timeout, never compute wrong data). Registrations
 * may overlap. InvalidArgument for a NULL or empty buffer. */
mscclppResult_t mscclppCommBufferRegister(mscclppComm_t comm, void* buff, size_t size, mscclppBufferReg_t* handle);
mscclppResult_t mscclppCommBufferDeregister(mscclppComm_t comm, mscclppBufferReg_t handle);

/* Groups (per thread, nestable): calls between the outermost GroupStart and GroupEnd are checked
 * when made and run at GroupEnd: first the collectives in call order, then every send and receive
 * together, progressing whichever can, so no order of the calls inside a group deadlocks. */
mscclppResult_t mscclppGroupStart(void);
mscclppResult_t mscclppGroupEnd(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSCCLPP_COLLECTIVES_H_ */
