/* perf_nccl.h - mscclpp-perf's NCCL side (--nccl): opens the real NCCL with dlopen, makes its
 * communicator over the same ranks, and issues one NCCL call of a collective. No CUDA or NCCL
 * header is needed: streams and communicators are opaque pointers, and NCCL's datatype and
 * operator values equal ours. */
#ifndef MPP_TOOLS_PERF_NCCL_H_
#define MPP_TOOLS_PERF_NCCL_H_

#include <stddef.h>

#include <mscclpp/mscclpp.h>

typedef struct {
  char internal[128];
} perf_nccl_id;

/* The NCCL functions the comparison needs (every one must be found). */
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
};

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

/* Destroys the communicator (when made). */
void perf_nccl_destroy(struct perf_nccl* nc);

#endif
