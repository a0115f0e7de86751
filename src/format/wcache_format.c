/* wcache_format.c - encoding and checking of weights-cache headers and
 * indexes (wcache_format.h). Every read of the input is bounds-checked
 * against the length the caller gives; nothing is trusted before its
 * checksum and layout are checked. */
#include "format/wcache_format.h"

#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "base/cpu.h"

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

uint64_t wcache_checksum(const void *p, size_t n) { return XXH3_64bits(p, n); }

uint32_t wcache_tag(const char *name) { return XXH32(name, strlen(name), 0x57434143u); }

void wcache_key(const wcache_id *id, uint8_t out[16]) {
    uint8_t b[16 + 8 + 12 + WC_VERSION_BYTES] = {0};
    memcpy(b, id->model_fp, 16);
    put_u64(b + 16, id->model_size);
    put_u32(b + 24, id->isa);
    put_u32(b + 28, id->pack_layout);
    put_u32(b + 32, id->loader_layout);
    size_t vn = strnlen(id->version, WC_VERSION_BYTES - 1);
    memcpy(b + 36, id->version, vn);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(b, sizeof b));
    memcpy(out, c.digest, 16);
}

uint64_t wcache_index_bytes(uint32_t n_entries) { return (uint64_t)n_entries * WC_ENTRY_BYTES; }

void wcache_encode_header(wcache_hdr *h, uint8_t buf[WC_HEADER_BYTES]) {
    memset(buf, 0, WC_HEADER_BYTES);
    h->version = WC_FORMAT_VERSION;
    h->header_bytes = WC_HEADER_BYTES;
    wcache_key(&h->id, h->key);
    memcpy(buf, WC_MAGIC, 8);
    put_u32(buf + 8, h->version);
    put_u32(buf + 12, h->header_bytes);
    memcpy(buf + 16, h->key, 16);
    memcpy(buf + 32, h->id.model_fp, 16);
    put_u64(buf + 48, h->id.model_size);
    put_u32(buf + 56, h->id.isa);
    put_u32(buf + 60, h->id.pack_layout);
    put_u32(buf + 64, h->id.loader_layout);
    put_u32(buf + 68, h->n_entries);
    put_u64(buf + 72, h->index_offset);
    put_u64(buf + 80, h->data_offset);
    put_u64(buf + 88, h->file_bytes);
    put_u64(buf + 96, h->index_checksum);
    memcpy(buf + 112, h->id.version, strnlen(h->id.version, WC_VERSION_BYTES - 1));
    h->header_checksum = wcache_checksum(buf, WC_HEADER_BYTES);
    put_u64(buf + WC_HDR_CHECKSUM_OFF, h->header_checksum);
}

uint64_t wcache_encode_index(const wcache_entry *e, uint32_t n, uint8_t *buf) {
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *p = buf + (size_t)i * WC_ENTRY_BYTES;
        put_u64(p, e[i].offset);
        put_u64(p + 8, e[i].bytes);
        put_u32(p + 16, e[i].kind);
        put_u32(p + 20, e[i].tag);
        put_u64(p + 24, e[i].checksum);
    }
    return wcache_checksum(buf, (size_t)wcache_index_bytes(n));
}

static wcache_verdict bad(const char **why, const char *what) {
    if (why) *why = what;
    return WC_CORRUPT;
}

wcache_verdict wcache_decode_header(const uint8_t *buf, size_t len, uint64_t file_len, wcache_hdr *h,
                                    const char **why) {
    memset(h, 0, sizeof *h);
    if (why) *why = NULL;
    if (len < 16 || file_len < 16) return bad(why, "shorter than a header");
    if (memcmp(buf, WC_MAGIC, 8) != 0) return bad(why, "not a weights cache file (magic)");
    h->version = get_u32(buf + 8);
    if (h->version != WC_FORMAT_VERSION) {
        if (why) *why = "another cache format version";
        return WC_OTHER_VERSION;
    }
    h->header_bytes = get_u32(buf + 12);
    if (h->header_bytes != WC_HEADER_BYTES) return bad(why, "bad header length");
    if (len < WC_HEADER_BYTES || file_len < WC_HEADER_BYTES) return bad(why, "truncated header");
    uint8_t copy[WC_HEADER_BYTES];
    memcpy(copy, buf, WC_HEADER_BYTES);
    h->header_checksum = get_u64(buf + WC_HDR_CHECKSUM_OFF);
    memset(copy + WC_HDR_CHECKSUM_OFF, 0, 8);
    if (wcache_checksum(copy, WC_HEADER_BYTES) != h->header_checksum) return bad(why, "header checksum mismatch");
    memcpy(h->key, buf + 16, 16);
    memcpy(h->id.model_fp, buf + 32, 16);
    h->id.model_size = get_u64(buf + 48);
    h->id.isa = get_u32(buf + 56);
    h->id.pack_layout = get_u32(buf + 60);
    h->id.loader_layout = get_u32(buf + 64);
    h->n_entries = get_u32(buf + 68);
    h->index_offset = get_u64(buf + 72);
    h->data_offset = get_u64(buf + 80);
    h->file_bytes = get_u64(buf + 88);
    h->index_checksum = get_u64(buf + 96);
    memcpy(h->id.version, buf + 112, WC_VERSION_BYTES);
    if (h->id.version[WC_VERSION_BYTES - 1] != 0) return bad(why, "version string not terminated");
    for (size_t i = strlen(h->id.version); i < WC_VERSION_BYTES; i++) /* NUL padded: one encoding only */
        if (h->id.version[i]) return bad(why, "bytes after the version string's end");
    for (size_t i = 112 + WC_VERSION_BYTES; i < WC_HEADER_BYTES; i++)
        if (buf[i]) return bad(why, "nonzero reserved bytes");
    uint8_t key[16];
    wcache_key(&h->id, key);
    if (memcmp(key, h->key, 16)) return bad(why, "key does not match the identity fields");
    if (h->n_entries > WC_MAX_ENTRIES) return bad(why, "too many entries");
    if (h->file_bytes != file_len) return bad(why, "file length differs from the header (truncated?)");
    if (h->data_offset != WC_HEADER_BYTES || h->index_offset < h->data_offset || h->index_offset % WC_ALIGN ||
        h->index_offset > h->file_bytes || h->file_bytes - h->index_offset != wcache_index_bytes(h->n_entries))
        return bad(why, "bad data or index offset");
    return WC_VALID;
}

static int bad_index(const char **why, const char *what) {
    if (why) *why = what;
    return -1;
}

int wcache_check_index(const wcache_hdr *h, const uint8_t *idx, size_t len, wcache_entry *out, const char **why) {
    if (why) *why = NULL;
    uint64_t need = wcache_index_bytes(h->n_entries);
    if (len < need) return bad_index(why, "truncated index");
    if (wcache_checksum(idx, (size_t)need) != h->index_checksum) return bad_index(why, "index checksum mismatch");
    uint64_t at = h->data_offset;
    for (uint32_t i = 0; i < h->n_entries; i++) {
        const uint8_t *p = idx + (size_t)i * WC_ENTRY_BYTES;
        wcache_entry e = {get_u64(p), get_u64(p + 8), get_u32(p + 16), get_u32(p + 20), get_u64(p + 24)};
        if (e.offset < at || e.offset % WC_ALIGN || e.bytes == 0 || e.bytes > h->index_offset ||
            e.offset > h->index_offset - e.bytes)
            return bad_index(why, "index entry outside the data area");
        if (e.kind < WC_KIND_PACKED || e.kind > WC_KIND_F32) return bad_index(why, "index entry of unknown kind");
        at = e.offset + e.bytes;
        out[i] = e;
    }
    return 0;
}

const char *wcache_identity_mismatch(const wcache_hdr *h, const wcache_id *want, char *buf, size_t cap) {
    const wcache_id *got = &h->id;
    if (memcmp(got->model_fp, want->model_fp, 16) || got->model_size != want->model_size)
        return "built from another model file";
    if (got->isa != want->isa) {
        const char *g = got->isa < CPU_ISA_COUNT ? cpu_isa_name((cpu_isa)got->isa) : "an unknown ISA";
        snprintf(buf, cap, "built for %s kernels, this process uses %s", g, cpu_isa_name((cpu_isa)want->isa));
        return buf;
    }
    if (got->pack_layout != want->pack_layout || got->loader_layout != want->loader_layout) {
        snprintf(buf, cap, "layout %u.%u, this build uses %u.%u", got->pack_layout, got->loader_layout,
                 want->pack_layout, want->loader_layout);
        return buf;
    }
    if (strcmp(got->version, want->version)) {
        snprintf(buf, cap, "written by cinfer %.40s, this is %.40s", got->version, want->version);
        return buf;
    }
    return NULL;
}
