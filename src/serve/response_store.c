/* response_store.c - bounded LRU + TTL map from response ids to stored
 * conversations and response objects (see response_store.h). The list is
 * ordered most recently used first; eviction takes from the tail. An entry
 * is found only with both its id and its tenant: another tenant's entry is
 * indistinguishable from a missing one. */
#include "serve/response_store.h"

#include <stdlib.h>
#include <string.h>

typedef struct rs_entry {
    struct rs_entry *prev, *next;
    char *id;
    char *tenant; /* the API key's tenant (serve/tenant.h); "" for the single tenant */
    json_t *conversation;
    char *response;
    size_t bytes;
    double touched;
} rs_entry;

struct response_store {
    rs_entry *head, *tail;
    size_t count, bytes, max_count, max_bytes;
    double ttl;
};

response_store *rstore_new(size_t max_count, size_t max_bytes, double ttl_s) {
    response_store *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->max_count = max_count;
    st->max_bytes = max_bytes;
    st->ttl = ttl_s;
    return st;
}

static void unlink_entry(response_store *st, rs_entry *e) {
    if (e->prev) e->prev->next = e->next;
    else st->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else st->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(response_store *st, rs_entry *e) {
    e->prev = NULL;
    e->next = st->head;
    if (st->head) st->head->prev = e;
    st->head = e;
    if (!st->tail) st->tail = e;
}

static void drop(response_store *st, rs_entry *e) {
    unlink_entry(st, e);
    st->count--;
    st->bytes -= e->bytes;
    if (e->conversation) json_decref(e->conversation);
    free(e->id);
    free(e->tenant);
    free(e->response);
    free(e);
}

void rstore_free(response_store *st) {
    if (!st) return;
    while (st->head) drop(st, st->head);
    free(st);
}

static void expire(response_store *st, double now) {
    while (st->tail && now - st->tail->touched > st->ttl) drop(st, st->tail);
}

static rs_entry *find(response_store *st, const char *id, const char *tenant) {
    for (rs_entry *e = st->head; e; e = e->next)
        if (!strcmp(e->id, id) && !strcmp(e->tenant, tenant ? tenant : "")) return e;
    return NULL;
}

/* Size of a conversation: the lengths of its strings (content, arguments...). */
static size_t json_bytes(const json_t *j) {
    size_t n = 16;
    if (json_is_string(j)) return n + json_string_length(j);
    if (json_is_array(j))
        for (size_t i = 0; i < json_array_size(j); i++) n += json_bytes(json_array_get(j, i));
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) n += strlen(k) + json_bytes(v);
    }
    return n;
}

int rstore_put(response_store *st, const char *id, const char *tenant, json_t *conversation, const char *response_json,
               double now) {
    if (!st->max_count) return 0;
    if (!tenant) tenant = "";
    size_t bytes = sizeof(rs_entry) + strlen(id) + strlen(tenant) + strlen(response_json) + json_bytes(conversation);
    if (bytes > st->max_bytes) return -1;
    rs_entry *e = calloc(1, sizeof *e);
    if (!e || !(e->id = strdup(id)) || !(e->tenant = strdup(tenant)) || !(e->response = strdup(response_json))) {
        if (e) free(e->id), free(e->tenant);
        free(e);
        return -1;
    }
    rs_entry *old = find(st, id, tenant);
    if (old) drop(st, old);
    e->conversation = json_incref(conversation);
    e->bytes = bytes;
    e->touched = now;
    push_front(st, e);
    st->count++;
    st->bytes += bytes;
    expire(st, now);
    while (st->tail && (st->count > st->max_count || st->bytes > st->max_bytes)) drop(st, st->tail);
    return 0;
}

bool rstore_get(response_store *st, const char *id, const char *tenant, double now, json_t **conversation,
                const char **response_json) {
    expire(st, now);
    rs_entry *e = find(st, id, tenant);
    if (!e) return false;
    unlink_entry(st, e);
    push_front(st, e);
    e->touched = now;
    if (conversation) *conversation = e->conversation;
    if (response_json) *response_json = e->response;
    return true;
}

bool rstore_delete(response_store *st, const char *id, const char *tenant) {
    rs_entry *e = find(st, id, tenant);
    if (!e) return false;
    drop(st, e);
    return true;
}

size_t rstore_count(const response_store *st) { return st->count; }
size_t rstore_bytes(const response_store *st) { return st->bytes; }
