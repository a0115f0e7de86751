/* weights_cache.h - the repacked-weights cache of one model load
 * (`--weights-cache DIR`; file format: format/wcache_format.h).
 *
 * The loader asks for every weight buffer it would otherwise compute
 * (repacked matrices, stacked rows, f32 copies) through model_wbuf
 * (model_memory.c), which takes it from here when a cache is open:
 *   - hit: DIR holds a valid cache file for this model, ISA, layout and
 *     cinfer version. It is mapped read-only (MAP_SHARED: every process on
 *     the host that maps it shares one page-cache copy), every buffer's
 *     checksum is verified before use, and wcache_take hands out the buffers
 *     in load order, already filled; a request that does not match the next
 *     entry (kind, size, tensor name) fails the load (wcache_failed), and the
 *     loader rebuilds the file;
 *   - build: no valid file. A temporary file in DIR is mapped read-write
 *     (MAP_SHARED) and grown (posix_fallocate, so a full disk is an error,
 *     not a SIGBUS) as wcache_take hands out slots the loader fills in place;
 *     wcache_finish checksums them, writes the index and the header, fsyncs
 *     and renames the file onto its name, and the model keeps using the
 *     mapping (read-only from then on), so the first process shares the
 *     pages with later ones too.
 * A file that is truncated, corrupt, of another format version, built for
 * another model / ISA / layout / cinfer version, not a regular file or not
 * owned by this user is rejected with one log line and rebuilt; it is never
 * used. Stale temporary files of dead writers are removed when a build
 * starts.
 *
 * Trust: the cache directory must be writable only by the server's user (as
 * the model file must be): checksums detect corruption, not a deliberate
 * writer. A process writing the mapped file in place, or truncating it,
 * while a server runs would change or fault its weights, as it would with
 * the mmap'd model file itself.
 *
 * Threads: one loading thread; verification uses short-lived helper
 * threads. Progress of verification goes to the model's progress callback. */
#ifndef CINFER_MODEL_WEIGHTS_CACHE_H
#define CINFER_MODEL_WEIGHTS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "format/gguf.h"
#include "format/wcache_format.h"
#include "model/model.h"

/* Layout of the loader's sequence of cached buffers: bump it whenever the
 * loader changes which buffers it makes or their order (model.c, arch/). */
#define WC_LOADER_LAYOUT 1u

typedef struct wcache wcache;

/* Opens the cache for model file f under dir (made if missing): a verified
 * hit, or a build. force_build skips reading an existing file (after a hit
 * failed during the load). progress (may be NULL) sees verification.
 * Returns 0 with *out set, or -1 with err when no cache can be used at all
 * (the directory cannot be made or written): then load without one. */
int wcache_open(const char *dir, const gguf_file *f, bool force_build, model_progress_fn progress, void *progress_ctx,
                wcache **out, cf_err *err);

/* The next buffer: `bytes` for tensor(s) `name` of `kind`. Hit: the cached
 * bytes, *filled = true. Build: a zeroed, 64-byte aligned slot to fill,
 * *filled = false. NULL with err on failure (then wcache_failed is true). */
void *wcache_take(wcache *c, const char *name, uint32_t kind, size_t bytes, bool *filled, cf_err *err);

/* After the whole load: a hit checks every entry was used; a build
 * publishes the file. The mapping stays valid (read-only) until
 * wcache_close. -1 with err on failure (wcache_failed is then true). */
int wcache_finish(wcache *c, cf_err *err);

/* True once a take or finish failed: the load should be redone without
 * trusting this cache (rebuild after a failed hit, no cache after a failed
 * build). */
bool wcache_failed(const wcache *c);
bool wcache_is_hit(const wcache *c);

/* The mapping (for mlock) and the bytes of buffers handed out. */
void wcache_region(const wcache *c, void **p, size_t *n);
uint64_t wcache_buffer_bytes(const wcache *c);
/* The cache file's path, and why an existing file was rejected ("" if none). */
const char *wcache_path(const wcache *c);
const char *wcache_rejected(const wcache *c);
/* Seconds spent verifying (hit) or publishing (build). */
double wcache_seconds(const wcache *c);

/* Unmaps; an unfinished build's temporary file is removed. NULL is fine. */
void wcache_close(wcache *c);

#endif
