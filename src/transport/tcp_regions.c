/* tcp_regions.c - the per-communicator table of local registered regions that the tcp transport's
 * receiving threads write into. Every access is checked against the region's bounds under the
 * table's lock, so a peer can neither reach outside a registered buffer nor into one that was
 * released. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tcp_regions.h"

#include "sys/memalloc.h"
#include "util/err.h"

struct region_entry {
  uint64_t id;
  char* ptr;
  uint64_t size;
  int device; /* >= 0: GPU memory */
};

void region_table_init(struct region_table* t) {
  pthread_mutex_init(&t->lock, NULL);
  t->entries = NULL;
  t->count = t->cap = 0;
  t->next_id = 1;
}

void region_table_fini(struct region_table* t) {
  free(t->entries);
  t->entries = NULL;
  t->count = t->cap = 0;
  pthread_mutex_destroy(&t->lock);
}

mscclppResult_t region_add(struct region_table* t, void* ptr, uint64_t size, int device, uint64_t* id) {
  pthread_mutex_lock(&t->lock);
  if (t->count == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 16;
    struct region_entry* grown = realloc(t->entries, cap * sizeof(*grown));
    if (grown == NULL) {
      pthread_mutex_unlock(&t->lock);
      return MPP_ERR(mscclppSystemError, "region table: out of host memory");
    }
    t->entries = grown;
    t->cap = cap;
  }
  *id = t->next_id++;
  t->entries[t->count++] = (struct region_entry){.id = *id, .ptr = ptr, .size = size, .device = device};
  pthread_mutex_unlock(&t->lock);
  return mscclppSuccess;
}

void region_remove(struct region_table* t, uint64_t id) {
  pthread_mutex_lock(&t->lock);
  for (size_t i = 0; i < t->count; i++) {
    if (t->entries[i].id == id) {
      t->entries[i] = t->entries[--t->count];
      break;
    }
  }
  pthread_mutex_unlock(&t->lock);
}

/* The entry of id whose bounds hold [offset, offset+size), or NULL with the error recorded.
 * Call with the lock held. */
static const struct region_entry* lookup(struct region_table* t, uint64_t id, uint64_t offset, uint64_t size,
                                         mscclppResult_t* res) {
  for (size_t i = 0; i < t->count; i++) {
    const struct region_entry* e = &t->entries[i];
    if (e->id != id) continue;
    if (offset > e->size || size > e->size - offset) {
      *res = MPP_ERR(mscclppInvalidArgument, "region %llu: %llu bytes at offset %llu leave its %llu bytes",
                     (unsigned long long)id, (unsigned long long)size, (unsigned long long)offset,
                     (unsigned long long)e->size);
      return NULL;
    }
    return e;
  }
  *res = MPP_ERR(mscclppInvalidArgument, "region %llu is not registered (released, or never was)", (unsigned long long)id);
  return NULL;
}

/* Copies host memory in 64-bit words when both sides and the size are 8-byte aligned, each word one
 * relaxed atomic store (memcpy may write a word in pieces): a reader polling a word, as LL packets'
 * readers do (flag and data in one word), never sees half of a new word. Else memcpy. */
static void copy_words(char* dst, const char* src, uint64_t size) {
  if (((uintptr_t)dst | (uintptr_t)src | size) % 8 != 0) {
    memcpy(dst, src, size);
    return;
  }
  for (uint64_t i = 0; i < size; i += 8) {
    uint64_t v;
    memcpy(&v, src + i, 8);
    atomic_store_explicit((_Atomic uint64_t*)(void*)(dst + i), v, memory_order_relaxed);
  }
}

mscclppResult_t region_write(struct region_table* t, uint64_t id, uint64_t offset, const void* data, uint64_t size) {
  mscclppResult_t res = mscclppSuccess;
  pthread_mutex_lock(&t->lock);
  const struct region_entry* e = lookup(t, id, offset, size, &res);
  if (e != NULL && e->device >= 0) res = mem_copy(e->ptr + offset, e->device, data, -1, size);
  else if (e != NULL) copy_words(e->ptr + offset, data, size);
  pthread_mutex_unlock(&t->lock);
  return res;
}

mscclppResult_t region_check(struct region_table* t, uint64_t id, uint64_t offset, uint64_t size) {
  mscclppResult_t res = mscclppSuccess;
  pthread_mutex_lock(&t->lock);
  (void)lookup(t, id, offset, size, &res);
  pthread_mutex_unlock(&t->lock);
  return res;
}

mscclppResult_t region_read(struct region_table* t, uint64_t id, uint64_t offset, void* data, uint64_t size) {
  mscclppResult_t res = mscclppSuccess;
  pthread_mutex_lock(&t->lock);
  const struct region_entry* e = lookup(t, id, offset, size, &res);
  if (e != NULL) res = mem_copy(data, -1, e->ptr + offset, e->device, size);
  pthread_mutex_unlock(&t->lock);
  return res;
}

mscclppResult_t region_store64(struct region_table* t, uint64_t id, uint64_t offset, uint64_t value) {
  mscclppResult_t res = mscclppSuccess;
  if (offset % 8 != 0)
    return MPP_ERR(mscclppInvalidArgument, "region %llu: 64-bit update at offset %llu is not 8-byte aligned",
                   (unsigned long long)id, (unsigned long long)offset);
  pthread_mutex_lock(&t->lock);
  const struct region_entry* e = lookup(t, id, offset, 8, &res);
  if (e != NULL && (uintptr_t)(e->ptr + offset) % 8 != 0) {
    res = MPP_ERR(mscclppInvalidArgument, "region %llu: 64-bit update address %p is not 8-byte aligned",
                  (unsigned long long)id, (void*)(e->ptr + offset));
  } else if (e != NULL && e->device >= 0) {
    /* GPU memory: cudaMemcpy is synchronous and ordered after the earlier (synchronous) copies of
     * this thread, so the word lands after the data. */
    res = mem_copy(e->ptr + offset, e->device, &value, -1, 8);
  } else if (e != NULL) {
    /* Release: a waiter that acquire-loads this word sees every earlier region_write of this
     * thread (the data the peer wrote before its update). */
    atomic_store_explicit((_Atomic uint64_t*)(void*)(e->ptr + offset), value, memory_order_release);
  }
  pthread_mutex_unlock(&t->lock);
  return res;
}
