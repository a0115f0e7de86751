/* test_safetensors.c - the safetensors reader and shard sets.
 *
 * 1. A hand-made file (two tensors and __metadata__) parses: dtypes, shapes,
 *    data pointers, lookups by name, metadata.
 * 2. Every truncation of it and every malformed header (length past the file,
 *    over the limit, not JSON, not an object, unknown dtype, shape/dtype/size
 *    disagreement, offsets past the data, begin > end, overlapping tensors,
 *    misaligned data, duplicate names, non-string metadata) fails with one
 *    line naming the file (and the tensor and field where there is one).
 *    Images are exact-size heap copies, so the ASan build sees any overread.
 * 3. Shard sets in a scratch directory: an index over two shards opens and
 *    finds every tensor; an index naming a missing tensor, a shard holding a
 *    tensor the index does not list, and a file name with '/' are refused. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "format/safetensors.h"
#include "testutil.h"

/* header JSON (padded with spaces to a multiple of 8) + data bytes */
static uint8_t *image(const char *json, const void *data, size_t data_n, size_t *size) {
    size_t jn = strlen(json), padded = (jn + 7) / 8 * 8;
    *size = 8 + padded + data_n;
    uint8_t *p = malloc(*size);
    if (!p) abort();
    uint64_t n = padded;
    memcpy(p, &n, 8);
    memcpy(p + 8, json, jn);
    memset(p + 8 + jn, ' ', padded - jn);
    if (data_n) memcpy(p + 8 + padded, data, data_n);
    return p;
}

static const float DATA[6] = {1, 2, 3, 4, 5, 6};
static const char *GOOD = "{\"__metadata__\":{\"format\":\"pt\"},"
                          "\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[16,20]},"
                          "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";

static void test_good(void) {
    size_t n;
    uint8_t *img = image(GOOD, DATA, 20, &n);
    st_file *f;
    cf_err err = {{0}};
    CHECKF(st_open_memory(img, n, "good.st", &f, &err) == 0, "%s", err.msg);
    if (!f) {
        free(img);
        return;
    }
    CHECK(st_tensor_count(f) == 2);
    const st_tensor *a = st_find_tensor(f, "a"), *b = st_find_tensor(f, "b");
    CHECK(a && b && !st_find_tensor(f, "c"));
    CHECK(st_tensor_at(f, 0) == a && st_tensor_at(f, 1) == b); /* data order */
    CHECK(a->dtype == ST_F32 && a->n_dims == 2 && a->shape[0] == 2 && a->shape[1] == 2 && a->nbytes == 16);
    CHECK(b->dtype == ST_F16 && b->n_dims == 1 && b->nbytes == 4 && b->begin == 16);
    CHECK(memcmp(a->data, DATA, 16) == 0);
    CHECK(st_metadata(f, "format") && !strcmp(st_metadata(f, "format"), "pt"));
    CHECK(!st_metadata(f, "other"));
    st_close(f);
    /* every truncation fails cleanly */
    for (size_t len = 0; len < n; len++) {
        uint8_t *cut = malloc(len ? len : 1);
        memcpy(cut, img, len);
        st_file *g = NULL;
        int rc = st_open_memory(cut, len, "cut.st", &g, &err);
        CHECKF(rc == -1 && !strncmp(err.msg, "cut.st: ", 8) && !strchr(err.msg, '\n'), "len %zu: %s", len, err.msg);
        if (!rc) st_close(g);
        free(cut);
    }
    free(img);
}

static void expect_bad(const char *json, size_t data_n, const char *needle) {
    size_t n;
    uint8_t data[64] = {0};
    uint8_t *img = image(json, data, data_n, &n);
    st_file *f = NULL;
    cf_err err = {{0}};
    int rc = st_open_memory(img, n, "bad.st", &f, &err);
    CHECKF(rc == -1, "accepted: %s", json);
    CHECKF(strstr(err.msg, needle) && !strncmp(err.msg, "bad.st: ", 8) && !strchr(err.msg, '\n'), "want '%s', got '%s'",
           needle, err.msg);
    if (!rc) st_close(f);
    free(img);
}

static void test_bad_headers(void) {
    /* header length past the file / over the limit */
    uint8_t hdr[16] = {0};
    uint64_t big = 1000;
    memcpy(hdr, &big, 8);
    st_file *f = NULL;
    cf_err err = {{0}};
    CHECK(st_open_memory(hdr, sizeof hdr, "h.st", &f, &err) == -1 && strstr(err.msg, "past the end"));
    big = (uint64_t)1 << 40;
    memcpy(hdr, &big, 8);
    CHECK(st_open_memory(hdr, sizeof hdr, "h.st", &f, &err) == -1 && strstr(err.msg, "100 MiB"));
    expect_bad("{\"a\":", 0, "header JSON");
    expect_bad("[1,2]", 0, "not an object");
    expect_bad("{\"a\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "field dtype: unknown dtype 'Q4'");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "field data_offsets: 8 bytes");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "past the data section");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 8, "is after end");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "field shape");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "8 dimensions");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
               "field shape: element count overflows");
    expect_bad("{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967295],\"data_offsets\":[0,8]}}", 8,
               "8 bytes, but shape and dtype F64 need more than");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               16, "overlap tensor 'a'");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}", 8, "not aligned");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8, "duplicate");
    expect_bad("{\"__metadata__\":{\"k\":1}}", 0, "field __metadata__.k");
    expect_bad("{\"a\\u0001\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'a\\x01': field data_offsets");
    expect_bad("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "field dtype: missing");
}

static int write_file(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    size_t w = fwrite(p, 1, n, fp);
    return fclose(fp) == 0 && w == n ? 0 : -1;
}

static void write_shard(const char *dir, const char *name, const char *json) {
    char path[512];
    size_t n;
    uint8_t *img = image(json, DATA, 24, &n);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    CHECK(write_file(path, img, n) == 0);
    free(img);
}

static void write_index(const char *dir, const char *json) {
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    CHECK(write_file(path, json, strlen(json)) == 0);
}

static void expect_set(const char *dir, const char *needle) {
    st_set *s = NULL;
    cf_err err = {{0}};
    int rc = st_set_open_dir(dir, &s, &err);
    if (!needle) {
        CHECKF(rc == 0, "%s", err.msg);
        st_set_close(s);
        return;
    }
    CHECKF(rc == -1 && strstr(err.msg, needle) && !strchr(err.msg, '\n'), "want '%s', got '%s'", needle, err.msg);
    if (!rc) st_set_close(s);
}

static void test_sets(void) {
    char dir[512];
    if (!test_scratch_path(dir, sizeof dir, "st")) {
        CHECK(0);
        return;
    }
    CHECK(mkdir(dir, 0700) == 0);
    write_shard(dir, "s1.safetensors", "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}");
    write_shard(dir, "s2.safetensors", "{\"y\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}");
    expect_set(dir, "model.safetensors: cannot open"); /* no index, no single file */
    write_index(dir, "{\"metadata\":{},\"weight_map\":{\"x\":\"s1.safetensors\",\"y\":\"s2.safetensors\"}}");
    st_set *s = NULL;
    cf_err err = {{0}};
    CHECKF(st_set_open_dir(dir, &s, &err) == 0, "%s", err.msg);
    if (s) {
        const char *file = NULL;
        const st_tensor *y = st_set_find(s, "y", &file);
        CHECK(st_set_count(s) == 2 && y && y->dtype == ST_BF16 && strstr(file, "s2.safetensors"));
        CHECK(st_set_find(s, "x", NULL) && !st_set_find(s, "z", NULL) && st_set_at(s, 1) == y);
        st_set_close(s);
    }
    write_index(dir, "{\"weight_map\":{\"x\":\"s1.safetensors\",\"y\":\"s1.safetensors\"}}");
    expect_set(dir, "field weight_map.y: tensor not in");
    write_index(dir, "{\"weight_map\":{\"x\":\"s1.safetensors\"}}");
    write_shard(dir, "s1.safetensors",
                "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}");
    expect_set(dir, "tensor 'w' is in");
    write_index(dir, "{\"weight_map\":{\"x\":\"../s1.safetensors\"}}");
    expect_set(dir, "not a file name in the directory");
    write_index(dir, "{\"weight_map\":[]}");
    expect_set(dir, "field weight_map: missing or not an object");
    write_index(dir, "{\"weight_map\":");
    expect_set(dir, "model.safetensors.index.json: ");
    test_scratch_remove(dir);
}

int main(void) {
    test_good();
    test_bad_headers();
    test_sets();
    return test_finish();
}
