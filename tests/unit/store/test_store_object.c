/* test_store_object.c - one persistent KV block object, in memory and on disk:
 *  - encode / verify: a valid object verifies; a flipped byte anywhere in the
 *    header or payload, a wrong fingerprint / key / parent / tokens / payload
 *    length expectation is CORRUPT; past its expiry it is EXPIRED;
 *  - load from a directory: hit (payload identical, atime touched); corrupt
 *    byte, truncated file, wrong fingerprint, wrong tokens -> a miss that moves
 *    the file to quarantine/ (the next load is a plain miss); an object of
 *    another format version is a miss left in place; a second publish
 *    of the same key reports EXISTS;
 *  - atomic publish with concurrent writers: 6 forked processes publish the
 *    same 40 keys in different orders; every object then loads and verifies,
 *    and no temporary file is left. */
#include <sys/wait.h>
#include <time.h>

#include "store_testlib.h"

static void test_memory(void) {
    st_obj o;
    st_obj_make(&o, 1);
    uint8_t buf[1024];
    store_obj_hdr h = {
        .n_tokens = ST_BT, .traffic_class = 2, .created = 100, .expires = 200, .payload_len = ST_PAYLOAD};
    memcpy(h.fingerprint, o.fp, 32);
    memcpy(h.key, o.key, 32);
    memcpy(h.parent, o.parent, 32);
    uint32_t hl = store_encode(&h, o.tokens, o.payload, buf, sizeof buf);
    CHECK(hl == store_header_len(ST_BT) && hl % 64 == 0 && hl >= STORE_HDR_FIXED + 4 * ST_BT);
    uint64_t flen = hl + ST_PAYLOAD;
    store_expect x = st_expect(&o);
    const char *why = NULL;
    CHECK(store_verify(buf, hl, o.payload, flen, &x, 150, &why) == STORE_VALID);
    CHECK(store_verify(buf, hl, o.payload, flen, &x, 200, &why) == STORE_EXPIRED);
    store_obj_hdr d;
    CHECK(store_decode_header(buf, hl, &d, NULL) == 0 && d.traffic_class == 2 && d.created == 100 && d.expires == 200 &&
          d.payload_len == ST_PAYLOAD && d.checksum == h.checksum);
    /* every single-byte flip in the header (incl. padding) or the payload is caught */
    int caught = 0, total = 0;
    for (uint32_t i = 0; i < hl + ST_PAYLOAD; i += (i < hl ? 1 : 97)) {
        uint8_t *p = i < hl ? &buf[i] : &o.payload[i - hl];
        *p ^= 0x10;
        total++;
        store_verdict v = store_verify(buf, hl, o.payload, flen, &x, 150, &why);
        caught += v == STORE_CORRUPT || (v == STORE_OTHER_VERSION && i >= 8 && i < 12);
        *p ^= 0x10;
    }
    CHECKF(caught == total, "%d of %d flips caught", caught, total);
    CHECK(store_verify(buf, hl, o.payload, flen, &x, 150, &why) == STORE_VALID);
    CHECK(store_verify(buf, hl, o.payload, flen - 1, &x, 150, &why) == STORE_CORRUPT);
    uint8_t other[32];
    memset(other, 0xF2, 32);
    store_expect y = x;
    y.fingerprint = other;
    CHECK(store_verify(buf, hl, o.payload, flen, &y, 150, &why) == STORE_CORRUPT && !strcmp(why, "model fingerprint"));
    y = x;
    y.key = other;
    CHECK(store_verify(buf, hl, o.payload, flen, &y, 150, &why) == STORE_CORRUPT);
    y = x;
    y.parent = NULL;
    CHECK(store_verify(buf, hl, o.payload, flen, &y, 150, &why) == STORE_CORRUPT && !strcmp(why, "parent key"));
    int32_t toks[ST_BT];
    memcpy(toks, o.tokens, sizeof toks);
    toks[7]++;
    y = x;
    y.tokens = toks;
    CHECK(store_verify(buf, hl, o.payload, flen, &y, 150, &why) == STORE_CORRUPT && !strcmp(why, "tokens"));
    y = x;
    y.payload_len = ST_PAYLOAD / 2;
    CHECK(store_verify(buf, hl, o.payload, flen, &y, 150, &why) == STORE_CORRUPT);
    buf[8] = 3; /* another format version: a miss, never quarantined */
    CHECK(store_verify(buf, hl, o.payload, flen, &x, 150, &why) == STORE_OTHER_VERSION);
    buf[8] = 1;
    memcpy(buf, "NOTMAGIC", 8);
    CHECK(store_decode_header(buf, hl, &d, NULL) == -1);
    /* hex names */
    char hex[STORE_HEX_BYTES];
    uint8_t back[32];
    store_key_hex(o.key, hex);
    CHECK(strlen(hex) == 64 && store_hex_key(hex, back) == 0 && !memcmp(back, o.key, 32));
    CHECK(store_hex_key("zz", back) == -1);
}

/* Flips one byte of the object file at offset off (or truncates it when off < 0). */
static void damage(const char *dir, const uint8_t *key, long off) {
    char p[2048];
    CHECK(store_object_path(dir, key, p, sizeof p) == 0);
    if (off < 0) {
        CHECK(truncate(p, (off_t)(store_header_len(ST_BT) + ST_PAYLOAD - 100)) == 0);
        return;
    }
    FILE *f = fopen(p, "r+b");
    CHECK(f != NULL);
    if (!f) return;
    fseek(f, off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ 0x01, f);
    fclose(f);
}

static void test_disk(void) {
    char dir[512];
    st_dir(dir, sizeof dir, "store-obj");
    cf_err err;
    CHECK(store_fs_prepare(dir, &err) == 0);
    int64_t now = time(NULL);
    st_obj o[6];
    for (int i = 0; i < 6; i++) {
        st_obj_make(&o[i], (uint32_t)i);
        CHECK(st_publish(dir, &o[i], 0, now, now + 1000) == STORE_PUB_WRITTEN);
    }
    CHECK(st_publish(dir, &o[0], 0, now, now + 1000) == STORE_PUB_EXISTS);
    uint8_t hdr[1024], dst[ST_PAYLOAD];
    uint64_t got;
    store_expect x = st_expect(&o[0]);
    CHECK(store_fs_load(dir, &x, hdr, dst, now + 700, 600, &got, &err) == STORE_LOAD_HIT);
    CHECK(!memcmp(dst, o[0].payload, ST_PAYLOAD) && got == store_header_len(ST_BT) + ST_PAYLOAD);
    char p[2048];
    struct stat sb;
    store_object_path(dir, o[0].key, p, sizeof p);
    CHECK(stat(p, &sb) == 0 && sb.st_atime == now + 700 && sb.st_mtime == now + 1000); /* touched; mtime = expiry */
    CHECK(store_fs_load(dir, &x, hdr, dst, now + 1000, 600, &got, &err) == STORE_LOAD_EXPIRED);
    CHECK(st_exists(dir, o[0].key)); /* expired objects are left for GC */

    /* another format version (a rolling upgrade): a plain miss, the file stays */
    st_obj v2;
    st_obj_make(&v2, 77);
    CHECK(st_publish(dir, &v2, 0, now, now + 1000) == STORE_PUB_WRITTEN);
    damage(dir, v2.key, 8); /* version 1 -> 0 */
    store_expect xv = st_expect(&v2);
    CHECK(store_fs_load(dir, &xv, hdr, dst, now, 600, &got, &err) == STORE_LOAD_MISS && st_exists(dir, v2.key));
    damage(dir, o[1].key, (long)store_header_len(ST_BT) + 1234); /* payload byte */
    damage(dir, o[2].key, -1); /* truncated */
    damage(dir, o[5].key, STORE_HDR_FIXED + 8); /* a token id in the header */
    store_expect x1 = st_expect(&o[1]), x2 = st_expect(&o[2]), x5 = st_expect(&o[5]);
    CHECK(store_fs_load(dir, &x1, hdr, dst, now, 600, &got, &err) == STORE_LOAD_QUARANTINED);
    CHECK(store_fs_load(dir, &x2, hdr, dst, now, 600, &got, &err) == STORE_LOAD_QUARANTINED);
    CHECK(store_fs_load(dir, &x5, hdr, dst, now, 600, &got, &err) == STORE_LOAD_QUARANTINED);
    /* a valid object read with the wrong expectations is quarantined too: */
    store_expect x3 = st_expect(&o[3]);
    uint8_t fp2[32];
    memset(fp2, 0x77, 32);
    x3.fingerprint = fp2;
    CHECK(store_fs_load(dir, &x3, hdr, dst, now, 600, &got, &err) == STORE_LOAD_QUARANTINED);
    store_expect x4 = st_expect(&o[4]);
    int32_t toks[ST_BT];
    memcpy(toks, o[4].tokens, sizeof toks);
    toks[0] ^= 1;
    x4.tokens = toks;
    CHECK(store_fs_load(dir, &x4, hdr, dst, now, 600, &got, &err) == STORE_LOAD_QUARANTINED);
    for (int i = 1; i < 6; i++) CHECK(!st_exists(dir, o[i].key));
    char q[600];
    snprintf(q, sizeof q, "%s/quarantine", dir);
    CHECK(st_count_files(q, NULL) == 5);
    CHECK(store_fs_load(dir, &x1, hdr, dst, now, 600, &got, &err) == STORE_LOAD_MISS);
    st_rmrf(dir);
}

#define CW_PROCS 6
#define CW_KEYS 40

static void test_concurrent_writers(void) {
    char dir[512];
    st_dir(dir, sizeof dir, "store-cw");
    cf_err err;
    CHECK(store_fs_prepare(dir, &err) == 0);
    int64_t now = time(NULL);
    pid_t pids[CW_PROCS];
    for (int k = 0; k < CW_PROCS; k++) {
        pids[k] = fork();
        if (pids[k] == 0) {
            int bad = 0;
            for (int j = 0; j < CW_KEYS; j++) {
                int i = (j * (k + 1) * 7 + k) % CW_KEYS; /* a different order per process */
                st_obj o;
                st_obj_make(&o, (uint32_t)i);
                for (int rep = 0; rep < 3; rep++) bad += st_publish(dir, &o, 1, now, now + 1000) == STORE_PUB_ERROR;
            }
            _exit(bad ? 1 : 0);
        }
    }
    int ok = 0;
    for (int k = 0; k < CW_PROCS; k++) {
        int status = 0;
        if (pids[k] > 0 && waitpid(pids[k], &status, 0) == pids[k] && WIFEXITED(status) && WEXITSTATUS(status) == 0)
            ok++;
    }
    CHECK(ok == CW_PROCS);
    int hits = 0;
    for (int i = 0; i < CW_KEYS; i++) {
        st_obj o;
        st_obj_make(&o, (uint32_t)i);
        store_expect x = st_expect(&o);
        uint8_t hdr[1024], dst[ST_PAYLOAD];
        uint64_t got;
        hits += store_fs_load(dir, &x, hdr, dst, now, 600, &got, &err) == STORE_LOAD_HIT &&
                !memcmp(dst, o.payload, ST_PAYLOAD);
    }
    char objs[600];
    snprintf(objs, sizeof objs, "%s/objects", dir);
    fprintf(stderr, "concurrent writers: %d/%d objects verify, %d files, %d temporaries\n", hits, CW_KEYS,
            st_count_files(objs, NULL), st_count_files(objs, STORE_SUFFIX_TMP));
    CHECK(hits == CW_KEYS);
    CHECK(st_count_files(objs, NULL) == CW_KEYS);
    CHECK(st_count_files(objs, STORE_SUFFIX_TMP) == 0);
    st_rmrf(dir);
}

int main(void) {
    test_memory();
    test_disk();
    test_concurrent_writers();
    return test_finish();
}
