/* fuzz_xfer_wire.c - libFuzzer harness for the KV handoff wire format
 * (src/xfer/xfer_wire.h), what a decode worker parses from untrusted peers.
 * The input is a stream of messages, each: a 64-byte frame header, a 2-byte
 * little-endian data length, then that many data bytes (the first BEGIN in
 * the stream becomes the handoff's geometry for later RECORDS checks).
 * Checks: never crashes or reads out of bounds; a frame or BEGIN that decodes
 * re-encodes to exactly the input bytes (canonical: nothing else passes); a
 * RECORDS frame that passes xfer_records_check lies inside the announced
 * records and its length is count x record_bytes; a WINDOW frame that passes
 * xfer_window_check was announced, has exactly window_bytes at block
 * n_records, and then also passes the window-state snapshot check of
 * engine/swa_format.h only when its bytes are a canonical snapshot (the
 * geometry taken from its own header: what the decode worker's engine
 * verifies next); id hex round-trips. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/le_bytes.h"
#include "engine/swa_format.h"
#include "xfer/xfer_wire.h"

/* The WINDOW data as the decode worker's engine checks it next: a geometry
 * from the header's own fields (the fuzzer's stand-in for the engine's), the
 * boundary from the frame. A snapshot that passes must re-seal to the same
 * bytes (its header is canonical; the checksum covers the floats). */
static void window_snapshot(const uint8_t *d, size_t len, uint32_t boundary) {
    if (len < SWA_SNAP_HDR_BYTES) return;
    swa_snap_geom g = {
        .n_blocks = le_get32(d + 12), .block_tokens = le_get32(d + 16), .block_floats = le_get64(d + 24)};
    if (g.n_blocks > 64 || g.block_floats > ((uint64_t)1 << 24)) return; /* beyond what len can hold */
    if (swa_snap_check(&g, boundary, d, len, NULL)) return;
    if ((uint64_t)swa_snap_floats(&g) * sizeof(float) != len) abort();
    uint8_t *again = malloc(len);
    if (!again) return;
    memcpy(again, d, len);
    swa_snap_seal(&g, boundary, again);
    if (memcmp(again, d, len)) abort();
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    xfer_begin b;
    int have_begin = 0;
    while (size >= XFER_FRAME_BYTES + 2) {
        const uint8_t *fb = data;
        size_t dlen = (size_t)data[XFER_FRAME_BYTES] | (size_t)data[XFER_FRAME_BYTES + 1] << 8;
        data += XFER_FRAME_BYTES + 2;
        size -= XFER_FRAME_BYTES + 2;
        if (dlen > size) dlen = size;
        const uint8_t *d = data;
        data += dlen;
        size -= dlen;
        xfer_frame f;
        if (xfer_frame_decode(fb, XFER_FRAME_BYTES, dlen, &f, NULL)) continue;
        uint8_t again[XFER_FRAME_BYTES];
        xfer_frame_encode(&f, again);
        if (memcmp(again, fb, XFER_FRAME_BYTES)) abort();
        char hex[2 * XFER_ID_BYTES + 1];
        uint8_t id[XFER_ID_BYTES];
        xfer_id_hex(f.id, hex);
        if (xfer_id_parse(hex, id) || memcmp(id, f.id, XFER_ID_BYTES)) abort();
        if (f.kind == XFER_MSG_BEGIN) {
            xfer_begin nb;
            uint8_t enc[XFER_BEGIN_BYTES];
            if (xfer_begin_decode(d, dlen, &nb, NULL)) continue;
            xfer_begin_encode(&nb, enc);
            if (dlen != XFER_BEGIN_BYTES || memcmp(enc, d, XFER_BEGIN_BYTES)) abort();
            if (nb.n_records > (nb.prompt_tokens - 1) / nb.block_tokens) abort();
            if (!have_begin) b = nb, have_begin = 1;
        } else if (f.kind == XFER_MSG_RECORDS && have_begin && !xfer_records_check(&f, &b, NULL)) {
            if ((uint64_t)f.seq + f.count > b.n_records || f.data_len != (uint64_t)f.count * b.record_bytes) abort();
        } else if (f.kind == XFER_MSG_WINDOW && have_begin && !xfer_window_check(&f, &b, NULL)) {
            if (!b.window_bytes || f.data_len != b.window_bytes || f.seq != b.n_records || !b.n_records) abort();
            window_snapshot(d, dlen, f.seq);
        } else if (f.kind == XFER_MSG_END && f.seq > 1) {
            abort();
        }
    }
    return 0;
}
