/* nccl.h - the NCCL C API, served by libmscclpp_nccl.so (also installed as libnccl.so.2 in its own
 * folder): programs written for NCCL build against this header, or run unchanged with the library
 * put in place of NCCL's (LD_LIBRARY_PATH, LD_PRELOAD, VLLM_NCCL_SO_PATH). docs/nccl.md lists
 * what is native, what goes to a real NCCL when one is configured, and what differs.
 *
 * ABI: NCCL 2.27's (types, enum values, ncclConfig_t's layout and its size/magic/version rules),
 * with the 2.28 calls PyTorch 2.11 imports (ncclAlltoAll, ncclGather, ncclScatter, the device-
 * communicator pair). The version claimed stays below 2.28 so that nccl-tests builds without the
 * device-API header. Every function is also exported as pnccl<Name> (the profiling names).
 *
 * CPU ranks (an extension; machines without a GPU): the same calls with host pointers; streams are
 * ignored (pass NULL) and every collective is complete when it returns.
 *
 * Compiles as C and C++. cudaStream_t comes from cuda_runtime.h when that header is found,
 * otherwise it is declared here exactly as CUDA declares it. */
#ifndef NCCL_H_
#define NCCL_H_

#if !defined(MSCCLPP_NCCL_NO_CUDA_HEADERS) && defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#define MSCCLPP_NCCL_CUDA_RUNTIME 1
#endif
#endif
#ifndef MSCCLPP_NCCL_CUDA_RUNTIME
typedef struct CUstream_st* cudaStream_t;
#endif

#include <limits.h>
#include <stddef.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 27
#define NCCL_PATCH 7
#define NCCL_SUFFIX ""
/* Versions up to 2.8 were X*1000 + Y*100 + Z; later ones X*10000 + Y*100 + Z. */
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01

#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01

#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* Communicator settings. Start from NCCL_CONFIG_INITIALIZER: size, magic and version tell the
 * library which layout the caller was built with; fields left undefined take the defaults. */
typedef struct ncclConfig_v22700 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking; /* 0: init and calls may return ncclInProgress (ncclCommGetAsyncError polls) */
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                                  \
  {                                                                                                              \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_CONFIG_UNDEF_INT,   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR,              \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,              \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT                                      \
  }

/* What ncclGroupSimulateEnd reports. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_UNDEF_FLOAT }

typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
/* Built-in operators; ncclRedOpCreatePreMulSum makes more from ncclNumOps upward. */
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where a pre-multiplied sum's scalar lives: device memory read at every use, or a host value
 * copied when the op is made. */
typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/* Device communicators (the 2.28 device API) are not provided: the calls say so. */
typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;

/* Declares ncclName and pncclName with one signature. */
#define MSCCLPP_NCCL_DECL(ret, name, args) \
  ret nccl##name args;                     \
  ret pnccl##name args

MSCCLPP_NCCL_DECL(ncclResult_t, MemAlloc, (void** ptr, size_t size));
MSCCLPP_NCCL_DECL(ncclResult_t, MemFree, (void* ptr));
MSCCLPP_NCCL_DECL(ncclResult_t, GetVersion, (int* version));
MSCCLPP_NCCL_DECL(ncclResult_t, GetUniqueId, (ncclUniqueId * uniqueId));
MSCCLPP_NCCL_DECL(ncclResult_t, CommInitRankConfig,
                  (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config));
MSCCLPP_NCCL_DECL(ncclResult_t, CommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank));
MSCCLPP_NCCL_DECL(ncclResult_t, CommInitAll, (ncclComm_t * comm, int ndev, const int* devlist));
MSCCLPP_NCCL_DECL(ncclResult_t, CommInitRankScalable,
                  (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds, ncclConfig_t* config));
MSCCLPP_NCCL_DECL(ncclResult_t, CommFinalize, (ncclComm_t comm));
MSCCLPP_NCCL_DECL(ncclResult_t, CommDestroy, (ncclComm_t comm));
MSCCLPP_NCCL_DECL(ncclResult_t, CommAbort, (ncclComm_t comm));
MSCCLPP_NCCL_DECL(ncclResult_t, CommSplit, (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config));
MSCCLPP_NCCL_DECL(ncclResult_t, CommShrink,
                  (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                   ncclConfig_t* config, int shrinkFlags));
MSCCLPP_NCCL_DECL(const char*, GetErrorString, (ncclResult_t result));
MSCCLPP_NCCL_DECL(const char*, GetLastError, (ncclComm_t comm));
MSCCLPP_NCCL_DECL(void, ResetDebugInit, (void));
MSCCLPP_NCCL_DECL(ncclResult_t, CommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError));
MSCCLPP_NCCL_DECL(ncclResult_t, CommCount, (const ncclComm_t comm, int* count));
MSCCLPP_NCCL_DECL(ncclResult_t, CommCuDevice, (const ncclComm_t comm, int* device));
MSCCLPP_NCCL_DECL(ncclResult_t, CommUserRank, (const ncclComm_t comm, int* rank));
MSCCLPP_NCCL_DECL(ncclResult_t, CommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle));
MSCCLPP_NCCL_DECL(ncclResult_t, CommDeregister, (const ncclComm_t comm, void* handle));
MSCCLPP_NCCL_DECL(ncclResult_t, CommWindowRegister,
                  (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags));
MSCCLPP_NCCL_DECL(ncclResult_t, CommWindowDeregister, (ncclComm_t comm, ncclWindow_t win));
MSCCLPP_NCCL_DECL(ncclResult_t, RedOpCreatePreMulSum,
                  (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                   ncclComm_t comm));
MSCCLPP_NCCL_DECL(ncclResult_t, RedOpDestroy, (ncclRedOp_t op, ncclComm_t comm));
MSCCLPP_NCCL_DECL(ncclResult_t, Reduce,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                   int root, ncclComm_t comm, cudaStream_t stream));
MSCCLPP_NCCL_DECL(ncclResult_t, Bcast,
                  (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream));
MSCCLPP_NCCL_DECL(ncclResult_t, Broadcast,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                   ncclComm_t comm, cudaStream_t stream));
MSCCLPP_NCCL_DECL(ncclResult_t, AllReduce,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                   ncclComm_t comm, cudaStream_t stream));
MSCCLPP_NCCL_DECL(ncclResult_t, ReduceScatter,
                  (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
                   ncclComm_t comm, cudaStream_t stream));
MSCCLPP_NCCL_DECL(ncclResult_t, AllGather,
                  (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                   cudaStream_t stream));
MSCCLPP_NCCL_DECL(ncclResult_t, AlltoAll,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                   cudaStream_t stream));
MSCCLPP_NCCL_DECL(ncclResult_t, Gather,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                   ncclComm_t comm, cudaStream_t stream));
MSCCLPP_NCCL_DECL(ncclResult_t, Scatter,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                   ncclComm_t comm, cudaStream_t stream));
MSCCLPP_NCCL_DECL(ncclResult_t, Send,
                  (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                   cudaStream_t stream));
MSCCLPP_NCCL_DECL(ncclResult_t, Recv,
                  (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream));
MSCCLPP_NCCL_DECL(ncclResult_t, GroupStart, (void));
MSCCLPP_NCCL_DECL(ncclResult_t, GroupEnd, (void));
MSCCLPP_NCCL_DECL(ncclResult_t, GroupSimulateEnd, (ncclSimInfo_t * simInfo));
MSCCLPP_NCCL_DECL(ncclResult_t, DevCommCreate,
                  (ncclComm_t comm, const ncclDevCommRequirements_t* reqs, ncclDevComm_t* outDevComm));
MSCCLPP_NCCL_DECL(ncclResult_t, DevCommDestroy, (ncclComm_t comm, const ncclDevComm_t* devComm));

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */
