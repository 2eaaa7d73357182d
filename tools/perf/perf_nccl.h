/* perf_nccl.h - mscclpp-perf's NCCL side (--nccl): opens the real NCCL with dlopen, makes its
 * communicator over the same ranks, and issues one NCCL call of a collective; --nccl-symm gives
 * NCCL its own buffers registered as symmetric windows. No CUDA or NCCL
 * header is needed: streams and communicators are opaque pointers, and NCCL's datatype and
 * operator values equal ours. */
#ifndef MPP_TOOLS_PERF_NCCL_H_
#define MPP_TOOLS_PERF_NCCL_H_

#include <stddef.h>

#include <mscclpp/mscclpp.h>

typedef struct {
  char internal[128];
} perf_nccl_id;

/* The NCCL functions the comparison needs (every one must be found), then those of symmetric
 * windows (NCCL 2.27 and later; NULL where the library lacks them). */
struct perf_nccl_api {
  const char* (*GetErrorString)(int);
  int (*GetUniqueId)(perf_nccl_id*);
  int (*CommInitRank)(void**, int, perf_nccl_id, int);
  int (*CommDestroy)(void*);
  int (*AllReduce)(const void*, void*, size_t, int, int, void*, void*);
  int (*AllGather)(const void*, void*, size_t, int, void*, void*);
  int (*ReduceScatter)(const void*, void*, size_t, int, int, void*, void*);
  int (*Broadcast)(const void*, void*, size_t, int, int, void*, void*);
  int (*Reduce)(const void*, void*, size_t, int, int, int, void*, void*);
  int (*Send)(const void*, size_t, int, int, void*, void*);
  int (*Recv)(void*, size_t, int, int, void*, void*);
  int (*GroupStart)(void);
  int (*GroupEnd)(void);
  int (*RedOpCreatePreMulSum)(int*, void*, int, int, void*);
  int (*RedOpDestroy)(int, void*);
  int (*MemAlloc)(void**, size_t);
  int (*MemFree)(void*);
  int (*CommWindowRegister)(void*, void*, size_t, void**, int);
  int (*CommWindowDeregister)(void*, void*);
};

#define PERF_NCCL_WIN_COLL_SYMMETRIC 0x01 /* nccl.h's NCCL_WIN_COLL_SYMMETRIC */
#define PERF_NCCL_WIN_ALIGN 4096          /* nccl.h's NCCL_WIN_REQUIRED_ALIGNMENT */

struct perf_nccl {
  struct perf_nccl_api api;
  void* comm;       /* NULL until perf_nccl_init */
  const char* path; /* the library that was opened */
};

/* One NCCL call: the collective (enum algo_coll), its datatype, operator and root, the ranks, the
 * API's count and element size, the buffers and the stream. */
struct perf_nccl_call {
  int coll, dtype, op, root, rank, nranks;
  size_t count, es;
  const char* in;
  char* out;
  void* stream;
};

/* Opens the real NCCL (MSCCLPP_NCCL_LIB_PATH, default libnccl.so.2; else PyTorch's nvidia-nccl
 * wheel when that variable is unset) and resolves its functions. 0, or -1 with why saying what
 * failed. Sets NCCL_NVLS_ENABLE=0 unless the environment sets it. */
int perf_nccl_load(struct perf_nccl* nc, char* why, size_t len);

/* Resolves the functions through sym(lib, "ncclName") (dlsym, or a test's table): 0, or -1 with
 * why naming the first missing one. */
int perf_nccl_resolve(struct perf_nccl* nc, void* (*sym)(void*, const char*), void* lib, char* why, size_t len);

/* Makes the NCCL communicator of the nranks ranks of comm (collective over comm: rank 0's unique
 * id goes to every rank through the bootstrap). 0, or -1 with why. */
int perf_nccl_init(struct perf_nccl* nc, mscclppComm_t comm, int rank, int nranks, char* why, size_t len);

/* Issues the call on c->stream: NCCL's collective, or grouped send/recv for alltoall (to and from
 * every rank) and sendrecv (to rank+1, from rank-1). NCCL's result (0: success). */
int perf_nccl_run(const struct perf_nccl* nc, const struct perf_nccl_call* c);

/* NCCL's send and receive buffers of --nccl-symm: from ncclMemAlloc, registered as symmetric
 * windows over the communicator. */
struct perf_nccl_symm {
  void *send, *recv;   /* bytes each; NULL until allocated */
  void *wsend, *wrecv; /* their windows; NULL until registered */
  size_t bytes;
};

/* 0 when the loaded NCCL has the four window functions, else -1 with why naming the first missing
 * one and the version that brings them. */
int perf_nccl_symm_supported(const struct perf_nccl* nc, char* why, size_t len);

/* Allocates both buffers with ncclMemAlloc (local, not collective), of bytes rounded up to
 * PERF_NCCL_WIN_ALIGN (w->bytes): 0, or -1 with why and nothing left allocated. */
int perf_nccl_symm_alloc(const struct perf_nccl* nc, struct perf_nccl_symm* w, size_t bytes, char* why, size_t len);

/* Registers send, then recv, as symmetric windows of their whole size: collective over the NCCL
 * communicator, so every rank calls it (with buffers of the same size) or none does. 0, or -1 with
 * why; what was registered stays for perf_nccl_symm_release. */
int perf_nccl_symm_register(const struct perf_nccl* nc, struct perf_nccl_symm* w, char* why, size_t len);

/* Deregisters what was registered (collective, as the registration; recv's window, then send's),
 * then frees both buffers; *w is zeroed. The caller's work on them has finished. */
void perf_nccl_symm_release(const struct perf_nccl* nc, struct perf_nccl_symm* w);

/* Destroys the communicator (when made). */
void perf_nccl_destroy(struct perf_nccl* nc);

#endif
