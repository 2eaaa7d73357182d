/* mscclpp/connection.h - connections between two ranks and host semaphores over them.
 * Compiles as C11 and as C++. */
#ifndef MSCCLPP_CONNECTION_H_
#define MSCCLPP_CONNECTION_H_

#include <mscclpp/memory.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Transports. The first three values are the seed API's; values never change (Net came after Auto). */
typedef enum {
  mscclppTransportP2P = 0,  /* GPU memory between processes of one host (CUDA IPC) */
  mscclppTransportSHM = 1,  /* host memory shared between processes of one host */
  mscclppTransportIB = 2,   /* InfiniBand verbs (not built yet) */
  mscclppTransportTCP = 3,  /* host memory across hosts, written by the owner's receiving thread */
  mscclppTransportAuto = 4, /* what the two ranks can both reach: P2P, SHM, then Net (where
                               MSCCLPP_NET_TRANSPORT=on) or TCP */
  mscclppTransportNet = 5   /* host memory across hosts through libfabric RMA (docs/net-transport.md) */
} mscclppTransport_t;
#define mscclppTransportCudaIpc mscclppTransportP2P

typedef struct mscclppConnection* mscclppConnection_t;

/* Connects this rank with peer. Both ranks call it with the same tag and transport (Auto resolves
 * to the same choice on both sides: P2P between GPU ranks of one host, SHM between other ranks of
 * one host, TCP across hosts). Returns once the peer has connected too; a tag or transport the two
 * sides disagree on is InvalidUsage on both. A pair creates its connections (and their
 * semaphores) in the same order on both sides, one at a time; creating them in increasing peer
 * order on every rank avoids cycles of waits. The library's own bootstrap messages use negative
 * tags, so the tag here may be any int. A connection is used by one thread at a time. */
mscclppResult_t mscclppConnectionCreate(mscclppComm_t comm, int peer, int tag, mscclppTransport_t transport,
                                        mscclppConnection_t* conn);
/* The transport the connection uses (never Auto). */
mscclppResult_t mscclppConnectionTransport(mscclppConnection_t conn, mscclppTransport_t* transport);
/* The rank at the other end. */
mscclppResult_t mscclppConnectionPeer(mscclppConnection_t conn, int* peer);

/* Copies size bytes from local registered memory src (at srcOffset) into the peer's registered
 * memory dst (imported here, at dstOffset). Asynchronous: the data is only guaranteed to have
 * landed after a later flush, or in the order the peer observes an UpdateAndSync issued after it.
 * src may be reused once the call returns. Over P2P the copy runs on the connection's own stream,
 * after the work queued so far on the device's legacy default stream (cudaMemcpy, cudaMemset,
 * kernels without a stream); work of the caller's other streams that produces src must be
 * synchronized first. SHM needs dst in shared memory (mscclppMemAlloc host memory); P2P needs dst
 * mapped here (GPU or shared memory of a rank of this host); TCP reaches any registered memory. A
 * write past either buffer's end is InvalidArgument. */
mscclppResult_t mscclppConnectionWrite(mscclppConnection_t conn, mscclppRegMem_t dst, uint64_t dstOffset,
                                       mscclppRegMem_t src, uint64_t srcOffset, uint64_t size);
/* Sets *src to newValue and stores it as one 64-bit word at dst+dstOffset (8-byte aligned) on the
 * peer, after every earlier write of this connection. The semaphores are made of this. Over P2P
 * into GPU memory the word is one more copy on the connection's stream; into host memory the call
 * first waits (bounded by MSCCLPP_FLUSH_TIMEOUT) for the connection's copies to finish. */
mscclppResult_t mscclppConnectionUpdateAndSync(mscclppConnection_t conn, mscclppRegMem_t dst, uint64_t dstOffset,
                                               uint64_t* src, uint64_t newValue);
/* Waits, at most timeoutMs (<0: MSCCLPP_FLUSH_TIMEOUT), until every earlier write and update of
 * this connection has landed in the peer's memory. Over TCP it also reports (RemoteError) a write
 * or update the peer refused since the last flush, e.g. to a registration it released. */
mscclppResult_t mscclppConnectionFlush(mscclppConnection_t conn, int64_t timeoutMs);
/* Closes the connection (its host semaphores must be destroyed first: InvalidUsage otherwise).
 * Connections still open when their communicator is destroyed are closed with it. */
mscclppResult_t mscclppConnectionDestroy(mscclppConnection_t conn);

/* A host semaphore: a 64-bit monotonic token in memory this rank owns, advanced by the peer's
 * signal through the connection. Both ends of the connection create one (a pairwise exchange that
 * returns once both sides have imported the other's token). */
typedef struct mscclppHostSemaphore* mscclppHostSemaphore_t;

mscclppResult_t mscclppHostSemaphoreCreate(mscclppComm_t comm, mscclppConnection_t conn, mscclppHostSemaphore_t* sem);
/* Tells the peer one more step is ready: every write of the connection issued before it is visible
 * to the peer once its wait for this step returns. */
mscclppResult_t mscclppHostSemaphoreSignal(mscclppHostSemaphore_t sem);
/* Waits for the peer's next signal, at most timeoutMs (<0: MSCCLPP_SEMAPHORE_TIMEOUT). Timeout names
 * the peer and the step awaited, and leaves that step to be waited for again. A peer known to be
 * gone (its process on this host exited, or its TCP connection closed) is RemoteError. Spins
 * briefly, then yields the CPU and sleeps in short steps. */
mscclppResult_t mscclppHostSemaphoreWait(mscclppHostSemaphore_t sem, int64_t timeoutMs);
/* Non-blocking wait: *ready = 1 and the step is consumed when the peer's next signal arrived. */
mscclppResult_t mscclppHostSemaphorePoll(mscclppHostSemaphore_t sem, int* ready);
mscclppResult_t mscclppHostSemaphoreDestroy(mscclppHostSemaphore_t sem);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSCCLPP_CONNECTION_H_ */
