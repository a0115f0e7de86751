/* wcache_format.h - the on-disk format of a repacked-weights cache file
 * (`--weights-cache DIR`, written and mapped by src/model/weights_cache.c).
 * Pure functions over memory: no I/O, no allocation.
 *
 * A cache file holds, for one model file, one kernel ISA and one cinfer
 * build, every weight buffer the loader would otherwise compute at start-up
 * (repacked matrices, stacked rows, f32 copies), in load order, so that a
 * later start maps the file and uses the bytes in place. All integers are
 * little-endian:
 *
 *   header (WC_HEADER_BYTES = 4096)
 *     off size
 *       0    8  magic "CINFWC1\0"
 *       8    4  format version (WC_FORMAT_VERSION)
 *      12    4  header bytes (4096)
 *      16   16  key: XXH3-128 of everything that selects the file (wcache_key)
 *      32   16  model fingerprint (XXH3-128 over the model file's header and samples)
 *      48    8  model file size
 *      56    4  ISA (cpu_isa of the kernels the buffers were prepared for)
 *      60    4  pack layout version (KERN_PACK_LAYOUT_VERSION)
 *      64    4  loader layout version (WC_LOADER_LAYOUT: which buffers, in what order)
 *      68    4  n_entries
 *      72    8  index offset: after the last buffer, WC_ALIGN aligned
 *      80    8  data offset (= 4096: the buffers follow the header)
 *      88    8  file bytes = index offset + index bytes; the file is exactly this long
 *      96    8  index checksum: XXH3-64 over the index
 *     104    8  header checksum: XXH3-64 over the 4096 header bytes with this field zero
 *     112   64  cinfer version, NUL padded ("0.1.0+<commit>")
 *     176       zero to 4096
 *   data: the buffers, each at its offset; gaps are zero.
 *   index: n_entries x 32 bytes, at the end (the writer learns the count last)
 *       0    8  offset of the buffer in the file (WC_ALIGN aligned, >= data offset)
 *       8    8  bytes
 *      16    4  kind (WC_KIND_*)
 *      20    4  tag: XXH32 of the name of the tensor(s) it was made from
 *      24    8  checksum: XXH3-64 of the buffer's bytes
 *
 * Validity: wcache_decode_header accepts a header iff the magic, version,
 * lengths and header checksum are right and the layout fits in file_len
 * (data offset right after the header, the index after it and ending
 * exactly at file_len). wcache_check_index then accepts the index iff its
 * checksum matches and every entry lies inside the data area (between the
 * data offset and the index), aligned, in increasing non-overlapping order. wcache_identity_mismatch names the first field that
 * differs from what this process needs (another model, ISA, layout or
 * version). Buffer checksums are checked by the reader over the mapping
 * (wcache_checksum). A file that fails any of these is never used.
 *
 * Callers: src/model/weights_cache.c, tests, the fuzzer (tests/fuzz). */
#ifndef CINFER_FORMAT_WCACHE_FORMAT_H
#define CINFER_FORMAT_WCACHE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define WC_MAGIC "CINFWC1" /* 7 characters + the NUL = 8 bytes */
#define WC_FORMAT_VERSION 1u
#define WC_HEADER_BYTES 4096u
#define WC_ENTRY_BYTES 32u
#define WC_ALIGN 64u /* every buffer starts on a cache line (the kernels need 64) */
#define WC_MAX_ENTRIES (1u << 24)
#define WC_VERSION_BYTES 64
#define WC_HDR_CHECKSUM_OFF 104

/* What a buffer holds (recorded, and checked on read, per entry). */
enum {
    WC_KIND_PACKED = 1, /* a matrix repacked by the kernels (kern_weight_prepare_into) */
    WC_KIND_STACKED = 2, /* rows of several GGUF matrices stacked, GGUF layout */
    WC_KIND_F32 = 3, /* a vector or matrix converted to f32 */
};

typedef struct wcache_id {
    uint8_t model_fp[16];
    uint64_t model_size;
    uint32_t isa, pack_layout, loader_layout;
    char version[WC_VERSION_BYTES]; /* NUL terminated */
} wcache_id;

typedef struct wcache_hdr {
    uint32_t version, header_bytes;
    uint8_t key[16];
    wcache_id id;
    uint32_t n_entries;
    uint64_t index_offset, data_offset, file_bytes;
    uint64_t index_checksum, header_checksum;
} wcache_hdr;

typedef struct wcache_entry {
    uint64_t offset, bytes;
    uint32_t kind, tag;
    uint64_t checksum;
} wcache_entry;

typedef enum wcache_verdict {
    WC_VALID = 0,
    WC_OTHER_VERSION, /* our magic, another format version */
    WC_CORRUPT, /* anything else: truncated, bad checksum, bad layout, not a cache file */
} wcache_verdict;

/* The key of an identity: XXH3-128 over its fields (also in the header). */
void wcache_key(const wcache_id *id, uint8_t out[16]);
/* XXH3-64 of n bytes (buffer and index checksums). */
uint64_t wcache_checksum(const void *p, size_t n);
/* The tag of a buffer made from the tensor(s) `name` (XXH32). */
uint32_t wcache_tag(const char *name);
/* Bytes of the index of n entries. */
uint64_t wcache_index_bytes(uint32_t n_entries);

/* Writes h (key computed from h->id, header checksum filled in) into
 * buf[WC_HEADER_BYTES]. The caller sets every other field. */
void wcache_encode_header(wcache_hdr *h, uint8_t buf[WC_HEADER_BYTES]);
/* Encodes entries into an index of wcache_index_bytes(n) bytes and returns its checksum. */
uint64_t wcache_encode_index(const wcache_entry *e, uint32_t n, uint8_t *buf);

/* Decodes and checks a header read from a file of file_len bytes (buf holds
 * len >= 0 bytes of its start). why names the first problem. */
wcache_verdict wcache_decode_header(const uint8_t *buf, size_t len, uint64_t file_len, wcache_hdr *h, const char **why);
/* Checks the index bytes (wcache_index_bytes(h->n_entries) of them) against
 * h and decodes them into out[h->n_entries]. 0, or -1 with why. */
int wcache_check_index(const wcache_hdr *h, const uint8_t *idx, size_t len, wcache_entry *out, const char **why);
/* NULL when h was built for `want`; else a short phrase naming the first
 * difference ("another model file", "kernels for avx2", ...), written into
 * buf when it needs the values. */
const char *wcache_identity_mismatch(const wcache_hdr *h, const wcache_id *want, char *buf, size_t cap);

#endif
