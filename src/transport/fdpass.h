/* fdpass.h - the fd service: hands the file descriptors behind exported memory (memfd host memory,
 * cuMem allocations) to other processes of this host over a UNIX domain socket (SCM_RIGHTS).
 *
 * One service per communicator and rank: a thread serving the abstract-namespace socket
 * "\0mscclpp-fd-<24 hex digits>-<rank>", the digits an HMAC of the rank under the communicator's
 * key (bootstrap_derive_key): only the communicator's ranks can compute a service's name, so no
 * stranger can take it first. A request (the requesting rank, the service's rank, an export id and
 * its 64-bit random key) opens a handshake (util/auth.h) keyed by the communicator's key: the
 * service proves the key before the client sends its proof, the client proves it before the
 * service looks at the export. Only an authenticated request whose export key matches gets the fd.
 * Connections are served at once by poll, each bounded by 2 s, at most 64 at a time (the oldest
 * is dropped beyond), so silent connections hold up no real peer. */
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

#define FD_KEY_BYTES 32
/* Starts rank's service for the communicator whose key is key (nranks bounds the requesting rank). */
mscclppResult_t fd_service_start(const uint8_t key[FD_KEY_BYTES], int rank, int nranks, struct fd_service** out);
/* The key s was started with (for fd_fetch). */
const uint8_t* fd_service_key(const struct fd_service* s);
/* Stops the thread (without waiting for any peer), closes every exported fd and frees s. */
void fd_service_stop(struct fd_service* s);
/* Exports fd (the service takes ownership of it) describing size bytes; returns its id and key. */
mscclppResult_t fd_service_add(struct fd_service* s, int fd, uint64_t size, uint64_t* id, uint64_t* key);
/* Withdraws an export and closes its fd. Unknown ids are ignored. */
void fd_service_remove(struct fd_service* s, uint64_t id);

/* Fetches export id (with its export key ekey) from owner's service of the communicator whose key
 * is key, within timeout_ms: *fd gets a new descriptor (CLOEXEC) and *size the exported size.
 * Errors name the owner rank and the reason. */
mscclppResult_t fd_fetch(const uint8_t key[FD_KEY_BYTES], int my_rank, int owner, uint64_t id, uint64_t ekey,
                         int64_t timeout_ms, int* fd, uint64_t* size);

#endif /* MPP_TRANSPORT_FDPASS_H_ */
