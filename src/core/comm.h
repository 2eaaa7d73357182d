/* comm.h - the communicator as the layers above the bootstrap see it. */
#ifndef MPP_CORE_COMM_H_
#define MPP_CORE_COMM_H_

#include <stdint.h>

#include <mscclpp/comm.h>

struct bootstrap;
struct transport_state;

/* What every rank tells the others at init (allgathered, fixed layout). */
struct peer_info {
  int32_t rank;
  int32_t kind;     /* mscclppRankKind_t: Cpu or Gpu */
  int32_t cuda_dev; /* -1 for CPU ranks */
  int32_t pid;
  uint64_t host_hash; /* equal for ranks of one host (host name + boot id) */
  uint64_t comm_id;   /* rank 0's value is the communicator's id */
  char bus_id[16];    /* PCI bus id of the GPU, "" for CPU ranks */
};

struct mscclppComm {
  int rank, nranks;
  int local_rank, local_size; /* among ranks with our host_hash */
  int kind;                   /* mscclppRankKind_t of this rank */
  int cuda_dev;
  uint64_t comm_id;           /* random, shared by all ranks: tags blobs of this communicator */
  int timeout_ms;             /* bootstrap bound */
  struct bootstrap* boot;
  struct peer_info* peers;    /* nranks entries */
  struct transport_state* tstate; /* owned by core/transports.c */
};

/* Starts and stops what the transports keep per communicator (services, listeners). Called at
 * the end of init and at the start of destroy/abort; abort != 0 must not wait for peers. */
mscclppResult_t transports_init(struct mscclppComm* comm);
void transports_fini(struct mscclppComm* comm, int abort);

/* Validates a communicator handle at a public entry point. */
#define COMM_CHECK(comm) MPP_CHECK_ARG((comm) != NULL, "%s: communicator is NULL", __func__)

#endif /* MPP_CORE_COMM_H_ */
