/* Intrusive circular doubly-linked lists (header-only). */
#ifndef MDR_LIST_H
#define MDR_LIST_H

#include <stddef.h>

typedef struct mdr_list {
    struct mdr_list *next, *prev;
} mdr_list_t;

#define MDR_LIST_INIT(_l) { &(_l), &(_l) }
#define mdr_container_of(_ptr, _type, _member)                                              \
    ((_type *)((char *)(_ptr) - offsetof(_type, _member)))

static inline void mdr_list_init(mdr_list_t *l) { l->next = l->prev = l; }
static inline int mdr_list_empty(const mdr_list_t *l) { return l->next == l; }
static inline void mdr_list_insert_after(mdr_list_t *pos, mdr_list_t *e)
{
    e->next = pos->next;
    e->prev = pos;
    pos->next->prev = e;
    pos->next = e;
}
static inline void mdr_list_push_tail(mdr_list_t *l, mdr_list_t *e)
{
    mdr_list_insert_after(l->prev, e);
}
static inline void mdr_list_push_head(mdr_list_t *l, mdr_list_t *e)
{
    mdr_list_insert_after(l, e);
}
static inline void mdr_list_del(mdr_list_t *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    e->next = e->prev = e;
}
static inline mdr_list_t *mdr_list_pop_head(mdr_list_t *l)
{
    mdr_list_t *e = l->next;
    if (e == l)
        return NULL;
    mdr_list_del(e);
    return e;
}

#define mdr_list_for_each(_it, _head) for ((_it) = (_head)->next; (_it) != (_head); (_it) = (_it)->next)
#define mdr_list_for_each_safe(_it, _tmp, _head)                                            \
    for ((_it) = (_head)->next, (_tmp) = (_it)->next; (_it) != (_head);                      \
         (_it) = (_tmp), (_tmp) = (_it)->next)

#endif
