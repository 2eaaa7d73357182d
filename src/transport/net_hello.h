/* net_hello.h - what the two sides of a net connection swap when it is made (net_hello.c): the
 * endpoint name, connection id, signal-key nonce, whether the provider granted FI_HMEM and the
 * staging ring; and the connection-time choice of how memory crosses. Only built with libfabric. */
#ifndef MPP_TRANSPORT_NET_HELLO_H_
#define MPP_TRANSPORT_NET_HELLO_H_

#include <stdint.h>

#include "transport/net_conn.h"
#include "transport/net_stage.h"

/* Swapped over the (authenticated) bootstrap, NET_HELLO_BYTES on the wire (little endian). */
#define NET_HELLO_BYTES (8 + NET_ADDR_MAX + 8 + NET_SIG_NONCE_BYTES + 8 + NET_STAGE_DESC_BYTES)
#define NET_HELLO_HMEM 1u /* flags: the sender's provider granted FI_HMEM */
struct net_hello {
  uint64_t name_len;
  uint8_t name[NET_ADDR_MAX]; /* the endpoint's name: the only address put in the address vector */
  uint32_t conn_id;           /* the sender's id of the connection, for the signals it will accept */
  uint8_t nonce[NET_SIG_NONCE_BYTES]; /* fresh: the connection's keys are new each time */
  uint32_t flags;                     /* NET_HELLO_HMEM */
  struct net_stage_desc ring;         /* the sender's staging ring (slots 0: none) */
};

void net_hello_encode(const struct net_hello* h, uint8_t* out);
void net_hello_decode(const uint8_t* in, struct net_hello* h);
/* MSCCLPP_NET_STAGE_HOST=1: every write staged (tests). */
int net_stage_host(void);
/* Whether conn gets staging rings: either rank is a GPU rank, or net_stage_host(). Both sides
 * compute the same from the peer table. */
int net_needs_stage(const struct transport_conn* conn);
/* How memory crosses conn, for its log line ("host memory direct, GPU memory staged", ...);
 * InvalidUsage naming the rank where MSCCLPP_NET_GPU_MEM=hmem and a GPU rank lacks FI_HMEM. */
mscclppResult_t net_gpu_mode(struct transport_conn* conn, const struct net_hello* theirs, const char** mode);

#endif /* MPP_TRANSPORT_NET_HELLO_H_ */
