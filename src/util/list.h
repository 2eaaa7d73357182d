/* list.h - an intrusive doubly-linked list (the communicator's lists of open objects). */
#ifndef MPP_UTIL_LIST_H_
#define MPP_UTIL_LIST_H_

/* An intrusive doubly-linked list node; a list is a sentinel node pointing at itself when empty. */
struct list_node {
  struct list_node *prev, *next;
};
static inline void list_init(struct list_node* head) { head->prev = head->next = head; }
static inline void list_push(struct list_node* head, struct list_node* n) {
  n->next = head;
  n->prev = head->prev;
  head->prev->next = n;
  head->prev = n;
}
static inline void list_unlink(struct list_node* n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->prev = n->next = n;
}

#endif /* MPP_UTIL_LIST_H_ */
