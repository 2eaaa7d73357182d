/* objects.c - what core keeps per communicator besides its identity: the transports' view of it
 * (comm->tc, started here) and the lists of open registrations, connections and semaphores, which
 * teardown frees when the user left them open. */
#include <stdlib.h>

#include "core/comm.h"
#include "core/connection.h"
#include "util/err.h"
#include "util/log.h"

struct comm_objects {
  pthread_mutex_t lock; /* guards the lists */
  struct list_node lists[COMM_OBJ_LISTS];
};

void comm_objects_track(struct mscclppComm* comm, enum comm_object_list list, struct list_node* node) {
  pthread_mutex_lock(&comm->objs->lock);
  list_push(&comm->objs->lists[list], node);
  pthread_mutex_unlock(&comm->objs->lock);
}

void comm_objects_untrack(struct mscclppComm* comm, struct list_node* node) {
  pthread_mutex_lock(&comm->objs->lock);
  list_unlink(node);
  pthread_mutex_unlock(&comm->objs->lock);
}

/* The transports' view of comm: its identity and peer table, read-only from here on. */
static void fill_transport_comm(struct mscclppComm* comm) {
  struct transport_comm* tc = &comm->tc;
  tc->comm_id = comm->comm_id;
  tc->rank = comm->rank;
  tc->nranks = comm->nranks;
  tc->kind = comm->kind;
  tc->cuda_dev = comm->cuda_dev;
  tc->timeout_ms = comm->timeout_ms;
  tc->boot = comm->boot;
  tc->peers = comm->peers;
}

mscclppResult_t comm_objects_init(struct mscclppComm* comm) {
  struct comm_objects* o = calloc(1, sizeof(*o));
  if (o == NULL) return MPP_ERR(mscclppSystemError, "communicator init: out of host memory");
  pthread_mutex_init(&o->lock, NULL);
  for (int i = 0; i < COMM_OBJ_LISTS; i++) list_init(&o->lists[i]);
  fill_transport_comm(comm);
  mscclppResult_t res = transport_comm_start(&comm->tc);
  if (res != mscclppSuccess) {
    pthread_mutex_destroy(&o->lock);
    free(o);
    return res;
  }
  comm->objs = o;
  return mscclppSuccess;
}

/* Pops the first node of list (NULL when empty) under the lock. */
static struct list_node* pop_first(struct comm_objects* o, enum comm_object_list list) {
  pthread_mutex_lock(&o->lock);
  struct list_node* head = &o->lists[list];
  struct list_node* n = head->next == head ? NULL : head->next;
  if (n != NULL) list_unlink(n);
  pthread_mutex_unlock(&o->lock);
  return n;
}

/* Frees what the user left open: semaphores first (they hold memory and use connections), then
 * connections (joining their threads), then registrations; finally the transports stop. */
void comm_objects_fini(struct mscclppComm* comm, int abort) {
  struct comm_objects* o = comm->objs;
  if (o == NULL) return;
  struct list_node* n;
  int left = 0;
  while ((n = pop_first(o, COMM_OBJ_SEMS)) != NULL) {
    semaphore_free((struct mscclppHostSemaphore*)(void*)n);
    left++;
  }
  while ((n = pop_first(o, COMM_OBJ_CONNS)) != NULL) {
    connection_free((struct mscclppConnection*)(void*)n, abort);
    left++;
  }
  while ((n = pop_first(o, COMM_OBJ_MEMS)) != NULL) {
    regmem_free((struct mscclppRegMem*)(void*)n);
    left++;
  }
  if (left > 0)
    LOG_INFO_(LOG_SUB_TRANSPORT, "communicator teardown released %d registrations, connections or semaphores left open", left);
  transport_comm_stop(&comm->tc);
  pthread_mutex_destroy(&o->lock);
  free(o);
  comm->objs = NULL;
}
