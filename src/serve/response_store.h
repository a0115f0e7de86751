/* response_store.h - the in-memory store behind the Responses API's
 * previous_response_id, GET /v1/responses/{id} and DELETE /v1/responses/{id}.
 *
 * Each entry maps a response id to (a) the conversation that produced it, as
 * chat-template messages (JSON array; the new turn of a continuation is
 * appended to it) and (b) the response object as sent (JSON text, for GET).
 * Bounded three ways: entry count, total bytes (texts' lengths), and a TTL
 * since the entry was last written or read; beyond a cap the least recently
 * used entries are evicted. Lookups are a linear scan over the LRU list (the
 * caps keep it small; the store is touched once per Responses request).
 *
 * Tenants: every entry belongs to the tenant (API key) that stored it and
 * is invisible to every other tenant (docs/serve.md "Tenants").
 *
 * Ownership: the store owns its entries. Not thread-safe: only the server's
 * HTTP loop thread calls it. */
#ifndef CINFER_SERVE_RESPONSE_STORE_H
#define CINFER_SERVE_RESPONSE_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct response_store response_store;

/* max_count 0 disables storing (every put is dropped). NULL when out of memory. */
response_store *rstore_new(size_t max_count, size_t max_bytes, double ttl_s);
void rstore_free(response_store *st);

/* Stores (replaces) an entry owned by `tenant` (serve/tenant.h; NULL or ""
 * for the single tenant). Takes a reference to `conversation` only on
 * success; copies `response_json`. 0, or -1 when out of memory or when the
 * entry alone is larger than the byte cap (nothing stored). */
int rstore_put(response_store *st, const char *id, const char *tenant, json_t *conversation, const char *response_json,
               double now);
/* Looks an entry of `tenant` up (expired entries are dropped first) and marks
 * it used; another tenant's entry is not found. Borrowed pointers, valid
 * until the next call that changes the store. */
bool rstore_get(response_store *st, const char *id, const char *tenant, double now, json_t **conversation,
                const char **response_json);
/* Removes an entry of `tenant`; false if there was none. */
bool rstore_delete(response_store *st, const char *id, const char *tenant);
size_t rstore_count(const response_store *st);
size_t rstore_bytes(const response_store *st);

#endif
