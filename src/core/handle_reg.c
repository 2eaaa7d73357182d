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
 * pointers as handles: a stale handle then names the new object).
 *
 * The calls that use an object hold it (handle_hold): the hold counts the call in, so that a
 * destroy of the object (handle_retire) or of its communicator (handle_comm_close) while the call
 * runs is refused instead of freeing memory under it. Holds and checks take no lock on the common
 * path: a live object is published in a direct-mapped table of atomic keys (address | kind), one
 * object per slot, with a busy count per slot. A hold reads its key, counts itself in and reads the
 * key again; a destroy replaces the key with RESERVED before it reads the count, so either the hold
 * sees the key gone and backs out, or the destroy sees the hold. Objects without a slot of their
 * own, and every error, take the locked path, which is the authority. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "core/handle_reg.h"
#include "util/err.h"

#define HANDLE_BUCKETS 4096 /* power of two */
#define HANDLE_GRAVES 1024

/* ENTRY_ORPHAN: a live object whose communicator was destroyed without freeing it (a proxy
 * service): only its destroy call accepts it. */
enum entry_state { ENTRY_LIVE = 0, ENTRY_DESTROYED, ENTRY_COMM_GONE, ENTRY_ORPHAN, ENTRY_CLOSING };

struct entry {
  const void* p;
  const struct mscclppComm* owner;
  const char* keeper; /* handle_set_keeper */
  struct entry* next; /* in its bucket */
  int grave;          /* its slot in graves[] while dead */
  int busy;           /* holds counted here (those that found no fast slot) */
  uintptr_t closer;   /* ENTRY_CLOSING: the thread closing its communicator (only it may hold it) */
  unsigned char kind, state;
  unsigned char fast; /* the object owns its fast slot (its holds may be counted there) */
};

#define FAST_SLOTS 4096  /* power of two */
#define FAST_RESERVED 1u /* a slot kept for an object being destroyed (no object has address 0) */

/* key: address | kind (objects are at least 8-byte aligned), 0 when free; written under lock. */
struct fast_slot {
  _Atomic uintptr_t key;
  _Atomic int busy; /* holds of the object whose key is (or was, while reserved) in the slot */
};
static struct fast_slot fast[FAST_SLOTS];

static _Thread_local char thread_token; /* its address tells threads apart */

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

static uintptr_t fast_key(enum handle_kind kind, const void* p) { return (uintptr_t)p | (uintptr_t)kind; }

static struct fast_slot* fast_slot_of(const void* p) {
  uint64_t h = ((uint64_t)(uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull;
  return &fast[h >> (64 - 12)];
}

/* Gives e its fast slot when the slot is free (lock held). seq_cst: the object's fields, written
 * before registration, are visible to whoever reads the key. */
static void fast_publish(struct entry* e) {
  if (((uintptr_t)e->p & 7u) != 0) return; /* no room for the kind in the key: the locked path */
  struct fast_slot* s = fast_slot_of(e->p);
  uintptr_t k = atomic_load(&s->key);
  if (k != 0 && !(e->fast && k == FAST_RESERVED)) return; /* another object's slot */
  atomic_store(&s->key, fast_key((enum handle_kind)e->kind, e->p));
  e->fast = 1;
}

/* Takes e's key out of its slot (lock held): RESERVED while e may still count holds there (keep),
 * else free. */
static void fast_hide(struct entry* e, int keep) {
  if (!e->fast) return;
  atomic_store(&fast_slot_of(e->p)->key, keep ? FAST_RESERVED : 0);
  if (!keep) e->fast = 0;
}

/* Holds of e (lock held, e hidden: no new fast hold can count itself in). A fast hold that read
 * another object's key just before it changed counts itself in for a moment and backs out: a
 * non-zero count is looked at again for up to about a millisecond before it is believed. */
static int holds_of(const struct entry* e) {
  for (int tries = 0;; tries++) {
    int n = e->busy + (e->fast ? atomic_load(&fast_slot_of(e->p)->busy) : 0);
    if (n == 0 || tries == 100) return n;
    struct timespec ts = {0, 10000};
    nanosleep(&ts, NULL);
  }
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
  fast_hide(e, 0);
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
  e->busy = 0, e->closer = 0;
  fast_publish(e);
  pthread_mutex_unlock(&lock);
  return mscclppSuccess;
}

static void remove_as(enum handle_kind kind, const void* p, enum entry_state why) {
  pthread_mutex_lock(&lock);
  struct entry* e = find(p);
  if (e != NULL && (e->state == ENTRY_LIVE || e->state == ENTRY_ORPHAN || e->state == ENTRY_CLOSING) && e->kind == kind)
    bury(e, why);
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
      if ((e->state == ENTRY_LIVE || e->state == ENTRY_CLOSING) && e->owner == comm) {
        if (e->kind == HANDLE_PROXY_SERVICE) { /* the user still destroys it: only the locked path knows */
          e->state = ENTRY_ORPHAN;
          fast_hide(e, 1);
        } else {
          bury(e, ENTRY_COMM_GONE);
        }
      }
  pthread_mutex_unlock(&lock);
}

/* May this thread hold e (lock held)? Live, of kind, or closing by this very thread (the teardown
 * of its communicator releasing its objects through the public calls). */
static int holdable(const struct entry* e, enum handle_kind kind) {
  if (e == NULL || e->kind != kind) return 0;
  return e->state == ENTRY_LIVE || (e->state == ENTRY_CLOSING && e->closer == (uintptr_t)&thread_token);
}

/* May a destroy call take e (lock held)? What may be held, or an orphan (its communicator gone). */
static int destroyable(const struct entry* e, enum handle_kind kind) {
  return holdable(e, kind) || (e != NULL && e->state == ENTRY_ORPHAN && e->kind == kind);
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
  if (e->state == ENTRY_CLOSING)
    return MPP_ERR(mscclppInvalidUsage, "%s: %s %p belongs to a communicator being destroyed by another thread", fn, k, p);
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
  if (atomic_load(&fast_slot_of(p)->key) == fast_key(kind, p)) return mscclppSuccess;
  pthread_mutex_lock(&lock);
  const struct entry* e = find(p);
  mscclppResult_t res = holdable(e, kind) ? mscclppSuccess : not_live(e, kind, p, fn);
  pthread_mutex_unlock(&lock);
  return res;
}

mscclppResult_t handle_check_destroy(enum handle_kind kind, const void* p, const char* fn) {
  if (p == NULL) return MPP_ERR(mscclppInvalidArgument, "%s: the %s handle is NULL", fn, handle_kind_name(kind));
  pthread_mutex_lock(&lock);
  const struct entry* e = find(p);
  mscclppResult_t res = destroyable(e, kind) ? mscclppSuccess : not_live(e, kind, p, fn);
  pthread_mutex_unlock(&lock);
  return res;
}

mscclppResult_t handle_check_owned(enum handle_kind kind, const void* p, const struct mscclppComm* comm, const char* fn) {
  if (p == NULL) return MPP_ERR(mscclppInvalidArgument, "%s: the %s handle is NULL", fn, handle_kind_name(kind));
  pthread_mutex_lock(&lock);
  const struct entry* e = find(p);
  mscclppResult_t res;
  if (!holdable(e, kind))
    res = not_live(e, kind, p, fn);
  else if (e->owner != comm)
    res = MPP_ERR(mscclppInvalidUsage, "%s: %s %p belongs to another communicator than %p", fn, handle_kind_name(kind), p,
                  (const void*)comm);
  else
    res = mscclppSuccess;
  pthread_mutex_unlock(&lock);
  return res;
}

mscclppResult_t handle_hold(enum handle_kind kind, const void* p, const char* fn, struct handle_hold* h) {
  h->slot_busy = NULL, h->p = NULL;
  if (p == NULL) return MPP_ERR(mscclppInvalidArgument, "%s: the %s handle is NULL", fn, handle_kind_name(kind));
  struct fast_slot* s = fast_slot_of(p);
  uintptr_t k = fast_key(kind, p);
  if (atomic_load(&s->key) == k) {
    /* seq_cst, the pair of handle_retire's and handle_comm_close's (hide the key, then count): we
     * count in, then look at the key again, so one of the two sides sees the other. */
    atomic_fetch_add(&s->busy, 1);
    if (atomic_load(&s->key) == k) {
      h->slot_busy = &s->busy;
      return mscclppSuccess;
    }
    atomic_fetch_sub(&s->busy, 1);
  }
  pthread_mutex_lock(&lock);
  struct entry* e = find(p);
  mscclppResult_t res = holdable(e, kind) ? mscclppSuccess : not_live(e, kind, p, fn);
  if (res == mscclppSuccess) e->busy++, h->p = p, h->kind = (unsigned char)kind;
  pthread_mutex_unlock(&lock);
  return res;
}

void handle_release(struct handle_hold* h) {
  if (h->slot_busy != NULL) {
    atomic_fetch_sub(h->slot_busy, 1); /* seq_cst: a destroy that reads 0 sees all this call did */
  } else if (h->p != NULL) {
    pthread_mutex_lock(&lock);
    struct entry* e = find(h->p);
    if (e != NULL && e->busy > 0) e->busy--;
    pthread_mutex_unlock(&lock);
  }
  h->slot_busy = NULL, h->p = NULL;
}

mscclppResult_t handle_retire(enum handle_kind kind, const void* p, const char* fn) {
  if (p == NULL) return MPP_ERR(mscclppInvalidArgument, "%s: the %s handle is NULL", fn, handle_kind_name(kind));
  pthread_mutex_lock(&lock);
  struct entry* e = find(p);
  mscclppResult_t res = mscclppSuccess;
  if (!destroyable(e, kind)) {
    res = not_live(e, kind, p, fn);
  } else {
    fast_hide(e, 1);
    int n = holds_of(e);
    if (n > 0) {
      res = MPP_ERR(mscclppInvalidUsage, "%s: %s %p is in use by another thread (%d call(s) on it have not returned); "
                    "destroy it once they have (docs/errors.md)", fn, handle_kind_name(kind), p, n);
      if (e->state == ENTRY_LIVE) fast_publish(e);
    } else {
      bury(e, ENTRY_DESTROYED);
    }
  }
  pthread_mutex_unlock(&lock);
  return res;
}

/* Sets every live, non-orphan object of comm to state (CLOSING with this thread as closer, or back
 * to LIVE), hiding or republishing its key (lock held). */
static void comm_objects_set(const struct mscclppComm* comm, enum entry_state state) {
  for (int i = 0; i < HANDLE_BUCKETS; i++)
    for (struct entry* e = buckets[i]; e; e = e->next) {
      if (e->owner != comm || e->kind == HANDLE_PROXY_SERVICE) continue;
      if (state == ENTRY_CLOSING && e->state == ENTRY_LIVE) {
        e->state = ENTRY_CLOSING, e->closer = (uintptr_t)&thread_token;
        fast_hide(e, 1);
      } else if (state == ENTRY_LIVE && e->state == ENTRY_CLOSING) {
        e->state = ENTRY_LIVE, e->closer = 0;
        fast_publish(e);
      }
    }
}

void handle_comm_close(const struct mscclppComm* comm) {
  pthread_mutex_lock(&lock);
  comm_objects_set(comm, ENTRY_CLOSING);
  pthread_mutex_unlock(&lock);
}

void handle_comm_reopen(const struct mscclppComm* comm) {
  pthread_mutex_lock(&lock);
  comm_objects_set(comm, ENTRY_LIVE);
  pthread_mutex_unlock(&lock);
}

int handle_comm_holds(const struct mscclppComm* comm, const char** kind, const void** p) {
  pthread_mutex_lock(&lock);
  int n = 0;
  for (int i = 0; i < HANDLE_BUCKETS; i++)
    for (struct entry* e = buckets[i]; e; e = e->next) {
      if (e->owner != comm || e->state != ENTRY_CLOSING) continue;
      int h = holds_of(e);
      if (h > 0 && n == 0 && kind) *kind = handle_kind_name((enum handle_kind)e->kind), *p = e->p;
      n += h;
    }
  pthread_mutex_unlock(&lock);
  return n;
}
