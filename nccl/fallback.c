/* fallback.c - calls this library does not serve go to a real NCCL: MSCCLPP_NCCL_LIB_PATH names its
 * libnccl.so.2 (loaded with dlopen on first need), MSCCLPP_NCCL_FALLBACK lists the calls forced
 * there ("allreduce,alltoall", or "all"); the device API (ncclDevCommCreate) goes there whenever a
 * real NCCL is configured. Each communicator gets its real twin lazily, at its first forwarded call:
 * rank 0 of it makes a real unique id and sends it over this library's bootstrap, then every rank
 * initialises the twin on the communicator's device. Every rank must forward the same calls (the same
 * environment), as NCCL's own rules require of collectives. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

/* The real NCCL's functions this file calls (NCCL's signatures; streams as void*). */
struct real_nccl {
  void* lib;
  ncclResult_t (*GetUniqueId)(ncclUniqueId*);
  ncclResult_t (*CommInitRank)(void**, int, ncclUniqueId, int);
  ncclResult_t (*CommDestroy)(void*);
  ncclResult_t (*CommAbort)(void*);
  const char* (*GetErrorString)(ncclResult_t);
  ncclResult_t (*AllReduce)(const void*, void*, size_t, int, int, void*, void*);
  ncclResult_t (*AllGather)(const void*, void*, size_t, int, void*, void*);
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, int, int, void*, void*);
  ncclResult_t (*Broadcast)(const void*, void*, size_t, int, int, void*, void*);
  ncclResult_t (*Reduce)(const void*, void*, size_t, int, int, int, void*, void*);
  ncclResult_t (*AlltoAll)(const void*, void*, size_t, int, void*, void*); /* 2.28+; may be NULL */
  ncclResult_t (*Send)(const void*, size_t, int, int, void*, void*);
  ncclResult_t (*Recv)(void*, size_t, int, int, void*, void*);
  ncclResult_t (*GroupStart)(void);
  ncclResult_t (*GroupEnd)(void);
  ncclResult_t (*DevCommCreate)(void*, const void*, void*);
  ncclResult_t (*DevCommDestroy)(void*, const void*);
  /* what it calls on its own communicators (shim_fallback_async_error and siblings) */
  ncclResult_t (*CommGetAsyncError)(void*, ncclResult_t*);
  ncclResult_t (*CommRegister)(void*, void*, size_t, void**);
  ncclResult_t (*CommDeregister)(void*, void*);
  ncclResult_t (*CommWindowDeregister)(void*, void*);
};

/* The real NCCL calls its own exported functions (ncclAllGather asks ncclCommGetAsyncError whether
 * the communicator is ready): without RTLD_DEEPBIND those calls would bind to this library's names,
 * which come first in the global scope, and be refused as foreign communicators. A real NCCL that
 * the process loaded before (torch preloads its wheel's libnccl.so.2 into the global scope) is
 * returned as it is, already bound: its calls on its own communicators come here and are sent back
 * (shim_fallback_async_error and siblings). (AddressSanitizer
 * refuses RTLD_DEEPBIND; the sanitized builds load only tests/nccl/fake_nccl.c, which does the same
 * self-call only when built without it.) */
#if defined(__SANITIZE_ADDRESS__)
#define DEEP_BIND 0
#else
#define DEEP_BIND RTLD_DEEPBIND
#endif

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct real_nccl real;
static char load_error[512];
static unsigned forced; /* bit per enum shim_kind */

static const char* const kind_names[] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                         "reduce",    "alltoall",  "send",          "recv"};

/* MSCCLPP_NCCL_FALLBACK: names of kind_names (send and recv also as "sendrecv"), or "all". */
static void parse_forced(const char* v) {
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", v ? v : "");
  for (char *save = NULL, *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
    if (!strcmp(t, "all")) forced = ~0u;
    if (!strcmp(t, "sendrecv")) forced |= 1u << SHIM_SEND | 1u << SHIM_RECV;
    for (unsigned k = 0; k < sizeof(kind_names) / sizeof(kind_names[0]); k++)
      if (!strcmp(t, kind_names[k])) forced |= 1u << k;
  }
}

#define SYM(name) (*(void**)&real.name = dlsym(real.lib, "nccl" #name))

static void load(void) {
  parse_forced(getenv("MSCCLPP_NCCL_FALLBACK"));
  const char* path = getenv("MSCCLPP_NCCL_LIB_PATH");
  if (!path || !*path) {
    snprintf(load_error, sizeof(load_error), "no real NCCL is configured (MSCCLPP_NCCL_LIB_PATH is not set)");
    return;
  }
  real.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | DEEP_BIND);
  if (!real.lib) {
    snprintf(load_error, sizeof(load_error), "MSCCLPP_NCCL_LIB_PATH=%s: %s", path, dlerror());
    return;
  }
  if (dlsym(real.lib, "ncclGetVersion") == (void*)ncclGetVersion) { /* it would forward to itself for ever */
    snprintf(load_error, sizeof(load_error), "MSCCLPP_NCCL_LIB_PATH=%s is this library, not a real NCCL", path);
    dlclose(real.lib);
    real.lib = NULL;
    return;
  }
  SYM(GetUniqueId), SYM(CommInitRank), SYM(CommDestroy), SYM(CommAbort), SYM(GetErrorString), SYM(AllReduce);
  SYM(AllGather), SYM(ReduceScatter), SYM(Broadcast), SYM(Reduce), SYM(AlltoAll), SYM(Send), SYM(Recv);
  SYM(GroupStart), SYM(GroupEnd), SYM(DevCommCreate), SYM(DevCommDestroy);
  SYM(CommGetAsyncError), SYM(CommRegister), SYM(CommDeregister), SYM(CommWindowDeregister);
  if (!real.GetUniqueId || !real.CommInitRank || !real.CommDestroy || !real.AllReduce || !real.GroupStart ||
      !real.GroupEnd || !real.Send || !real.Recv) {
    snprintf(load_error, sizeof(load_error), "MSCCLPP_NCCL_LIB_PATH=%s does not export NCCL's functions", path);
    dlclose(real.lib);
    real.lib = NULL;
  }
}

int shim_fallback_forced(enum shim_kind kind) {
  pthread_once(&load_once, load);
  return (forced >> kind) & 1u;
}

/* The real library, or NULL with the reason recorded on comm. */
static const struct real_nccl* real_lib(ncclComm_t comm, const char* call) {
  pthread_once(&load_once, load);
  if (real.lib) return &real;
  (void)shim_fail(comm, ncclInvalidUsage, "%s: %s", call, load_error);
  return NULL;
}

/* Bootstrap tag of the twin's id (apart from split.c's). */
#define TWIN_TAG 0x4e540001

/* comm's real twin, made on first use (collective over comm's ranks). */
static ncclResult_t twin(ncclComm_t comm, const char* call, void** out) {
  const struct real_nccl* R = real_lib(comm, call);
  if (!R) return ncclInvalidUsage;
  if (comm->real) {
    *out = comm->real;
    return ncclSuccess;
  }
  ncclUniqueId id;
  mscclppResult_t r = mscclppSuccess;
  ncclResult_t res = ncclSuccess;
  if (comm->rank == 0) {
    res = R->GetUniqueId(&id);
    for (int p = 1; res == ncclSuccess && r == mscclppSuccess && p < comm->nranks; p++)
      r = mscclppBootstrapSend(comm->c, p, TWIN_TAG, &id, sizeof(id));
  } else {
    r = mscclppBootstrapRecv(comm->c, 0, TWIN_TAG, &id, sizeof(id));
  }
  if (r != mscclppSuccess) return shim_fail_lib(comm, r, call);
  /* The twin lives on the communicator's device, whatever is current on the calling thread (a
   * group's worker, or a caller that drives ranks of several devices): NCCL takes the current one
   * at init and refuses buffers of another device later. */
  int dev = -1, prev = -1;
  (void)mscclppCommCudaDevice(comm->c, &dev);
  (void)mscclppGetCudaDevice(&prev);
  if (res == ncclSuccess && dev != prev) r = mscclppSetCudaDevice(dev);
  if (r != mscclppSuccess) return shim_fail_lib(comm, r, call);
  if (res == ncclSuccess) res = R->CommInitRank(&comm->real, comm->nranks, id, comm->rank);
  if (dev != prev) (void)mscclppSetCudaDevice(prev);
  if (res != ncclSuccess)
    return shim_fail(comm, res, "%s: the real NCCL's communicator: %s", call, R->GetErrorString ? R->GetErrorString(res) : "");
  *out = comm->real;
  return ncclSuccess;
}

ncclResult_t shim_fallback_prepare(ncclComm_t comm, const char* call) {
  void* rc = NULL;
  return twin(comm, call, &rc);
}

ncclResult_t shim_fallback_run(const struct shim_op* o) {
  void* rc = NULL;
  ncclResult_t res = twin(o->comm, o->call, &rc);
  if (res != ncclSuccess) return res;
  if (o->redop >= ncclNumOps && (o->kind == SHIM_ALLREDUCE || o->kind == SHIM_REDUCESCATTER || o->kind == SHIM_REDUCE))
    return shim_fail(o->comm, ncclInvalidUsage, "%s: a pre-multiplied sum made by this library cannot go to the real "
                     "NCCL (MSCCLPP_NCCL_FALLBACK)", o->call);
  const struct real_nccl* R = &real;
  switch (o->kind) {
    case SHIM_ALLREDUCE: res = R->AllReduce(o->send, o->recv, o->count, o->dtype, o->redop, rc, o->stream); break;
    case SHIM_ALLGATHER: res = R->AllGather(o->send, o->recv, o->count, o->dtype, rc, o->stream); break;
    case SHIM_REDUCESCATTER: res = R->ReduceScatter(o->send, o->recv, o->count, o->dtype, o->redop, rc, o->stream); break;
    case SHIM_BROADCAST: res = R->Broadcast(o->send, o->recv, o->count, o->dtype, o->peer, rc, o->stream); break;
    case SHIM_REDUCE: res = R->Reduce(o->send, o->recv, o->count, o->dtype, o->redop, o->peer, rc, o->stream); break;
    case SHIM_ALLTOALL:
      if (!R->AlltoAll) return shim_fail(o->comm, ncclInvalidUsage, "%s: the real NCCL has no ncclAlltoAll", o->call);
      res = R->AlltoAll(o->send, o->recv, o->count, o->dtype, rc, o->stream);
      break;
    case SHIM_SEND: res = R->Send(o->send, o->count, o->dtype, o->peer, rc, o->stream); break;
    case SHIM_RECV: res = R->Recv(o->recv, o->count, o->dtype, o->peer, rc, o->stream); break;
    case SHIM_WINDOW: /* never forced (no MSCCLPP_NCCL_FALLBACK name) */
      return shim_fail(o->comm, ncclInternalError, "%s: a window registration reached the real NCCL", o->call);
  }
  if (res != ncclSuccess && res != ncclInProgress)
    return shim_fail(o->comm, res, "%s (real NCCL): %s", o->call, R->GetErrorString ? R->GetErrorString(res) : "");
  return ncclSuccess;
}

ncclResult_t shim_fallback_group(int start) {
  pthread_once(&load_once, load);
  if (!real.lib) return ncclSuccess;
  return start ? real.GroupStart() : real.GroupEnd();
}

ncclResult_t shim_fallback_devcomm(ncclComm_t comm, const void* reqs, void* out, int create) {
  const char* call = create ? "ncclDevCommCreate" : "ncclDevCommDestroy";
  void* rc = NULL;
  if (!real_lib(comm, call)) return ncclInvalidUsage;
  if (!(create ? (void*)real.DevCommCreate : (void*)real.DevCommDestroy))
    return shim_fail(comm, ncclInvalidUsage, "%s: the real NCCL has no device API", call);
  ncclResult_t res = twin(comm, call, &rc);
  if (res != ncclSuccess) return res;
  return create ? real.DevCommCreate(rc, reqs, out) : real.DevCommDestroy(rc, reqs);
}

void shim_fallback_free(ncclComm_t comm, int abort) {
  if (!comm->real || !real.lib) return;
  (void)(abort && real.CommAbort ? real.CommAbort(comm->real) : real.CommDestroy(comm->real));
  comm->real = NULL;
}

/* Whether comm is a twin of the real NCCL that has function fn: the real library's own call that
 * bound to this library's name. */
static int twin_call(const void* comm, const void* fn) { return real.lib && fn && shim_live_is_twin(comm); }

int shim_fallback_async_error(const void* comm, ncclResult_t* asyncError, ncclResult_t* res) {
  if (!twin_call(comm, (void*)real.CommGetAsyncError)) return 0;
  *res = real.CommGetAsyncError((void*)comm, asyncError);
  return 1;
}

int shim_fallback_register(const void* comm, void* buff, size_t size, void** handle, ncclResult_t* res) {
  if (!twin_call(comm, (void*)real.CommRegister)) return 0;
  *res = real.CommRegister((void*)comm, buff, size, handle);
  return 1;
}

int shim_fallback_deregister(const void* comm, void* handle, int window, ncclResult_t* res) {
  if (!twin_call(comm, window ? (void*)real.CommWindowDeregister : (void*)real.CommDeregister)) return 0;
  *res = window ? real.CommWindowDeregister((void*)comm, handle) : real.CommDeregister((void*)comm, handle);
  return 1;
}
