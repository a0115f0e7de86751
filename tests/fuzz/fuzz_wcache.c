/* fuzz_wcache.c - libFuzzer harness for the weights-cache header and index
 * reader (format/wcache_format.h): the input is taken as a whole cache file.
 * wcache_decode_header reads its start with the input's length as the file
 * length; when the header is valid, wcache_check_index reads the index where
 * the header says it is, and the identity is compared with a fixed one.
 * Checks: never crashes or reads out of bounds (ASan); a valid header
 * re-encodes to exactly the input's header bytes (nothing but the canonical
 * encoding passes); every entry of a valid index lies inside the data area,
 * aligned and in order, and its buffer's checksum can be computed in bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/wcache_format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wcache_hdr h;
    const char *why = NULL;
    if (wcache_decode_header(data, size, size, &h, &why) != WC_VALID) return 0;
    if (size < WC_HEADER_BYTES || h.file_bytes != size || h.index_offset > size) abort();
    uint8_t re[WC_HEADER_BYTES];
    wcache_hdr h2 = h;
    wcache_encode_header(&h2, re);
    if (memcmp(re, data, WC_HEADER_BYTES) != 0 || memcmp(h2.key, h.key, sizeof h.key) != 0) abort();
    wcache_entry *e = calloc(h.n_entries ? h.n_entries : 1, sizeof *e);
    if (!e) return 0;
    if (wcache_check_index(&h, data + h.index_offset, size - (size_t)h.index_offset, e, &why) == 0) {
        uint64_t at = h.data_offset;
        for (uint32_t i = 0; i < h.n_entries; i++) {
            if (e[i].offset < at || e[i].offset % WC_ALIGN || e[i].offset + e[i].bytes > h.index_offset) abort();
            at = e[i].offset + e[i].bytes;
            (void)wcache_checksum(data + e[i].offset, (size_t)e[i].bytes);
        }
    }
    wcache_id want = {.model_size = 12345, .isa = 2, .pack_layout = 1, .loader_layout = 1};
    char buf[160];
    (void)wcache_identity_mismatch(&h, &want, buf, sizeof buf);
    free(e);
    return 0;
}
