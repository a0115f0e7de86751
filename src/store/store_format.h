/* store_format.h - the on-disk format of one persistent KV block object and
 * its name. Pure functions over memory: no I/O, no clock, no allocation.
 *
 * An object is a header followed by the block's payload (the pool block's
 * bytes, exactly as kv_pool lays them out). All integers little-endian:
 *   off  size
 *     0     8  magic "CINFKVB\0"
 *     8     4  format version (STORE_FORMAT_VERSION)
 *    12     4  header_len: bytes before the payload (160 + 4*n_tokens, rounded up to 64)
 *    16    32  fingerprint: store_fingerprint() (model weights + KV layout + dtype)
 *    48    32  key: the block's prefix-cache key (prefix_cache.h), also the object's name
 *    80    32  parent key (32 zero bytes for the first block of a sequence)
 *   112     4  n_tokens (= block_tokens)
 *   116     4  traffic class (STORE_CLASS_*)
 *   120     8  created, unix seconds (store clock)
 *   128     8  expires, unix seconds (store clock)
 *   136     8  payload_len
 *   144     8  checksum: XXH3-64 over the header with this field zero, then the payload
 *   152     4  version 1: reserved, zero. Version 2: flags (STORE_FLAG_MAC, which v2 requires)
 *   156     4  reserved, zero
 *   160  4*n  the block's token ids (i32)
 *   ...        zero padding to header_len
 *   then payload_len bytes of payload, and in version 2 a 32-byte trailer:
 *              HMAC-SHA256(key, header[0..header_len) || payload)
 * Version 1 objects are written without a key, version 2 (authenticated) with
 * one; a version-1-only reader treats v2 as another version (a miss, left
 * alone), so servers with and without this code can share a directory.
 * An object is valid for a reader iff every field equals what the reader
 * expects (magic, version, header_len, fingerprint, key, parent, tokens,
 * payload_len), the file is exactly header_len + payload_len (+ 32 with a MAC)
 * bytes, it has not expired, and the checksum matches; and, when the reader
 * holds a key, the object is version 2 and its MAC matches (an object without
 * a valid MAC is then corrupt). A reader without a key accepts both versions
 * on the checksum alone. Anything else is a miss.
 *
 * Name: <dir>/objects/<hex[0..2)>/<hex[2..4)>/<hex> where hex is the key in
 * lower-case hex (64 characters); 65536 fan-out directories, made on demand.
 *
 * Callers: store_fs.c (publish / load), store_gc.c (stats), tests, fuzzers. */
#ifndef CINFER_STORE_STORE_FORMAT_H
#define CINFER_STORE_STORE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define STORE_KEY_BYTES 32

/* Traffic classes recorded in each object; they select its retention. The
 * values are the engine's cinfer_traffic_class (engine_store.c asserts so);
 * the store defines them itself because it sits below the engine. */
enum { STORE_CLASS_DEFAULT = 0, STORE_CLASS_CHAT = 1, STORE_CLASS_AGENT = 2 };
#define STORE_N_CLASSES 3
#define STORE_FORMAT_VERSION 1u /* objects written without a key */
#define STORE_FORMAT_VERSION_MAC 2u /* objects written with a key: flags field + MAC trailer */
#define STORE_FLAGS_OFF 152
#define STORE_FLAG_MAC 1u /* a STORE_MAC_BYTES trailer follows the payload */
#define STORE_MAC_BYTES 32 /* HMAC-SHA256 */
#define STORE_MAC_KEY_MIN 32
#define STORE_MAC_KEY_MAX 4096
#define STORE_MAGIC "CINFKVB" /* 7 characters + the NUL = 8 bytes */
#define STORE_HDR_FIXED 160
#define STORE_HDR_CHECKSUM_OFF 144
#define STORE_MAX_TOKENS 65536
#define STORE_HEX_BYTES (2 * STORE_KEY_BYTES + 1)
#define STORE_SUFFIX_TMP ".tmp." /* temporary names: <hex>.tmp.<pid>.<n> */

/* An HMAC key (the bytes of a key file, store_key_load in store_fs.h). */
typedef struct store_mac_key {
    size_t len;
    uint8_t bytes[STORE_MAC_KEY_MAX];
} store_mac_key;

typedef struct store_obj_hdr {
    uint32_t version, header_len;
    uint32_t flags; /* STORE_FLAG_MAC: set by the caller before store_encode to write version 2 */
    uint8_t fingerprint[STORE_KEY_BYTES];
    uint8_t key[STORE_KEY_BYTES];
    uint8_t parent[STORE_KEY_BYTES];
    uint32_t n_tokens;
    int32_t traffic_class;
    int64_t created, expires;
    uint64_t payload_len;
    uint64_t checksum;
} store_obj_hdr;

/* What a reader knows the object must contain. */
typedef struct store_expect {
    const uint8_t *fingerprint; /* STORE_KEY_BYTES */
    const uint8_t *key;
    const uint8_t *parent; /* NULL: zeros (first block) */
    const int32_t *tokens;
    uint32_t n_tokens;
    uint64_t payload_len;
    const store_mac_key *mac_key; /* NULL: no key (MACs are not checked, v1 objects accepted) */
    const uint8_t *mac; /* the object's trailer as read (STORE_MAC_BYTES), NULL: none read */
} store_expect;

typedef enum store_verdict {
    STORE_VALID = 0,
    STORE_EXPIRED, /* intact but past its expiry: a miss, not quarantined */
    STORE_OTHER_VERSION, /* our magic, another format version (a rolling upgrade): a miss, left alone */
    STORE_CORRUPT, /* anything else: a miss, quarantined */
} store_verdict;

/* header_len for n tokens. */
uint32_t store_header_len(uint32_t n_tokens);

/* Encodes h (version / header_len / checksum are filled here; version 2 when
 * h->flags has STORE_FLAG_MAC, else 1) and tokens into buf (capacity >=
 * store_header_len(n)), computing the checksum over the header and payload.
 * Returns header_len, or 0 if n_tokens or flags are out of range. */
uint32_t store_encode(store_obj_hdr *h, const int32_t *tokens, const void *payload, uint8_t *buf, size_t cap);

/* HMAC-SHA256(k, hdr[0..header_len) || payload) into out: the v2 trailer. 0, or -1 (libcrypto failed). */
int store_mac(const store_mac_key *k, const uint8_t *hdr, uint32_t header_len, const void *payload,
              uint64_t payload_len, uint8_t out[STORE_MAC_BYTES]);

/* Bytes after the payload for an object with these flags (0 or STORE_MAC_BYTES). */
uint32_t store_trailer_len(uint32_t flags);

/* Parses the fixed part of a header (no checksum check): 0, or -1 with err
 * when the magic / version / lengths are not a valid header of len bytes. */
int store_decode_header(const uint8_t *buf, size_t len, store_obj_hdr *h, cf_err *err);

/* Full verification of header bytes buf[0..header_len) + payload (+ x->mac)
 * against x at time now. why (may be NULL) names the first mismatch. */
store_verdict store_verify(const uint8_t *buf, size_t buf_len, const void *payload, uint64_t file_len,
                           const store_expect *x, int64_t now, const char **why);

/* Lower-case hex of a key into out[STORE_HEX_BYTES]; parse back (-1: not 64 hex digits). */
void store_key_hex(const uint8_t key[STORE_KEY_BYTES], char out[STORE_HEX_BYTES]);
int store_hex_key(const char *hex, uint8_t key[STORE_KEY_BYTES]);

/* "<dir>/objects/ab/cd/<hex>" (and the two fan-out directories). -1 if it does not fit. */
int store_object_path(const char *dir, const uint8_t key[STORE_KEY_BYTES], char *out, size_t cap);

#endif
