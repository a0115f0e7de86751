/* swa_format.h - the self-describing layout of one window-state snapshot
 * (swa_state.h): the bytes a window-state tier slot holds and, unchanged,
 * the payload of a snapshot object in the persistent store (engine_swa_store.c,
 * where it is untrusted input: another worker, an older build or a corrupted
 * disk may have written it).
 *
 * Layout (all integers little-endian, the floats in host order, which the
 * store's fingerprint pins: "swa-f32"):
 *   off  size
 *     0     8  magic "CINFSWA\0"
 *     8     4  version (SWA_SNAP_VERSION)
 *    12     4  n_blocks: ring blocks in the snapshot
 *    16     4  block_tokens
 *    20     4  boundary: position block index B / block_tokens of the boundary
 *    24     8  block_floats: floats per ring block (all window layers)
 *    32     8  checksum: XXH3-64 over the floats
 *    40    24  reserved, zero
 *    64   ...  n_blocks * block_floats floats: position blocks
 *              [boundary - n_blocks, boundary), oldest first
 * A snapshot is valid for a reader iff its length is exactly
 * SWA_SNAP_HDR_BYTES + n_blocks * block_floats * 4, every header field equals
 * the reader's expectation (geometry and boundary), the reserved bytes are
 * zero, the checksum matches, every float is finite, and the blocks before
 * position 0 (boundary - n_blocks + j < 0) are all zeros. Anything else is
 * refused with a reason. Pure functions: no I/O, no allocation. */
#ifndef CINFER_ENGINE_SWA_FORMAT_H
#define CINFER_ENGINE_SWA_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define SWA_SNAP_MAGIC "CINFSWA" /* 7 characters + the NUL */
#define SWA_SNAP_VERSION 1u
#define SWA_SNAP_HDR_BYTES 64
#define SWA_SNAP_HDR_FLOATS (SWA_SNAP_HDR_BYTES / 4)

typedef struct swa_snap_geom {
    uint32_t n_blocks, block_tokens;
    uint64_t block_floats;
} swa_snap_geom;

/* Floats of a whole snapshot, header included. */
int64_t swa_snap_floats(const swa_snap_geom *g);
/* Writes the header for boundary block `boundary` over the floats that
 * follow it in buf (buf holds swa_snap_floats(g) floats, the data filled). */
void swa_snap_seal(const swa_snap_geom *g, uint32_t boundary, void *buf);
/* 0 when buf (len bytes) is a valid snapshot of geometry g at boundary; else
 * -1 with the reason in err. */
int swa_snap_check(const swa_snap_geom *g, uint32_t boundary, const void *buf, size_t len, cf_err *err);

#endif
