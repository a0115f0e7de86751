/* swa_format.c - see swa_format.h. Integers are read and written byte by
 * byte (little-endian on every host); the floats are checked in place. */
#include "engine/swa_format.h"

#include "base/le_bytes.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <xxhash.h>

int64_t swa_snap_floats(const swa_snap_geom *g) {
    return SWA_SNAP_HDR_FLOATS + (int64_t)g->n_blocks * (int64_t)g->block_floats;
}

void swa_snap_seal(const swa_snap_geom *g, uint32_t boundary, void *buf) {
    uint8_t *h = buf;
    size_t data = (size_t)g->n_blocks * g->block_floats * sizeof(float);
    memset(h, 0, SWA_SNAP_HDR_BYTES);
    memcpy(h, SWA_SNAP_MAGIC, sizeof SWA_SNAP_MAGIC);
    le_put32(h + 8, SWA_SNAP_VERSION);
    le_put32(h + 12, g->n_blocks);
    le_put32(h + 16, g->block_tokens);
    le_put32(h + 20, boundary);
    le_put64(h + 24, g->block_floats);
    le_put64(h + 32, XXH3_64bits(h + SWA_SNAP_HDR_BYTES, data));
}

int swa_snap_check(const swa_snap_geom *g, uint32_t boundary, const void *buf, size_t len, cf_err *err) {
    const uint8_t *h = buf;
    size_t data = (size_t)g->n_blocks * g->block_floats * sizeof(float);
    if (len != SWA_SNAP_HDR_BYTES + data)
        return cf_fail(err, "window-state snapshot: %zu bytes, expected %zu", len, SWA_SNAP_HDR_BYTES + data);
    if (memcmp(h, SWA_SNAP_MAGIC, sizeof SWA_SNAP_MAGIC)) return cf_fail(err, "window-state snapshot: bad magic");
    if (le_get32(h + 8) != SWA_SNAP_VERSION)
        return cf_fail(err, "window-state snapshot: version %u, expected %u", le_get32(h + 8), SWA_SNAP_VERSION);
    if (le_get32(h + 12) != g->n_blocks || le_get32(h + 16) != g->block_tokens || le_get64(h + 24) != g->block_floats)
        return cf_fail(err, "window-state snapshot: geometry %u x %u tokens x %llu floats, expected %u x %u x %llu",
                       le_get32(h + 12), le_get32(h + 16), (unsigned long long)le_get64(h + 24), g->n_blocks,
                       g->block_tokens, (unsigned long long)g->block_floats);
    if (le_get32(h + 20) != boundary)
        return cf_fail(err, "window-state snapshot: boundary block %u, expected %u", le_get32(h + 20), boundary);
    for (int i = 40; i < SWA_SNAP_HDR_BYTES; i++)
        if (h[i]) return cf_fail(err, "window-state snapshot: reserved byte %d is not zero", i);
    if (le_get64(h + 32) != XXH3_64bits(h + SWA_SNAP_HDR_BYTES, data))
        return cf_fail(err, "window-state snapshot: checksum mismatch");
    const uint8_t *d = h + SWA_SNAP_HDR_BYTES;
    for (uint64_t b = 0; b < g->n_blocks; b++)
        for (uint64_t i = 0; i < g->block_floats; i++) {
            float v;
            memcpy(&v, d + (b * g->block_floats + i) * sizeof(float), sizeof v); /* alignment-free */
            bool before_start = (int64_t)boundary - (int64_t)g->n_blocks + (int64_t)b < 0;
            if (!isfinite(v) || (before_start && v != 0.0f))
                return cf_fail(err, "window-state snapshot: block %llu float %llu is %s", (unsigned long long)b,
                               (unsigned long long)i, before_start ? "not zero before position 0" : "not finite");
        }
    return 0;
}
