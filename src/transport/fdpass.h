/* fdpass.h - the fd service: hands the file descriptors behind exported memory (memfd host memory,
 * cuMem allocations) to other processes of this host over a UNIX domain socket (SCM_RIGHTS).
 *
 * One service per communicator and rank: a thread serving the abstract-namespace socket
 * "\0mscclpp-fd-<comm id>-<rank>". A request names the communicator, the requesting rank and an
 * export id with its 64-bit random key; only a request whose comm id and key both match gets the
 * fd, so a process that never received the registered-memory blob cannot fetch it. Requests are
 * read with a short bound, so a stalled client cannot block the service for long. */
#ifndef MPP_TRANSPORT_FDPASS_H_
#define MPP_TRANSPORT_FDPASS_H_

#include <stdint.h>

#include <mscclpp/core.h>

struct fd_service;

/* An export as a peer names it (what shm and cuda-ipc add to a buffer's description). */
struct fd_ref {
  uint64_t id;  /* export id in the owner's service */
  uint64_t key; /* ... and the secret that fetches it */
};
#define FD_REF_WIRE_BYTES 16
/* Its wire form (little endian id, key), and back. */
void fd_ref_encode(const struct fd_ref* e, uint8_t* out);
void fd_ref_decode(const uint8_t* in, struct fd_ref* e);

/* Starts rank's service for communicator comm_id (nranks bounds the requesting rank). */
mscclppResult_t fd_service_start(uint64_t comm_id, int rank, int nranks, struct fd_service** out);
/* Stops the thread (without waiting for any peer), closes every exported fd and frees s. */
void fd_service_stop(struct fd_service* s);
/* Exports fd (the service takes ownership of it) describing size bytes; returns its id and key. */
mscclppResult_t fd_service_add(struct fd_service* s, int fd, uint64_t size, uint64_t* id, uint64_t* key);
/* Withdraws an export and closes its fd. Unknown ids are ignored. */
void fd_service_remove(struct fd_service* s, uint64_t id);

/* Fetches export id (with key) from owner's service within timeout_ms: *fd gets a new descriptor
 * (CLOEXEC) and *size the exported size. Errors name the owner rank and the reason. */
mscclppResult_t fd_fetch(uint64_t comm_id, int my_rank, int owner, uint64_t id, uint64_t key, int64_t timeout_ms,
                         int* fd, uint64_t* size);

#endif /* MPP_TRANSPORT_FDPASS_H_ */
