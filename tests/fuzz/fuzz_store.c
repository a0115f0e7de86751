/* fuzz_store.c - libFuzzer harness for the store object decoder: the input
 * is taken as an object file (header + payload) and checked with
 * store_decode_header and store_verify against a fixed expectation (16
 * tokens, 64-byte payload). Checks: never crashes or reads out of bounds;
 * VALID only when the input is byte-for-byte the canonical encoding
 * (store_encode) of an object with the expected identity - fingerprint, key,
 * parent, tokens, payload length - whatever its times, class and payload
 * bytes: those are free (the checksum guards against corruption, not against
 * a writer on the shared filesystem, and libFuzzer's comparison tracing does
 * learn checksums), but nothing else can pass verification. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_format.h"

#define FZ_BT 16
#define FZ_PAYLOAD 64

static uint8_t g_fp[32], g_key[32], g_parent[32], g_payload[FZ_PAYLOAD], g_valid[1024];
static int32_t g_tokens[FZ_BT];
static uint32_t g_valid_len;

static void fz_init(void) {
    if (g_valid_len) return;
    for (int i = 0; i < 32; i++) g_fp[i] = (uint8_t)i, g_key[i] = (uint8_t)(i * 7), g_parent[i] = (uint8_t)(255 - i);
    for (int i = 0; i < FZ_BT; i++) g_tokens[i] = i * 3 + 1;
    for (int i = 0; i < FZ_PAYLOAD; i++) g_payload[i] = (uint8_t)(i ^ 0x5A);
    store_obj_hdr h = {
        .n_tokens = FZ_BT, .traffic_class = 1, .created = 10, .expires = 1000, .payload_len = FZ_PAYLOAD};
    memcpy(h.fingerprint, g_fp, 32);
    memcpy(h.key, g_key, 32);
    memcpy(h.parent, g_parent, 32);
    uint32_t hl = store_encode(&h, g_tokens, g_payload, g_valid, sizeof g_valid);
    if (!hl) abort();
    memcpy(g_valid + hl, g_payload, FZ_PAYLOAD);
    g_valid_len = hl + FZ_PAYLOAD;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_init();
    store_obj_hdr h;
    (void)store_decode_header(data, size, &h, NULL);
    uint32_t hl = store_header_len(FZ_BT);
    if (size < hl) return 0;
    /* the file as a reader sees it: header bytes, then the payload (if the length fits) */
    uint8_t *copy = malloc(size);
    if (!copy) return 0;
    memcpy(copy, data, size);
    uint8_t payload[FZ_PAYLOAD] = {0};
    memcpy(payload, copy + hl, size - hl < FZ_PAYLOAD ? size - hl : FZ_PAYLOAD);
    store_expect x = {.fingerprint = g_fp,
                      .key = g_key,
                      .parent = g_parent,
                      .tokens = g_tokens,
                      .n_tokens = FZ_BT,
                      .payload_len = FZ_PAYLOAD};
    const char *why = NULL;
    store_verdict v = store_verify(copy, hl, payload, size, &x, 500, &why);
    if (v == STORE_VALID) {
        store_obj_hdr d;
        if (size != g_valid_len || store_decode_header(copy, hl, &d, NULL)) abort();
        if (memcmp(d.fingerprint, g_fp, 32) || memcmp(d.key, g_key, 32) || memcmp(d.parent, g_parent, 32) ||
            d.n_tokens != FZ_BT || d.payload_len != FZ_PAYLOAD)
            abort();
        static uint8_t re[1024];
        store_obj_hdr h2 = {.n_tokens = FZ_BT,
                            .traffic_class = d.traffic_class,
                            .created = d.created,
                            .expires = d.expires,
                            .payload_len = FZ_PAYLOAD};
        memcpy(h2.fingerprint, g_fp, 32);
        memcpy(h2.key, g_key, 32);
        memcpy(h2.parent, g_parent, 32);
        if (store_encode(&h2, g_tokens, payload, re, sizeof re) != hl || memcmp(re, copy, hl)) abort();
    }
    free(copy);
    return 0;
}
