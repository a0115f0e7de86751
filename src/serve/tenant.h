/* tenant.h - who a request belongs to, for isolating one API key's data from
 * another's (docs/serve.md "Tenants"): stored Responses are visible only to
 * the tenant that created them, and, unless --share-prefix-cache, a tenant's
 * prompts get a cache salt of their own so that no tenant can learn from
 * prefix-cache hits (timing, usage.cached_tokens) what another one sent.
 *
 * Tenant id: "" when the server has at most one key (no key, one --api-key
 * or $CINFER_API_KEY: one tenant); with several --api-key keys, the
 * first 16 bytes of SHA-256("cinfer-tenant:" || key) in hex (32 chars), the
 * same across restarts (the persistent KV store keeps working per tenant).
 * Pure functions; the id never contains the key. */
#ifndef CINFER_SERVE_TENANT_H
#define CINFER_SERVE_TENANT_H

#include <event2/http.h>
#include <stdbool.h>

#include "serve/server.h"

#define TENANT_ID_CAP 33

/* The tenant of a request that passed authorization (its x-api-key or
 * Authorization: Bearer key). 0, or -1 when hashing fails (out is ""). */
int tenant_of_request(const serve_config *cfg, struct evhttp_request *req, char out[TENANT_ID_CAP]);
/* The tenant of a key (used by tenant_of_request; "" for NULL). 0 or -1. */
int tenant_of_key(const char *key, char out[TENANT_ID_CAP]);

/* Rewrites a request's cache salt (owned string or NULL) for its tenant:
 * unchanged for the single tenant "" or when `share`; else
 * "tenant:ID" or "tenant:ID\x1f" + the request's own salt. 0, or -1 when out
 * of memory (the salt is then unchanged). */
int tenant_cache_salt(const char *tenant, bool share, char **cache_salt);

#endif
