/* handle_reg.c - the registry of live objects behind public handles other than communicators
 * (handle_reg.h; communicators have their own registry in handles.c, which also holds them for the
 * thread rule).
 *
 * A chained hash table keyed by address, under one mutex. An entry stays in the table after its
 * object is destroyed, marked dead (by its own destroy call, or with its communicator), for the
 * last HANDLE_GRAVES destroys, so that a stale handle is reported as destroyed rather than unknown;
 * the oldest dead entry is dropped when a newer one needs its place. The memory of a destroyed
 * object is freed at once: only its address is remembered, and should the allocator give that
 * address to a new object, registering the new object revives the entry (the limit of plain
 * pointers as handles: a stale handle then names the new object). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/handle_reg.h"
#include "util/err.h"

#define HANDLE_BUCKETS 4096 /* power of two */
#define HANDLE_GRAVES 1024

/* ENTRY_ORPHAN: a live object whose communicator was destroyed without freeing it (a proxy
 * service): only its destroy call accepts it. */
enum entry_state { ENTRY_LIVE = 0, ENTRY_DESTROYED, ENTRY_COMM_GONE, ENTRY_ORPHAN };

struct entry {
  const void* p;
  const struct mscclppComm* owner;
  const char* keeper; /* handle_set_keeper */
  struct entry* next; /* in its bucket */
  int grave;          /* its slot in graves[] while dead */
  unsigned char kind, state;
};

/* All under lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry* buckets[HANDLE_BUCKETS];
static struct entry* graves[HANDLE_GRAVES]; /* dead entries, oldest at grave_next once full */
static int grave_next;

static const char* const kind_names[HANDLE_KINDS] = {
    "connection", "host semaphore", "registered memory", "plan", "window", "buffer registration", "proxy service",
    "native algorithm"};

const char* handle_kind_name(enum handle_kind kind) {
  return (unsigned)kind < HANDLE_KINDS ? kind_names[kind] : "handle";
}

static struct entry** bucket_of(const void* p) {
  uint64_t h = ((uint64_t)(uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull;
  return &buckets[h >> (64 - 12)];
}

static struct entry* find(const void* p) {
  for (struct entry* e = *bucket_of(p); e; e = e->next)
    if (e->p == p) return e;
  return NULL;
}

/* Takes e out of its bucket and frees it (lock held). */
static void drop(struct entry* e) {
  for (struct entry** q = bucket_of(e->p); *q; q = &(*q)->next)
    if (*q == e) {
      *q = e->next;
      break;
    }
  free(e);
}

/* Marks e dead with state, giving it the oldest grave (whose entry is forgotten). Lock held. */
static void bury(struct entry* e, enum entry_state state) {
  struct entry* old = graves[grave_next];
  if (old != NULL) drop(old);
  e->state = (unsigned char)state;
  e->grave = grave_next;
  graves[grave_next] = e;
  grave_next = (grave_next + 1) % HANDLE_GRAVES;
}

mscclppResult_t handle_add(enum handle_kind kind, const void* p, const struct mscclppComm* owner) {
  pthread_mutex_lock(&lock);
  struct entry* e = find(p);
  if (e == NULL) {
    e = calloc(1, sizeof(*e));
    if (e == NULL) {
      pthread_mutex_unlock(&lock);
      return MPP_ERR(mscclppSystemError, "out of memory for the registry of %s handles", handle_kind_name(kind));
    }
    e->p = p;
    struct entry** b = bucket_of(p);
    e->next = *b, *b = e;
  } else if (e->state != ENTRY_LIVE) {
    graves[e->grave] = NULL; /* the address came back: a new object */
  }
  e->kind = (unsigned char)kind, e->owner = owner, e->state = ENTRY_LIVE, e->keeper = NULL;
  pthread_mutex_unlock(&lock);
  return mscclppSuccess;
}

static void remove_as(enum handle_kind kind, const void* p, enum entry_state why) {
  pthread_mutex_lock(&lock);
  struct entry* e = find(p);
  if (e != NULL && (e->state == ENTRY_LIVE || e->state == ENTRY_ORPHAN) && e->kind == kind) bury(e, why);
  pthread_mutex_unlock(&lock);
}

void handle_remove(enum handle_kind kind, const void* p) { remove_as(kind, p, ENTRY_DESTROYED); }

void handle_remove_with_comm(enum handle_kind kind, const void* p) { remove_as(kind, p, ENTRY_COMM_GONE); }

void handle_set_keeper(enum handle_kind kind, const void* p, const char* keeper) {
  pthread_mutex_lock(&lock);
  struct entry* e = find(p);
  if (e != NULL && e->state == ENTRY_LIVE && e->kind == kind) e->keeper = keeper;
  pthread_mutex_unlock(&lock);
}

const char* handle_keeper(enum handle_kind kind, const void* p) {
  pthread_mutex_lock(&lock);
  const struct entry* e = find(p);
  const char* k = e != NULL && e->state == ENTRY_LIVE && e->kind == kind ? e->keeper : NULL;
  pthread_mutex_unlock(&lock);
  return k;
}

void handle_comm_gone(const struct mscclppComm* comm) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < HANDLE_BUCKETS; i++)
    for (struct entry* e = buckets[i]; e; e = e->next)
      if (e->state == ENTRY_LIVE && e->owner == comm) {
        if (e->kind == HANDLE_PROXY_SERVICE) e->state = ENTRY_ORPHAN; /* the user still destroys it */
        else bury(e, ENTRY_COMM_GONE);
      }
  pthread_mutex_unlock(&lock);
}

/* The error for p, not a live handle of kind (lock held; e is p's entry or NULL). */
static mscclppResult_t not_live(const struct entry* e, enum handle_kind kind, const void* p, const char* fn) {
  const char* k = handle_kind_name(kind);
  if (e == NULL)
    return MPP_ERR(mscclppInvalidUsage, "%s: %p is not a %s handle (never made by the library, or destroyed long ago)",
                   fn, p, k);
  if (e->kind != kind)
    return MPP_ERR(mscclppInvalidUsage, "%s: %p is a %s handle%s, not a %s handle", fn, p,
                   handle_kind_name((enum handle_kind)e->kind), e->state == ENTRY_LIVE ? "" : " (destroyed)", k);
  if (e->state == ENTRY_ORPHAN)
    return MPP_ERR(mscclppInvalidUsage, "%s: the communicator of %s %p was destroyed; only its destroy call remains", fn,
                   k, p);
  if (e->state == ENTRY_COMM_GONE)
    return MPP_ERR(mscclppInvalidUsage, "%s: %s %p was destroyed with its communicator (mscclppCommDestroy or "
                   "mscclppCommAbort destroys what the communicator owns); it must not be used after that", fn, k, p);
  return MPP_ERR(mscclppInvalidUsage, "%s: %s %p was destroyed; it must not be used after that", fn, k, p);
}

mscclppResult_t handle_check(enum handle_kind kind, const void* p, const char* fn) {
  if (p == NULL) return MPP_ERR(mscclppInvalidArgument, "%s: the %s handle is NULL", fn, handle_kind_name(kind));
  pthread_mutex_lock(&lock);
  const struct entry* e = find(p);
  mscclppResult_t res =
      e != NULL && e->state == ENTRY_LIVE && e->kind == kind ? mscclppSuccess : not_live(e, kind, p, fn);
  pthread_mutex_unlock(&lock);
  return res;
}

mscclppResult_t handle_check_destroy(enum handle_kind kind, const void* p, const char* fn) {
  if (p == NULL) return MPP_ERR(mscclppInvalidArgument, "%s: the %s handle is NULL", fn, handle_kind_name(kind));
  pthread_mutex_lock(&lock);
  const struct entry* e = find(p);
  mscclppResult_t res = e != NULL && (e->state == ENTRY_LIVE || e->state == ENTRY_ORPHAN) && e->kind == kind
                            ? mscclppSuccess
                            : not_live(e, kind, p, fn);
  pthread_mutex_unlock(&lock);
  return res;
}

mscclppResult_t handle_check_owned(enum handle_kind kind, const void* p, const struct mscclppComm* comm, const char* fn) {
  if (p == NULL) return MPP_ERR(mscclppInvalidArgument, "%s: the %s handle is NULL", fn, handle_kind_name(kind));
  pthread_mutex_lock(&lock);
  const struct entry* e = find(p);
  mscclppResult_t res;
  if (e == NULL || e->state != ENTRY_LIVE || e->kind != kind)
    res = not_live(e, kind, p, fn);
  else if (e->owner != comm)
    res = MPP_ERR(mscclppInvalidUsage, "%s: %s %p belongs to another communicator than %p", fn, handle_kind_name(kind), p,
                  (const void*)comm);
  else
    res = mscclppSuccess;
  pthread_mutex_unlock(&lock);
  return res;
}
