/* mscclpp/comm.h - communicators and the bootstrap network that connects their ranks.
 * Compiles as C11 and as C++. */
#ifndef MSCCLPP_COMM_H_
#define MSCCLPP_COMM_H_

#include <mscclpp/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A communicator. Rules (docs/errors.md): a destroyed or never-initialised handle is an
 * InvalidUsage error, never a crash; one thread at a time may call into a communicator (another
 * thread's call meanwhile fails with InvalidUsage), except the queries (rank, size, local rank,
 * rank kind, device, device error) and mscclppCommAbort, which any thread may call. After an
 * argument error the communicator is unchanged; after a collective failed between ranks (mismatch,
 * timeout, dead peer) its collectives and sends/receives fail naming that error, and only destroy
 * or abort remain. */
typedef struct mscclppComm* mscclppComm_t;

/* An opaque id that ranks share to find each other: the root's address and a random secret.
 * A bootstrap connection that does not present the secret is refused. */
#define MSCCLPP_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[MSCCLPP_UNIQUE_ID_BYTES];
} mscclppUniqueId;

/* What a rank computes with. A GPU rank owns one CUDA device; a CPU rank keeps its buffers in
 * host memory (shared memory on one host, TCP across hosts). */
typedef enum { mscclppRankAuto = 0, mscclppRankCpu = 1, mscclppRankGpu = 2 } mscclppRankKind_t;

/* Optional settings for mscclppCommInitRankConfig. Initialize with MSCCLPP_CONFIG_INITIALIZER so
 * that size, magic and version identify the caller's layout; fields left at their initializer
 * value take the defaults (environment parameters, then built-in values). */
#define MSCCLPP_CONFIG_MAGIC 0x6d73636cu
#define MSCCLPP_CONFIG_VERSION 1
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rankKind;           /* mscclppRankKind_t; Auto: GPU when a device is usable, else CPU */
  int cudaDevice;         /* -1: the calling thread's current device (GPU ranks only) */
  int bootstrapTimeoutMs; /* bound of every bootstrap wait; 0: MSCCLPP_BOOTSTRAP_TIMEOUT */
} mscclppConfig_t;
#define MSCCLPP_CONFIG_INITIALIZER \
  { sizeof(mscclppConfig_t), MSCCLPP_CONFIG_MAGIC, MSCCLPP_CONFIG_VERSION, mscclppRankAuto, -1, 0 }

/* Creates a unique id and starts the root of the bootstrap in the calling process (a thread that
 * lives until every rank has joined or the timeout passes). Only one process calls it; the id is
 * then given to every rank, e.g. through MPI or a file. The root listens on MSCCLPP_SOCKET_IFNAME's
 * address when set, otherwise on the first non-loopback IPv4 interface, else on loopback. */
mscclppResult_t mscclppGetUniqueId(mscclppUniqueId* uniqueId);

/* Creates this rank's communicator. nranks processes call it with ranks 0..nranks-1. ipPortPair
 * ("host:port", "[v6]:port") names the root, which rank 0 starts itself. */
mscclppResult_t mscclppCommInitRank(mscclppComm_t* comm, int nranks, const char* ipPortPair, int rank);

/* As mscclppCommInitRank, with the root named by an id from mscclppGetUniqueId. */
mscclppResult_t mscclppCommInitRankFromId(mscclppComm_t* comm, int nranks, mscclppUniqueId id, int rank);

/* As mscclppCommInitRankFromId, with settings. config may be NULL. */
mscclppResult_t mscclppCommInitRankConfig(mscclppComm_t* comm, int nranks, mscclppUniqueId id, int rank,
                                          const mscclppConfig_t* config);

/* Creates the communicator from what a launcher put in the environment: rank and size from
 * RANK/WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK/SIZE (Open MPI), PMI_RANK/PMI_SIZE (MPICH),
 * SLURM_PROCID/SLURM_NTASKS (Slurm) or MSCCLPP_RANK/MSCCLPP_WORLD_SIZE; the root from
 * MSCCLPP_MASTER_ADDR/MSCCLPP_MASTER_PORT, else MASTER_ADDR/MASTER_PORT. Under torchrun (its
 * agent's store at MASTER_ADDR:MASTER_PORT) without MSCCLPP_MASTER_PORT, rank 0 starts the root
 * on a free port and the ranks exchange its id through torchrun's store, never binding MASTER_PORT;
 * a rank 0 that cannot start its root makes every rank fail at once. Every rank must make its
 * inits from the environment in the same order. Local rank (for the default device) from
 * LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID. */
mscclppResult_t mscclppCommInitFromEnv(mscclppComm_t* comm, const mscclppConfig_t* config);

mscclppResult_t mscclppCommRank(mscclppComm_t comm, int* rank);
mscclppResult_t mscclppCommSize(mscclppComm_t comm, int* size);
/* Ranks on this rank's host, and this rank's index among them (ordered by global rank). */
mscclppResult_t mscclppCommLocalRank(mscclppComm_t comm, int* localRank, int* localSize);
/* The kind (mscclppRankCpu/Gpu) of any rank of the communicator. */
mscclppResult_t mscclppCommRankKind(mscclppComm_t comm, int rank, mscclppRankKind_t* kind);
/* This rank's CUDA device, or -1 for a CPU rank. */
mscclppResult_t mscclppCommCudaDevice(mscclppComm_t comm, int* device);
/* The calling thread's current CUDA device, or -1 when this build or machine has no usable GPU:
 * what a config's cudaDevice of -1 means, for a caller that creates the communicator on another
 * thread. */
mscclppResult_t mscclppGetCudaDevice(int* device);
/* Makes device the calling thread's current CUDA device (-1: does nothing), for a client that
 * does not link the CUDA runtime itself. InvalidArgument when there is no such device. */
mscclppResult_t mscclppSetCudaDevice(int device);

/* Tears down after the other ranks are done with this one (no collective wait). InvalidUsage, and
 * nothing is freed, while another thread's call is inside comm; calls queued in a group on comm
 * make that group's mscclppGroupEnd fail without running any of its calls. */
mscclppResult_t mscclppCommDestroy(mscclppComm_t comm);
/* Tears down at once: sockets are closed so that peers blocked on this rank fail promptly. May be
 * called from another thread while calls are blocked in comm: they return mscclppAborted
 * (bootstrap waits at once, host semaphore and CPU-executor waits within 20 ms), new calls fail
 * with mscclppAborted, and comm is freed once no call is inside (waiting at most the bootstrap
 * timeout; past it, InternalError and comm is left allocated rather than freed under a running
 * call). GPU kernels already launched finish or reach their device-wait bound first. comm must
 * not be used after a successful abort. */
mscclppResult_t mscclppCommAbort(mscclppComm_t comm);

/* Allgather through the bootstrap network: data holds nranks slots of size bytes; slot r is
 * rank r's contribution. */
mscclppResult_t mscclppBootstrapAllGather(mscclppComm_t comm, void* data, int size);
/* Returns once every rank has entered the barrier. */
mscclppResult_t mscclppBootstrapBarrier(mscclppComm_t comm);
/* Tagged point-to-point messages through the bootstrap network. Messages between one pair with
 * one tag arrive in order; the receiver's size must equal the sender's. */
mscclppResult_t mscclppBootstrapSend(mscclppComm_t comm, int peer, int tag, const void* data, size_t size);
mscclppResult_t mscclppBootstrapRecv(mscclppComm_t comm, int peer, int tag, void* data, size_t size);

/* Sets the bound, in seconds, of bootstrap connection and receive waits for communicators created
 * afterwards (default: MSCCLPP_BOOTSTRAP_TIMEOUT). */
mscclppResult_t mscclppSetBootstrapConnTimeout(int timeout);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSCCLPP_COMM_H_ */
