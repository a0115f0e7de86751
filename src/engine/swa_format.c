/* swa_format.c - see swa_format.h. Integers are read and written byte by
 * byte (little-endian on every host); the floats are checked in place. */
#include "engine/swa_format.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <xxhash.h>

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int64_t swa_snap_floats(const swa_snap_geom *g) {
    return SWA_SNAP_HDR_FLOATS + (int64_t)g->n_blocks * (int64_t)g->block_floats;
}

void swa_snap_seal(const swa_snap_geom *g, uint32_t boundary, void *buf) {
    uint8_t *h = buf;
    size_t data = (size_t)g->n_blocks * g->block_floats * sizeof(float);
    memset(h, 0, SWA_SNAP_HDR_BYTES);
    memcpy(h, SWA_SNAP_MAGIC, sizeof SWA_SNAP_MAGIC);
    put32(h + 8, SWA_SNAP_VERSION);
    put32(h + 12, g->n_blocks);
    put32(h + 16, g->block_tokens);
    put32(h + 20, boundary);
    put64(h + 24, g->block_floats);
    put64(h + 32, XXH3_64bits(h + SWA_SNAP_HDR_BYTES, data));
}

int swa_snap_check(const swa_snap_geom *g, uint32_t boundary, const void *buf, size_t len, cf_err *err) {
    const uint8_t *h = buf;
    size_t data = (size_t)g->n_blocks * g->block_floats * sizeof(float);
    if (len != SWA_SNAP_HDR_BYTES + data)
        return cf_fail(err, "window-state snapshot: %zu bytes, expected %zu", len, SWA_SNAP_HDR_BYTES + data);
    if (memcmp(h, SWA_SNAP_MAGIC, sizeof SWA_SNAP_MAGIC)) return cf_fail(err, "window-state snapshot: bad magic");
    if (get32(h + 8) != SWA_SNAP_VERSION)
        return cf_fail(err, "window-state snapshot: version %u, expected %u", get32(h + 8), SWA_SNAP_VERSION);
    if (get32(h + 12) != g->n_blocks || get32(h + 16) != g->block_tokens || get64(h + 24) != g->block_floats)
        return cf_fail(err, "window-state snapshot: geometry %u x %u tokens x %llu floats, expected %u x %u x %llu",
                       get32(h + 12), get32(h + 16), (unsigned long long)get64(h + 24), g->n_blocks, g->block_tokens,
                       (unsigned long long)g->block_floats);
    if (get32(h + 20) != boundary)
        return cf_fail(err, "window-state snapshot: boundary block %u, expected %u", get32(h + 20), boundary);
    for (int i = 40; i < SWA_SNAP_HDR_BYTES; i++)
        if (h[i]) return cf_fail(err, "window-state snapshot: reserved byte %d is not zero", i);
    if (get64(h + 32) != XXH3_64bits(h + SWA_SNAP_HDR_BYTES, data))
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
