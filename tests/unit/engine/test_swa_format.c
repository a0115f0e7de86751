/* test_swa_format.c - the window-state snapshot layout (swa_format.h): a
 * sealed snapshot checks; every kind of damage is refused with a reason
 * (length, magic, version, geometry, boundary, reserved bytes, checksum, a
 * NaN or an infinity with a matching checksum, non-zero rows before
 * position 0). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/swa_format.h"
#include "testutil.h"

static const swa_snap_geom G = {.n_blocks = 3, .block_tokens = 16, .block_floats = 40};

static float *make(uint32_t boundary) {
    int64_t n = swa_snap_floats(&G);
    float *buf = calloc((size_t)n, sizeof(float));
    if (!buf) return NULL;
    for (int64_t i = 0; i < (int64_t)G.n_blocks * (int64_t)G.block_floats; i++) {
        int64_t block = i / (int64_t)G.block_floats;
        bool before_start = (int64_t)boundary - (int64_t)G.n_blocks + block < 0;
        buf[SWA_SNAP_HDR_FLOATS + i] = before_start ? 0.0f : 0.25f * (float)(i % 13) - 1.0f;
    }
    swa_snap_seal(&G, boundary, buf);
    return buf;
}

static void expect_refused(const float *buf, size_t len, uint32_t boundary, const char *why) {
    cf_err err = {0};
    CHECKF(swa_snap_check(&G, boundary, buf, len, &err) == -1 && strstr(err.msg, why), "want '%s', got '%s'", why,
           err.msg);
}

int main(void) {
    size_t len = (size_t)swa_snap_floats(&G) * sizeof(float);
    cf_err err = {0};
    float *ok = make(5), *early = make(1);
    if (!ok || !early) return 1;
    CHECKF(swa_snap_check(&G, 5, ok, len, &err) == 0, "%s", err.msg);
    CHECKF(swa_snap_check(&G, 1, early, len, &err) == 0, "%s", err.msg); /* two blocks before position 0 */
    expect_refused(ok, len - 4, 5, "bytes");
    expect_refused(ok, len, 6, "boundary");
    swa_snap_geom other = G;
    other.block_floats = 41;
    CHECK(swa_snap_check(&other, 5, ok, len, &err) == -1);
    float *bad = malloc(len);
    if (!bad) return 1;
    struct {
        size_t off;
        const char *why;
    } hdr[] = {{0, "magic"}, {8, "version"}, {12, "geometry"}, {16, "geometry"}, {24, "geometry"}, {45, "reserved"}};
    for (size_t i = 0; i < sizeof hdr / sizeof hdr[0]; i++) {
        memcpy(bad, ok, len);
        ((uint8_t *)bad)[hdr[i].off] ^= 0x10;
        expect_refused(bad, len, 5, hdr[i].why);
    }
    memcpy(bad, ok, len);
    bad[SWA_SNAP_HDR_FLOATS + 7] += 1.0f;
    expect_refused(bad, len, 5, "checksum");
    memcpy(bad, ok, len); /* a NaN that the checksum covers: refused by the value check */
    bad[SWA_SNAP_HDR_FLOATS + 7] = NAN;
    swa_snap_seal(&G, 5, bad);
    expect_refused(bad, len, 5, "not finite");
    bad[SWA_SNAP_HDR_FLOATS + 7] = INFINITY;
    swa_snap_seal(&G, 5, bad);
    expect_refused(bad, len, 5, "not finite");
    memcpy(bad, early, len); /* a row before position 0 that is not zero */
    bad[SWA_SNAP_HDR_FLOATS + 3] = 1.0f;
    swa_snap_seal(&G, 1, bad);
    expect_refused(bad, len, 1, "before position 0");
    free(bad);
    free(ok);
    free(early);
    return test_finish();
}
