/* net.h - what the net transport (net.c) offers beyond its row: a probe of whether it can work on
 * this machine, for mscclpp-info and the tests' skip decision. */
#ifndef MPP_TRANSPORT_NET_H_
#define MPP_TRANSPORT_NET_H_

#include <stddef.h>
#include <stdint.h>

/* 1 when this library has the net transport and libfabric offers a provider it can use (the one
 * MSCCLPP_NET_PROVIDER names, if set); else 0 with why (len bytes) saying what is missing. On 1,
 * why names the provider, fabric and domain it would use. */
int net_probe(char* why, size_t len);

/* ---- for the tests (tests/mp/transport_net_auth.c): what a stranger or a recorder would learn ---- */
struct transport_comm;
struct transport_conn;
struct transport_mem;
/* This communicator's endpoint name (at most 64 bytes into buf), 0 when it has none. */
size_t net_test_name(const struct transport_comm* tc, void* buf);
/* The last signal message (64 bytes) the communicator's endpoint accepted: 1, or 0 when none. */
int net_test_last_signal(const struct transport_comm* tc, void* msg64);
/* Sends msg64 verbatim as a signal message on conn (a replay from the real peer) and waits for it. */
int net_test_send_raw(struct transport_conn* conn, const void* msg64);
/* The remote key and address of a registration's net memory region: 1, or 0 when it has none. */
int net_test_region(const struct transport_mem* mem, uint64_t* key, uint64_t* base);
/* Seals and sends a STAGE message {mem's region, offset, size, slot} on conn without writing the
 * slot (the owner's checks of the staged path): 1 sent, 0 when conn has no staging or it failed. */
int net_test_stage_raw(struct transport_conn* conn, const struct transport_mem* mem, uint64_t offset, uint64_t size,
                       uint64_t slot);
/* Signal messages refused by the endpoints of this process so far. */
unsigned long long net_test_refused(void);

#endif /* MPP_TRANSPORT_NET_H_ */
