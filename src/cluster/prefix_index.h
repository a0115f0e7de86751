/* prefix_index.h - the router's compact index of which prompt prefixes it
 * sent to which worker, to estimate each worker's cached prefix length
 * (route_worker.cached_tokens) without asking the worker.
 *
 * A prompt is the canonical byte string the router derives from a request
 * (cluster/router_prompt.c). It is cut into PREFIX_CHUNK_BYTES chunks and
 * hashed as a chain: h[i] = H(h[i-1], chunk i), h[-1] = H(tenant key), so a
 * chain hash names a whole prefix and two tenants never share one. The
 * index holds, per worker, a fixed-size table of chain hashes (open
 * addressing, one probe window; a full window overwrites its oldest entry),
 * so memory is bounded and lookups never allocate. The index is an estimate,
 * like the worker's own cache: entries age out by being overwritten.
 *
 * Not thread-safe: one owner (the router's event loop). */
#ifndef CINFER_CLUSTER_PREFIX_INDEX_H
#define CINFER_CLUSTER_PREFIX_INDEX_H

#include <stddef.h>
#include <stdint.h>

#define PREFIX_CHUNK_BYTES 128
#define PREFIX_MAX_CHUNKS 4096 /* prompts longer than 512 KiB are indexed on their first 512 KiB */

/* Chain hashes of the full chunks of prompt[0, len) seeded by tenant
 * (tenant_len bytes, may be 0). Writes at most cap hashes; returns the count. */
int32_t prefix_chain(const char *tenant, size_t tenant_len, const char *prompt, size_t len, uint64_t *out, int32_t cap);

/* A 64-bit hash of bytes (seeded); also used for worker ids and affinity keys. */
uint64_t prefix_hash_bytes(uint64_t seed, const void *p, size_t n);

typedef struct prefix_index {
    int32_t n_workers;
    int32_t slots_per_worker; /* power of two */
    uint64_t *hash; /* n_workers * slots_per_worker; 0 = empty */
    uint64_t *stamp; /* insertion stamp per slot (oldest is overwritten) */
    uint64_t clock;
} prefix_index;

/* Allocates the table (slots_per_worker rounded up to a power of two). 0, or -1 (ENOMEM). */
int prefix_index_init(prefix_index *ix, int32_t n_workers, int32_t slots_per_worker);
void prefix_index_free(prefix_index *ix);
/* Records that `worker` now holds every prefix of the chain. */
void prefix_index_insert(prefix_index *ix, int32_t worker, const uint64_t *chain, int32_t n);
/* Number of leading chain entries `worker` holds (longest cached prefix, in chunks). */
int32_t prefix_index_match(const prefix_index *ix, int32_t worker, const uint64_t *chain, int32_t n);
/* Forgets everything about a worker (it restarted: its cache is empty). */
void prefix_index_clear_worker(prefix_index *ix, int32_t worker);

#endif
