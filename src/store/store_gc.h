/* store_gc.h - retention and capacity of a store directory, and its summary.
 *
 * A GC pass walks objects/ with stat() only (store_fs.h: mtime = expiry,
 * atime = last use) and deletes, in order:
 *   1. objects whose expiry has passed (mtime <= now);
 *   2. temporaries (<hex>.tmp.*) untouched for STORE_GC_TMP_AGE_S of real
 *      time (a writer that died mid-write), and quarantined files older than
 *      STORE_GC_QUARANTINE_AGE_S;
 *   3. when quota_bytes > 0 and the remaining objects exceed it, the least
 *      recently used (oldest atime, ties by name) until they fit.
 * Several passes may run at once (several servers, `cinfer store gc`): every
 * unlink that finds the file already gone is ignored, a reader holding an
 * open object keeps reading it (POSIX unlink semantics), and concurrent LRU
 * passes can only evict somewhat more than needed. Empty fan-out directories
 * are left in place (removing them would race with writers).
 *
 * Callers: the store's GC thread (store.c), `cinfer store gc|stats`, tests. */
#ifndef CINFER_STORE_STORE_GC_H
#define CINFER_STORE_STORE_GC_H

#include <stdint.h>

#include "base/error.h"
#include "store/store_format.h"

#define STORE_GC_TMP_AGE_S 3600
#define STORE_GC_QUARANTINE_AGE_S 86400

typedef struct store_gc_result {
    uint64_t objects, bytes; /* objects found / their bytes, before deletion */
    uint64_t deleted_expired, deleted_lru, deleted_tmp, deleted_quarantine;
    uint64_t bytes_deleted;
    uint64_t objects_after, bytes_after;
    uint64_t errors; /* unlink / stat failures other than ENOENT */
} store_gc_result;

/* The retention decisions, as pure functions shared with the cluster
 * simulator (src/sim/sim_store.c), which links them rather than copying:
 * an object written at `now` in class `cls` expires at now + retention[cls];
 * it is expired (unloadable, and deleted by the next pass) once expires <=
 * now. */
int64_t store_expiry_for(int64_t now, int cls, const int64_t retention_s[STORE_N_CLASSES]);
static inline int store_is_expired(int64_t expires, int64_t now) { return expires <= now; }

/* A live object, as the quota pass sees it. */
typedef struct store_gc_cand {
    uint8_t key[STORE_KEY_BYTES];
    int64_t atime, size;
} store_gc_cand;

/* The quota decision: sorts v into eviction order (least recently used
 * first: oldest atime, ties by key) and returns how many of the first
 * objects must go so that `live` bytes fit in quota_bytes (0 when
 * quota_bytes <= 0 or live already fits). Pure: no I/O, no clock. */
size_t store_gc_lru_victims(store_gc_cand *v, size_t n, uint64_t live, int64_t quota_bytes);

/* One pass over dir at store time `now`. -1 (err) only when dir/objects cannot be read. */
int store_gc(const char *dir, int64_t now, int64_t quota_bytes, store_gc_result *r, cf_err *err);

typedef struct store_summary {
    uint64_t objects, bytes, expired, unreadable;
    uint64_t class_objects[STORE_N_CLASSES], class_bytes[STORE_N_CLASSES];
    uint64_t tmp_files, quarantined, quarantined_bytes;
    int64_t oldest_created, newest_created, oldest_access, next_expiry; /* 0 when there are no objects */
    uint64_t fingerprints; /* distinct model fingerprints seen (up to 16 counted) */
} store_summary;

/* Reads every object's header (for `cinfer store stats`). */
int store_summarize(const char *dir, int64_t now, store_summary *s, cf_err *err);

/* Retention: "agent=3d,chat=7d,default=1d" (any subset; others keep
 * STORE_RETENTION_DEFAULTS). Durations as store_parse_duration. */
#define STORE_RETENTION_DEFAULT_S 86400
#define STORE_RETENTION_CHAT_S (7 * 86400)
#define STORE_RETENTION_AGENT_S (3 * 86400)
void store_retention_defaults(int64_t out[STORE_N_CLASSES]);
/* swa_s non-NULL: also accepts "swa=DURATION", the retention of window-state
 * snapshots (engine_swa_store.c), a short-lived pseudo-class (*swa_s = 0 when
 * absent: snapshots are not stored); NULL: "swa" is refused. */
int store_retention_parse(const char *spec, int64_t out[STORE_N_CLASSES], int64_t *swa_s, cf_err *err);
/* "default" / "chat" / "agent" -> class, -1 if unknown; and back. */
int store_class_parse(const char *name);
const char *store_class_name(int cls);

#endif
