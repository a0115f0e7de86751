/* test_store_mac.c - authenticated store objects (format version 2, HMAC-SHA256
 * trailer) and objects that are not regular files:
 *  - store_verify in memory: a keyed object verifies with the key and without
 *    one; a forged object (same content, MAC under another key), a tampered
 *    payload whose checksum was recomputed (what a writer on the shared
 *    filesystem can do), a v1 object with no MAC, and a v2 object whose
 *    trailer was not read are all corrupt with the key; the v1 object is
 *    valid without one;
 *  - on disk (store_fs_publish / store_fs_load): the same four cases end in
 *    quarantine/ with a key, and keyless objects load without one;
 *  - key files: a good one loads; world-readable, too short, a FIFO and a
 *    symlink are refused;
 *  - a FIFO and a symlink under an object's name: store_fs_load does not
 *    block or follow, and moves them to quarantine/. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_testlib.h"

static void make_key(store_mac_key *k, uint8_t seed) {
    memset(k, 0, sizeof *k);
    k->len = 48;
    for (size_t i = 0; i < k->len; i++) k->bytes[i] = (uint8_t)(seed + 13 * i);
}

/* Encodes o as a v2 object with a MAC under k: header in buf, MAC in mac. */
static uint32_t encode_mac(const st_obj *o, const void *payload, const store_mac_key *k, uint8_t *buf, size_t cap,
                           uint8_t mac[STORE_MAC_BYTES]) {
    store_obj_hdr h = {
        .n_tokens = ST_BT, .created = 100, .expires = 200, .payload_len = ST_PAYLOAD, .flags = STORE_FLAG_MAC};
    memcpy(h.fingerprint, o->fp, 32);
    memcpy(h.key, o->key, 32);
    memcpy(h.parent, o->parent, 32);
    uint32_t hl = store_encode(&h, o->tokens, payload, buf, cap);
    CHECK(hl > 0 && h.version == STORE_FORMAT_VERSION_MAC);
    CHECK(store_mac(k, buf, hl, payload, ST_PAYLOAD, mac) == 0);
    return hl;
}

static void test_verify_memory(void) {
    st_obj o;
    st_obj_make(&o, 5);
    store_mac_key k, k2;
    make_key(&k, 1);
    make_key(&k2, 2);
    uint8_t buf[1024], mac[STORE_MAC_BYTES], mac2[STORE_MAC_BYTES];
    uint32_t hl = encode_mac(&o, o.payload, &k, buf, sizeof buf, mac);
    uint64_t flen = hl + ST_PAYLOAD + STORE_MAC_BYTES;
    store_expect x = st_expect(&o);
    const char *why = NULL;
    x.mac = mac;
    x.mac_key = &k;
    CHECK(store_verify(buf, hl, o.payload, flen, &x, 150, &why) == STORE_VALID);
    x.mac_key = NULL; /* no key: the checksum alone */
    CHECK(store_verify(buf, hl, o.payload, flen, &x, 150, &why) == STORE_VALID);
    x.mac_key = &k;
    /* every single-bit flip of the MAC is caught */
    int caught = 0;
    for (int i = 0; i < STORE_MAC_BYTES * 8; i++) {
        mac[i / 8] ^= (uint8_t)(1 << (i % 8));
        caught += store_verify(buf, hl, o.payload, flen, &x, 150, &why) == STORE_CORRUPT;
        mac[i / 8] ^= (uint8_t)(1 << (i % 8));
    }
    CHECK(caught == STORE_MAC_BYTES * 8);
    /* forged: the same object, MAC'd under another key */
    uint8_t fbuf[1024];
    encode_mac(&o, o.payload, &k2, fbuf, sizeof fbuf, mac2);
    x.mac = mac2;
    CHECK(store_verify(fbuf, hl, o.payload, flen, &x, 150, &why) == STORE_CORRUPT && strstr(why, "MAC"));
    /* tampered payload, checksum recomputed, the original MAC kept */
    uint8_t evil[ST_PAYLOAD], tbuf[1024], unused[STORE_MAC_BYTES];
    memcpy(evil, o.payload, sizeof evil);
    evil[100] ^= 0x55;
    encode_mac(&o, evil, &k2, tbuf, sizeof tbuf, unused);
    x.mac = mac;
    CHECK(store_verify(tbuf, hl, evil, flen, &x, 150, &why) == STORE_CORRUPT && strstr(why, "MAC"));
    /* a v2 object whose trailer was not read */
    x.mac = NULL;
    CHECK(store_verify(buf, hl, o.payload, flen, &x, 150, &why) == STORE_CORRUPT);
    /* a v1 object (no MAC): corrupt with a key, valid without */
    store_obj_hdr h = {.n_tokens = ST_BT, .created = 100, .expires = 200, .payload_len = ST_PAYLOAD};
    memcpy(h.fingerprint, o.fp, 32);
    memcpy(h.key, o.key, 32);
    memcpy(h.parent, o.parent, 32);
    uint8_t v1[1024];
    CHECK(store_encode(&h, o.tokens, o.payload, v1, sizeof v1) == hl && h.version == STORE_FORMAT_VERSION);
    CHECK(store_verify(v1, hl, o.payload, hl + ST_PAYLOAD, &x, 150, &why) == STORE_CORRUPT && strstr(why, "no MAC"));
    x.mac_key = NULL;
    CHECK(store_verify(v1, hl, o.payload, hl + ST_PAYLOAD, &x, 150, &why) == STORE_VALID);
    /* the flag and the version go together: v1 with the flag set, v2 without, are not objects */
    v1[STORE_FLAGS_OFF] = 1;
    CHECK(store_verify(v1, hl, o.payload, hl + ST_PAYLOAD, &x, 150, &why) == STORE_CORRUPT);
    buf[STORE_FLAGS_OFF] = 0;
    CHECK(store_verify(buf, hl, o.payload, flen, &x, 150, &why) == STORE_CORRUPT);
}

/* Publishes o (with key k or none) and returns the object's path. */
static void publish(const char *dir, const st_obj *o, const store_mac_key *k, int64_t now, char *path, size_t cap) {
    store_obj_hdr h = {.n_tokens = ST_BT, .created = now, .expires = now + 1000, .payload_len = ST_PAYLOAD};
    memcpy(h.fingerprint, o->fp, 32);
    memcpy(h.key, o->key, 32);
    memcpy(h.parent, o->parent, 32);
    int e = 0;
    cf_err err = {0};
    CHECKF(store_fs_publish(dir, &h, o->tokens, o->payload, k, false, now, &e, &err) == STORE_PUB_WRITTEN, "%s",
           err.msg);
    store_object_path(dir, o->key, path, cap);
}

static store_load_result load(const char *dir, const st_obj *o, const store_mac_key *k, int64_t now) {
    uint8_t hdr[1024], dst[ST_PAYLOAD];
    uint64_t got;
    cf_err err = {0};
    store_expect x = st_expect(o);
    x.mac_key = k;
    store_load_result r = store_fs_load(dir, &x, hdr, dst, now, 600, &got, &err);
    if (r == STORE_LOAD_HIT) CHECK(!memcmp(dst, o->payload, ST_PAYLOAD));
    return r;
}

static void test_disk(void) {
    char dir[512], q[600], p[2048];
    st_dir(dir, sizeof dir, "store-mac");
    cf_err err;
    CHECK(store_fs_prepare(dir, &err) == 0);
    snprintf(q, sizeof q, "%s/quarantine", dir);
    int64_t now = time(NULL);
    store_mac_key k, k2;
    make_key(&k, 1);
    make_key(&k2, 2);
    st_obj o[5];
    for (int i = 0; i < 5; i++) st_obj_make(&o[i], 40 + (uint32_t)i);
    struct stat sb;
    /* keyed: verifies with the key and without one; the file carries the trailer */
    publish(dir, &o[0], &k, now, p, sizeof p);
    CHECK(stat(p, &sb) == 0 && (uint64_t)sb.st_size == store_header_len(ST_BT) + ST_PAYLOAD + STORE_MAC_BYTES);
    CHECK(load(dir, &o[0], &k, now) == STORE_LOAD_HIT);
    CHECK(load(dir, &o[0], NULL, now) == STORE_LOAD_HIT);
    /* forged: written under another key */
    publish(dir, &o[1], &k2, now, p, sizeof p);
    CHECK(load(dir, &o[1], &k, now) == STORE_LOAD_QUARANTINED && !st_exists(dir, o[1].key));
    /* tampered payload with the checksum recomputed: rewrite the file as an attacker would */
    publish(dir, &o[2], &k, now, p, sizeof p);
    {
        uint8_t hdr[1024], mac[STORE_MAC_BYTES];
        FILE *f = fopen(p, "r+b");
        CHECK(f && fseek(f, (long)(store_header_len(ST_BT) + ST_PAYLOAD), SEEK_SET) == 0 &&
              fread(mac, 1, sizeof mac, f) == sizeof mac);
        st_obj evil = o[2];
        evil.payload[7] ^= 0x80;
        store_obj_hdr h = {.n_tokens = ST_BT,
                           .created = now,
                           .expires = now + 1000,
                           .payload_len = ST_PAYLOAD,
                           .flags = STORE_FLAG_MAC};
        memcpy(h.fingerprint, evil.fp, 32);
        memcpy(h.key, evil.key, 32);
        memcpy(h.parent, evil.parent, 32);
        uint32_t hl = store_encode(&h, evil.tokens, evil.payload, hdr, sizeof hdr);
        CHECK(f && fseek(f, 0, SEEK_SET) == 0 && fwrite(hdr, 1, hl, f) == hl &&
              fwrite(evil.payload, 1, ST_PAYLOAD, f) == ST_PAYLOAD && fwrite(mac, 1, sizeof mac, f) == sizeof mac);
        if (f) fclose(f);
        CHECK(load(dir, &evil, NULL, now) == STORE_LOAD_HIT); /* the checksum alone cannot tell */
        CHECK(load(dir, &evil, &k, now) == STORE_LOAD_QUARANTINED && !st_exists(dir, o[2].key));
    }
    /* no MAC (written without a key): accepted without a key, quarantined with one */
    publish(dir, &o[3], NULL, now, p, sizeof p);
    CHECK(stat(p, &sb) == 0 && (uint64_t)sb.st_size == store_header_len(ST_BT) + ST_PAYLOAD);
    CHECK(load(dir, &o[3], NULL, now) == STORE_LOAD_HIT);
    CHECK(load(dir, &o[3], &k, now) == STORE_LOAD_QUARANTINED && !st_exists(dir, o[3].key));
    CHECK(st_count_files(q, NULL) == 3);

    /* a FIFO under an object name: no blocking open, quarantined */
    CHECK(store_object_path(dir, o[4].key, p, sizeof p) == 0);
    char d1[2048];
    snprintf(d1, sizeof d1, "%.*s", (int)(strlen(p) - 68), p);
    mkdir(d1, 0755);
    snprintf(d1, sizeof d1, "%.*s", (int)(strlen(p) - 65), p);
    mkdir(d1, 0755);
    CHECK(mkfifo(p, 0644) == 0);
    CHECK(load(dir, &o[4], NULL, now) == STORE_LOAD_QUARANTINED && lstat(p, &sb) != 0);
    /* a symlink to a valid object: not followed, quarantined; the target stays */
    char target[2048];
    store_object_path(dir, o[0].key, target, sizeof target);
    CHECK(symlink(target, p) == 0);
    CHECK(load(dir, &o[4], NULL, now) == STORE_LOAD_QUARANTINED && lstat(p, &sb) != 0);
    CHECK(st_exists(dir, o[0].key));
    CHECK(st_count_files(q, NULL) == 4); /* the symlink took the FIFO's quarantine name (same key, second, pid) */
    st_rmrf(dir);
}

static void test_key_files(void) {
    char dir[512], p[700];
    st_dir(dir, sizeof dir, "store-key");
    CHECK(mkdir(dir, 0700) == 0);
    store_mac_key k;
    cf_err err = {0};
    snprintf(p, sizeof p, "%s/key", dir);
    FILE *f = fopen(p, "wb");
    CHECK(f && fwrite("0123456789abcdef0123456789abcdef\n", 1, 33, f) == 33);
    if (f) fclose(f);
    CHECK(chmod(p, 0600) == 0);
    CHECK(store_key_load(p, &k, &err) == 0 && k.len == 33);
    CHECK(chmod(p, 0640) == 0 && store_key_load(p, &k, &err) == 0); /* group-readable: allowed */
    CHECK(chmod(p, 0644) == 0 && store_key_load(p, &k, &err) == -1 && strstr(err.msg, "others"));
    CHECK(chmod(p, 0602) == 0 && store_key_load(p, &k, &err) == -1);
    CHECK(truncate(p, 31) == 0 && chmod(p, 0600) == 0 && store_key_load(p, &k, &err) == -1 && strstr(err.msg, "bytes"));
    char l[720];
    CHECK(truncate(p, 64) == 0);
    snprintf(l, sizeof l, "%s/link", dir);
    CHECK(symlink(p, l) == 0 && store_key_load(l, &k, &err) == -1);
    snprintf(l, sizeof l, "%s/fifo", dir);
    CHECK(mkfifo(l, 0600) == 0 && store_key_load(l, &k, &err) == -1 && strstr(err.msg, "regular"));
    snprintf(l, sizeof l, "%s/none", dir);
    CHECK(store_key_load(l, &k, &err) == -1);
    st_rmrf(dir);
}

int main(void) {
    test_verify_memory();
    test_disk();
    test_key_files();
    return test_finish();
}
