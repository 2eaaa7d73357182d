/* cudaipc.c - the P2P transport: GPU memory between processes of one host. cudaMalloc memory is
 * shared with a legacy CUDA IPC handle of its allocation base (plus the offset into it); cuMem
 * memory by its POSIX fd, passed through the fd service and mapped into a reserved range here.
 * Writes are cudaMemcpyAsync on the connection's own non-blocking stream; flush polls that stream
 * against a deadline. Without CUDA in the build the transport exports and imports nothing and its
 * connections are refused. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sys/cudawrap.h"
#include "transport/fdpass.h"
#include "transport/transport.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/timeutil.h"

/* What cuda-ipc adds to a buffer's description: the cuMem allocation's export in the owner's fd
 * service (CUDA_VMM), or the legacy IPC handle of the cudaMalloc allocation (CUDA_IPC); and the
 * allocation's address in the owner's process, which a GPU rank of that same process uses as it
 * is (CUDA refuses to open an IPC handle in the process that made it). */
#define IPC_HANDLE_BYTES 64
struct cuda_part {
  struct fd_ref fd;
  uint8_t ipc_handle[IPC_HANDLE_BYTES];
  uint64_t base;
};
_Static_assert(sizeof(struct cuda_part) <= TRANSPORT_PART_BYTES, "cuda-ipc's part must fit");
#define CUDA_PART_WIRE_BYTES (FD_REF_WIRE_BYTES + IPC_HANDLE_BYTES + 8)

#if MSCCLPP_HAVE_CUDA

static struct cuda_part* cuda_part(struct regmem_desc* d) { return (struct cuda_part*)(void*)&d->part[mscclppTransportP2P]; }

struct cuda_conn {
  cudaStream_t stream; /* non-blocking: the connection's copies, in issue order */
  cudaEvent_t fence;   /* recorded on the legacy default stream before each copy (see after_default) */
  int dev;
};

/* Makes the connection's stream wait for everything queued so far on this device's legacy default
 * stream (cudaMemcpy from pageable memory, cudaMemset, kernels launched without a stream), so that
 * a write copies the data that work produced and a signal follows it. Work on the caller's own
 * streams is the caller's to synchronize. Host-side it does not block. */
static cudaError_t after_default(struct cuda_conn* c) {
  cudaError_t e = cudaEventRecord(c->fence, cudaStreamLegacy);
  return e == cudaSuccess ? cudaStreamWaitEvent(c->stream, c->fence, 0) : e;
}

/* Makes dev the calling thread's current device; returns the previous one for dev_leave. */
static int dev_enter(int dev) {
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
  if (dev >= 0 && prev != dev) (void)cudaSetDevice(dev);
  return prev;
}
static void dev_leave(int prev, int dev) {
  if (prev >= 0 && prev != dev) (void)cudaSetDevice(prev);
}

/* Exports cuMem memory: its allocation handle as a POSIX fd through the fd service. Memory whose
 * allocation was not created exportable stays reachable over tcp only. */
static mscclppResult_t export_vmm(struct transport_mem* mem) {
  CUmemGenericAllocationHandle h;
  CU_CHECK(cu.cuMemRetainAllocationHandle(&h, mem->ptr));
  int fd = -1;
  CUresult r = cu.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  cu.cuMemRelease(h); /* drops the reference the retain took */
  if (r != CUDA_SUCCESS) {
    LOG_INFO_(LOG_SUB_MEM, "cuMem memory %p is not exportable as a POSIX fd (error %d); reachable over tcp only",
              mem->ptr, (int)r);
    return mscclppSuccess;
  }
  MPP_CHECK(fd_service_add(mem->tc->fds, fd, mem->d.alloc_size, &cuda_part(&mem->d)->fd.id, &cuda_part(&mem->d)->fd.key));
  mem->d.transports |= TRANSPORT_BIT(mscclppTransportP2P);
  return mscclppSuccess;
}

static mscclppResult_t cuda_export(struct transport_mem* mem, const struct mem_info* info) {
  if (info->kind != MEM_KIND_CUDA_IPC && info->kind != MEM_KIND_CUDA_VMM) return mscclppSuccess;
  cuda_part(&mem->d)->base = (uint64_t)(uintptr_t)info->base;
  if (info->kind == MEM_KIND_CUDA_VMM) return export_vmm(mem);
  cudaIpcMemHandle_t h;
  _Static_assert(sizeof(h) == IPC_HANDLE_BYTES, "cudaIpcMemHandle_t size");
  CUDA_CHECK(cudaIpcGetMemHandle(&h, info->base));
  memcpy(cuda_part(&mem->d)->ipc_handle, &h, sizeof(h));
  mem->d.transports |= TRANSPORT_BIT(mscclppTransportP2P);
  return mscclppSuccess;
}

static void cuda_unexport(struct transport_mem* mem) {
  if (mem->d.kind == MEM_KIND_CUDA_VMM) fd_service_remove(mem->tc->fds, cuda_part(&mem->d)->fd.id);
}

/* A cudaMalloc allocation of a GPU rank of this process: its own address, reached from this rank's
 * device (current) once peer access to the owner's device is on. */
static mscclppResult_t import_same_process(struct transport_mem* mem) {
  struct regmem_desc* d = &mem->d;
  int dev = mem->tc->cuda_dev, can = 0;
  if (d->cuda_dev != dev) {
    CUDA_CHECK(cudaDeviceCanAccessPeer(&can, dev, d->cuda_dev));
    if (!can)
      return MPP_ERR(mscclppInvalidUsage, "p2p: GPU %d cannot access GPU %d (rank %d's buffer, in this process)", dev,
                     d->cuda_dev, d->owner);
    cudaError_t e = cudaDeviceEnablePeerAccess(d->cuda_dev, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError(); /* on already: what is wanted */
    else if (e != cudaSuccess) return cuda_error(e, "cudaDeviceEnablePeerAccess", __FILE__, __LINE__);
  }
  mem->ptr = (char*)(uintptr_t)cuda_part(d)->base + d->alloc_offset;
  return mscclppSuccess;
}

/* The legacy IPC handles this process has open. CUDA maps a handle once per process and refuses a
 * second open of it (cudaErrorAlreadyMapped): small cudaMalloc buffers share their allocation, so
 * two registrations, of one peer or of one buffer made again, can name the same one. Counted, and
 * closed when the last import of it goes. */
struct ipc_open {
  uint8_t handle[IPC_HANDLE_BYTES];
  int dev;
  void* base;
  int refs;
};
static struct {
  pthread_mutex_t lock;
  struct ipc_open* v;
  int n, cap;
} ipc_opens = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The mapping of handle h on device dev: opened now, or the one already open (one more user). */
static mscclppResult_t ipc_open_get(const uint8_t* h, int dev, void** base) {
  pthread_mutex_lock(&ipc_opens.lock);
  for (int i = 0; i < ipc_opens.n; i++)
    if (ipc_opens.v[i].dev == dev && memcmp(ipc_opens.v[i].handle, h, IPC_HANDLE_BYTES) == 0) {
      ipc_opens.v[i].refs++;
      *base = ipc_opens.v[i].base;
      pthread_mutex_unlock(&ipc_opens.lock);
      return mscclppSuccess;
    }
  mscclppResult_t res = mscclppSuccess;
  if (ipc_opens.n == ipc_opens.cap) {
    int cap = ipc_opens.cap ? 2 * ipc_opens.cap : 16;
    struct ipc_open* v = realloc(ipc_opens.v, (size_t)cap * sizeof(*v));
    if (v == NULL) res = MPP_ERR(mscclppSystemError, "p2p: out of host memory");
    else ipc_opens.v = v, ipc_opens.cap = cap;
  }
  cudaIpcMemHandle_t ch;
  memcpy(&ch, h, sizeof(ch));
  cudaError_t ce = res == mscclppSuccess ? cudaIpcOpenMemHandle(base, ch, cudaIpcMemLazyEnablePeerAccess) : cudaSuccess;
  if (ce != cudaSuccess) res = cuda_error(ce, "cudaIpcOpenMemHandle of a peer's cudaMalloc buffer", __FILE__, __LINE__);
  if (res == mscclppSuccess) {
    struct ipc_open* o = &ipc_opens.v[ipc_opens.n++];
    memcpy(o->handle, h, IPC_HANDLE_BYTES);
    o->dev = dev, o->base = *base, o->refs = 1;
  }
  pthread_mutex_unlock(&ipc_opens.lock);
  return res;
}

/* One user of the mapping at base fewer; the last one closes it. */
static void ipc_open_put(void* base) {
  pthread_mutex_lock(&ipc_opens.lock);
  for (int i = 0; i < ipc_opens.n; i++)
    if (ipc_opens.v[i].base == base) {
      if (--ipc_opens.v[i].refs == 0) {
        cudaIpcCloseMemHandle(base);
        ipc_opens.v[i] = ipc_opens.v[--ipc_opens.n];
      }
      break;
    }
  pthread_mutex_unlock(&ipc_opens.lock);
}

/* Opens a peer's cudaMalloc allocation and checks it is as large as the blob says. */
static mscclppResult_t import_legacy(struct transport_mem* mem) {
  struct regmem_desc* d = &mem->d;
  if (d->pid == (int32_t)getpid()) return import_same_process(mem);
  void* base = NULL;
  MPP_CHECK(ipc_open_get(cuda_part(d)->ipc_handle, mem->tc->cuda_dev, &base));
  CUdeviceptr rbase = 0;
  size_t rsize = 0;
  if (cu.cuMemGetAddressRange(&rbase, &rsize, (CUdeviceptr)base) != CUDA_SUCCESS || d->alloc_offset > rsize ||
      d->size > rsize - d->alloc_offset) {
    ipc_open_put(base);
    return MPP_ERR(mscclppRemoteError, "p2p: rank %d's allocation has %zu bytes, its blob claims %llu at offset %llu",
                   d->owner, rsize, (unsigned long long)d->size, (unsigned long long)d->alloc_offset);
  }
  mem->map_base = base;
  mem->ptr = (char*)base + d->alloc_offset;
  return mscclppSuccess;
}

/* Maps a peer's cuMem allocation (fd fetched from its fd service) for this rank's device. */
static mscclppResult_t import_vmm(struct transport_mem* mem) {
  struct transport_comm* tc = mem->tc;
  struct regmem_desc* d = &mem->d;
  int fd = -1;
  uint64_t exported = 0;
  const struct fd_ref* e = &cuda_part(d)->fd;
  MPP_CHECK(fd_fetch(fd_service_key(tc->fds), tc->rank, d->owner, e->id, e->key, tc->timeout_ms, &fd, &exported));
  if (exported != d->alloc_size) {
    close(fd);
    return MPP_ERR(mscclppRemoteError, "p2p: rank %d exported %llu bytes, its blob claims %llu", d->owner,
                   (unsigned long long)exported, (unsigned long long)d->alloc_size);
  }
  CUmemGenericAllocationHandle h;
  CUresult r = cu.cuMemImportFromShareableHandle(&h, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  close(fd);
  if (r != CUDA_SUCCESS) return cu_error(r, "cuMemImportFromShareableHandle of a peer's cuMem buffer", __FILE__, __LINE__);
  CUdeviceptr va = 0;
  size_t len = (size_t)d->alloc_size;
  r = cu.cuMemAddressReserve(&va, len, 0, 0, 0);
  if (r != CUDA_SUCCESS) goto err_release;
  r = cu.cuMemMap(va, len, 0, h, 0);
  if (r != CUDA_SUCCESS) goto err_free_va;
  CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = tc->cuda_dev},
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  r = cu.cuMemSetAccess(va, len, &access, 1);
  if (r != CUDA_SUCCESS) goto err_unmap;
  mem->map_base = (void*)va;
  mem->map_len = len;
  mem->handle = (uint64_t)h;
  mem->ptr = (char*)va + d->alloc_offset;
  return mscclppSuccess;
err_unmap:
  cu.cuMemUnmap(va, len);
err_free_va:
  cu.cuMemAddressFree(va, len);
err_release:
  cu.cuMemRelease(h);
  return cu_error(r, "p2p: mapping a peer's cuMem buffer", __FILE__, __LINE__);
}

static mscclppResult_t cuda_import(struct transport_mem* mem) {
  struct transport_comm* tc = mem->tc;
  if (!transport_same_host(tc, mem->d.owner) || tc->kind != mscclppRankGpu || tc->cuda_dev < 0 || !cu_available())
    return mscclppSuccess; /* not reachable from here: the buffer stays unmapped */
  int prev = dev_enter(tc->cuda_dev);
  mscclppResult_t res = mem->d.kind == MEM_KIND_CUDA_VMM ? import_vmm(mem) : import_legacy(mem);
  dev_leave(prev, tc->cuda_dev);
  if (res == mscclppSuccess) mem->is_device = 1;
  return res;
}

static void cuda_unimport(struct transport_mem* mem) {
  if (mem->map_base == NULL) return;
  if (mem->d.kind == MEM_KIND_CUDA_VMM) {
    CUdeviceptr va = (CUdeviceptr)mem->map_base;
    cu.cuMemUnmap(va, mem->map_len);
    cu.cuMemAddressFree(va, mem->map_len);
    cu.cuMemRelease((CUmemGenericAllocationHandle)mem->handle);
  } else {
    ipc_open_put(mem->map_base);
  }
  mem->map_base = NULL;
  mem->ptr = NULL;
}

static mscclppResult_t cuda_connect(struct transport_conn* conn) {
  struct transport_comm* tc = conn->tc;
  if (!cu_available() || tc->cuda_dev < 0)
    return MPP_ERR(mscclppInvalidUsage, "p2p connection to rank %d: this rank has no usable CUDA device", conn->peer);
  struct cuda_conn* c = calloc(1, sizeof(*c));
  if (c == NULL) return MPP_ERR(mscclppSystemError, "p2p: out of host memory");
  c->dev = tc->cuda_dev;
  int prev = dev_enter(c->dev);
  cudaError_t ce = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
  if (ce == cudaSuccess) {
    ce = cudaEventCreateWithFlags(&c->fence, cudaEventDisableTiming);
    if (ce != cudaSuccess) cudaStreamDestroy(c->stream);
  }
  dev_leave(prev, c->dev);
  if (ce != cudaSuccess) {
    free(c);
    return cuda_error(ce, "p2p: creating the connection's stream and event", __FILE__, __LINE__);
  }
  conn->priv = c;
  return mscclppSuccess;
}

/* Polls the connection's stream until its work is done, or Timeout at timeout_ms. */
static mscclppResult_t stream_wait(struct transport_conn* conn, int64_t timeout_ms) {
  struct cuda_conn* c = conn->priv;
  uint64_t start = time_now_ns(), deadline = time_deadline_ms(timeout_ms);
  for (;;) {
    cudaError_t ce = cudaStreamQuery(c->stream);
    if (ce == cudaSuccess) return mscclppSuccess;
    if (ce != cudaErrorNotReady) return cuda_error(ce, "p2p flush: cudaStreamQuery", __FILE__, __LINE__);
    uint64_t now = time_now_ns();
    if (now >= deadline)
      return MPP_ERR(mscclppTimeout, "p2p flush to rank %d (tag %d): copies not done within %lld ms", conn->peer,
                     conn->tag, (long long)timeout_ms);
    if (now - start < 100000) sched_yield();
    else usleep(20);
  }
}

static mscclppResult_t cuda_write(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                  struct transport_mem* src, uint64_t src_off, uint64_t size) {
  struct cuda_conn* c = conn->priv;
  if (size == 0) return mscclppSuccess;
  int prev = dev_enter(c->dev);
  cudaError_t ce = after_default(c);
  if (ce == cudaSuccess)
    ce = cudaMemcpyAsync((char*)dst->ptr + dst_off, (const char*)src->ptr + src_off, (size_t)size, cudaMemcpyDefault,
                         c->stream);
  dev_leave(prev, c->dev);
  if (ce != cudaSuccess) {
    (void)cudaGetLastError();
    return MPP_ERR(mscclppUnhandledCudaError, "p2p write of %llu bytes to rank %d (offset %llu): cudaMemcpyAsync: %s",
                   (unsigned long long)size, conn->peer, (unsigned long long)dst_off, cudaGetErrorString(ce));
  }
  return mscclppSuccess;
}

/* Both orders start after the legacy default stream's work so far (after_default). GPU destination:
 * the word is one more copy on the connection's stream, which runs after every earlier copy of the
 * stream has completed, so the peer sees it after the data. Host destination (a host semaphore's
 * token, mapped through shm): the stream is drained first (bounded by MSCCLPP_FLUSH_TIMEOUT), then
 * the word is stored with release order. */
static mscclppResult_t cuda_update(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                   uint64_t new_value) {
  struct cuda_conn* c = conn->priv;
  char* to = (char*)dst->ptr + dst_off;
  int prev = dev_enter(c->dev);
  cudaError_t ce = after_default(c);
  dev_leave(prev, c->dev);
  if (ce != cudaSuccess) return cuda_error(ce, "p2p update: ordering after the default stream", __FILE__, __LINE__);
  if (!dst->is_device) {
    MPP_CHECK(stream_wait(conn, param_int(PARAM_FLUSH_TIMEOUT)));
    /* Release: the peer that acquire-loads the word also sees what the drained copies wrote. */
    atomic_store_explicit((_Atomic uint64_t*)(void*)to, new_value, memory_order_release);
    return mscclppSuccess;
  }
  prev = dev_enter(c->dev);
  /* From pageable memory: the value is staged before cudaMemcpyAsync returns, so a local is fine. */
  ce = cudaMemcpyAsync(to, &new_value, sizeof(new_value), cudaMemcpyHostToDevice, c->stream);
  dev_leave(prev, c->dev);
  if (ce != cudaSuccess) {
    (void)cudaGetLastError();
    return MPP_ERR(mscclppUnhandledCudaError, "p2p update of rank %d's word at offset %llu: cudaMemcpyAsync: %s",
                   conn->peer, (unsigned long long)dst_off, cudaGetErrorString(ce));
  }
  return mscclppSuccess;
}

static mscclppResult_t cuda_flush(struct transport_conn* conn, int64_t timeout_ms) { return stream_wait(conn, timeout_ms); }

/* Normal close drains the stream (bounded); abort destroys it at once (CUDA releases it when the
 * queued copies are done). */
static void cuda_close(struct transport_conn* conn, int abort) {
  struct cuda_conn* c = conn->priv;
  if (c == NULL) return;
  if (!abort && stream_wait(conn, param_int(PARAM_FLUSH_TIMEOUT)) != mscclppSuccess)
    log_msg(LOG_WARN, LOG_SUB_TRANSPORT, "p2p connection to rank %d closed with copies still pending", conn->peer);
  int prev = dev_enter(c->dev);
  cudaStreamDestroy(c->stream);
  cudaEventDestroy(c->fence);
  dev_leave(prev, c->dev);
  free(c);
  conn->priv = NULL;
}

#else /* !MSCCLPP_HAVE_CUDA: no GPU memory to export or import, and no connections. */

static mscclppResult_t cuda_export(struct transport_mem* mem, const struct mem_info* info) {
  (void)mem;
  (void)info;
  return mscclppSuccess;
}
static void cuda_unexport(struct transport_mem* mem) { (void)mem; }
static mscclppResult_t cuda_import(struct transport_mem* mem) {
  (void)mem;
  return mscclppSuccess;
}
static void cuda_unimport(struct transport_mem* mem) { (void)mem; }
static mscclppResult_t cuda_connect(struct transport_conn* conn) {
  return MPP_ERR(mscclppInvalidUsage, "p2p connection to rank %d: the library was built without CUDA", conn->peer);
}
static mscclppResult_t cuda_write(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                  struct transport_mem* src, uint64_t src_off, uint64_t size) {
  (void)dst, (void)dst_off, (void)src, (void)src_off, (void)size;
  return MPP_ERR(mscclppInvalidUsage, "p2p write to rank %d: the library was built without CUDA", conn->peer);
}
static mscclppResult_t cuda_update(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                   uint64_t new_value) {
  (void)dst, (void)dst_off, (void)new_value;
  return MPP_ERR(mscclppInvalidUsage, "p2p update to rank %d: the library was built without CUDA", conn->peer);
}
static mscclppResult_t cuda_flush(struct transport_conn* conn, int64_t timeout_ms) {
  (void)timeout_ms;
  return MPP_ERR(mscclppInvalidUsage, "p2p flush to rank %d: the library was built without CUDA", conn->peer);
}
static void cuda_close(struct transport_conn* conn, int abort) {
  (void)conn;
  (void)abort;
}

#endif

/* Two GPU ranks of one host, in a build with CUDA. */
static const char* cuda_unusable(const struct transport_comm* tc, int peer) {
#if !MSCCLPP_HAVE_CUDA
  (void)tc;
  (void)peer;
  return "the library was built without CUDA";
#else
  if (!transport_same_host(tc, peer)) return "the two ranks are on different hosts";
  return tc->peers[tc->rank].kind == mscclppRankGpu && tc->peers[peer].kind == mscclppRankGpu ? NULL
                                                                                                : "both ranks must be GPU ranks";
#endif
}

static void cuda_encode_part(const union transport_part* part, uint8_t* out) {
  const struct cuda_part* p = (const struct cuda_part*)(const void*)part;
  fd_ref_encode(&p->fd, out);
  memcpy(out + FD_REF_WIRE_BYTES, p->ipc_handle, IPC_HANDLE_BYTES);
  for (int i = 0; i < 8; i++) out[FD_REF_WIRE_BYTES + IPC_HANDLE_BYTES + i] = (uint8_t)(p->base >> (8 * i));
}

static mscclppResult_t cuda_decode_part(const uint8_t* in, const struct regmem_desc* d, union transport_part* part) {
  (void)d;
  struct cuda_part* p = (struct cuda_part*)(void*)part;
  fd_ref_decode(in, &p->fd);
  memcpy(p->ipc_handle, in + FD_REF_WIRE_BYTES, IPC_HANDLE_BYTES);
  p->base = 0;
  for (int i = 0; i < 8; i++) p->base |= (uint64_t)in[FD_REF_WIRE_BYTES + IPC_HANDLE_BYTES + i] << (8 * i);
  return mscclppSuccess;
}

const struct transport_ops cudaipc_transport = {
    .name = "cuda-ipc",
    .api_name = "p2p",
    .id = mscclppTransportP2P,
    .mem_kinds = (1u << MEM_KIND_CUDA_IPC) | (1u << MEM_KIND_CUDA_VMM),
    /* A semaphore token is host memory: shm maps it for cuda-ipc's update to store into. */
    .token_import = TRANSPORT_BIT(mscclppTransportP2P) | TRANSPORT_BIT(mscclppTransportSHM),
    .maps_memory = 1,
    .unreachable_why = "it is not mapped here (P2P needs cudaMalloc/cuMem memory or mscclppMemAlloc memory of a rank of "
                       "this host, imported by a GPU rank)",
    .part_wire_bytes = CUDA_PART_WIRE_BYTES,
    .unusable = cuda_unusable,
    .encode_part = cuda_encode_part,
    .decode_part = cuda_decode_part,
    .export_mem = cuda_export,
    .unexport_mem = cuda_unexport,
    .import_mem = cuda_import,
    .unimport_mem = cuda_unimport,
    .connect = cuda_connect,
    .write = cuda_write,
    .update_and_sync = cuda_update,
    .flush = cuda_flush,
    .status = NULL,
    .close = cuda_close,
};
