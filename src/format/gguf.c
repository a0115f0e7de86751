/* gguf.c - GGUF v2/v3 reader: maps a file (or takes an image in memory),
 * validates every byte of the metadata and every tensor's extent, and builds
 * an index of key/values and tensor infos. See gguf.h for the contract.
 *
 * Layout parsed (little-endian):
 *   u32 magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x { string key | u32 vtype | value }
 *   n_tensors x { string name | u32 n_dims | i64 ne[n_dims] | u32 type | u64 offset }
 *   padding to general.alignment | tensor data (offsets relative to here)
 *   string = u64 len | bytes;  array value = u32 elem type | u64 n | n elements
 *
 * Invariants after a successful open:
 *   - every index entry lies inside the image; every string has a NUL-terminated
 *     copy in the file's string arena; keys and tensor names are unique and
 *     contain no NUL byte;
 *   - numeric array payloads are referenced in place (unaligned: read with memcpy);
 *   - each tensor's [data, data + nbytes) lies inside the image, `offset` is a
 *     multiple of the alignment and the data section start is aligned too.
 * No allocation is made whose size is not bounded by bytes actually parsed
 * (arrays grow as entries are read), so a lying count cannot exhaust memory.
 *
 * Called by model loaders, the tokenizer (vocab), quantize/convert tools and the
 * fuzz harness (gguf_open_memory). The writer lives in gguf_write.c. */
#include "format/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/file_map.h"
#include "format/gguf_internal.h"
#include "tensor/dtype.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "cinfer's GGUF reader assumes a little-endian host"
#endif

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as little-endian u32 */
#define GGUF_DEFAULT_ALIGNMENT 32
#define ARENA_CHUNK (64 * 1024)

/* ---- the index ---- */

typedef struct gguf_kv {
    gguf_str key;
    gguf_vtype type;
    uint64_t offset; /* of the key in the image (for messages) */
    union { /* scalars, widened */
        uint64_t u;
        int64_t i;
        double f;
    } v;
    gguf_str str; /* GGUF_STRING */
    gguf_vtype arr_type; /* GGUF_ARRAY */
    uint64_t arr_len;
    const uint8_t *arr_raw; /* numeric arrays: payload in the image */
    gguf_str *arr_str; /* string arrays: owned index */
} gguf_kv;

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    char data[];
} arena_chunk;

/* Open-addressing hash of names -> index (+1; 0 = empty slot). Grows as names
 * are inserted, so its size is bounded by entries actually parsed. */
typedef struct name_map {
    int64_t *slots;
    size_t mask, count;
} name_map;

struct gguf_file {
    char *path;
    const uint8_t *base;
    size_t size;
    bool mapped;
    uint32_t version;
    size_t alignment;
    uint64_t data_start;
    gguf_kv *kvs;
    int64_t n_kv, cap_kv;
    gguf_tensor *tensors;
    int64_t n_tensors, cap_tensors;
    name_map key_map, tensor_map;
    arena_chunk *arena;
    void *owned_image; /* gguf_open_parts: the metadata image, freed at close */
    void *owner; /* gguf_open_parts: keeps the tensors' data alive; release(owner) at close */
    void (*release)(void *);
};

/* ---- cursor over the image ---- */

typedef struct cursor {
    const uint8_t *p;
    size_t size, pos;
    const char *name;
    cf_err *err;
} cursor;

static size_t remaining(const cursor *c) { return c->size - c->pos; }

static int fail_at(const cursor *c, uint64_t off, const char *what) {
    return cf_fail(c->err, "%s: %s (offset %" PRIu64 ")", c->name, what, off);
}

static int need(const cursor *c, size_t n, const char *what) {
    if (remaining(c) >= n) return 0;
    return cf_fail(c->err, "%s: truncated %s: need %zu bytes, %zu left (offset %zu)", c->name, what, n, remaining(c),
                   c->pos);
}

static int rd_u32(cursor *c, uint32_t *v, const char *what) {
    if (need(c, 4, what)) return -1;
    memcpy(v, c->p + c->pos, 4);
    c->pos += 4;
    return 0;
}

static int rd_u64(cursor *c, uint64_t *v, const char *what) {
    if (need(c, 8, what)) return -1;
    memcpy(v, c->p + c->pos, 8);
    c->pos += 8;
    return 0;
}

/* Renders a name from the file for a one-line message: control bytes become
 * \xNN and long names are cut with "...". Returns out. */
static const char *safe_name(const char *s, char *out, size_t cap) {
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
#define SAFE(s) safe_name((s), (char[104]){0}, 104)

/* ---- string arena ---- */

static char *arena_alloc(gguf_file *f, size_t n) {
    arena_chunk *a = f->arena;
    if (!a || a->cap - a->used < n) {
        size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        a = malloc(sizeof *a + cap);
        if (!a) return NULL;
        a->next = f->arena;
        a->used = 0;
        a->cap = cap;
        f->arena = a;
    }
    char *p = a->data + a->used;
    a->used += n;
    return p;
}

/* Reads a GGUF string into the arena. `what` names it in messages. */
static int rd_str(gguf_file *f, cursor *c, gguf_str *out, const char *what) {
    uint64_t start = c->pos, len;
    if (rd_u64(c, &len, what)) return -1;
    if (len > remaining(c)) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s length %" PRIu64 " runs past the end of the file (%zu bytes left)", what, len,
                 remaining(c));
        return fail_at(c, start, msg);
    }
    char *s = arena_alloc(f, (size_t)len + 1);
    if (!s) return fail_at(c, start, "out of memory");
    memcpy(s, c->p + c->pos, (size_t)len);
    s[len] = 0;
    c->pos += (size_t)len;
    out->s = s;
    out->len = len;
    return 0;
}

/* ---- value types ---- */

static const size_t scalar_size[GGUF_VTYPE_COUNT] = {
    [GGUF_UINT8] = 1,   [GGUF_INT8] = 1, [GGUF_UINT16] = 2, [GGUF_INT16] = 2, [GGUF_UINT32] = 4,  [GGUF_INT32] = 4,
    [GGUF_FLOAT32] = 4, [GGUF_BOOL] = 1, [GGUF_UINT64] = 8, [GGUF_INT64] = 8, [GGUF_FLOAT64] = 8,
};

const char *gguf_vtype_name(gguf_vtype t) {
    static const char *names[GGUF_VTYPE_COUNT] = {
        "uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
        "bool",  "string", "array",  "uint64", "int64",  "float64",
    };
    return (unsigned)t < GGUF_VTYPE_COUNT ? names[t] : "invalid";
}

size_t gguf_vtype_size(gguf_vtype t) { return (unsigned)t < GGUF_VTYPE_COUNT ? scalar_size[t] : 0; }

static bool is_int_type(gguf_vtype t) {
    return t == GGUF_UINT8 || t == GGUF_INT8 || t == GGUF_UINT16 || t == GGUF_INT16 || t == GGUF_UINT32 ||
           t == GGUF_INT32 || t == GGUF_UINT64 || t == GGUF_INT64 || t == GGUF_BOOL;
}
static bool is_num_type(gguf_vtype t) { return is_int_type(t) || t == GGUF_FLOAT32 || t == GGUF_FLOAT64; }

/* Decodes one little-endian scalar of type t at p. Integers go to *i (uint64
 * values above INT64_MAX set *big), floats to *d; both are always filled. */
static void decode_scalar(gguf_vtype t, const uint8_t *p, int64_t *i, double *d, bool *big) {
    uint8_t u8;
    int8_t i8;
    uint16_t u16;
    int16_t i16;
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    *big = false;
    switch (t) {
    case GGUF_UINT8:
    case GGUF_BOOL:
        memcpy(&u8, p, 1);
        *i = u8;
        *d = u8;
        break;
    case GGUF_INT8:
        memcpy(&i8, p, 1);
        *i = i8;
        *d = i8;
        break;
    case GGUF_UINT16:
        memcpy(&u16, p, 2);
        *i = u16;
        *d = u16;
        break;
    case GGUF_INT16:
        memcpy(&i16, p, 2);
        *i = i16;
        *d = i16;
        break;
    case GGUF_UINT32:
        memcpy(&u32, p, 4);
        *i = u32;
        *d = u32;
        break;
    case GGUF_INT32:
        memcpy(&i32, p, 4);
        *i = i32;
        *d = i32;
        break;
    case GGUF_UINT64:
        memcpy(&u64, p, 8);
        *big = u64 > (uint64_t)INT64_MAX;
        *i = *big ? INT64_MAX : (int64_t)u64;
        *d = (double)u64;
        break;
    case GGUF_INT64:
        memcpy(&i64, p, 8);
        *i = i64;
        *d = (double)i64;
        break;
    case GGUF_FLOAT32:
        memcpy(&f32, p, 4);
        *d = f32;
        *i = 0;
        break;
    case GGUF_FLOAT64:
        memcpy(&f64, p, 8);
        *d = f64;
        *i = 0;
        break;
    default:
        *i = 0;
        *d = 0;
        break;
    }
}

/* ---- name maps ---- */

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

typedef const char *(*name_of_fn)(const void *ctx, int64_t i);

static uint64_t map_probe_start(const name_map *m, const char *name) { return hash_name(name) & m->mask; }

/* Doubles the table (or creates it) and reinserts every entry. */
static int map_grow(name_map *m, name_of_fn name_of, const void *ctx) {
    size_t cap = m->slots ? (m->mask + 1) * 2 : 16;
    int64_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; m->slots && i <= m->mask; i++) {
        int64_t s = m->slots[i];
        if (!s) continue;
        size_t h = (size_t)hash_name(name_of(ctx, s - 1)) & (cap - 1);
        while (slots[h]) h = (h + 1) & (cap - 1);
        slots[h] = s;
    }
    free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    return 0;
}

/* Inserts name -> idx; returns the index of an existing equal name, or -1. */
static int64_t map_insert(name_map *m, const char *name, int64_t idx, name_of_fn name_of, const void *ctx, bool *oom) {
    *oom = false;
    if ((!m->slots || (m->count + 1) * 2 > m->mask + 1) && map_grow(m, name_of, ctx)) {
        *oom = true;
        return -1;
    }
    size_t h = (size_t)map_probe_start(m, name);
    for (;; h = (h + 1) & m->mask) {
        int64_t s = m->slots[h];
        if (s == 0) {
            m->slots[h] = idx + 1;
            m->count++;
            return -1;
        }
        if (strcmp(name_of(ctx, s - 1), name) == 0) return s - 1;
    }
}

static int64_t map_find(const name_map *m, const char *name, name_of_fn name_of, const void *ctx) {
    if (!m->slots) return -1;
    size_t h = (size_t)map_probe_start(m, name);
    for (;; h = (h + 1) & m->mask) {
        int64_t s = m->slots[h];
        if (s == 0) return -1;
        if (strcmp(name_of(ctx, s - 1), name) == 0) return s - 1;
    }
}

static const char *kv_name_of(const void *ctx, int64_t i) { return ((const gguf_file *)ctx)->kvs[i].key.s; }
static const char *tensor_name_of(const void *ctx, int64_t i) { return ((const gguf_file *)ctx)->tensors[i].name; }

/* ---- growth of the index arrays ---- */

static int grow(void **arr, int64_t *cap, int64_t need_n, size_t elem) {
    if (need_n <= *cap) return 0;
    int64_t nc = *cap ? *cap * 2 : 16;
    if (nc < need_n) nc = need_n;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

/* ---- key/values ---- */

static int parse_array(gguf_file *f, cursor *c, gguf_kv *kv) {
    uint64_t at = c->pos;
    uint32_t et;
    uint64_t n;
    if (rd_u32(c, &et, "array element type")) return -1;
    if (et >= GGUF_VTYPE_COUNT) {
        char msg[160];
        snprintf(msg, sizeof msg, "key '%s': unknown array element type %u", SAFE(kv->key.s), et);
        return fail_at(c, at, msg);
    }
    if (et == GGUF_ARRAY) {
        char msg[160];
        snprintf(msg, sizeof msg, "key '%s': nested arrays are not supported", SAFE(kv->key.s));
        return fail_at(c, at, msg);
    }
    uint64_t at_n = c->pos;
    if (rd_u64(c, &n, "array length")) return -1;
    kv->arr_type = (gguf_vtype)et;
    kv->arr_len = n;
    size_t min_elem = et == GGUF_STRING ? 8 : scalar_size[et];
    if (n > remaining(c) / min_elem) {
        char msg[200];
        snprintf(msg, sizeof msg, "key '%s': array of %" PRIu64 " %s elements does not fit in the %zu bytes left",
                 SAFE(kv->key.s), n, gguf_vtype_name(kv->arr_type), remaining(c));
        return fail_at(c, at_n, msg);
    }
    if (et != GGUF_STRING) {
        kv->arr_raw = c->p + c->pos;
        if (et == GGUF_BOOL)
            for (uint64_t j = 0; j < n; j++)
                if (kv->arr_raw[j] > 1) {
                    char msg[160];
                    snprintf(msg, sizeof msg, "key '%s': bool element %" PRIu64 " is %u, not 0 or 1", SAFE(kv->key.s),
                             j, kv->arr_raw[j]);
                    return fail_at(c, c->pos + j, msg);
                }
        c->pos += (size_t)n * min_elem;
        return 0;
    }
    int64_t cap = 0;
    for (uint64_t j = 0; j < n; j++) {
        if (grow((void **)&kv->arr_str, &cap, (int64_t)j + 1, sizeof *kv->arr_str))
            return fail_at(c, c->pos, "out of memory");
        if (rd_str(f, c, &kv->arr_str[j], "array string")) return -1;
    }
    return 0;
}

static int parse_value(gguf_file *f, cursor *c, gguf_kv *kv) {
    if (kv->type == GGUF_STRING) return rd_str(f, c, &kv->str, "string value");
    if (kv->type == GGUF_ARRAY) return parse_array(f, c, kv);
    size_t sz = scalar_size[kv->type];
    if (need(c, sz, "value")) return -1;
    const uint8_t *p = c->p + c->pos;
    if (kv->type == GGUF_BOOL && *p > 1) {
        char msg[160];
        snprintf(msg, sizeof msg, "key '%s': bool value is %u, not 0 or 1", SAFE(kv->key.s), *p);
        return fail_at(c, c->pos, msg);
    }
    memcpy(&kv->v, p, sz); /* raw bits; widened on access */
    c->pos += sz;
    return 0;
}

static int parse_kv(gguf_file *f, cursor *c) {
    if (grow((void **)&f->kvs, &f->cap_kv, f->n_kv + 1, sizeof *f->kvs)) return fail_at(c, c->pos, "out of memory");
    gguf_kv *kv = &f->kvs[f->n_kv];
    memset(kv, 0, sizeof *kv);
    kv->offset = c->pos;
    if (rd_str(f, c, &kv->key, "key")) return -1;
    f->n_kv++; /* owned from here on (arr_str freed on close) */
    if (kv->key.len == 0) return fail_at(c, kv->offset, "empty key");
    if (strlen(kv->key.s) != kv->key.len) return fail_at(c, kv->offset, "key contains a NUL byte");
    bool oom;
    int64_t dup = map_insert(&f->key_map, kv->key.s, f->n_kv - 1, kv_name_of, f, &oom);
    if (oom) return fail_at(c, kv->offset, "out of memory");
    if (dup >= 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "duplicate key '%s' (first at offset %" PRIu64 ")", SAFE(kv->key.s),
                 f->kvs[dup].offset);
        return fail_at(c, kv->offset, msg);
    }
    uint64_t at = c->pos;
    uint32_t t;
    if (rd_u32(c, &t, "value type")) return -1;
    if (t >= GGUF_VTYPE_COUNT) {
        char msg[160];
        snprintf(msg, sizeof msg, "key '%s': unknown value type %u", SAFE(kv->key.s), t);
        return fail_at(c, at, msg);
    }
    kv->type = (gguf_vtype)t;
    return parse_value(f, c, kv);
}

/* ---- tensor infos ---- */

static int tensor_fail(const cursor *c, uint64_t at, const char *name, const char *what) {
    return cf_fail(c->err, "%s: tensor '%s': %s (offset %" PRIu64 ")", c->name, SAFE(name), what, at);
}

/* Shape and size checks: dims >= 1, element count and byte size without overflow. */
static int tensor_size(const cursor *c, uint64_t at, gguf_tensor *t) {
    char msg[200];
    int64_t nel = 1;
    for (int d = 0; d < t->n_dims; d++) {
        if (t->ne[d] < 1) {
            snprintf(msg, sizeof msg, "dimension %d is %" PRId64 ", must be >= 1", d, t->ne[d]);
            return tensor_fail(c, at, t->name, msg);
        }
        if (nel > INT64_MAX / t->ne[d]) return tensor_fail(c, at, t->name, "element count overflows int64");
        nel *= t->ne[d];
    }
    int64_t be = dtype_block_elems(t->type);
    if (t->ne[0] % be) {
        snprintf(msg, sizeof msg, "ne[0] = %" PRId64 " is not a multiple of the %s block size %" PRId64, t->ne[0],
                 dtype_name(t->type), be);
        return tensor_fail(c, at, t->name, msg);
    }
    uint64_t blocks = (uint64_t)(t->ne[0] / be), bb = dtype_block_bytes(t->type);
    if (blocks > UINT64_MAX / bb) return tensor_fail(c, at, t->name, "byte size overflows");
    uint64_t row = blocks * bb;
    uint64_t rows = (uint64_t)(nel / t->ne[0]);
    if (rows && row > UINT64_MAX / rows) return tensor_fail(c, at, t->name, "byte size overflows");
    uint64_t nbytes = row * rows;
    if (nbytes > SIZE_MAX) return tensor_fail(c, at, t->name, "byte size exceeds the address space");
    t->nbytes = (size_t)nbytes;
    return 0;
}

static int parse_tensor_info(gguf_file *f, cursor *c) {
    if (grow((void **)&f->tensors, &f->cap_tensors, f->n_tensors + 1, sizeof *f->tensors))
        return fail_at(c, c->pos, "out of memory");
    gguf_tensor *t = &f->tensors[f->n_tensors];
    memset(t, 0, sizeof *t);
    uint64_t at = c->pos;
    gguf_str name;
    if (rd_str(f, c, &name, "tensor name")) return -1;
    t->name = name.s;
    if (name.len == 0) return fail_at(c, at, "empty tensor name");
    if (strlen(name.s) != name.len) return fail_at(c, at, "tensor name contains a NUL byte");
    uint32_t nd;
    uint64_t at_nd = c->pos;
    if (rd_u32(c, &nd, "tensor n_dims")) return -1;
    if (nd < 1 || nd > GGUF_MAX_DIMS) {
        char msg[120];
        snprintf(msg, sizeof msg, "n_dims is %u, must be 1..%d", nd, GGUF_MAX_DIMS);
        return tensor_fail(c, at_nd, t->name, msg);
    }
    t->n_dims = (int)nd;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t v;
        if (rd_u64(c, &v, "tensor dimension")) return -1;
        t->ne[d] = (int64_t)v;
    }
    uint64_t at_type = c->pos;
    if (rd_u32(c, &t->type, "tensor type")) return -1;
    if (!dtype_known(t->type)) {
        char msg[120];
        snprintf(msg, sizeof msg, "unknown ggml type %u", t->type);
        return tensor_fail(c, at_type, t->name, msg);
    }
    if (tensor_size(c, at_nd, t)) return -1;
    uint64_t at_off = c->pos;
    if (rd_u64(c, &t->offset, "tensor offset")) return -1;
    if (t->offset % f->alignment) {
        char msg[160];
        snprintf(msg, sizeof msg, "data offset %" PRIu64 " is not a multiple of the alignment %zu", t->offset,
                 f->alignment);
        return tensor_fail(c, at_off, t->name, msg);
    }
    f->n_tensors++;
    bool oom;
    int64_t dup = map_insert(&f->tensor_map, t->name, f->n_tensors - 1, tensor_name_of, f, &oom);
    if (oom) return fail_at(c, at, "out of memory");
    if (dup >= 0) return tensor_fail(c, at, t->name, "duplicate tensor name");
    return 0;
}

/* ---- header and alignment ---- */

static int parse_header(gguf_file *f, cursor *c, uint64_t *n_tensors, uint64_t *n_kv) {
    uint32_t magic;
    if (need(c, 4, "header")) return -1;
    memcpy(&magic, c->p, 4);
    if (magic != GGUF_MAGIC) return fail_at(c, 0, "not a GGUF file (bad magic)");
    c->pos = 4;
    if (rd_u32(c, &f->version, "header")) return -1;
    uint32_t v = f->version, swapped = __builtin_bswap32(v);
    if (v != 2 && v != 3) {
        char msg[160];
        if (swapped >= 1 && swapped <= 3) snprintf(msg, sizeof msg, "big-endian GGUF files are not supported");
        else if (v == 1) snprintf(msg, sizeof msg, "GGUF version 1 is not supported (obsolete; re-convert the model)");
        else snprintf(msg, sizeof msg, "unsupported GGUF version %u (supported: 2, 3)", v);
        return fail_at(c, 4, msg);
    }
    if (rd_u64(c, n_tensors, "header") || rd_u64(c, n_kv, "header")) return -1;
    /* Smallest encodings: kv = key len 8 + 1 byte + type 4 + 1 byte value;
     * tensor info = name len 8 + 1 byte + n_dims 4 + ne 8 + type 4 + offset 8. */
    if (*n_kv > remaining(c) / 14) {
        char msg[160];
        snprintf(msg, sizeof msg, "key/value count %" PRIu64 " cannot fit in the file", *n_kv);
        return fail_at(c, 16, msg);
    }
    if (*n_tensors > remaining(c) / 33) {
        char msg[160];
        snprintf(msg, sizeof msg, "tensor count %" PRIu64 " cannot fit in the file", *n_tensors);
        return fail_at(c, 8, msg);
    }
    return 0;
}

static int read_alignment(gguf_file *f, cursor *c) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = gguf_find_key(f, "general.alignment");
    if (i < 0) return 0;
    const gguf_kv *kv = &f->kvs[i];
    if (kv->type != GGUF_UINT32) {
        char msg[120];
        snprintf(msg, sizeof msg, "general.alignment has type %s, expected uint32", gguf_vtype_name(kv->type));
        return fail_at(c, kv->offset, msg);
    }
    uint32_t a;
    memcpy(&a, &kv->v, 4);
    if (a == 0 || (a & (a - 1))) {
        char msg[120];
        snprintf(msg, sizeof msg, "general.alignment %u is not a power of two", a);
        return fail_at(c, kv->offset, msg);
    }
    f->alignment = a;
    return 0;
}

/* Places the data section and checks every tensor lies inside the image. */
static int place_data(gguf_file *f, cursor *c) {
    uint64_t end = c->pos, a = f->alignment;
    f->data_start = (end + a - 1) / a * a; /* end < 2^63 and a <= 2^31: no overflow */
    for (int64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        uint64_t avail = f->data_start <= c->size ? c->size - f->data_start : 0;
        if (t->offset > avail || t->nbytes > avail - t->offset) {
            char msg[200];
            snprintf(msg, sizeof msg, "data (%zu bytes at data offset %" PRIu64 ") runs past the end of the file",
                     t->nbytes, t->offset);
            return tensor_fail(c, f->data_start + t->offset, t->name, msg);
        }
        t->data = c->p + f->data_start + t->offset;
    }
    return 0;
}

static int parse(gguf_file *f, cf_err *err) {
    cursor c = {.p = f->base, .size = f->size, .pos = 0, .name = f->path, .err = err};
    uint64_t n_tensors = 0, n_kv = 0;
    if (parse_header(f, &c, &n_tensors, &n_kv)) return -1;
    for (uint64_t i = 0; i < n_kv; i++)
        if (parse_kv(f, &c)) return -1;
    if (read_alignment(f, &c)) return -1;
    for (uint64_t i = 0; i < n_tensors; i++)
        if (parse_tensor_info(f, &c)) return -1;
    return place_data(f, &c);
}

/* ---- open / close ---- */

static gguf_file *file_new(const char *name) {
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->path = strdup(name ? name : "(memory)");
    if (!f->path) {
        free(f);
        return NULL;
    }
    return f;
}

int gguf_open_memory(const void *data, size_t size, const char *name, gguf_file **out, cf_err *err) {
    *out = NULL;
    gguf_file *f = file_new(name);
    if (!f) return cf_fail(err, "%s: out of memory", name ? name : "(memory)");
    f->base = data;
    f->size = size;
    if (parse(f, err)) {
        gguf_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

int gguf_open(const char *path, gguf_file **out, cf_err *err) {
    *out = NULL;
    const void *map;
    size_t size;
    if (file_map_readonly(path, &map, &size, err)) return -1;
    if (size < 24) {
        file_unmap(map, size);
        return cf_fail(err, "%s: file too small for a GGUF header (%lld bytes) (offset 0)", path, (long long)size);
    }
    gguf_file *f = file_new(path);
    if (!f) {
        file_unmap(map, size);
        return cf_fail(err, "%s: out of memory", path);
    }
    f->base = map;
    f->size = size;
    f->mapped = true;
    if (parse(f, err)) {
        gguf_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

/* Appends one tensor whose bytes live outside the image (gguf_open_parts). */
static int add_external(gguf_file *f, cursor *c, const gguf_tensor *src) {
    if (grow((void **)&f->tensors, &f->cap_tensors, f->n_tensors + 1, sizeof *f->tensors))
        return fail_at(c, 0, "out of memory");
    gguf_tensor *t = &f->tensors[f->n_tensors];
    *t = *src;
    size_t len = src->name ? strlen(src->name) : 0;
    char *name = arena_alloc(f, len + 1);
    if (!name) return fail_at(c, 0, "out of memory");
    memcpy(name, src->name ? src->name : "", len + 1);
    t->name = name;
    if (!len) return fail_at(c, 0, "empty tensor name");
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS) return tensor_fail(c, 0, name, "n_dims must be 1..4");
    for (int d = t->n_dims; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    if (!dtype_known(t->type) && t->type != DT_F8_B128) return tensor_fail(c, 0, name, "unknown ggml type");
    if (tensor_size(c, 0, t)) return -1;
    if (t->nbytes != src->nbytes) return tensor_fail(c, 0, name, "byte size does not match its shape and type");
    t->offset = 0;
    f->n_tensors++;
    bool oom;
    int64_t dup = map_insert(&f->tensor_map, name, f->n_tensors - 1, tensor_name_of, f, &oom);
    if (oom) return fail_at(c, 0, "out of memory");
    if (dup >= 0) return tensor_fail(c, 0, name, "duplicate tensor name");
    return 0;
}

int gguf_open_parts(void *meta, size_t meta_size, const char *name, const gguf_tensor *tensors, int64_t n_tensors,
                    void *owner, void (*release)(void *), gguf_file **out, cf_err *err) {
    *out = NULL;
    gguf_file *f = file_new(name);
    if (!f) {
        free(meta);
        if (release) release(owner);
        return cf_fail(err, "%s: out of memory", name ? name : "(memory)");
    }
    f->base = meta;
    f->size = meta_size;
    f->owned_image = meta;
    f->owner = owner;
    f->release = release;
    int rc = parse(f, err);
    if (!rc && f->n_tensors) rc = cf_fail(err, "%s: metadata image holds tensors", f->path);
    cursor c = {.p = f->base, .size = f->size, .pos = 0, .name = f->path, .err = err};
    for (int64_t i = 0; !rc && i < n_tensors; i++) rc = add_external(f, &c, &tensors[i]);
    if (rc) {
        gguf_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    if (f->release) f->release(f->owner);
    free(f->owned_image);
    for (int64_t i = 0; i < f->n_kv; i++) free(f->kvs[i].arr_str);
    free(f->kvs);
    free(f->tensors);
    free(f->key_map.slots);
    free(f->tensor_map.slots);
    while (f->arena) {
        arena_chunk *n = f->arena->next;
        free(f->arena);
        f->arena = n;
    }
    if (f->mapped) file_unmap(f->base, f->size);
    free(f->path);
    free(f);
}

/* ---- accessors ---- */

const char *gguf_path(const gguf_file *f) { return f->path; }
bool gguf_is_mapped(const gguf_file *f) { return f->mapped; }

size_t gguf_release_range(const gguf_file *f, const void *p, size_t n) {
    if (!f->mapped || !p || n == 0) return 0;
    uintptr_t base = (uintptr_t)f->base, a = (uintptr_t)p, b = a + n;
    if (a < base || b > base + f->size) return 0;
    long ps = sysconf(_SC_PAGESIZE);
    uintptr_t pg = ps > 0 ? (uintptr_t)ps : 4096;
    uintptr_t lo = (a + pg - 1) / pg * pg, hi = b / pg * pg;
    if (hi <= lo) return 0;
    if (madvise((void *)lo, hi - lo, MADV_DONTNEED) != 0) return 0; /* advisory: nothing to undo */
    return hi - lo;
}
uint32_t gguf_version(const gguf_file *f) { return f->version; }
size_t gguf_alignment(const gguf_file *f) { return f->alignment; }
uint64_t gguf_data_offset(const gguf_file *f) { return f->data_start; }
uint64_t gguf_image_size(const gguf_file *f) { return f->size; }
const void *gguf_image(const gguf_file *f) { return f->base; }

int64_t gguf_kv_count(const gguf_file *f) { return f->n_kv; }

int64_t gguf_find_key(const gguf_file *f, const char *key) { return map_find(&f->key_map, key, kv_name_of, f); }

static const gguf_kv *kv_at(const gguf_file *f, int64_t i) { return i >= 0 && i < f->n_kv ? &f->kvs[i] : NULL; }

const char *gguf_key_name(const gguf_file *f, int64_t i) {
    const gguf_kv *kv = kv_at(f, i);
    return kv ? kv->key.s : NULL;
}

gguf_vtype gguf_kv_type(const gguf_file *f, int64_t i) {
    const gguf_kv *kv = kv_at(f, i);
    return kv ? kv->type : GGUF_VTYPE_COUNT;
}

gguf_vtype gguf_arr_type(const gguf_file *f, int64_t i) {
    const gguf_kv *kv = kv_at(f, i);
    return kv && kv->type == GGUF_ARRAY ? kv->arr_type : GGUF_VTYPE_COUNT;
}

uint64_t gguf_arr_len(const gguf_file *f, int64_t i) {
    const gguf_kv *kv = kv_at(f, i);
    return kv && kv->type == GGUF_ARRAY ? kv->arr_len : 0;
}

/* ---- internal accessors for the writer (gguf_internal.h) ---- */

const void *gguf_kv_scalar_raw(const gguf_file *f, int64_t i) {
    const gguf_kv *kv = kv_at(f, i);
    return kv ? &kv->v : NULL;
}
const gguf_str *gguf_kv_str(const gguf_file *f, int64_t i) {
    const gguf_kv *kv = kv_at(f, i);
    return kv && kv->type == GGUF_STRING ? &kv->str : NULL;
}
const void *gguf_arr_raw(const gguf_file *f, int64_t i) {
    const gguf_kv *kv = kv_at(f, i);
    return kv && kv->type == GGUF_ARRAY ? (kv->arr_type == GGUF_STRING ? (const void *)kv->arr_str : kv->arr_raw)
                                        : NULL;
}

/* ---- typed getters ---- */

static int type_fail(const gguf_file *f, const gguf_kv *kv, const char *expected, cf_err *err) {
    const char *t = kv->type == GGUF_ARRAY ? "array" : gguf_vtype_name(kv->type);
    return cf_fail(err, "%s: key '%s' has type %s, expected %s (offset %" PRIu64 ")", f->path, SAFE(kv->key.s), t,
                   expected, kv->offset);
}

static const gguf_kv *find(const gguf_file *f, const char *key) { return kv_at(f, gguf_find_key(f, key)); }

int gguf_get_int(const gguf_file *f, const char *key, int64_t *out, cf_err *err) {
    const gguf_kv *kv = find(f, key);
    if (!kv) return 1;
    if (!is_int_type(kv->type)) return type_fail(f, kv, "an integer", err);
    int64_t i;
    double d;
    bool big;
    decode_scalar(kv->type, (const uint8_t *)&kv->v, &i, &d, &big);
    if (big)
        return cf_fail(err, "%s: key '%s' value %" PRIu64 " is out of range (offset %" PRIu64 ")", f->path, SAFE(key),
                       kv->v.u, kv->offset);
    *out = i;
    return 0;
}

int gguf_get_float(const gguf_file *f, const char *key, double *out, cf_err *err) {
    const gguf_kv *kv = find(f, key);
    if (!kv) return 1;
    if (!is_num_type(kv->type) || kv->type == GGUF_BOOL) return type_fail(f, kv, "a number", err);
    int64_t i;
    double d;
    bool big;
    decode_scalar(kv->type, (const uint8_t *)&kv->v, &i, &d, &big);
    *out = d;
    return 0;
}

int gguf_get_bool(const gguf_file *f, const char *key, bool *out, cf_err *err) {
    const gguf_kv *kv = find(f, key);
    if (!kv) return 1;
    if (kv->type != GGUF_BOOL) return type_fail(f, kv, "bool", err);
    *out = (kv->v.u & 0xff) != 0;
    return 0;
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, cf_err *err) {
    const gguf_kv *kv = find(f, key);
    if (!kv) return 1;
    if (kv->type != GGUF_STRING) return type_fail(f, kv, "string", err);
    *out = kv->str;
    return 0;
}

int gguf_get_arr_str(const gguf_file *f, const char *key, const gguf_str **out, uint64_t *n, cf_err *err) {
    const gguf_kv *kv = find(f, key);
    if (!kv) return 1;
    if (kv->type != GGUF_ARRAY || kv->arr_type != GGUF_STRING) return type_fail(f, kv, "array of strings", err);
    *out = kv->arr_str;
    *n = kv->arr_len;
    return 0;
}

/* Shared body of the numeric array getters: converts each element to int64 (want_float
 * false), or to float / double (want_float, as_double). */
static int get_arr_conv(const gguf_file *f, const char *key, bool want_float, bool as_double, void **out, uint64_t *n,
                        cf_err *err) {
    const gguf_kv *kv = find(f, key);
    if (!kv) return 1;
    bool ok = kv->type == GGUF_ARRAY &&
              (want_float ? is_num_type(kv->arr_type) && kv->arr_type != GGUF_BOOL : is_int_type(kv->arr_type));
    if (!ok) return type_fail(f, kv, want_float ? "array of numbers" : "array of integers", err);
    size_t es = scalar_size[kv->arr_type], osz = !want_float ? sizeof(int64_t)
                                                 : as_double ? sizeof(double)
                                                             : sizeof(float);
    void *buf = malloc(kv->arr_len ? (size_t)kv->arr_len * osz : 1); /* arr_len bounded by the file size */
    if (!buf) return cf_fail(err, "%s: key '%s': out of memory", f->path, SAFE(key));
    for (uint64_t j = 0; j < kv->arr_len; j++) {
        int64_t i;
        double d;
        bool big;
        decode_scalar(kv->arr_type, kv->arr_raw + j * es, &i, &d, &big);
        if (big && !want_float) {
            free(buf);
            return cf_fail(err, "%s: key '%s' element %" PRIu64 " is out of range (offset %" PRIu64 ")", f->path,
                           SAFE(key), j, kv->offset);
        }
        if (want_float && as_double) ((double *)buf)[j] = d;
        else if (want_float) ((float *)buf)[j] = (float)d;
        else ((int64_t *)buf)[j] = i;
    }
    *out = buf;
    *n = kv->arr_len;
    return 0;
}

static int get_arr_num(const gguf_file *f, const char *key, bool want_float, void **out, uint64_t *n, cf_err *err) {
    return get_arr_conv(f, key, want_float, false, out, n, err);
}

int gguf_get_arr_f64(const gguf_file *f, const char *key, double **out, uint64_t *n, cf_err *err) {
    void *p;
    int rc = get_arr_conv(f, key, true, true, &p, n, err);
    if (rc == 0) *out = p;
    return rc;
}

int gguf_get_arr_f32(const gguf_file *f, const char *key, float **out, uint64_t *n, cf_err *err) {
    void *p;
    int rc = get_arr_num(f, key, true, &p, n, err);
    if (rc == 0) *out = p;
    return rc;
}

int gguf_get_arr_i64(const gguf_file *f, const char *key, int64_t **out, uint64_t *n, cf_err *err) {
    void *p;
    int rc = get_arr_num(f, key, false, &p, n, err);
    if (rc == 0) *out = p;
    return rc;
}

/* ---- tensors ---- */

int64_t gguf_tensor_count(const gguf_file *f) { return f->n_tensors; }

int64_t gguf_tensor_index(const gguf_file *f, const gguf_tensor *t) { return t - f->tensors; }

const gguf_tensor *gguf_tensor_at(const gguf_file *f, int64_t i) {
    return i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    return gguf_tensor_at(f, map_find(&f->tensor_map, name, tensor_name_of, f));
}
