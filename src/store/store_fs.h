/* store_fs.h - file operations on one store directory: atomic publish of an
 * object, opening / verifying / loading one, quarantine, access-time touch.
 * Synchronous and thread-safe (no shared state): the I/O threads (store.c),
 * the GC, the CLI and the tests call these directly.
 *
 * Layout of a store directory:
 *   objects/ab/cd/<hex>             published objects (write-once)
 *   objects/ab/cd/<hex>.tmp.<pid>.<n>  a write in progress (GC removes stale ones)
 *   quarantine/<hex>.<unix>.<pid>   objects that failed verification
 *
 * Atomicity: an object is written under a temporary name in its final
 * directory, optionally fsync'ed, given its times, then rename()d onto its
 * name; readers see either no object or a complete one. Two writers of the
 * same key each rename their own complete copy; whichever lands last wins,
 * and both copies hold the KV of the same key, so it does not matter.
 *
 * Times: a published object's mtime is set to its EXPIRY and its atime to its
 * last use (set at publish, refreshed on load at most every touch interval),
 * so GC needs only stat(): expired = mtime <= now, LRU order = atime. The
 * header's expiry stays authoritative on load. Files are opened O_NOATIME
 * where permitted so plain reads do not move the access time.
 *
 * Opening never blocks on the file itself: objects are opened O_NONBLOCK |
 * O_NOFOLLOW and anything but a regular file under an object name (a FIFO, a
 * symlink, ...) is quarantined. A hung mount can still block a syscall; the
 * store's shutdown deadline (store.h) covers that. */
#ifndef CINFER_STORE_STORE_FS_H
#define CINFER_STORE_STORE_FS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "store/store_format.h"

/* Creates dir, dir/objects and dir/quarantine if missing. 0, or -1 with err
 * (errno kept). */
int store_fs_prepare(const char *dir, cf_err *err);

typedef enum store_pub_result {
    STORE_PUB_WRITTEN = 0,
    STORE_PUB_EXISTS, /* an object with this key is already published: nothing written */
    STORE_PUB_ERROR, /* err set, *err_no = the errno (ENOSPC, EROFS, EACCES, ...) */
} store_pub_result;

/* Publishes one object (h: fingerprint, key, parent, n_tokens, class,
 * created, expires, payload_len set by the caller). now: the store clock,
 * becomes the atime. mac_key: NULL writes version 1, else version 2 with an
 * HMAC trailer (store_format.h). */
store_pub_result store_fs_publish(const char *dir, store_obj_hdr *h, const int32_t *tokens, const void *payload,
                                  const store_mac_key *mac_key, bool sync, int64_t now, int *err_no, cf_err *err);

typedef enum store_load_result {
    STORE_LOAD_HIT = 0,
    STORE_LOAD_MISS, /* no such object */
    STORE_LOAD_EXPIRED, /* present but expired (left for GC) */
    STORE_LOAD_QUARANTINED, /* failed verification; moved to quarantine/ */
    STORE_LOAD_ERROR, /* I/O error (EIO, EACCES, ...); err set */
} store_load_result;

/* *err_no for a path that is not a regular file (a FIFO, socket, device,
 * directory or symlink): never a real errno. */
#define STORE_ENOTREG (-1000)

/* Opens a file for reading without blocking on it: O_NONBLOCK | O_NOFOLLOW
 * (| O_NOATIME where permitted), then fstat; fd >= 0 only for a regular file,
 * else -1 with *err_no (STORE_ENOTREG, ENOENT, ...). */
int store_fs_open_file(const char *path, int *err_no);

/* Opens the object for key (store_fs_open_file): fd >= 0, or -1 with *err_no
 * (ENOENT: absent; STORE_ENOTREG: not a regular file, moved to quarantine/). */
int store_fs_open(const char *dir, const uint8_t key[STORE_KEY_BYTES], int *err_no);

/* Reads the object on fd into hdr_buf (capacity store_header_len(x->n_tokens))
 * and payload_dst (x->payload_len bytes), verifies it against x at `now`,
 * quarantines it when corrupt, refreshes its atime when older than
 * now - touch_interval_s, and closes fd. *bytes_read: bytes read. */
store_load_result store_fs_load_fd(const char *dir, int fd, const store_expect *x, uint8_t *hdr_buf, void *payload_dst,
                                   int64_t now, int64_t touch_interval_s, uint64_t *bytes_read, cf_err *err);

/* store_fs_open + store_fs_load_fd. */
store_load_result store_fs_load(const char *dir, const store_expect *x, uint8_t *hdr_buf, void *payload_dst,
                                int64_t now, int64_t touch_interval_s, uint64_t *bytes_read, cf_err *err);

/* Moves the object named by key to quarantine/ (no-op if it is gone). */
int store_fs_quarantine(const char *dir, const uint8_t key[STORE_KEY_BYTES], cf_err *err);

/* Reads an HMAC key file: a regular file (not a symlink), not readable or
 * writable by others, STORE_MAC_KEY_MIN..STORE_MAC_KEY_MAX bytes, used as raw
 * bytes (a trailing newline is part of the key). 0, or -1 with err. */
int store_key_load(const char *path, store_mac_key *k, cf_err *err);

/* Parses a duration "90", "90s", "15m", "12h", "3d" into seconds. -1 if invalid. */
int store_parse_duration(const char *s, int64_t *out);

#endif
