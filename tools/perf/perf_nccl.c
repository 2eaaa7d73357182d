/* perf_nccl.c - mscclpp-perf's NCCL side (perf_nccl.h). */
#include "perf_nccl.h"

#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>

#include "algo/algo.h"
#include "util/param.h"

/* Opens the real NCCL: MSCCLPP_NCCL_LIB_PATH (default libnccl.so.2 on the loader's path), else the
 * nvidia-nccl wheel that PyTorch installs (site-packages/nvidia/nccl/lib/libnccl.so.2). */
static void* nccl_open(const char** used) {
  const char* path = param_str(PARAM_NCCL_LIB_PATH);
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  *used = path;
  if (lib != NULL || getenv("MSCCLPP_NCCL_LIB_PATH") != NULL) return lib;
  static const char* const pats[] = {"/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
                                     "/usr/local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
                                     "/usr/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
                                     "/opt/*/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
                                     "/root/.local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2"};
  static char found[4096];
  for (size_t i = 0; i < sizeof(pats) / sizeof(pats[0]) && lib == NULL; i++) {
    glob_t gl;
    if (glob(pats[i], 0, NULL, &gl) == 0 && gl.gl_pathc > 0) {
      snprintf(found, sizeof(found), "%s", gl.gl_pathv[0]);
      lib = dlopen(found, RTLD_NOW | RTLD_LOCAL);
      if (lib != NULL) *used = found;
    }
    globfree(&gl);
  }
  return lib;
}

static int missing(const struct perf_nccl* nc, const char* name, char* why, size_t len) {
  snprintf(why, len, "%s has no %s", nc->path ? nc->path : "the NCCL library", name);
  return -1;
}

int perf_nccl_resolve(struct perf_nccl* nc, void* (*sym)(void*, const char*), void* lib, char* why, size_t len) {
#define SYM(name)                                                          \
  do {                                                                     \
    *(void**)&nc->api.name = sym(lib, "nccl" #name);                       \
    if (nc->api.name == NULL) return missing(nc, "nccl" #name, why, len); \
  } while (0)
  SYM(GetErrorString);
  SYM(GetUniqueId);
  SYM(CommInitRank);
  SYM(CommDestroy);
  SYM(AllReduce);
  SYM(AllGather);
  SYM(ReduceScatter);
  SYM(Broadcast);
  SYM(Reduce);
  SYM(Send);
  SYM(Recv);
  SYM(GroupStart);
  SYM(GroupEnd);
  SYM(RedOpCreatePreMulSum);
  SYM(RedOpDestroy);
#undef SYM
  /* optional: symmetric windows (perf_nccl_symm_supported tells) */
  *(void**)&nc->api.MemAlloc = sym(lib, "ncclMemAlloc");
  *(void**)&nc->api.MemFree = sym(lib, "ncclMemFree");
  *(void**)&nc->api.CommWindowRegister = sym(lib, "ncclCommWindowRegister");
  *(void**)&nc->api.CommWindowDeregister = sym(lib, "ncclCommWindowDeregister");
  return 0;
}

int perf_nccl_load(struct perf_nccl* nc, char* why, size_t len) {
  /* Never let NCCL create NVLink multicast objects on the shared machines (design.md). */
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  void* lib = nccl_open(&nc->path);
  if (lib == NULL) return snprintf(why, len, "dlopen: %s (set MSCCLPP_NCCL_LIB_PATH)", dlerror()), -1;
  return perf_nccl_resolve(nc, dlsym, lib, why, len);
}

int perf_nccl_init(struct perf_nccl* nc, mscclppComm_t comm, int rank, int nranks, char* why, size_t len) {
  perf_nccl_id* ids = calloc((size_t)nranks, sizeof(perf_nccl_id));
  if (ids == NULL) return snprintf(why, len, "out of memory"), -1;
  int r = rank == 0 ? nc->api.GetUniqueId(&ids[0]) : 0;
  if (r != 0) snprintf(why, len, "ncclGetUniqueId: %s", nc->api.GetErrorString(r)); /* the others wait: exit */
  else if (mscclppBootstrapAllGather(comm, ids, sizeof(perf_nccl_id)) != mscclppSuccess)
    r = -1, snprintf(why, len, "exchanging NCCL's unique id: %s", mscclppGetLastError());
  else if ((r = nc->api.CommInitRank(&nc->comm, nranks, ids[0], rank)) != 0)
    snprintf(why, len, "ncclCommInitRank: %s", nc->api.GetErrorString(r)), nc->comm = NULL;
  free(ids);
  return r != 0 ? -1 : 0;
}

int perf_nccl_run(const struct perf_nccl* nc, const struct perf_nccl_call* c) {
  const struct perf_nccl_api* a = &nc->api;
  int t = c->dtype, n = c->nranks, next = (c->rank + 1) % n, prev = (c->rank + n - 1) % n;
  void *comm = nc->comm, *st = c->stream;
  switch (c->coll) {
    case ALGO_COLL_ALLREDUCE: return a->AllReduce(c->in, c->out, c->count, t, c->op, comm, st);
    case ALGO_COLL_ALLGATHER: return a->AllGather(c->in, c->out, c->count, t, comm, st);
    case ALGO_COLL_REDUCESCATTER: return a->ReduceScatter(c->in, c->out, c->count, t, c->op, comm, st);
    case ALGO_COLL_BROADCAST: return a->Broadcast(c->in, c->out, c->count, t, c->root, comm, st);
    case ALGO_COLL_REDUCE: return a->Reduce(c->in, c->out, c->count, t, c->op, c->root, comm, st);
    default: break;
  }
  int r = a->GroupStart(), all = c->coll == ALGO_COLL_ALLTOALL;
  for (int q = 0; q < n && r == 0; q++) {
    if (!all && q != next && q != prev) continue;
    size_t at = all ? (size_t)q * c->count * c->es : 0;
    if (q == next || all) r = a->Send(c->in + at, c->count, t, q, comm, st);
    if (r == 0 && (q == prev || all)) r = a->Recv(c->out + at, c->count, t, q, comm, st);
  }
  int r2 = a->GroupEnd();
  return r != 0 ? r : r2;
}

void perf_nccl_destroy(struct perf_nccl* nc) {
  if (nc->comm != NULL) nc->api.CommDestroy(nc->comm);
  nc->comm = NULL;
}

int perf_nccl_symm_supported(const struct perf_nccl* nc, char* why, size_t len) {
  const char* name = !nc->api.MemAlloc                 ? "ncclMemAlloc"
                     : !nc->api.MemFree                ? "ncclMemFree"
                     : !nc->api.CommWindowRegister     ? "ncclCommWindowRegister"
                     : !nc->api.CommWindowDeregister   ? "ncclCommWindowDeregister"
                                                       : NULL;
  if (name == NULL) return 0;
  snprintf(why, len, "%s has no %s (symmetric windows need NCCL 2.27 or later)", nc->path ? nc->path : "the NCCL library",
           name);
  return -1;
}

int perf_nccl_symm_alloc(const struct perf_nccl* nc, struct perf_nccl_symm* w, size_t bytes, char* why, size_t len) {
  bytes = (bytes + PERF_NCCL_WIN_ALIGN - 1) / PERF_NCCL_WIN_ALIGN * PERF_NCCL_WIN_ALIGN;
  *w = (struct perf_nccl_symm){.bytes = bytes};
  int r = nc->api.MemAlloc(&w->send, bytes);
  if (r == 0) r = nc->api.MemAlloc(&w->recv, bytes);
  if (r == 0) return 0;
  snprintf(why, len, "ncclMemAlloc of %zu bytes: %s", bytes, nc->api.GetErrorString(r));
  if (w->send != NULL) nc->api.MemFree(w->send);
  *w = (struct perf_nccl_symm){0};
  return -1;
}

int perf_nccl_symm_register(const struct perf_nccl* nc, struct perf_nccl_symm* w, char* why, size_t len) {
  const struct perf_nccl_api* a = &nc->api;
  int r = a->CommWindowRegister(nc->comm, w->send, w->bytes, &w->wsend, PERF_NCCL_WIN_COLL_SYMMETRIC);
  if (r == 0) r = a->CommWindowRegister(nc->comm, w->recv, w->bytes, &w->wrecv, PERF_NCCL_WIN_COLL_SYMMETRIC);
  if (r == 0) return 0;
  snprintf(why, len, "ncclCommWindowRegister (NCCL_WIN_COLL_SYMMETRIC, %zu bytes): %s", w->bytes, a->GetErrorString(r));
  return -1;
}

void perf_nccl_symm_release(const struct perf_nccl* nc, struct perf_nccl_symm* w) {
  const struct perf_nccl_api* a = &nc->api;
  if (w->wrecv != NULL) a->CommWindowDeregister(nc->comm, w->wrecv);
  if (w->wsend != NULL) a->CommWindowDeregister(nc->comm, w->wsend);
  if (w->recv != NULL) a->MemFree(w->recv);
  if (w->send != NULL) a->MemFree(w->send);
  *w = (struct perf_nccl_symm){0};
}
