/* net_hello.c - the net connection's hello and its choice of how memory crosses (net_hello.h). */
#if MSCCLPP_HAVE_LIBFABRIC
#include "transport/net_hello.h"

#include <string.h>

#include "util/bytes.h"
#include "util/err.h"
#include "util/param.h"

void net_hello_encode(const struct net_hello* h, uint8_t* out) {
  memset(out, 0, NET_HELLO_BYTES);
  le_put64(out, h->name_len);
  memcpy(out + 8, h->name, sizeof(h->name));
  le_put32(out + 8 + NET_ADDR_MAX, h->conn_id);
  memcpy(out + 16 + NET_ADDR_MAX, h->nonce, NET_SIG_NONCE_BYTES);
  uint8_t* x = out + 16 + NET_ADDR_MAX + NET_SIG_NONCE_BYTES;
  le_put32(x, h->flags);
  le_put32(x + 8, h->ring.slots);
  le_put32(x + 12, h->ring.slot_bytes);
  le_put64(x + 16, h->ring.key);
  le_put64(x + 24, h->ring.base);
}

void net_hello_decode(const uint8_t* in, struct net_hello* h) {
  h->name_len = le_get64(in);
  memcpy(h->name, in + 8, sizeof(h->name));
  h->conn_id = le_get32(in + 8 + NET_ADDR_MAX);
  memcpy(h->nonce, in + 16 + NET_ADDR_MAX, NET_SIG_NONCE_BYTES);
  const uint8_t* x = in + 16 + NET_ADDR_MAX + NET_SIG_NONCE_BYTES;
  h->flags = le_get32(x);
  h->ring.slots = le_get32(x + 8);
  h->ring.slot_bytes = le_get32(x + 12);
  h->ring.key = le_get64(x + 16);
  h->ring.base = le_get64(x + 24);
}

int net_stage_host(void) { return param_int(PARAM_NET_STAGE_HOST) != 0; }

/* Whether conn may carry GPU memory (either rank is a GPU rank) or stages everything (tests):
 * then each side keeps a staging ring. Both sides compute the same from the peer table. */
int net_needs_stage(const struct transport_conn* conn) {
  const struct transport_comm* tc = conn->tc;
  return tc->kind == mscclppRankGpu || tc->peers[conn->peer].kind == mscclppRankGpu || net_stage_host();
}

/* How memory crosses conn, for its log line: GPU memory "hmem" when every GPU rank of the pair
 * has FI_HMEM (and MSCCLPP_NET_GPU_MEM allows), else "staged"; host memory directly. (Each write
 * still decides by its two buffers: one without a provider region goes staged.) InvalidUsage where
 * MSCCLPP_NET_GPU_MEM=hmem and a side lacks FI_HMEM. */
mscclppResult_t net_gpu_mode(struct transport_conn* conn, const struct net_hello* theirs, const char** mode) {
  const struct transport_comm* tc = conn->tc;
  int me_gpu = tc->kind == mscclppRankGpu, peer_gpu = tc->peers[conn->peer].kind == mscclppRankGpu;
  int me_ok = !me_gpu || net_fabric_hmem(net_fabric_of(conn)), peer_ok = !peer_gpu || (theirs->flags & NET_HELLO_HMEM);
  const char* want = param_str(PARAM_NET_GPU_MEM);
  *mode = net_stage_host() ? "every write staged (MSCCLPP_NET_STAGE_HOST=1)"
         : !me_gpu && !peer_gpu ? "host memory direct" : "host memory direct, GPU memory hmem (FI_HMEM)";
  if (net_stage_host() || (!me_gpu && !peer_gpu)) return mscclppSuccess;
  if (strcmp(want, "hmem") == 0 && !(me_ok && peer_ok))
    return MPP_ERR(mscclppInvalidUsage, "net transport: MSCCLPP_NET_GPU_MEM=hmem but the provider of rank %d does not "
                   "grant FI_HMEM (%s); use auto or staged", me_ok ? conn->peer : tc->rank, net_fabric_desc(net_fabric_of(conn)));
  if (strcmp(want, "staged") == 0 || !(me_ok && peer_ok)) *mode = "host memory direct, GPU memory staged";
  return mscclppSuccess;
}
#endif /* MSCCLPP_HAVE_LIBFABRIC */
