/* store_format.c - see store_format.h. Explicit little-endian encoding, one
 * XXH3 streaming state on the stack per checksum; the v2 MAC is libcrypto's
 * HMAC (EVP_MAC) and is compared in constant time. */
#include "store/store_format.h"

#include "base/le_bytes.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdio.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack (same package as the library) */
#include <xxhash.h>

uint32_t store_header_len(uint32_t n_tokens) { return (STORE_HDR_FIXED + 4 * n_tokens + 63) / 64 * 64; }

/* XXH3-64 of header (checksum field read as zero) then payload. */
static uint64_t store_checksum(const uint8_t *hdr, uint32_t header_len, const void *payload, uint64_t payload_len) {
    XXH3_state_t st;
    static const uint8_t zero8[8];
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, hdr, STORE_HDR_CHECKSUM_OFF);
    XXH3_64bits_update(&st, zero8, 8);
    XXH3_64bits_update(&st, hdr + STORE_HDR_CHECKSUM_OFF + 8, header_len - STORE_HDR_CHECKSUM_OFF - 8);
    if (payload_len) XXH3_64bits_update(&st, payload, (size_t)payload_len);
    return XXH3_64bits_digest(&st);
}

uint32_t store_trailer_len(uint32_t flags) { return flags & STORE_FLAG_MAC ? STORE_MAC_BYTES : 0; }

int store_mac(const store_mac_key *k, const uint8_t *hdr, uint32_t header_len, const void *payload,
              uint64_t payload_len, uint8_t out[STORE_MAC_BYTES]) {
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    size_t len = 0;
    int ok = ctx && k->len > 0 && EVP_MAC_init(ctx, k->bytes, k->len, params) && EVP_MAC_update(ctx, hdr, header_len) &&
             (payload_len == 0 || EVP_MAC_update(ctx, payload, (size_t)payload_len)) &&
             EVP_MAC_final(ctx, out, &len, STORE_MAC_BYTES) && len == STORE_MAC_BYTES;
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
    return ok ? 0 : -1;
}

uint32_t store_encode(store_obj_hdr *h, const int32_t *tokens, const void *payload, uint8_t *buf, size_t cap) {
    if (h->n_tokens == 0 || h->n_tokens > STORE_MAX_TOKENS || (h->flags & ~STORE_FLAG_MAC)) return 0;
    uint32_t hl = store_header_len(h->n_tokens);
    if (cap < hl) return 0;
    h->version = h->flags ? STORE_FORMAT_VERSION_MAC : STORE_FORMAT_VERSION;
    h->header_len = hl;
    memset(buf, 0, hl);
    memcpy(buf, STORE_MAGIC, 8);
    le_put32(buf + 8, h->version);
    le_put32(buf + 12, hl);
    memcpy(buf + 16, h->fingerprint, STORE_KEY_BYTES);
    memcpy(buf + 48, h->key, STORE_KEY_BYTES);
    memcpy(buf + 80, h->parent, STORE_KEY_BYTES);
    le_put32(buf + 112, h->n_tokens);
    le_put32(buf + 116, (uint32_t)h->traffic_class);
    le_put64(buf + 120, (uint64_t)h->created);
    le_put64(buf + 128, (uint64_t)h->expires);
    le_put64(buf + 136, h->payload_len);
    le_put32(buf + STORE_FLAGS_OFF, h->flags); /* zero (reserved) in version 1 */
    for (uint32_t i = 0; i < h->n_tokens; i++) le_put32(buf + STORE_HDR_FIXED + 4 * i, (uint32_t)tokens[i]);
    h->checksum = store_checksum(buf, hl, payload, h->payload_len);
    le_put64(buf + STORE_HDR_CHECKSUM_OFF, h->checksum);
    return hl;
}

int store_decode_header(const uint8_t *buf, size_t len, store_obj_hdr *h, cf_err *err) {
    memset(h, 0, sizeof *h);
    if (len < STORE_HDR_FIXED) return cf_fail(err, "object header is %zu bytes (expected >= %d)", len, STORE_HDR_FIXED);
    if (memcmp(buf, STORE_MAGIC, 8) != 0) return cf_fail(err, "bad magic (not a cinfer KV block object)");
    h->version = le_get32(buf + 8);
    if (h->version != STORE_FORMAT_VERSION && h->version != STORE_FORMAT_VERSION_MAC)
        return cf_fail(err, "format version %u (expected %u or %u)", h->version, STORE_FORMAT_VERSION,
                       STORE_FORMAT_VERSION_MAC);
    h->header_len = le_get32(buf + 12);
    memcpy(h->fingerprint, buf + 16, STORE_KEY_BYTES);
    memcpy(h->key, buf + 48, STORE_KEY_BYTES);
    memcpy(h->parent, buf + 80, STORE_KEY_BYTES);
    h->n_tokens = le_get32(buf + 112);
    h->traffic_class = (int32_t)le_get32(buf + 116);
    h->created = (int64_t)le_get64(buf + 120);
    h->expires = (int64_t)le_get64(buf + 128);
    h->payload_len = le_get64(buf + 136);
    h->checksum = le_get64(buf + STORE_HDR_CHECKSUM_OFF);
    h->flags = le_get32(buf + STORE_FLAGS_OFF);
    if (h->version == STORE_FORMAT_VERSION_MAC ? h->flags != STORE_FLAG_MAC : h->flags != 0)
        return cf_fail(err, "format version %u with flags 0x%x", h->version, h->flags);
    if (h->n_tokens == 0 || h->n_tokens > STORE_MAX_TOKENS || h->header_len != store_header_len(h->n_tokens))
        return cf_fail(err, "header of %u tokens has header_len %u", h->n_tokens, h->header_len);
    return 0;
}

store_verdict store_verify(const uint8_t *buf, size_t buf_len, const void *payload, uint64_t file_len,
                           const store_expect *x, int64_t now, const char **why) {
    static const uint8_t zeros[STORE_KEY_BYTES];
    const char *w = NULL;
    store_obj_hdr h;
    if (buf_len >= 12 && !memcmp(buf, STORE_MAGIC, 8) && le_get32(buf + 8) != STORE_FORMAT_VERSION &&
        le_get32(buf + 8) != STORE_FORMAT_VERSION_MAC) {
        if (why) *why = "format version";
        return STORE_OTHER_VERSION;
    }
    if (store_decode_header(buf, buf_len, &h, NULL)) w = "header";
    else if (h.header_len != store_header_len(x->n_tokens) || h.header_len > buf_len) w = "header length";
    else if (memcmp(h.fingerprint, x->fingerprint, STORE_KEY_BYTES)) w = "model fingerprint";
    else if (memcmp(h.key, x->key, STORE_KEY_BYTES)) w = "key";
    else if (memcmp(h.parent, x->parent ? x->parent : zeros, STORE_KEY_BYTES)) w = "parent key";
    else if (h.n_tokens != x->n_tokens) w = "token count";
    else if (h.payload_len != x->payload_len) w = "payload length";
    else if (file_len != (uint64_t)h.header_len + h.payload_len + store_trailer_len(h.flags))
        w = "file length (truncated or padded)";
    else if (x->mac_key && !(h.flags & STORE_FLAG_MAC)) w = "no MAC (a key is set: unauthenticated object)";
    else if ((h.flags & STORE_FLAG_MAC) && !x->mac) w = "MAC trailer not read";
    else {
        for (uint32_t i = 0; i < h.n_tokens && !w; i++)
            if ((int32_t)le_get32(buf + STORE_HDR_FIXED + 4 * i) != x->tokens[i]) w = "tokens";
        /* reserved bytes (after the checksum, and the padding after the tokens) are zero in every
         * object this version writes: anything else is not ours */
        for (uint32_t o = STORE_FLAGS_OFF + 4; o < STORE_HDR_FIXED && !w; o++)
            if (buf[o]) w = "reserved header bytes";
        for (uint32_t o = STORE_HDR_FIXED + 4 * h.n_tokens; o < h.header_len && !w; o++)
            if (buf[o]) w = "header padding";
        if (!w && store_checksum(buf, h.header_len, payload, h.payload_len) != h.checksum) w = "checksum";
        if (!w && x->mac_key) {
            uint8_t m[STORE_MAC_BYTES];
            if (store_mac(x->mac_key, buf, h.header_len, payload, h.payload_len, m)) w = "MAC (libcrypto failed)";
            else if (CRYPTO_memcmp(m, x->mac, STORE_MAC_BYTES)) w = "MAC (not written with this key)";
        }
    }
    if (why) *why = w;
    if (w) return STORE_CORRUPT;
    if (h.expires <= now) {
        if (why) *why = "expired";
        return STORE_EXPIRED;
    }
    return STORE_VALID;
}

void store_key_hex(const uint8_t key[STORE_KEY_BYTES], char out[STORE_HEX_BYTES]) {
    static const char hx[] = "0123456789abcdef";
    for (int i = 0; i < STORE_KEY_BYTES; i++) {
        out[2 * i] = hx[key[i] >> 4];
        out[2 * i + 1] = hx[key[i] & 15];
    }
    out[2 * STORE_KEY_BYTES] = 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int store_hex_key(const char *hex, uint8_t key[STORE_KEY_BYTES]) {
    for (int i = 0; i < STORE_KEY_BYTES; i++) {
        int a = hexval(hex[2 * i]), b = a < 0 ? -1 : hexval(hex[2 * i + 1]);
        if (a < 0 || b < 0) return -1;
        key[i] = (uint8_t)(a << 4 | b);
    }
    return 0;
}

int store_object_path(const char *dir, const uint8_t key[STORE_KEY_BYTES], char *out, size_t cap) {
    char hex[STORE_HEX_BYTES];
    store_key_hex(key, hex);
    int n = snprintf(out, cap, "%s/objects/%.2s/%.2s/%s", dir, hex, hex + 2, hex);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}
