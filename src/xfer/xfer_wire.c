/* xfer_wire.c - see xfer_wire.h. Explicit little-endian encoding; every
 * decoder rejects anything it did not write. */
#include "xfer/xfer_wire.h"

#include "base/le_bytes.h"

#include <string.h>

#define XFER_MAGIC "CXH1"

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static int all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

void xfer_frame_encode(const xfer_frame *f, uint8_t out[XFER_FRAME_BYTES]) {
    memset(out, 0, XFER_FRAME_BYTES);
    memcpy(out, XFER_MAGIC, 4);
    put16(out + 4, f->kind);
    memcpy(out + 8, f->id, XFER_ID_BYTES);
    le_put32(out + 24, f->seq);
    le_put32(out + 28, f->count);
    le_put64(out + 32, f->data_len);
}

int xfer_frame_decode(const uint8_t *buf, size_t len, uint64_t data_len, xfer_frame *f, cf_err *err) {
    memset(f, 0, sizeof *f);
    if (len != XFER_FRAME_BYTES) return cf_fail(err, "handoff frame is %zu bytes (expected %d)", len, XFER_FRAME_BYTES);
    if (memcmp(buf, XFER_MAGIC, 4)) return cf_fail(err, "handoff frame: bad magic");
    if (!all_zero(buf + 6, 2) || !all_zero(buf + 40, 24)) return cf_fail(err, "handoff frame: reserved bytes set");
    f->kind = get16(buf + 4);
    memcpy(f->id, buf + 8, XFER_ID_BYTES);
    f->seq = le_get32(buf + 24);
    f->count = le_get32(buf + 28);
    f->data_len = le_get64(buf + 32);
    if (f->data_len != data_len)
        return cf_fail(err, "handoff frame: data length %llu, %llu bytes arrived", (unsigned long long)f->data_len,
                       (unsigned long long)data_len);
    switch (f->kind) {
    case XFER_MSG_BEGIN:
        if (data_len != XFER_BEGIN_BYTES || f->seq || f->count) return cf_fail(err, "handoff BEGIN: bad sizes");
        return 0;
    case XFER_MSG_RECORDS:
        if (f->count == 0 || f->count > XFER_MAX_RECORDS) return cf_fail(err, "handoff RECORDS: %u records", f->count);
        return 0;
    case XFER_MSG_WINDOW:
        if (data_len == 0 || data_len > XFER_MAX_WINDOW_BYTES || f->count || f->seq > XFER_MAX_RECORDS)
            return cf_fail(err, "handoff WINDOW: bad sizes");
        return 0;
    case XFER_MSG_END:
        if (data_len || f->seq > 1 || f->count > XFER_MAX_RECORDS) return cf_fail(err, "handoff END: bad sizes");
        return 0;
    case XFER_MSG_ABORT:
        if (data_len || f->seq || f->count) return cf_fail(err, "handoff ABORT: bad sizes");
        return 0;
    default: return cf_fail(err, "handoff frame: unknown kind %u", f->kind);
    }
}

void xfer_begin_encode(const xfer_begin *b, uint8_t out[XFER_BEGIN_BYTES]) {
    memset(out, 0, XFER_BEGIN_BYTES);
    memcpy(out, b->fingerprint, XFER_DIGEST_BYTES);
    memcpy(out + 32, b->salt_digest, XFER_DIGEST_BYTES);
    le_put32(out + 64, b->prompt_tokens);
    le_put32(out + 68, b->block_tokens);
    le_put32(out + 72, b->n_records);
    le_put32(out + 76, b->window_bytes);
    le_put64(out + 80, b->record_bytes);
}

int xfer_begin_decode(const uint8_t *buf, size_t len, xfer_begin *b, cf_err *err) {
    memset(b, 0, sizeof *b);
    if (len != XFER_BEGIN_BYTES) return cf_fail(err, "handoff BEGIN is %zu bytes (expected %d)", len, XFER_BEGIN_BYTES);
    memcpy(b->fingerprint, buf, XFER_DIGEST_BYTES);
    memcpy(b->salt_digest, buf + 32, XFER_DIGEST_BYTES);
    b->prompt_tokens = le_get32(buf + 64);
    b->block_tokens = le_get32(buf + 68);
    b->n_records = le_get32(buf + 72);
    b->window_bytes = le_get32(buf + 76);
    b->record_bytes = le_get64(buf + 80);
    if (b->block_tokens == 0 || b->prompt_tokens == 0 || b->record_bytes == 0 ||
        b->record_bytes > XFER_MAX_RECORD_BYTES || b->n_records > XFER_MAX_RECORDS)
        return cf_fail(err, "handoff BEGIN: bad geometry (%u tokens, blocks of %u, %u records of %llu bytes)",
                       b->prompt_tokens, b->block_tokens, b->n_records, (unsigned long long)b->record_bytes);
    if (b->n_records > (b->prompt_tokens - 1) / b->block_tokens)
        return cf_fail(err, "handoff BEGIN: %u records for a prompt of %u tokens", b->n_records, b->prompt_tokens);
    if (b->window_bytes > XFER_MAX_WINDOW_BYTES || (b->window_bytes && !b->n_records))
        return cf_fail(err, "handoff BEGIN: a window state of %u bytes with %u records", b->window_bytes, b->n_records);
    return 0;
}

int xfer_records_check(const xfer_frame *f, const xfer_begin *b, cf_err *err) {
    if (f->kind != XFER_MSG_RECORDS) return cf_fail(err, "not a RECORDS frame");
    if ((uint64_t)f->seq + f->count > b->n_records)
        return cf_fail(err, "handoff RECORDS %u..%u outside the %u announced", f->seq, f->seq + f->count, b->n_records);
    if (f->data_len != (uint64_t)f->count * b->record_bytes)
        return cf_fail(err, "handoff RECORDS: %llu bytes for %u records of %llu", (unsigned long long)f->data_len,
                       f->count, (unsigned long long)b->record_bytes);
    return 0;
}

int xfer_window_check(const xfer_frame *f, const xfer_begin *b, cf_err *err) {
    if (f->kind != XFER_MSG_WINDOW) return cf_fail(err, "not a WINDOW frame");
    if (!b->window_bytes) return cf_fail(err, "handoff WINDOW that BEGIN did not announce");
    if (f->data_len != b->window_bytes || f->seq != b->n_records)
        return cf_fail(err, "handoff WINDOW: %llu bytes at block %u, announced %u bytes at block %u",
                       (unsigned long long)f->data_len, f->seq, b->window_bytes, b->n_records);
    return 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int xfer_id_parse(const char *hex, uint8_t id[XFER_ID_BYTES]) {
    if (!hex || strlen(hex) != 2 * XFER_ID_BYTES) return -1;
    for (int i = 0; i < XFER_ID_BYTES; i++) {
        int a = hexval(hex[2 * i]), b = hexval(hex[2 * i + 1]);
        if (a < 0 || b < 0) return -1;
        id[i] = (uint8_t)(a << 4 | b);
    }
    return 0;
}

void xfer_id_hex(const uint8_t id[XFER_ID_BYTES], char out[2 * XFER_ID_BYTES + 1]) {
    static const char hx[] = "0123456789abcdef";
    for (int i = 0; i < XFER_ID_BYTES; i++) {
        out[2 * i] = hx[id[i] >> 4];
        out[2 * i + 1] = hx[id[i] & 15];
    }
    out[2 * XFER_ID_BYTES] = 0;
}
