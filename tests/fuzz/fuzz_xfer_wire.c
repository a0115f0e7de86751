/* fuzz_xfer_wire.c - libFuzzer harness for the KV handoff wire format
 * (src/xfer/xfer_wire.h), what a decode worker parses from untrusted peers.
 * The input is a stream of messages, each: a 64-byte frame header, a 2-byte
 * little-endian data length, then that many data bytes (the first BEGIN in
 * the stream becomes the handoff's geometry for later RECORDS checks).
 * Checks: never crashes or reads out of bounds; a frame or BEGIN that decodes
 * re-encodes to exactly the input bytes (canonical: nothing else passes); a
 * RECORDS frame that passes xfer_records_check lies inside the announced
 * records and its length is count x record_bytes; id hex round-trips. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xfer/xfer_wire.h"

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
        }
    }
    return 0;
}
