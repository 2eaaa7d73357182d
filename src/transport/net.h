/* net.h - what the net transport (net.c) offers beyond its row: a probe of whether it can work on
 * this machine, for mscclpp-info and the tests' skip decision. */
#ifndef MPP_TRANSPORT_NET_H_
#define MPP_TRANSPORT_NET_H_

#include <stddef.h>

/* 1 when this library has the net transport and libfabric offers a provider it can use (the one
 * MSCCLPP_NET_PROVIDER names, if set); else 0 with why (len bytes) saying what is missing. On 1,
 * why names the provider, fabric and domain it would use. */
int net_probe(char* why, size_t len);

#endif /* MPP_TRANSPORT_NET_H_ */
