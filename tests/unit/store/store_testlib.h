/* store_testlib.h - helpers shared by the store tests (header-only, static):
 * fresh store directories (testutil scratch dirs), deterministic keys /
 * tokens / payloads, publishing one object, counting files. */
#ifndef CINFER_TEST_STORE_TESTLIB_H
#define CINFER_TEST_STORE_TESTLIB_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_format.h"
#include "store/store_fs.h"
#include "testutil.h"

#define ST_BT 16
#define ST_PAYLOAD 4096

/* Removes the scratch directory st_dir made for `dir` (and nothing else). */
static inline void st_rmrf(const char *dir) { test_scratch_remove(dir); }

/* A path that does not exist yet inside a fresh mkdtemp directory
 * ($TMPDIR or /tmp, cinfer-test-<tag>-XXXXXX/d); "" if none could be made. */
static inline const char *st_dir(char *buf, size_t cap, const char *tag) {
    CHECK(test_scratch_path(buf, cap, tag) != NULL);
    return buf;
}

static inline void st_fill(uint8_t *p, size_t n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

typedef struct st_obj {
    uint8_t fp[STORE_KEY_BYTES], key[STORE_KEY_BYTES], parent[STORE_KEY_BYTES];
    int32_t tokens[ST_BT];
    uint8_t payload[ST_PAYLOAD];
} st_obj;

static inline void st_obj_make(st_obj *o, uint32_t i) {
    memset(o->fp, 0xF1, sizeof o->fp);
    st_fill(o->key, sizeof o->key, 1000 + i);
    st_fill(o->parent, sizeof o->parent, 2000 + i);
    for (int t = 0; t < ST_BT; t++) o->tokens[t] = (int32_t)(i * 31 + (uint32_t)t) % 500;
    st_fill(o->payload, sizeof o->payload, 3000 + i);
}

static inline store_expect st_expect(const st_obj *o) {
    return (store_expect){.fingerprint = o->fp,
                          .key = o->key,
                          .parent = o->parent,
                          .tokens = o->tokens,
                          .n_tokens = ST_BT,
                          .payload_len = ST_PAYLOAD};
}

static inline store_pub_result st_publish(const char *dir, const st_obj *o, int cls, int64_t now, int64_t expires) {
    store_obj_hdr h = {
        .n_tokens = ST_BT, .traffic_class = cls, .created = now, .expires = expires, .payload_len = ST_PAYLOAD};
    memcpy(h.fingerprint, o->fp, STORE_KEY_BYTES);
    memcpy(h.key, o->key, STORE_KEY_BYTES);
    memcpy(h.parent, o->parent, STORE_KEY_BYTES);
    int e = 0;
    cf_err err = {0};
    store_pub_result r = store_fs_publish(dir, &h, o->tokens, o->payload, NULL, false, now, &e, &err);
    if (r == STORE_PUB_ERROR) fprintf(stderr, "publish: %s\n", err.msg);
    return r;
}

/* Regular files under dir/<sub> (recursively); with `substr`, only names containing it. */
static inline int st_count_files(const char *dir, const char *substr) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *f;
    while ((f = readdir(d))) {
        if (!strcmp(f->d_name, ".") || !strcmp(f->d_name, "..")) continue;
        char p[2048];
        if ((size_t)snprintf(p, sizeof p, "%.1500s/%.255s", dir, f->d_name) >= sizeof p) continue;
        struct stat sb;
        if (stat(p, &sb)) continue;
        if (S_ISDIR(sb.st_mode)) n += st_count_files(p, substr);
        else if (!substr || strstr(f->d_name, substr)) n++;
    }
    closedir(d);
    return n;
}

static inline bool st_exists(const char *dir, const uint8_t *key) {
    char p[2048];
    struct stat sb;
    return store_object_path(dir, key, p, sizeof p) == 0 && stat(p, &sb) == 0;
}

#endif
