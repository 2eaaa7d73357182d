/* nccl_abi.c - nccl.h and libmscclpp_nccl.so against NCCL 2.27's ABI: enum values, struct sizes
 * and offsets (checked at compile time), every function of the API exported by the library found
 * under its libnccl.so.2 name with its pnccl alias at the same address, and configs from headers
 * of other versions (a smaller struct, an older version) taken, a wrong magic refused.
 *
 *   nccl_abi LIBNCCL_SO_2 */
#include <dlfcn.h>
#include <stddef.h>

#include "nccl/nccl_common.h"

_Static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is 128 bytes");
_Static_assert(ncclSuccess == 0 && ncclUnhandledCudaError == 1 && ncclSystemError == 2 && ncclInternalError == 3 &&
                   ncclInvalidArgument == 4 && ncclInvalidUsage == 5 && ncclRemoteError == 6 && ncclInProgress == 7 &&
                   ncclNumResults == 8,
               "ncclResult_t values");
_Static_assert(ncclInt8 == 0 && ncclUint8 == 1 && ncclInt32 == 2 && ncclUint32 == 3 && ncclInt64 == 4 &&
                   ncclUint64 == 5 && ncclFloat16 == 6 && ncclFloat32 == 7 && ncclFloat64 == 8 && ncclBfloat16 == 9 &&
                   ncclFloat8e4m3 == 10 && ncclFloat8e5m2 == 11 && ncclNumTypes == 12,
               "ncclDataType_t values");
_Static_assert(ncclSum == 0 && ncclProd == 1 && ncclMax == 2 && ncclMin == 3 && ncclAvg == 4 && ncclNumOps == 5 &&
                   ncclMaxRedOp == 0x7fffffff && sizeof(ncclRedOp_t) == 4,
               "ncclRedOp_t values");
_Static_assert(ncclScalarDevice == 0 && ncclScalarHostImmediate == 1, "ncclScalarResidence_t values");
_Static_assert(sizeof(ncclConfig_t) == 72 && offsetof(ncclConfig_t, magic) == 8 && offsetof(ncclConfig_t, version) == 12 &&
                   offsetof(ncclConfig_t, blocking) == 16 && offsetof(ncclConfig_t, netName) == 32 &&
                   offsetof(ncclConfig_t, splitShare) == 40 && offsetof(ncclConfig_t, commName) == 48 &&
                   offsetof(ncclConfig_t, nvlsCTAs) == 68,
               "ncclConfig_t layout (2.27)");
_Static_assert(sizeof(ncclSimInfo_t) == 24 && offsetof(ncclSimInfo_t, estimatedTime) == 16, "ncclSimInfo_t layout");
_Static_assert(NCCL_VERSION_CODE == 22707 && NCCL_VERSION(2, 8, 4) == 2804 && NCCL_SPLIT_NOCOLOR == -1,
               "versions below 2.28 (nccl-tests then needs no device-API header)");

static const char* const functions[] = {
    "MemAlloc",          "MemFree",           "GetVersion",       "GetUniqueId",         "CommInitRankConfig",
    "CommInitRank",      "CommInitAll",       "CommInitRankScalable", "CommFinalize",    "CommDestroy",
    "CommAbort",         "CommSplit",         "CommShrink",       "GetErrorString",      "GetLastError",
    "ResetDebugInit",    "CommGetAsyncError", "CommCount",        "CommCuDevice",        "CommUserRank",
    "CommRegister",      "CommDeregister",    "CommWindowRegister", "CommWindowDeregister", "RedOpCreatePreMulSum",
    "RedOpDestroy",      "Reduce",            "Bcast",            "Broadcast",           "AllReduce",
    "ReduceScatter",     "AllGather",         "AlltoAll",         "Gather",              "Scatter",
    "Send",              "Recv",              "GroupStart",       "GroupEnd",            "GroupSimulateEnd",
    "DevCommCreate",     "DevCommDestroy",
};

static void exports(const char* lib) {
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) NFAIL("dlopen %s: %s", lib, dlerror());
  for (size_t i = 0; i < sizeof(functions) / sizeof(functions[0]); i++) {
    char a[64], b[64];
    snprintf(a, sizeof(a), "nccl%s", functions[i]);
    snprintf(b, sizeof(b), "pnccl%s", functions[i]);
    void *fa = dlsym(h, a), *fb = dlsym(h, b);
    if (!fa || !fb) NFAIL("%s does not export %s (%p) and %s (%p)", lib, a, fa, b, fb);
    if (fa != fb) NFAIL("%s: %s is not an alias of %s", lib, b, a);
  }
  /* nothing of the library's own leaks out under NCCL's name space */
  NCHECK(dlsym(h, "shim_live") == NULL && dlsym(h, "mscclppAllReduce") != NULL); /* the latter: from libmscclpp */
  dlclose(h);
}

/* The 2.19 layout: fields up to splitShare. */
struct config_v21900 {
  size_t size;
  unsigned int magic, version;
  int blocking, cgaClusterSize, minCTAs, maxCTAs;
  const char* netName;
  int splitShare;
};

/* Single-rank communicators made with configs of other layouts, and a collective on each. */
static void configs(void) {
  ncclUniqueId id;
  ncclComm_t comm;
  struct config_v21900 old = {sizeof(old), 0xcafebeef, 21903, 1, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,
                              NCCL_CONFIG_UNDEF_INT, NULL, 0};
  NOK(ncclGetUniqueId(&id));
  NOK(ncclCommInitRankConfig(&comm, 1, id, 0, (ncclConfig_t*)&old));
  float x[5] = {1, 2, 3, 4, 5}, y[5] = {0};
  NOK(ncclAllReduce(x, y, 5, ncclFloat32, ncclMax, comm, NULL));
  NCHECK(memcmp(x, y, sizeof(x)) == 0);
  NOK(ncclCommDestroy(comm));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.commName = "abi";
  NOK(ncclGetUniqueId(&id));
  NOK(ncclCommInitRankConfig(&comm, 1, id, 0, &cfg));
  NOK(ncclCommDestroy(comm));
  cfg.magic = 0;
  NERR(ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument, "magic");
  cfg.magic = 0xcafebeef, cfg.blocking = 5;
  NERR(ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument, "blocking 5");
}

int main(int argc, char** argv) {
  if (argc != 2) NFAIL("usage: nccl_abi LIBNCCL_SO_2");
  exports(argv[1]);
  for (int r = 0; r <= (int)ncclInProgress; r++) NCHECK(ncclGetErrorString((ncclResult_t)r) != NULL);
  NCHECK(strcmp(ncclGetErrorString(ncclSuccess), ncclGetErrorString(ncclInvalidArgument)) != 0);
  configs();
  printf("nccl_abi: %zu functions and their pnccl aliases exported; configs of other layouts taken\n",
         sizeof(functions) / sizeof(functions[0]));
  return 0;
}
