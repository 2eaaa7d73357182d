/* mscclpp/devconn.h - the seed API's device connections: declare connections with mscclppConnect,
 * set them up with mscclppConnectionSetup, start the proxy with mscclppProxyLaunch, and use the
 * mscclppDevConn handles in kernels (put, signal, putWithSignal, putWithSignalAndFlush, flush,
 * wait). A device connection is a port channel of the communicator's own proxy service, between
 * two equally sized registered buffers. Compiles as C11, C++ and CUDA C++.
 *
 *   sender GPU                                     receiver GPU
 *   mscclppDevConnPut(&c, data1 ...)               not OK to read data1..3
 *   mscclppDevConnPut(&c, data2 ...)
 *   mscclppDevConnPut(&c, data3 ...)
 *   mscclppDevConnSignal(&c)  ------------------>  mscclppDevConnWait(&c)
 *   not OK to write data1..3                       OK to read data1..3
 *   mscclppDevConnFlush(&c)
 *   OK to write data1..3
 *
 * Both ends may use one connection at once when they put into different parts of the buffers. */
#ifndef MSCCLPP_DEVCONN_H_
#define MSCCLPP_DEVCONN_H_

#include <stdint.h>

#include <mscclpp/comm.h>
#include <mscclpp/connection.h>
#include <mscclpp/memory.h>
#include <mscclpp/port_channel.h>

typedef struct mscclppDevConn {
  int remoteRank;
  int tag;
  void* localBuff;         /* this rank's buffer */
  void* remoteBuff;        /* the peer's buffer mapped here (p2p / shm), or NULL (tcp) */
  uint64_t buffSize;       /* bytes of localBuff (the peer's may differ; the proxy checks) */
  mscclppPortChannel port; /* puts from localBuff into the peer's buffer through the proxy */
#if defined(__CUDACC__)
  /* Member-style wrappers of the functions below, as in the seed API. */
  __host__ __device__ int put(uint64_t dstDataOffset, uint64_t srcDataOffset, uint64_t dataSize) const;
  __host__ __device__ int put(uint64_t dataOffset, uint64_t dataSize) const;
  __host__ __device__ int signal() const;
  __host__ __device__ int putWithSignal(uint64_t dstDataOffset, uint64_t srcDataOffset, uint64_t dataSize) const;
  __host__ __device__ int putWithSignal(uint64_t dataOffset, uint64_t dataSize) const;
  __host__ __device__ int putWithSignalAndFlush(uint64_t dstDataOffset, uint64_t srcDataOffset, uint64_t dataSize) const;
  __host__ __device__ int putWithSignalAndFlush(uint64_t dataOffset, uint64_t dataSize) const;
  __host__ __device__ int flush() const;
  __host__ __device__ int wait() const;
#endif
} mscclppDevConn;
typedef mscclppDevConn mscclppDevConn_t;

/* [non-blocking] localBuff[srcOffset, +size) -> the peer's buffer at dstOffset. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppDevConnPut(const mscclppDevConn* c, uint64_t dstOffset, uint64_t srcOffset,
                                                 uint64_t size) {
  return mscclppPortChannelPut(&c->port, dstOffset, srcOffset, size);
}
/* [non-blocking] the peer's next wait returns after every earlier put has landed. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppDevConnSignal(const mscclppDevConn* c) { return mscclppPortChannelSignal(&c->port); }
MSCCLPP_HOST_DEVICE_INLINE int mscclppDevConnPutWithSignal(const mscclppDevConn* c, uint64_t dstOffset,
                                                           uint64_t srcOffset, uint64_t size) {
  return mscclppPortChannelPutWithSignal(&c->port, dstOffset, srcOffset, size);
}
/* [blocking] put, signal, and wait until both are complete. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppDevConnPutWithSignalAndFlush(const mscclppDevConn* c, uint64_t dstOffset,
                                                                   uint64_t srcOffset, uint64_t size) {
  return mscclppPortChannelPutWithSignalAndFlush(&c->port, dstOffset, srcOffset, size);
}
/* [blocking] every earlier put of this connection is complete; localBuff may be reused. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppDevConnFlush(const mscclppDevConn* c) { return mscclppPortChannelFlush(&c->port); }
/* [blocking] waits for the peer's next signal. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppDevConnWait(const mscclppDevConn* c) { return mscclppPortChannelWait(&c->port); }

#if defined(__CUDACC__)
__forceinline__ __host__ __device__ int mscclppDevConn::put(uint64_t d, uint64_t s, uint64_t n) const {
  return mscclppDevConnPut(this, d, s, n);
}
__forceinline__ __host__ __device__ int mscclppDevConn::put(uint64_t o, uint64_t n) const { return mscclppDevConnPut(this, o, o, n); }
__forceinline__ __host__ __device__ int mscclppDevConn::signal() const { return mscclppDevConnSignal(this); }
__forceinline__ __host__ __device__ int mscclppDevConn::putWithSignal(uint64_t d, uint64_t s, uint64_t n) const {
  return mscclppDevConnPutWithSignal(this, d, s, n);
}
__forceinline__ __host__ __device__ int mscclppDevConn::putWithSignal(uint64_t o, uint64_t n) const {
  return mscclppDevConnPutWithSignal(this, o, o, n);
}
__forceinline__ __host__ __device__ int mscclppDevConn::putWithSignalAndFlush(uint64_t d, uint64_t s, uint64_t n) const {
  return mscclppDevConnPutWithSignalAndFlush(this, d, s, n);
}
__forceinline__ __host__ __device__ int mscclppDevConn::putWithSignalAndFlush(uint64_t o, uint64_t n) const {
  return mscclppDevConnPutWithSignalAndFlush(this, o, o, n);
}
__forceinline__ __host__ __device__ int mscclppDevConn::flush() const { return mscclppDevConnFlush(this); }
__forceinline__ __host__ __device__ int mscclppDevConn::wait() const { return mscclppDevConnWait(this); }
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Declares a connection to remoteRank (both ranks declare their side, pairs in the same order).
 * localBuff: this rank's buffer of buffSize bytes, registered at setup. transportType: P2P, SHM,
 * TCP or Auto (IB is not built: InvalidUsage). ibDev: the IB device name, NULL otherwise. */
mscclppResult_t mscclppConnect(mscclppComm_t comm, int remoteRank, int tag, void* localBuff, uint64_t buffSize,
                               mscclppTransport_t transportType, const char* ibDev);
/* Sets up every declared connection (pairwise with each peer, in declaration order): connection,
 * buffer registration and exchange, semaphore, port of the communicator's proxy service. Returns
 * when every peer has done its side. Connections declared later need another setup call. */
mscclppResult_t mscclppConnectionSetup(mscclppComm_t comm);
/* The device connections set up so far, in mscclppConnect order. *devConns points into library
 * memory (valid until the next mscclppConnectionSetup or mscclppCommReleaseChannels); copy the
 * handles to the GPU or pass them to kernels by value. */
mscclppResult_t mscclppGetAllDeviceConnections(mscclppComm_t comm, mscclppDevConn_t** devConns, int* nConns);
mscclppResult_t mscclppGetDeviceConnection(mscclppComm_t comm, int remoteRank, int tag, mscclppDevConn_t** devConn);
/* Starts / stops the communicator's proxy thread (after setup; before / after the kernels). */
mscclppResult_t mscclppProxyLaunch(mscclppComm_t comm);
mscclppResult_t mscclppProxyStop(mscclppComm_t comm);
/* Copies srcBuff[srcOffset, +size) into every peer's buffer of regMem (from mscclppRegisterBuffer) at
 * dstOffset: cudaMemcpyAsync on stream (a cudaStream_t, 0 = default) for buffers mapped here;
 * memcpy for host memory. Peers whose buffer is not mapped here (tcp) are InvalidUsage. */
mscclppResult_t mscclppRegisteredBufferWrite(mscclppComm_t comm, mscclppRegisteredMemory* regMem, void* srcBuff,
                                             size_t size, uint64_t srcOffset, uint64_t dstOffset, int64_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSCCLPP_DEVCONN_H_ */
