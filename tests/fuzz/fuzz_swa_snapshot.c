/* fuzz_swa_snapshot.c - libFuzzer harness for the window-state snapshot
 * checker (swa_format.h), the parser of snapshots loaded from the persistent
 * store (untrusted bytes): the input is taken as a snapshot of a fixed
 * geometry (2 blocks x 16 tokens x 8 floats) at boundary block 3. Checks:
 * never crashes or reads out of bounds; VALID only when the input is exactly
 * as long as the geometry says, re-sealing its own floats reproduces it byte
 * for byte (header fields and checksum all canonical) and every float is
 * finite. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/swa_format.h"

static const swa_snap_geom G = {.n_blocks = 2, .block_tokens = 16, .block_floats = 8};
#define FZ_BOUNDARY 3u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cf_err err = {0};
    int rc = swa_snap_check(&G, FZ_BOUNDARY, data, size, &err);
    size_t len = (size_t)swa_snap_floats(&G) * sizeof(float);
    if (rc != 0) return 0;
    if (size != len) abort();
    float *copy = malloc(len);
    if (!copy) return 0;
    memcpy(copy, data, len);
    swa_snap_seal(&G, FZ_BOUNDARY, copy);
    if (memcmp(copy, data, len)) abort(); /* accepted but not canonical */
    for (size_t i = SWA_SNAP_HDR_FLOATS; i < len / sizeof(float); i++)
        if (!isfinite(copy[i])) abort();
    free(copy);
    return 0;
}
