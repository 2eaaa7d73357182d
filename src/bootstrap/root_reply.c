/* root_reply.c - the root's answer to a rank, as the rank reads it: the address table, or why the
 * rendezvous failed (wire.h: a failure reply, MACed over the rank's own handshake), turned into
 * words that tell the user what to fix. The root's log uses the same words. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/internal.h"
#include "util/err.h"

/* "rank 0's process" or "the process that made the unique id". */
static const char* owner_text(int owner, char* buf, size_t len) {
  if (owner >= 0)
    snprintf(buf, len, "rank %d's process", owner);
  else
    snprintf(buf, len, "the process that made the unique id");
  return buf;
}

static const char* self(int rank, int me) { return rank == me ? " (this rank)" : ""; }

/* Out of fds in the root's process: which limit, and where to raise it. */
static void fds_text(const struct wire_fail* f, char* buf, size_t len) {
  char who[64], limit[48] = "";
  owner_text(f->rank, who, sizeof(who));
  const char* where = f->rank >= 0 ? "on rank" : "for the process that made the unique id";
  char rank[16] = "";
  if (f->rank >= 0) snprintf(rank, sizeof(rank), " %d", f->rank);
  if (f->value == ENFILE) {
    snprintf(buf, len, "the bootstrap root (in %s) ran out of file descriptors: the system's file table is full "
             "(raise fs.file-max on that host)", who);
    return;
  }
  if (f->other_value > 0) snprintf(limit, sizeof(limit), "; its limit is %d", (int)f->other_value);
  snprintf(buf, len, "the bootstrap root (in %s) ran out of file descriptors (too many open files%s): raise ulimit -n "
           "%s%s", who, limit, where, rank);
}

const char* boot_root_fail_text(const struct wire_fail* f, int me, char* buf, size_t len) {
  char who[64];
  switch (f->cause) {
  case WIRE_FAIL_FDS:
    fds_text(f, buf, len);
    break;
  case WIRE_FAIL_HUNG_UP:
    if (f->value)
      snprintf(buf, len, "rank %d%s gave up waiting for the other ranks (its timeout ended) before the last one joined",
               (int)f->rank, self(f->rank, me));
    else
      snprintf(buf, len, "rank %d%s hung up during the rendezvous, before every rank had joined (exited or aborted?)",
               (int)f->rank, self(f->rank, me));
    break;
  case WIRE_FAIL_NRANKS:
    snprintf(buf, len, "rank %d%s said nranks=%d, rank %d%s said nranks=%d: every rank must pass the same nranks",
             (int)f->rank, self(f->rank, me), (int)f->value, (int)f->other_rank, self(f->other_rank, me),
             (int)f->other_value);
    break;
  case WIRE_FAIL_TWICE:
    snprintf(buf, len, "rank %d joined the rendezvous twice: two processes were given rank %d", (int)f->rank,
             (int)f->rank);
    break;
  case WIRE_FAIL_TIMEOUT:
    snprintf(buf, len, "only %d of %d ranks joined before the bootstrap root's deadline (rank %d never did)",
             (int)f->value, (int)f->other_value, (int)f->rank);
    break;
  case WIRE_FAIL_STOPPED:
    snprintf(buf, len, "the init in %s failed, which ended the rendezvous (its log says why)",
             owner_text(f->rank, who, sizeof(who)));
    break;
  default:
    snprintf(buf, len, "the bootstrap root (in %s) failed%s%s (its log says why)", owner_text(f->rank, who, sizeof(who)),
             f->value > 0 ? ": " : "", f->value > 0 ? strerror(f->value) : "");
    break;
  }
  return buf;
}

mscclppResult_t boot_root_fail_code(const struct wire_fail* f, int me) {
  switch (f->cause) {
  case WIRE_FAIL_NRANKS:
  case WIRE_FAIL_TWICE:
    return mscclppInvalidUsage;
  case WIRE_FAIL_TIMEOUT:
    return mscclppTimeout;
  case WIRE_FAIL_FDS:
  case WIRE_FAIL_INTERNAL:
    return f->rank == me ? mscclppSystemError : mscclppRemoteError;
  default:
    return mscclppRemoteError;
  }
}

/* The rest of a failure reply whose first bytes are peek, checked against t, as the error. */
static mscclppResult_t read_failure(struct bootstrap* b, int fd, const uint8_t* peek, const struct boot_transcript* t,
                                    uint64_t deadline_ns, const char* what, int* told) {
  uint8_t msg[WIRE_FAIL_BYTES];
  memcpy(msg, peek, WIRE_REPLY_PEEK_BYTES);
  MPP_CHECK(boot_recv_all_w(b, fd, msg + WIRE_REPLY_PEEK_BYTES, sizeof(msg) - WIRE_REPLY_PEEK_BYTES, deadline_ns, what));
  struct wire_fail f;
  MPP_CHECK(wire_decode_fail(msg, sizeof(msg), b->key, t->hello, t->nonce, &f));
  *told = 1;
  char why[400];
  return MPP_ERR(boot_root_fail_code(&f, b->rank), "bootstrap init of rank %d of %d: the rendezvous failed: %s",
                 b->rank, b->nranks, boot_root_fail_text(&f, b->rank, why, sizeof(why)));
}

mscclppResult_t boot_root_read_reply(struct bootstrap* b, int fd, const struct boot_transcript* t, uint64_t deadline_ns,
                                     const char* what, int* told) {
  *told = 0;
  uint8_t peek[WIRE_REPLY_PEEK_BYTES];
  MPP_CHECK(boot_recv_all_w(b, fd, peek, sizeof(peek), deadline_ns, what));
  if (wire_reply_is_fail(peek)) return read_failure(b, fd, peek, t, deadline_ns, what, told);
  size_t len = wire_table_bytes(b->nranks); /* from our own nranks, never from the reply */
  uint8_t* buf = malloc(len);
  if (!buf) return MPP_ERR(mscclppSystemError, "bootstrap: no memory for a %zu-byte table", len);
  memcpy(buf, peek, sizeof(peek)); /* a table is longer than the peek: its header at least */
  mscclppResult_t res = boot_recv_all_w(b, fd, buf + sizeof(peek), len - sizeof(peek), deadline_ns, what);
  if (res == mscclppSuccess) res = wire_decode_table(buf, len, b->nranks, b->addrs);
  free(buf);
  return res;
}
