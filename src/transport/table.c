/* table.c - the transport rows, the choice Auto makes among them, and what the transports keep per
 * communicator. A new transport is its file plus one line in `rows` below. */
#include "transport/transport.h"

#include "transport/fdpass.h"
#include "util/err.h"

extern const struct transport_ops cudaipc_transport;
extern const struct transport_ops shm_transport;
extern const struct transport_ops tcp_transport;
extern const struct transport_ops net_transport;

/* Registration exports and imports in this order, and Auto takes the first row that can connect:
 * net comes before tcp, so that across hosts Auto takes it where it is on (MSCCLPP_NET_TRANSPORT). */
static const struct transport_ops* const rows[] = {&cudaipc_transport, &shm_transport, &net_transport, &tcp_transport};
#define NROWS ((int)(sizeof(rows) / sizeof(rows[0])))

const struct transport_ops* const* transport_rows(int* count) {
  *count = NROWS;
  return rows;
}

const struct transport_ops* transport_get(mscclppTransport_t t) {
  for (int i = 0; i < NROWS; i++)
    if (rows[i]->id == t) return rows[i];
  return NULL;
}

const char* transport_name(mscclppTransport_t t) {
  const struct transport_ops* row = transport_get(t);
  if (row != NULL) return row->api_name;
  if (t == mscclppTransportIB) return "ib";
  return t == mscclppTransportAuto ? "auto" : "unknown";
}

/* Why the forced transport t cannot connect this rank with peer, or NULL when it can. */
static const char* unusable_reason(const struct transport_comm* tc, int peer, mscclppTransport_t t) {
  const struct transport_ops* row = transport_get(t);
  if (row != NULL) return row->unusable(tc, peer);
  return t == mscclppTransportIB ? "the InfiniBand transport is not built yet" : "unknown transport";
}

mscclppResult_t transport_resolve(const struct transport_comm* tc, int peer, mscclppTransport_t want,
                                  mscclppTransport_t* out) {
  if (want == mscclppTransportAuto) {
    for (int i = 0; i < NROWS && want == mscclppTransportAuto; i++)
      if (rows[i]->unusable(tc, peer) == NULL) want = rows[i]->id;
    if (want == mscclppTransportAuto)
      return MPP_ERR(mscclppInvalidUsage, "no transport can connect rank %d with rank %d", tc->rank, peer);
  }
  const char* why = unusable_reason(tc, peer, want);
  if (why != NULL)
    return MPP_ERR(mscclppInvalidUsage, "transport %s cannot connect rank %d with rank %d: %s", transport_name(want),
                   tc->rank, peer, why);
  *out = want;
  return mscclppSuccess;
}

/* Stops the first n rows' state in reverse order. */
static void stop_rows(struct transport_comm* tc, int n) {
  for (int i = n - 1; i >= 0; i--)
    if (rows[i]->stop != NULL) rows[i]->stop(tc);
}

mscclppResult_t transport_comm_start(struct transport_comm* tc) {
  MPP_CHECK(regblob_check_rows());
  uint8_t key[FD_KEY_BYTES]; /* the communicator's, for its fd services (fdpass.h) */
  MPP_CHECK(bootstrap_derive_key(tc->boot, "mscclpp-fd-service-v1", tc->comm_id, key));
  MPP_CHECK(fd_service_start(key, tc->rank, tc->nranks, &tc->fds));
  for (int i = 0; i < NROWS; i++) {
    mscclppResult_t res = rows[i]->start != NULL ? rows[i]->start(tc) : mscclppSuccess;
    if (res != mscclppSuccess) {
      stop_rows(tc, i);
      fd_service_stop(tc->fds);
      tc->fds = NULL;
      return res;
    }
  }
  return mscclppSuccess;
}

void transport_comm_stop(struct transport_comm* tc) {
  stop_rows(tc, NROWS);
  if (tc->fds != NULL) fd_service_stop(tc->fds);
  tc->fds = NULL;
}
