/* blob.c - the serialized form of a registered buffer and its validation.
 *
 * Layout (little endian; regblob_bytes() long: 216 bytes with today's rows):
 *   0  u32 magic "MPRM"        4 u16 version        6 u16 blob length
 *   8  u64 comm id            16 i32 owner rank    20 i32 owner pid
 *  24  u64 owner host hash    32 u32 transports    36 i32 kind (enum mem_kind)
 *  40  i32 owner cuda device  44 u32 reserved (0)  48 u64 size
 *  56  u64 allocation size    64 u64 offset in the allocation
 *  72  each transport row's part, in table order (cuda-ipc 88, shm 16, net 24, tcp 8 bytes), zeros for a
 *      transport that does not offer the buffer
 *   L  u64 FNV-1a checksum of bytes [0, L), L = 72 + the parts (208)
 * The length follows the rows: a row added or grown changes it, and a peer built with other rows
 * is refused by the length check.
 * A blob is only ever trusted after regblob_decode has checked every field. */
#include <string.h>

#include <mscclpp/connection.h>

#include "transport/transport.h"
#include "util/bytes.h"
#include "util/err.h"

#define OFF_PARTS 72

/* Where the checksum sits: after the common fields and every row's part. */
static size_t off_checksum(void) {
  int nrows;
  const struct transport_ops* const* rows = transport_rows(&nrows);
  size_t off = OFF_PARTS;
  for (int i = 0; i < nrows; i++) off += rows[i]->part_wire_bytes;
  return off;
}

size_t regblob_bytes(void) { return off_checksum() + 8; }

mscclppResult_t regblob_check_rows(void) {
  int nrows;
  const struct transport_ops* const* rows = transport_rows(&nrows);
  size_t bytes = 0;
  for (int i = 0; i < nrows; i++) {
    if (rows[i]->part_wire_bytes > TRANSPORT_PART_BYTES)
      return MPP_ERR(mscclppInternalError, "transport %s: its blob part of %zu bytes exceeds TRANSPORT_PART_BYTES (%d)",
                     rows[i]->name, rows[i]->part_wire_bytes, TRANSPORT_PART_BYTES);
    bytes += rows[i]->part_wire_bytes;
  }
  if (OFF_PARTS + bytes + 8 > MSCCLPP_REGMEM_BLOB_BYTES)
    return MPP_ERR(mscclppInternalError, "the transports' blob parts take %zu bytes; MSCCLPP_REGMEM_BLOB_BYTES leaves %d",
                   bytes, MSCCLPP_REGMEM_BLOB_BYTES - OFF_PARTS - 8);
  return mscclppSuccess;
}

void regblob_encode(const struct regmem_desc* d, uint8_t* out) {
  size_t sum_at = off_checksum();
  memset(out, 0, sum_at + 8);
  le_put32(out + 0, REGBLOB_MAGIC);
  le_put16(out + 4, REGBLOB_VERSION);
  le_put16(out + 6, (uint16_t)(sum_at + 8));
  le_put64(out + 8, d->comm_id);
  le_put32(out + 16, (uint32_t)d->owner);
  le_put32(out + 20, (uint32_t)d->pid);
  le_put64(out + 24, d->host_hash);
  le_put32(out + 32, d->transports);
  le_put32(out + 36, (uint32_t)d->kind);
  le_put32(out + 40, (uint32_t)d->cuda_dev);
  le_put64(out + 48, d->size);
  le_put64(out + 56, d->alloc_size);
  le_put64(out + 64, d->alloc_offset);
  int nrows;
  const struct transport_ops* const* rows = transport_rows(&nrows);
  uint8_t* at = out + OFF_PARTS;
  for (int i = 0; i < nrows; at += rows[i]->part_wire_bytes, i++)
    if (d->transports & TRANSPORT_BIT(rows[i]->id)) rows[i]->encode_part(&d->part[rows[i]->id], at);
  le_put64(out + sum_at, fnv1a_bytes(FNV1A_INIT, out, sum_at));
}

/* Checks the envelope: length, magic, version, checksum and communicator. */
static mscclppResult_t check_envelope(const uint8_t* b, size_t len, uint64_t comm_id) {
  if (len < 8) return MPP_ERR(mscclppInvalidArgument, "registered-memory blob truncated: %zu bytes", len);
  if (le_get32(b) != REGBLOB_MAGIC)
    return MPP_ERR(mscclppInvalidArgument, "registered-memory blob has a wrong magic 0x%08x (expected 0x%08x)", le_get32(b),
                   REGBLOB_MAGIC);
  if (le_get16(b + 4) != REGBLOB_VERSION)
    return MPP_ERR(mscclppInvalidArgument, "registered-memory blob version %u is not supported (this library: %u)",
                   le_get16(b + 4), REGBLOB_VERSION);
  size_t sum_at = off_checksum();
  if (le_get16(b + 6) != sum_at + 8 || len < sum_at + 8)
    return MPP_ERR(mscclppInvalidArgument, "registered-memory blob truncated or malformed: %zu bytes given, header says %u, need %zu",
                   len, le_get16(b + 6), sum_at + 8);
  if (le_get64(b + sum_at) != fnv1a_bytes(FNV1A_INIT, b, sum_at))
    return MPP_ERR(mscclppInvalidArgument, "registered-memory blob checksum mismatch (corrupted in transit?)");
  if (le_get64(b + 8) != comm_id)
    return MPP_ERR(mscclppInvalidArgument,
                   "registered-memory blob belongs to communicator %016llx, not this one (%016llx)",
                   (unsigned long long)le_get64(b + 8), (unsigned long long)comm_id);
  return mscclppSuccess;
}

static void decode_fields(const uint8_t* b, struct regmem_desc* d) {
  d->comm_id = le_get64(b + 8);
  d->owner = (int32_t)le_get32(b + 16);
  d->pid = (int32_t)le_get32(b + 20);
  d->host_hash = le_get64(b + 24);
  d->transports = le_get32(b + 32);
  d->kind = (int32_t)le_get32(b + 36);
  d->cuda_dev = (int32_t)le_get32(b + 40);
  d->size = le_get64(b + 48);
  d->alloc_size = le_get64(b + 56);
  d->alloc_offset = le_get64(b + 64);
}

/* The transports that may describe memory of kind. */
static uint32_t allowed_transports(int kind) {
  int nrows;
  const struct transport_ops* const* rows = transport_rows(&nrows);
  uint32_t bits = 0;
  for (int i = 0; i < nrows; i++)
    if (rows[i]->mem_kinds & (1u << (unsigned)kind)) bits |= TRANSPORT_BIT(rows[i]->id);
  return bits;
}

/* Decodes the part of every transport the blob offers, with that transport's checks. */
static mscclppResult_t decode_parts(const uint8_t* b, struct regmem_desc* d) {
  int nrows;
  const struct transport_ops* const* rows = transport_rows(&nrows);
  const uint8_t* at = b + OFF_PARTS;
  for (int i = 0; i < nrows; at += rows[i]->part_wire_bytes, i++)
    if (d->transports & TRANSPORT_BIT(rows[i]->id)) MPP_CHECK(rows[i]->decode_part(at, d, &d->part[rows[i]->id]));
  return mscclppSuccess;
}

/* Checks the fields against each other: kind, transports, sizes and offsets. */
static mscclppResult_t check_fields(const struct regmem_desc* d, int nranks) {
  if (d->owner < 0 || d->owner >= nranks)
    return MPP_ERR(mscclppInvalidArgument, "registered-memory blob: owner rank %d out of range [0, %d)", d->owner, nranks);
  if (d->pid <= 0) return MPP_ERR(mscclppInvalidArgument, "registered-memory blob of rank %d: bad pid %d", d->owner, d->pid);
  if (d->kind < 0 || d->kind >= MEM_KIND_COUNT)
    return MPP_ERR(mscclppInvalidArgument, "registered-memory blob of rank %d: unknown memory kind %d", d->owner, d->kind);
  if (d->transports == 0 || (d->transports & ~allowed_transports(d->kind)) != 0)
    return MPP_ERR(mscclppInvalidArgument, "registered-memory blob of rank %d: transports 0x%x impossible for memory kind %d",
                   d->owner, d->transports, d->kind);
  if (mem_kind_is_device(d->kind) ? d->cuda_dev < 0 : d->cuda_dev != -1)
    return MPP_ERR(mscclppInvalidArgument, "registered-memory blob of rank %d: cuda device %d wrong for memory kind %d",
                   d->owner, d->cuda_dev, d->kind);
  if (d->size == 0 || d->size > (1ull << 48))
    return MPP_ERR(mscclppInvalidArgument, "registered-memory blob of rank %d: size %llu out of range", d->owner,
                   (unsigned long long)d->size);
  if (d->kind != MEM_KIND_HOST &&
      (d->alloc_size > (1ull << 48) || d->alloc_offset > d->alloc_size || d->size > d->alloc_size - d->alloc_offset))
    return MPP_ERR(mscclppInvalidArgument,
                   "registered-memory blob of rank %d: size overflow: %llu bytes at offset %llu of a %llu-byte allocation",
                   d->owner, (unsigned long long)d->size, (unsigned long long)d->alloc_offset,
                   (unsigned long long)d->alloc_size);
  return mscclppSuccess;
}

mscclppResult_t regblob_decode(const void* blob, size_t len, uint64_t comm_id, int nranks, struct regmem_desc* d) {
  if (blob == NULL) return MPP_ERR(mscclppInvalidArgument, "registered-memory blob is NULL");
  const uint8_t* b = blob;
  MPP_CHECK(check_envelope(b, len, comm_id));
  struct regmem_desc tmp;
  memset(&tmp, 0, sizeof(tmp));
  decode_fields(b, &tmp);
  MPP_CHECK(check_fields(&tmp, nranks));
  MPP_CHECK(decode_parts(b, &tmp));
  *d = tmp;
  return mscclppSuccess;
}
