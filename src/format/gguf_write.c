/* gguf_write.c - GGUF v3 writer (see gguf.h).
 *
 * A gguf_writer collects key/values (in order of first set; setting a key
 * again replaces its value in place) and tensor declarations. Output goes to
 * "<path>.tmp" and is renamed onto <path> only once every byte is written and
 * the file closed cleanly, so readers never see a half file.
 *
 * Tensor data may be attached at add time (copied or referenced) or streamed
 * later (gguf_writer_begin / write_data / finish), which lets the quantizer and
 * mkmodel write multi-GB models holding one row at a time.
 *
 * Ownership: the writer owns copies of every key, string, array and any
 * tensor data added with copy=true. Allocation failures inside the void
 * setters are remembered and reported by the next begin()/write().
 * Callers: tools (convert, quantize, mkmodel), tests, fixture generators. */
#include "format/gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf_internal.h"
#include "tensor/dtype.h"

#define GGUF_WRITE_VERSION 3
#define GGUF_DEFAULT_ALIGNMENT 32
#define IO_BUF (1 << 20)

typedef struct wkv {
    char *key;
    gguf_vtype type;
    uint8_t raw[8]; /* scalar bytes (little-endian host) */
    gguf_str str; /* STRING: owned copy */
    gguf_vtype arr_type;
    uint64_t arr_len;
    void *arr; /* numeric: packed bytes; STRING: gguf_str[] with owned s */
} wkv;

typedef struct wtensor {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    const void *data;
    void *owned;
    size_t nbytes;
    uint64_t offset;
} wtensor;

struct gguf_writer {
    wkv *kvs;
    size_t n_kv, cap_kv;
    wtensor *tensors;
    size_t n_tensors, cap_tensors;
    bool oom;
    /* streaming state */
    FILE *fp;
    char *path, *tmp_path;
    char *iobuf;
    size_t alignment;
    size_t cur; /* tensor being streamed */
    uint64_t cur_done; /* bytes of it written */
};

gguf_writer *gguf_writer_create(void) { return calloc(1, sizeof(gguf_writer)); }

static void kv_clear(wkv *kv) {
    free(kv->str.s ? (void *)kv->str.s : NULL);
    if (kv->type == GGUF_ARRAY && kv->arr_type == GGUF_STRING)
        for (uint64_t i = 0; i < kv->arr_len; i++) free((void *)((gguf_str *)kv->arr)[i].s);
    free(kv->arr);
    kv->str = (gguf_str){0};
    kv->arr = NULL;
    kv->arr_len = 0;
}

static void stream_abort(gguf_writer *w) {
    if (w->fp) {
        fclose(w->fp);
        w->fp = NULL;
        remove(w->tmp_path);
    }
    free(w->path);
    free(w->tmp_path);
    free(w->iobuf);
    w->path = w->tmp_path = w->iobuf = NULL;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    stream_abort(w);
    for (size_t i = 0; i < w->n_kv; i++) {
        kv_clear(&w->kvs[i]);
        free(w->kvs[i].key);
    }
    free(w->kvs);
    for (size_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].owned);
    }
    free(w->tensors);
    free(w);
}

/* ---- key/values ---- */

/* Returns the slot for `key` (existing, cleared; or new), NULL on OOM. */
static wkv *kv_slot(gguf_writer *w, const char *key) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kvs[i].key, key)) {
            kv_clear(&w->kvs[i]);
            return &w->kvs[i];
        }
    if (w->n_kv == w->cap_kv) {
        size_t nc = w->cap_kv ? w->cap_kv * 2 : 32;
        wkv *p = realloc(w->kvs, nc * sizeof *p);
        if (!p) return NULL;
        w->kvs = p;
        w->cap_kv = nc;
    }
    char *k = strdup(key);
    if (!k) return NULL;
    wkv *kv = &w->kvs[w->n_kv++];
    memset(kv, 0, sizeof *kv);
    kv->key = k;
    return kv;
}

static void set_scalar(gguf_writer *w, const char *key, gguf_vtype t, const void *v) {
    wkv *kv = kv_slot(w, key);
    if (!kv) {
        w->oom = true;
        return;
    }
    kv->type = t;
    memset(kv->raw, 0, sizeof kv->raw);
    memcpy(kv->raw, v, gguf_vtype_size(t));
}

void gguf_set_u32(gguf_writer *w, const char *key, uint32_t v) { set_scalar(w, key, GGUF_UINT32, &v); }
void gguf_set_i32(gguf_writer *w, const char *key, int32_t v) { set_scalar(w, key, GGUF_INT32, &v); }
void gguf_set_f32(gguf_writer *w, const char *key, float v) { set_scalar(w, key, GGUF_FLOAT32, &v); }
void gguf_set_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    set_scalar(w, key, GGUF_BOOL, &b);
}

/* Copies len bytes into a NUL-terminated string. */
static bool dup_str(gguf_str *out, const char *s, uint64_t len) {
    if (len >= SIZE_MAX) return false;
    char *p = malloc((size_t)len + 1);
    if (!p) return false;
    if (len) memcpy(p, s, (size_t)len);
    p[len] = 0;
    out->s = p;
    out->len = len;
    return true;
}

static void set_str_len(gguf_writer *w, const char *key, const char *v, uint64_t len) {
    wkv *kv = kv_slot(w, key);
    if (!kv || !dup_str(&kv->str, v, len)) {
        w->oom = true;
        if (kv) kv->type = GGUF_UINT8; /* keep the slot well-formed */
        return;
    }
    kv->type = GGUF_STRING;
}

void gguf_set_str(gguf_writer *w, const char *key, const char *v) { set_str_len(w, key, v, strlen(v)); }

/* Array of strings given as (s, len) pairs, or NUL-terminated if lens NULL. */
static void set_arr_strs(gguf_writer *w, const char *key, const char *const *ss, const gguf_str *gs, uint64_t n) {
    wkv *kv = kv_slot(w, key);
    if (!kv) {
        w->oom = true;
        return;
    }
    kv->type = GGUF_ARRAY;
    kv->arr_type = GGUF_STRING;
    gguf_str *arr = calloc(n ? (size_t)n : 1, sizeof *arr);
    if (!arr || n > SIZE_MAX / sizeof *arr) {
        free(arr);
        w->oom = true;
        return;
    }
    kv->arr = arr;
    for (uint64_t i = 0; i < n; i++) {
        const char *s = ss ? ss[i] : gs[i].s;
        uint64_t len = ss ? strlen(s) : gs[i].len;
        if (!dup_str(&arr[i], s, len)) {
            w->oom = true;
            return;
        }
        kv->arr_len = i + 1;
    }
}

void gguf_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
    set_arr_strs(w, key, v, NULL, n);
}
void gguf_set_arr_str_len(gguf_writer *w, const char *key, const gguf_str *v, uint64_t n) {
    set_arr_strs(w, key, NULL, v, n);
}

static void set_arr_raw(gguf_writer *w, const char *key, gguf_vtype et, const void *v, uint64_t n) {
    wkv *kv = kv_slot(w, key);
    if (!kv) {
        w->oom = true;
        return;
    }
    size_t es = gguf_vtype_size(et);
    kv->type = GGUF_ARRAY;
    kv->arr_type = et;
    if (n > SIZE_MAX / es || !(kv->arr = malloc(n ? (size_t)n * es : 1))) {
        w->oom = true;
        return;
    }
    if (n) memcpy(kv->arr, v, (size_t)n * es);
    kv->arr_len = n;
}

void gguf_set_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n) {
    set_arr_raw(w, key, GGUF_FLOAT32, v, n);
}
void gguf_set_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n) {
    set_arr_raw(w, key, GGUF_INT32, v, n);
}

void gguf_set_arr_f64(gguf_writer *w, const char *key, const double *v, uint64_t n) {
    set_arr_raw(w, key, GGUF_FLOAT64, v, n);
}

void gguf_set_arr_u8(gguf_writer *w, const char *key, const uint8_t *v, uint64_t n) {
    set_arr_raw(w, key, GGUF_UINT8, v, n);
}

int gguf_writer_copy_kv(gguf_writer *w, const gguf_file *src, cf_err *err) {
    for (int64_t i = 0; i < gguf_kv_count(src); i++) {
        const char *key = gguf_key_name(src, i);
        gguf_vtype t = gguf_kv_type(src, i);
        if (t == GGUF_STRING) {
            const gguf_str *s = gguf_kv_str(src, i);
            set_str_len(w, key, s->s, s->len);
        } else if (t == GGUF_ARRAY) {
            gguf_vtype et = gguf_arr_type(src, i);
            if (et == GGUF_STRING) set_arr_strs(w, key, NULL, gguf_arr_raw(src, i), gguf_arr_len(src, i));
            else set_arr_raw(w, key, et, gguf_arr_raw(src, i), gguf_arr_len(src, i));
        } else {
            set_scalar(w, key, t, gguf_kv_scalar_raw(src, i));
        }
        if (w->oom) return cf_fail(err, "%s: out of memory copying key '%s'", gguf_path(src), key);
    }
    return 0;
}

void gguf_writer_remove_key(gguf_writer *w, const char *key) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kvs[i].key, key)) {
            kv_clear(&w->kvs[i]);
            free(w->kvs[i].key);
            memmove(&w->kvs[i], &w->kvs[i + 1], (w->n_kv - i - 1) * sizeof *w->kvs);
            w->n_kv--;
            return;
        }
}

/* ---- tensors ---- */

/* Byte size of a tensor of this shape and type; -1 with a message if invalid. */
static int tensor_bytes(const char *name, uint32_t type, int n_dims, const int64_t *ne, size_t *out, cf_err *err) {
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return cf_fail(err, "tensor '%s': n_dims %d is not 1..%d", name, n_dims, GGUF_MAX_DIMS);
    if (!dtype_known(type)) return cf_fail(err, "tensor '%s': unknown ggml type %u", name, type);
    uint64_t rows = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] < 1) return cf_fail(err, "tensor '%s': dimension %d is %" PRId64 ", must be >= 1", name, d, ne[d]);
        if (d > 0) {
            if (rows > UINT64_MAX / (uint64_t)ne[d]) return cf_fail(err, "tensor '%s': size overflows", name);
            rows *= (uint64_t)ne[d];
        }
    }
    size_t row = dtype_row_bytes(type, ne[0]);
    if (row == 0)
        return cf_fail(err, "tensor '%s': ne[0] = %" PRId64 " is not a multiple of the %s block size", name, ne[0],
                       dtype_name(type));
    if (rows > SIZE_MAX / row) return cf_fail(err, "tensor '%s': size overflows", name);
    *out = row * (size_t)rows;
    return 0;
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                           const void *data, bool copy, cf_err *err) {
    if (w->fp) return cf_fail(err, "tensor '%s': cannot add tensors after gguf_writer_begin", name);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (!strcmp(w->tensors[i].name, name)) return cf_fail(err, "duplicate tensor name '%s'", name);
    size_t nbytes = 0;
    if (tensor_bytes(name, type, n_dims, ne, &nbytes, err)) return -1;
    if (w->n_tensors == w->cap_tensors) {
        size_t nc = w->cap_tensors ? w->cap_tensors * 2 : 64;
        wtensor *p = realloc(w->tensors, nc * sizeof *p);
        if (!p) return cf_fail(err, "tensor '%s': out of memory", name);
        w->tensors = p;
        w->cap_tensors = nc;
    }
    wtensor t = {.type = type, .n_dims = n_dims, .nbytes = nbytes, .data = data};
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t.ne[d] = d < n_dims ? ne[d] : 1;
    t.name = strdup(name);
    if (!t.name) return cf_fail(err, "tensor '%s': out of memory", name);
    if (data && copy) {
        t.owned = malloc(nbytes ? nbytes : 1);
        if (!t.owned) {
            free(t.name);
            return cf_fail(err, "tensor '%s': out of memory (%zu bytes)", name, nbytes);
        }
        memcpy(t.owned, data, nbytes);
        t.data = t.owned;
    }
    w->tensors[w->n_tensors++] = t;
    return 0;
}

/* ---- serialization ---- */

static bool put(FILE *fp, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, fp) == n; }
static bool put_u32(FILE *fp, uint32_t v) { return put(fp, &v, 4); }
static bool put_u64(FILE *fp, uint64_t v) { return put(fp, &v, 8); }
static bool put_str(FILE *fp, const char *s, uint64_t len) { return put_u64(fp, len) && put(fp, s, (size_t)len); }

static bool put_zeros(FILE *fp, size_t n) {
    static const char zeros[64];
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        if (!put(fp, zeros, k)) return false;
        n -= k;
    }
    return true;
}

static bool put_kv(FILE *fp, const wkv *kv) {
    if (!put_str(fp, kv->key, strlen(kv->key)) || !put_u32(fp, kv->type)) return false;
    if (kv->type == GGUF_STRING) return put_str(fp, kv->str.s, kv->str.len);
    if (kv->type != GGUF_ARRAY) return put(fp, kv->raw, gguf_vtype_size(kv->type));
    if (!put_u32(fp, kv->arr_type) || !put_u64(fp, kv->arr_len)) return false;
    if (kv->arr_type != GGUF_STRING) return put(fp, kv->arr, (size_t)kv->arr_len * gguf_vtype_size(kv->arr_type));
    const gguf_str *a = kv->arr;
    for (uint64_t i = 0; i < kv->arr_len; i++)
        if (!put_str(fp, a[i].s, a[i].len)) return false;
    return true;
}

static bool put_tensor_info(FILE *fp, const wtensor *t) {
    if (!put_str(fp, t->name, strlen(t->name)) || !put_u32(fp, (uint32_t)t->n_dims)) return false;
    for (int d = 0; d < t->n_dims; d++)
        if (!put_u64(fp, (uint64_t)t->ne[d])) return false;
    return put_u32(fp, t->type) && put_u64(fp, t->offset);
}

static uint64_t pad_to(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

/* Alignment from general.alignment (must be a uint32 power of two) or 32. */
static int writer_alignment(const gguf_writer *w, size_t *out, cf_err *err) {
    *out = GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kvs[i].key, "general.alignment")) continue;
        uint32_t a;
        if (w->kvs[i].type != GGUF_UINT32) return cf_fail(err, "general.alignment must be a uint32");
        memcpy(&a, w->kvs[i].raw, 4);
        if (a == 0 || (a & (a - 1))) return cf_fail(err, "general.alignment %u is not a power of two", a);
        *out = a;
    }
    return 0;
}

static int io_fail(gguf_writer *w, cf_err *err) {
    int e = errno;
    cf_fail(err, "%s: write failed: %s", w->tmp_path ? w->tmp_path : "(gguf)", e ? strerror(e) : "I/O error");
    stream_abort(w);
    return -1;
}

int gguf_writer_begin(gguf_writer *w, const char *path, cf_err *err) {
    if (w->fp) return cf_fail(err, "%s: writer already started", path);
    if (w->oom) return cf_fail(err, "%s: out of memory while collecting key/values", path);
    if (writer_alignment(w, &w->alignment, err)) return cf_prefix(err, "%s", path);
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        w->tensors[i].offset = off;
        off += pad_to(w->tensors[i].nbytes, w->alignment);
    }
    size_t plen = strlen(path);
    w->path = strdup(path);
    w->tmp_path = malloc(plen + 5);
    w->iobuf = malloc(IO_BUF);
    if (!w->path || !w->tmp_path || !w->iobuf) {
        stream_abort(w);
        return cf_fail(err, "%s: out of memory", path);
    }
    memcpy(w->tmp_path, path, plen);
    memcpy(w->tmp_path + plen, ".tmp", 5);
    w->fp = fopen(w->tmp_path, "wb");
    if (!w->fp) {
        int e = errno;
        cf_fail(err, "%s: cannot create: %s", w->tmp_path, strerror(e));
        stream_abort(w);
        return -1;
    }
    setvbuf(w->fp, w->iobuf, _IOFBF, IO_BUF);
    errno = 0;
    bool ok = put_u32(w->fp, 0x46554747u) && put_u32(w->fp, GGUF_WRITE_VERSION) && put_u64(w->fp, w->n_tensors) &&
              put_u64(w->fp, w->n_kv);
    for (size_t i = 0; ok && i < w->n_kv; i++) ok = put_kv(w->fp, &w->kvs[i]);
    for (size_t i = 0; ok && i < w->n_tensors; i++) ok = put_tensor_info(w->fp, &w->tensors[i]);
    long pos = ok ? ftell(w->fp) : -1;
    if (!ok || pos < 0 || !put_zeros(w->fp, (size_t)(pad_to((uint64_t)pos, w->alignment) - (uint64_t)pos)))
        return io_fail(w, err);
    w->cur = 0;
    w->cur_done = 0;
    return 0;
}

int gguf_writer_meta_image(gguf_writer *w, void **out, size_t *size, cf_err *err) {
    *out = NULL;
    *size = 0;
    if (w->oom) return cf_fail(err, "gguf metadata: out of memory while collecting key/values");
    char *buf = NULL;
    size_t n = 0;
    FILE *fp = open_memstream(&buf, &n);
    if (!fp) return cf_fail(err, "gguf metadata: out of memory");
    bool ok = put_u32(fp, 0x46554747u) && put_u32(fp, GGUF_WRITE_VERSION) && put_u64(fp, 0) && put_u64(fp, w->n_kv);
    for (size_t i = 0; ok && i < w->n_kv; i++) ok = put_kv(fp, &w->kvs[i]);
    if (fclose(fp) != 0 || !ok) {
        free(buf);
        return cf_fail(err, "gguf metadata: out of memory");
    }
    *out = buf;
    *size = n;
    return 0;
}

int gguf_writer_write_data(gguf_writer *w, const void *data, size_t n, cf_err *err) {
    if (!w->fp) return cf_fail(err, "gguf writer: write_data without begin");
    const char *p = data;
    errno = 0;
    while (n) {
        if (w->cur >= w->n_tensors) {
            cf_fail(err, "%s: more tensor data than the declared tensors hold", w->tmp_path);
            stream_abort(w);
            return -1;
        }
        wtensor *t = &w->tensors[w->cur];
        uint64_t left = t->nbytes - w->cur_done;
        size_t k = n < left ? n : (size_t)left;
        if (!put(w->fp, p, k)) return io_fail(w, err);
        p += k;
        n -= k;
        w->cur_done += k;
        if (w->cur_done == t->nbytes) {
            if (!put_zeros(w->fp, (size_t)(pad_to(t->nbytes, w->alignment) - t->nbytes))) return io_fail(w, err);
            w->cur++;
            w->cur_done = 0;
        }
    }
    return 0;
}

int gguf_writer_finish(gguf_writer *w, cf_err *err) {
    if (!w->fp) return cf_fail(err, "gguf writer: finish without begin");
    /* zero-byte tensors cannot exist (dims >= 1), so cur counts complete tensors */
    if (w->cur != w->n_tensors) {
        cf_fail(err, "%s: tensor '%s' is missing data (%" PRIu64 " of %zu bytes written)", w->tmp_path,
                w->tensors[w->cur].name, w->cur_done, w->tensors[w->cur].nbytes);
        stream_abort(w);
        return -1;
    }
    errno = 0;
    if (fflush(w->fp) != 0 || ferror(w->fp)) return io_fail(w, err);
    FILE *fp = w->fp;
    w->fp = NULL;
    if (fclose(fp) != 0) {
        int e = errno;
        remove(w->tmp_path);
        cf_fail(err, "%s: close failed: %s", w->tmp_path, strerror(e));
        stream_abort(w);
        return -1;
    }
    if (rename(w->tmp_path, w->path) != 0) {
        int e = errno;
        remove(w->tmp_path);
        cf_fail(err, "%s: cannot rename into place: %s", w->path, strerror(e));
        stream_abort(w);
        return -1;
    }
    stream_abort(w); /* frees the path buffers; fp already closed */
    return 0;
}

int gguf_writer_write(gguf_writer *w, const char *path, cf_err *err) {
    for (size_t i = 0; i < w->n_tensors; i++)
        if (!w->tensors[i].data)
            return cf_fail(err, "%s: tensor '%s' has no data (declared for streaming)", path, w->tensors[i].name);
    if (gguf_writer_begin(w, path, err)) return -1;
    for (size_t i = 0; i < w->n_tensors; i++)
        if (gguf_writer_write_data(w, w->tensors[i].data, w->tensors[i].nbytes, err)) return -1;
    return gguf_writer_finish(w, err);
}
