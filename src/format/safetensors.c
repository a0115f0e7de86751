/* safetensors.c - the .safetensors reader (one file): maps it, parses the JSON
 * header with jansson and validates every entry (see safetensors.h for the
 * contract). Sharded sets are in safetensors_set.c.
 *
 * Invariants after a successful open:
 *   - tensors[] is sorted by `begin` (data order) and no two byte ranges
 *     overlap; every [data, data + nbytes) lies inside the image and data is
 *     aligned to the element size (relative to the image start);
 *   - by_name[] points at tensors[] sorted by name (binary search); names are
 *     unique (the JSON parser rejects duplicate keys) and NUL-free;
 *   - the header's JSON is released after parsing: names and metadata are
 *     copies owned by the st_file. */
#include "format/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/file_map.h"

typedef struct st_meta {
    char *key, *value;
} st_meta;

struct st_file {
    char *path;
    const uint8_t *base;
    size_t size;
    bool mapped;
    st_tensor *tensors; /* data order; names owned */
    int64_t n_tensors;
    const st_tensor **by_name; /* tensors sorted by name */
    st_meta *meta;
    int64_t n_meta;
};

static const struct {
    const char *name;
    size_t size;
} dtype_info[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 1},       [ST_U8] = {"U8", 1},           [ST_I8] = {"I8", 1},   [ST_F8_E4M3] = {"F8_E4M3", 1},
    [ST_F8_E5M2] = {"F8_E5M2", 1}, [ST_F8_E8M0] = {"F8_E8M0", 1}, [ST_I16] = {"I16", 2}, [ST_U16] = {"U16", 2},
    [ST_F16] = {"F16", 2},         [ST_BF16] = {"BF16", 2},       [ST_I32] = {"I32", 4}, [ST_U32] = {"U32", 4},
    [ST_F32] = {"F32", 4},         [ST_I64] = {"I64", 8},         [ST_U64] = {"U64", 8}, [ST_F64] = {"F64", 8},
};

const char *st_dtype_name(st_dtype t) { return (unsigned)t < ST_DTYPE_COUNT ? dtype_info[t].name : "?"; }
size_t st_dtype_size(st_dtype t) { return (unsigned)t < ST_DTYPE_COUNT ? dtype_info[t].size : 0; }

const char *st_escape(const char *s, char *out, size_t cap) {
    size_t o = 0;
    for (; *s && o + 8 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch < 0x20 || ch == 0x7f) o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
        else out[o++] = (char)ch;
    }
    if (*s) memcpy(out + o, "...", 3), o += 3;
    out[o] = 0;
    return out;
}
#define SAFE(s) st_escape((s), (char[104]){0}, 104)

static int tensor_fail(const st_file *f, const char *name, const char *field, const char *what, cf_err *err) {
    return cf_fail(err, "%s: tensor '%s': field %s: %s", f->path, SAFE(name), field, what);
}

static int parse_dtype(const st_file *f, const char *name, json_t *v, st_dtype *out, cf_err *err) {
    if (!json_is_string(v)) return tensor_fail(f, name, "dtype", "missing or not a string", err);
    const char *s = json_string_value(v);
    for (int i = 0; i < ST_DTYPE_COUNT; i++)
        if (!strcmp(s, dtype_info[i].name)) {
            *out = (st_dtype)i;
            return 0;
        }
    char msg[160];
    snprintf(msg, sizeof msg, "unknown dtype '%s'", SAFE(s));
    return tensor_fail(f, name, "dtype", msg, err);
}

/* Shape: at most ST_MAX_DIMS non-negative integers; *nel gets the element count (overflow-checked). */
static int parse_shape(const st_file *f, st_tensor *t, json_t *v, uint64_t *nel, cf_err *err) {
    if (!json_is_array(v)) return tensor_fail(f, t->name, "shape", "missing or not an array", err);
    size_t n = json_array_size(v);
    if (n > ST_MAX_DIMS) return tensor_fail(f, t->name, "shape", "more than 8 dimensions", err);
    t->n_dims = (int)n;
    uint64_t count = 1;
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(v, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return tensor_fail(f, t->name, "shape", "dimensions must be non-negative integers", err);
        uint64_t dim = (uint64_t)json_integer_value(d);
        t->shape[i] = (int64_t)dim;
        if (dim && count > UINT64_MAX / dim) return tensor_fail(f, t->name, "shape", "element count overflows", err);
        count *= dim;
    }
    *nel = count;
    return 0;
}

static int parse_offsets(const st_file *f, st_tensor *t, json_t *v, uint64_t data_size, cf_err *err) {
    if (!json_is_array(v) || json_array_size(v) != 2)
        return tensor_fail(f, t->name, "data_offsets", "missing or not a [begin, end] pair", err);
    json_t *b = json_array_get(v, 0), *e = json_array_get(v, 1);
    if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 || json_integer_value(e) < 0)
        return tensor_fail(f, t->name, "data_offsets", "offsets must be non-negative integers", err);
    uint64_t begin = (uint64_t)json_integer_value(b), end = (uint64_t)json_integer_value(e);
    char msg[200];
    if (begin > end) {
        snprintf(msg, sizeof msg, "begin %" PRIu64 " is after end %" PRIu64, begin, end);
        return tensor_fail(f, t->name, "data_offsets", msg, err);
    }
    if (end > data_size) {
        snprintf(msg, sizeof msg, "end %" PRIu64 " is past the data section (%" PRIu64 " bytes; file truncated?)", end,
                 data_size);
        return tensor_fail(f, t->name, "data_offsets", msg, err);
    }
    t->begin = begin;
    t->nbytes = (size_t)(end - begin);
    return 0;
}

static int parse_metadata(st_file *f, json_t *v, cf_err *err) {
    if (!json_is_object(v)) return cf_fail(err, "%s: field __metadata__: not an object", f->path);
    size_t n = json_object_size(v);
    f->meta = calloc(n ? n : 1, sizeof *f->meta);
    if (!f->meta) return cf_fail(err, "%s: out of memory", f->path);
    const char *k;
    json_t *val;
    json_object_foreach(v, k, val) {
        if (!json_is_string(val)) return cf_fail(err, "%s: field __metadata__.%s: not a string", f->path, SAFE(k));
        st_meta *m = &f->meta[f->n_meta];
        m->key = strdup(k);
        m->value = strdup(json_string_value(val));
        f->n_meta++;
        if (!m->key || !m->value) return cf_fail(err, "%s: out of memory", f->path);
    }
    return 0;
}

static int parse_entry(st_file *f, const char *name, json_t *v, uint64_t data_start, cf_err *err) {
    st_tensor *t = &f->tensors[f->n_tensors];
    memset(t, 0, sizeof *t);
    char *copy = strdup(name);
    if (!copy) return cf_fail(err, "%s: out of memory", f->path);
    t->name = copy;
    f->n_tensors++; /* owns the name from here */
    if (!*name) return cf_fail(err, "%s: empty tensor name", f->path);
    if (!json_is_object(v)) return tensor_fail(f, name, "(entry)", "not an object", err);
    uint64_t nel = 0;
    uint64_t data_size = f->size - data_start;
    if (parse_dtype(f, name, json_object_get(v, "dtype"), &t->dtype, err) ||
        parse_shape(f, t, json_object_get(v, "shape"), &nel, err) ||
        parse_offsets(f, t, json_object_get(v, "data_offsets"), data_size, err))
        return -1;
    size_t es = st_dtype_size(t->dtype);
    char msg[200];
    if (nel > UINT64_MAX / es || nel * es != t->nbytes) {
        snprintf(msg, sizeof msg, "%zu bytes, but shape and dtype %s need %s%" PRIu64, t->nbytes,
                 st_dtype_name(t->dtype), nel > UINT64_MAX / es ? "more than " : "",
                 nel > UINT64_MAX / es ? UINT64_MAX : nel * es);
        return tensor_fail(f, name, "data_offsets", msg, err);
    }
    if ((data_start + t->begin) % es) {
        snprintf(msg, sizeof msg, "data at file offset %" PRIu64 " is not aligned to its %zu-byte elements",
                 data_start + t->begin, es);
        return tensor_fail(f, name, "data_offsets", msg, err);
    }
    t->data = f->base + data_start + t->begin;
    return 0;
}

static int by_begin(const void *a, const void *b) {
    const st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static int by_name_cmp(const void *a, const void *b) {
    return strcmp((*(const st_tensor *const *)a)->name, (*(const st_tensor *const *)b)->name);
}

/* Sorts by data position, rejects overlaps, builds the name index. */
static int index_tensors(st_file *f, cf_err *err) {
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, by_begin);
    for (int64_t i = 1; i < f->n_tensors; i++) {
        const st_tensor *p = &f->tensors[i - 1], *t = &f->tensors[i];
        if (t->begin < p->begin + p->nbytes) {
            char msg[200];
            snprintf(msg, sizeof msg, "bytes [%" PRIu64 ", %" PRIu64 ") overlap tensor '%s'", t->begin,
                     t->begin + t->nbytes, SAFE(p->name));
            return tensor_fail(f, t->name, "data_offsets", msg, err);
        }
    }
    f->by_name = malloc((size_t)(f->n_tensors ? f->n_tensors : 1) * sizeof *f->by_name);
    if (!f->by_name) return cf_fail(err, "%s: out of memory", f->path);
    for (int64_t i = 0; i < f->n_tensors; i++) f->by_name[i] = &f->tensors[i];
    qsort(f->by_name, (size_t)f->n_tensors, sizeof *f->by_name, by_name_cmp);
    return 0;
}

static int parse(st_file *f, cf_err *err) {
    if (f->size < 8) return cf_fail(err, "%s: field header length: file of %zu bytes is too small", f->path, f->size);
    uint64_t n;
    memcpy(&n, f->base, 8);
    if (n < 2 || n > ST_MAX_HEADER || n > f->size - 8)
        return cf_fail(err, "%s: field header length: %" PRIu64 " is %s (file has %zu bytes)", f->path, n,
                       n < 2               ? "too small"
                       : n > ST_MAX_HEADER ? "over the 100 MiB limit"
                                           : "past the end of the file",
                       f->size);
    json_error_t je;
    json_t *root = json_loadb((const char *)f->base + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!root) return cf_fail(err, "%s: header JSON: %s (byte %d)", f->path, SAFE(je.text), je.position);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = cf_fail(err, "%s: header JSON is not an object", f->path);
        goto out;
    }
    f->tensors = calloc(json_object_size(root) + 1, sizeof *f->tensors);
    if (!f->tensors) {
        rc = cf_fail(err, "%s: out of memory", f->path);
        goto out;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        rc = !strcmp(k, "__metadata__") ? parse_metadata(f, v, err) : parse_entry(f, k, v, 8 + n, err);
        if (rc) goto out;
    }
    rc = index_tensors(f, err);
out:
    json_decref(root);
    return rc;
}

static st_file *file_new(const char *name) {
    st_file *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->path = strdup(name ? name : "(memory)");
    if (!f->path) {
        free(f);
        return NULL;
    }
    return f;
}

int st_open_memory(const void *data, size_t size, const char *name, st_file **out, cf_err *err) {
    *out = NULL;
    st_file *f = file_new(name);
    if (!f) return cf_fail(err, "%s: out of memory", name ? name : "(memory)");
    f->base = data;
    f->size = size;
    if (parse(f, err)) {
        st_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

int st_open(const char *path, st_file **out, cf_err *err) {
    *out = NULL;
    const void *map;
    size_t size;
    if (file_map_readonly(path, &map, &size, err)) return -1;
    if (size < 8) {
        file_unmap(map, size);
        return cf_fail(err, "%s: field header length: file of %lld bytes is too small", path, (long long)size);
    }
    st_file *f = file_new(path);
    if (!f) {
        file_unmap(map, size);
        return cf_fail(err, "%s: out of memory", path);
    }
    f->base = map;
    f->size = size;
    f->mapped = true;
    if (parse(f, err)) {
        st_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

void st_close(st_file *f) {
    if (!f) return;
    for (int64_t i = 0; i < f->n_tensors; i++) free((char *)f->tensors[i].name);
    for (int64_t i = 0; i < f->n_meta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->meta);
    free(f->tensors);
    free(f->by_name);
    if (f->mapped) file_unmap(f->base, f->size);
    free(f->path);
    free(f);
}

const char *st_path(const st_file *f) { return f->path; }
int64_t st_tensor_count(const st_file *f) { return f->n_tensors; }
const st_tensor *st_tensor_at(const st_file *f, int64_t i) {
    return i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const st_tensor *st_find_tensor(const st_file *f, const char *name) {
    int64_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->by_name[mid]->name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *st_metadata(const st_file *f, const char *key) {
    for (int64_t i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[i].key, key)) return f->meta[i].value;
    return NULL;
}
