/* tcpstore.h - a client of PyTorch's TCPStore (the key-value store torchrun serves at
 * MASTER_ADDR:MASTER_PORT for its workers), so that mscclppCommInitFromEnv under torchrun exchanges
 * its unique id through the launcher's store instead of binding the port the store already holds.
 * Only what the rendezvous needs: set, and a bounded wait-then-get. Every wait ends at the caller's
 * deadline (time_now_ns() based). */
#ifndef MPP_BOOTSTRAP_TCPSTORE_H_
#define MPP_BOOTSTRAP_TCPSTORE_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/core.h>

/* Connects to the store at host_port ("host:port") and introduces itself as a client. *fd is the
 * connection (sock_close it). */
mscclppResult_t tcpstore_connect(const char* host_port, uint64_t deadline_ns, int* fd);

/* Sets key to the len bytes at value. */
mscclppResult_t tcpstore_set(int fd, const char* key, const void* value, size_t len, uint64_t deadline_ns);

/* Waits until key exists, then reads its value into buf (cap bytes); *len gets its size. A value
 * larger than cap is InternalError. Timeout at the deadline, naming the key. */
mscclppResult_t tcpstore_wait_get(int fd, const char* key, void* buf, size_t cap, size_t* len, uint64_t deadline_ns);

#endif /* MPP_BOOTSTRAP_TCPSTORE_H_ */
