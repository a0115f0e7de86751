/* util.c - arena, SSE output buffer, JSON escaping, typed JSON value checks and
 * one-pass field picking (jpick) for the recipe codecs (see recipe_internal.h).
 * The arena hands out 16-byte aligned blocks (zeroed or not) from chunks; reset
 * merges the chunks into one so a request object reused across parses does not
 * allocate in the steady state. String escaping is the writer's hot loop (16/8-byte scans that
 * store before checking; see rb_json_str for the room invariant). */
#include <stdio.h>
#include <stdlib.h>

#include "recipe/recipe_internal.h"

#define RA_CHUNK 8192

void *ra_alloc_grow(recipe_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    recipe_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > RA_CHUNK ? n : RA_CHUNK;
        /* a reset arena keeps one chunk: reuse it when it is empty */
        recipe_arena_chunk *nc = malloc(sizeof *nc + cap);
        if (!nc) return NULL;
        nc->cap = cap;
        nc->used = 0;
        nc->next = c;
        a->head = c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

void *ra_alloc(recipe_arena *a, size_t n) {
    void *p = ra_alloc_raw(a, n);
    if (p) memset(p, 0, n);
    return p;
}

char *ra_strndup(recipe_arena *a, const char *s, size_t n) {
    char *d = ra_alloc_raw(a, n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

#define RA_KEEP_MAX (256u << 10) /* a reset arena keeps at most this much */

void ra_reset(recipe_arena *a) {
    a->pool_lo = a->pool_hi = NULL;
    recipe_arena_chunk *c = a->head;
    if (!c) return;
    if (!c->next) {
        c->used = 0;
        return;
    }
    /* several chunks: replace them by one chunk as large as all of them (up to RA_KEEP_MAX),
     * so that a request object reused for similar bodies settles on zero mallocs per parse */
    size_t total = 0;
    while (c) {
        recipe_arena_chunk *n = c->next;
        total += c->cap;
        free(c);
        c = n;
    }
    a->head = NULL;
    if (total > RA_KEEP_MAX) total = RA_KEEP_MAX;
    recipe_arena_chunk *nc = malloc(sizeof *nc + total);
    if (!nc) return;
    nc->cap = total;
    nc->used = 0;
    nc->next = NULL;
    a->head = nc;
}

void ra_free(recipe_arena *a) {
    a->pool_lo = a->pool_hi = NULL;
    recipe_arena_chunk *c = a->head;
    while (c) {
        recipe_arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
}

/* ---------------------------------------------------------------- buffer */

int rb_reserve(recipe_buf *b, size_t extra) {
    if (b->failed) return -1; /* sticky (recipe.h) */
    if (b->cap - b->len > extra) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len <= extra) {
        if (cap > SIZE_MAX / 2) return b->failed = true, -1;
        cap *= 2;
    }
    char *d = realloc(b->data, cap);
    if (!d) return b->failed = true, -1;
    b->data = d;
    b->cap = cap;
    return 0;
}

int rb_put(recipe_buf *b, const char *s, size_t n) {
    if (rb_reserve(b, n + 1)) return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

int rb_puts(recipe_buf *b, const char *s) { return rb_put(b, s, strlen(s)); }

int recipe_buf_append(recipe_buf *b, const char *s, size_t n) { return rb_put(b, s, n); }

int rb_printf(recipe_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    if ((size_t)n < sizeof tmp) return rb_put(b, tmp, (size_t)n);
    if (rb_reserve(b, (size_t)n + 1)) return -1;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid/truncated. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000;
    else return 0;
    if (n < len) return 0;
    unsigned cp = c & (0x3F >> (len - 1));
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* 1: byte copied as is inside a JSON string (printable ASCII and DEL, except " and \\) */
static const unsigned char k_plain[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

/* Nonzero in the high bit of each byte of x that must not be copied as is (control, '"', '\\',
 * non-ASCII); the lowest flagged byte is exact (borrows only propagate upward). */
static inline uint64_t swar_special(uint64_t x) {
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t ctl = (x - 0x2020202020202020ull) & ~x & high;
    uint64_t q = x ^ 0x2222222222222222ull, bs = x ^ 0x5C5C5C5C5C5C5C5Cull;
    return ctl | ((q - ones) & ~q & high) | ((bs - ones) & ~bs & high) | (x & high);
}

typedef unsigned char v16u __attribute__((vector_size(16)));

int rb_json_str(recipe_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    /* room for the common case (nothing to escape); escapes reserve more as they come. Invariant:
     * the buffer has room for (n - i) + 3 more bytes at d, so 8-byte stores while n - i >= 8 fit. */
    if (rb_reserve(b, n + 3)) return -1;
    char *d = b->data + b->len;
    *d++ = '"';
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, clean = 0; /* source from `clean` on was copied 1:1 (d - i constant since then) */
    if (n >= 4 && n < 8) { /* short strings (keys, enum values): two overlapping 4-byte loads */
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + n - 4, 4);
        if (!swar_special(lo | (uint64_t)hi << 32)) {
            memcpy(d, &lo, 4);
            memcpy(d + n - 4, &hi, 4);
            d += n;
            i = n;
        }
    }
    while (i < n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* 16 bytes at a time (GCC vector extensions: SSE2 on x86-64, scalar elsewhere), stored before
         * they are checked; on a special byte keep the clean prefix */
        while (n - i >= 16) {
            v16u x, bad;
            uint64_t m[2];
            memcpy(&x, p + i, 16);
            memcpy(d, &x, 16);
            bad = (v16u)((x < 0x20) | (x == '"') | (x == '\\') | (x >= 0x80));
            memcpy(m, &bad, 16);
            if (m[0] | m[1]) {
                size_t k = m[0] ? (size_t)__builtin_ctzll(m[0]) >> 3 : 8 + ((size_t)__builtin_ctzll(m[1]) >> 3);
                d += k;
                i += k;
                break;
            }
            d += 16;
            i += 16;
        }
#endif
        /* 8 bytes at a time, stored before they are checked; on a special byte keep the clean prefix */
        while (n - i >= 8) {
            uint64_t x, m;
            memcpy(&x, p + i, 8);
            memcpy(d, &x, 8);
            m = swar_special(x);
            if (m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                size_t k = (size_t)__builtin_ctzll(m) >> 3;
                d += k;
                i += k;
#endif
                break;
            }
            d += 8;
            i += 8;
        }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* a tail of 1-7 bytes after at least 8 bytes copied 1:1 since the last escape: check the
         * last 8 source bytes at once and store them over the identical bytes already written */
        if (n >= 8 && i < n && n - i < 8 && n - 8 >= clean) {
            size_t t = n - i;
            uint64_t x;
            memcpy(&x, p + n - 8, 8);
            if (!(swar_special(x) >> (8 * (8 - t)))) {
                memcpy(d - (8 - t), &x, 8);
                d += t;
                break;
            }
        }
#endif
        while (i < n && k_plain[p[i]]) *d++ = (char)p[i++];
        if (i == n) break;
        unsigned c = p[i];
        size_t l = c >= 0x80 ? utf8_seq(p + i, n - i) : 0;
        if (l) { /* a valid multi-byte sequence is copied as is */
            memcpy(d, s + i, l);
            d += l;
            i += l;
            continue;
        }
        /* an escape: make room for 6 more bytes plus the rest */
        b->len = (size_t)(d - b->data);
        if (rb_reserve(b, (n - i) + 8)) return -1;
        d = b->data + b->len;
        if (c == '"' || c == '\\') *d++ = '\\', *d++ = (char)c;
        else if (c == '\n') *d++ = '\\', *d++ = 'n';
        else if (c == '\r') *d++ = '\\', *d++ = 'r';
        else if (c == '\t') *d++ = '\\', *d++ = 't';
        else if (c < 0x20) {
            memcpy(d, "\\u00", 4);
            d[4] = hex[c >> 4];
            d[5] = hex[c & 15];
            d += 6;
        } else {
            memcpy(d, "\xEF\xBF\xBD", 3); /* invalid UTF-8 byte -> U+FFFD */
            d += 3;
        }
        clean = ++i;
    }
    *d++ = '"';
    b->len = (size_t)(d - b->data);
    *d = 0;
    return 0;
}

bool rj_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t l = p[i] < 0x80 ? 1 : utf8_seq(p + i, n - i);
        if (!l) return false;
        i += l;
    }
    return true;
}

int rb_put_utf8(recipe_buf *b, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, start = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t l = utf8_seq(p + i, n - i);
        if (l) {
            i += l;
            continue;
        }
        if (rb_put(b, s + start, i - start) || rb_put(b, "\xEF\xBF\xBD", 3)) return -1;
        start = ++i;
    }
    return rb_put(b, s + start, n - start);
}

const char *path_idx(char *buf, size_t cap, const char *prefix, size_t idx, const char *suffix) {
    char num[24], *e = num + sizeof num, *q = e;
    do *--q = (char)('0' + idx % 10), idx /= 10;
    while (idx);
    size_t pl = strlen(prefix), nl = (size_t)(e - q), sl = strlen(suffix);
    if (pl + nl + sl + 3 > cap) {
        snprintf(buf, cap, "%s", prefix);
        return buf;
    }
    memcpy(buf, prefix, pl);
    buf[pl] = '[';
    memcpy(buf + pl + 1, q, nl);
    buf[pl + 1 + nl] = ']';
    memcpy(buf + pl + 2 + nl, suffix, sl + 1);
    return buf;
}

int rb_int(recipe_buf *b, int64_t v) {
    char tmp[24], *e = tmp + sizeof tmp, *p = e;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do *--p = (char)('0' + u % 10), u /= 10;
    while (u);
    if (v < 0) *--p = '-';
    return rb_put(b, p, (size_t)(e - p));
}

int rb_real(recipe_buf *b, double v) {
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) { /* shortest text that reads back exactly */
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    if (!strpbrk(tmp, ".eEn")) strcat(tmp, ".0");
    return rb_puts(b, tmp);
}

/* One byte + NUL (the dumper's punctuation) without a call. */
static inline int rb_byte(recipe_buf *b, char c) {
    if (b->cap - b->len <= 1 && rb_reserve(b, 1)) return -1;
    b->data[b->len++] = c;
    b->data[b->len] = 0;
    return 0;
}

/* Compact dump of a jansson value (faster than json_dump_callback; same JSON). */
static int dump(recipe_buf *b, const json_t *j, int depth) {
    if (depth > 4096) return -1;
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        char sep = '{';
        /* the iterator API directly: json_object_foreach re-hashes every key to find the next */
        for (void *it = json_object_iter((json_t *)j); it; it = json_object_iter_next((json_t *)j, it)) {
            if (rb_byte(b, sep) || rb_json_str(b, json_object_iter_key(it), json_object_iter_key_len(it)) ||
                rb_byte(b, ':') || dump(b, json_object_iter_value(it), depth + 1))
                return -1;
            sep = ',';
        }
        if (sep == '{' && rb_byte(b, '{')) return -1;
        return rb_byte(b, '}');
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *v;
        if (rb_byte(b, '[')) return -1;
        json_array_foreach((json_t *)j, i, v) {
            if ((i && rb_byte(b, ',')) || dump(b, v, depth + 1)) return -1;
        }
        return rb_byte(b, ']');
    }
    case JSON_STRING: return rb_json_str(b, json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return rb_int(b, json_integer_value(j));
    case JSON_REAL: return rb_real(b, json_real_value(j));
    case JSON_TRUE: return rb_put(b, "true", 4);
    case JSON_FALSE: return rb_put(b, "false", 5);
    default: return rb_put(b, "null", 4);
    }
}

int rb_json(recipe_buf *b, const json_t *j) { return j ? dump(b, j, 0) : rb_put(b, "null", 4); }

void recipe_buf_free(recipe_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}

/* ---------------------------------------------------------------- errors */

int recipe_fail(recipe_error *e, recipe_err_kind kind, const char *param, const char *fmt, ...) {
    if (!e) return -1;
    e->kind = kind;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

static int type_fail(recipe_error *err, const char *path, const char *key, const char *want) {
    char p[RECIPE_PATH];
    snprintf(p, sizeof p, "%s%s%s", path ? path : "", path && *path ? "." : "", key);
    return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, p, "'%s' must be %s", p, want);
}

int rjv_str(const rj *v, const char *key, const char **out, recipe_error *err, const char *path) {
    if (rj_is_absent(v)) return 0;
    if (!rj_is_string(v)) return type_fail(err, path, key, "a string");
    *out = rj_str(v);
    return 0;
}

int rjv_num(const rj *v, const char *key, double *out, double lo, double hi, recipe_error *err, const char *path) {
    if (rj_is_absent(v)) return 0;
    if (!rj_is_number(v)) return type_fail(err, path, key, "a number");
    double d = rj_num(v);
    if (!(d >= lo && d <= hi)) {
        char want[96];
        snprintf(want, sizeof want, "a number in [%g, %g]", lo, hi);
        return type_fail(err, path, key, want);
    }
    *out = d;
    return 0;
}

int rjv_int(const rj *v, const char *key, int64_t *out, int64_t lo, int64_t hi, recipe_error *err, const char *path) {
    if (rj_is_absent(v)) return 0;
    if (!rj_is_integer(v) || rj_int(v) < lo || rj_int(v) > hi) {
        char want[96];
        snprintf(want, sizeof want, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
        return type_fail(err, path, key, want);
    }
    *out = rj_int(v);
    return 0;
}

int rjv_bool(const rj *v, const char *key, int *out, recipe_error *err, const char *path) {
    if (rj_is_absent(v)) return 0;
    if (!rj_is_boolean(v)) return type_fail(err, path, key, "a boolean");
    *out = rj_is_true(v);
    return 0;
}

int rjv_obj(const rj *v, const char *key, rj **out, recipe_error *err, const char *path) {
    if (rj_is_absent(v)) return 0;
    if (!rj_is_object(v)) return type_fail(err, path, key, "an object");
    *out = (rj *)v;
    return 0;
}

/* Whether member key b equals table key a, both n bytes long, given that their signatures
 * (length, first and last byte) already match: no libc call for the short keys of the tables. */
static inline bool key_eq(const char *a, const char *b, size_t n) {
    if (n <= 2) return true;
    if (n == 3) return a[1] == b[1];
    if (n <= 8) {
        uint32_t x0, y0, x1, y1;
        memcpy(&x0, a, 4), memcpy(&y0, b, 4), memcpy(&x1, a + n - 4, 4), memcpy(&y1, b + n - 4, 4);
        return x0 == y0 && x1 == y1;
    }
    if (n <= 16) {
        uint64_t x0, y0, x1, y1;
        memcpy(&x0, a, 8), memcpy(&y0, b, 8), memcpy(&x1, a + n - 8, 8), memcpy(&y1, b + n - 8, 8);
        return x0 == y0 && x1 == y1;
    }
    return !memcmp(a, b, n);
}

/* slot of a key signature in jpick's 64-entry map */
static inline unsigned jslot(uint32_t sig) { return (sig * 0x9E3779B1u) >> 26; }

void jpick(const rj *o, const jkey *keys, size_t n, rj **out) {
    for (size_t i = 0; i < n; i++) out[i] = NULL;
    if (!rj_is_object(o) || !n) return;
    rj **items = rj_items(o);
    if (n >= 12 && n < 64) {
        /* large tables (a body's top level): a small open-addressing map from signature to key */
        uint8_t map[64] = {0};
        for (size_t i = 0; i < n; i++) {
            unsigned h = jslot(keys[i].sig);
            while (map[h]) h = (h + 1) & 63;
            map[h] = (uint8_t)(i + 1);
        }
        for (size_t m = 0; m < o->n; m++) {
            rj *v = items[m];
            for (unsigned h = jslot(v->ksig); map[h]; h = (h + 1) & 63) {
                size_t i = map[h] - 1u;
                if (keys[i].sig == v->ksig && key_eq(keys[i].name, v->key, v->klen)) {
                    out[i] = v; /* a repeated key: the last one wins, as in jansson */
                    break;
                }
            }
        }
        return;
    }
    /* small tables: members usually come in (or near) the table's order, so each search
     * starts after the previous match */
    size_t start = 0;
    for (size_t m = 0; m < o->n; m++) {
        rj *v = items[m];
        const uint32_t sig = v->ksig; /* computed by the reader; 0 matches no table key */
        size_t i = start;
        for (size_t j = 0; j < n; j++, i = i + 1 == n ? 0 : i + 1)
            if (keys[i].sig == sig && key_eq(keys[i].name, v->key, v->klen)) {
                out[i] = v;
                start = i + 1 == n ? 0 : i + 1;
                break;
            }
    }
}

json_t *raw_json(const char *text) { return text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL; }

/* ---------------------------------------------------------------- small shared helpers */

int string_content(recipe_arena *a, const char *text, recipe_part **out, size_t *n, bool *is_string,
                   recipe_error *err) {
    recipe_part *p = ra_alloc(a, sizeof *p);
    if (!p) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    p->type = RECIPE_PART_TEXT;
    p->text = text;
    *out = p, *n = 1, *is_string = true;
    return 0;
}

const char *join_text(recipe_arena *a, const recipe_part *parts, size_t n, const char *sep) {
    size_t total = 0, cnt = 0, sl = strlen(sep);
    const char *only = NULL;
    for (size_t i = 0; i < n; i++)
        if (parts[i].type == RECIPE_PART_TEXT && parts[i].text)
            total += strlen(parts[i].text) + sl, cnt++, only = parts[i].text;
    if (!cnt) return NULL;
    if (cnt == 1) return only; /* one text part: nothing to join (it outlives the caller's use) */
    char *d = ra_alloc(a, total + 1), *w = d;
    if (!d) return NULL;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (parts[i].type != RECIPE_PART_TEXT || !parts[i].text) continue;
        if (!first) memcpy(w, sep, sl), w += sl;
        size_t l = strlen(parts[i].text);
        memcpy(w, parts[i].text, l);
        w += l;
        first = false;
    }
    *w = 0;
    return d;
}

json_t *args_to_object(const char *args) {
    if (args) {
        json_t *v = json_loads(args, JSON_DECODE_ANY, NULL);
        if (json_is_object(v)) return v;
        json_decref(v);
    }
    return json_object();
}

uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void mint_id(char *out, size_t cap, const char *prefix, uint64_t seed) {
    uint64_t a = mix64(seed), b = mix64(seed ^ 0x5851F42D4C957F2Dull);
    snprintf(out, cap, "%s%016llx%08llx", prefix, (unsigned long long)a, (unsigned long long)(b >> 32));
}

void image_from_url(recipe_arena *a, recipe_part *p, const char *url) {
    p->type = RECIPE_PART_IMAGE;
    p->url = url;
    if (url && !strncmp(url, "data:", 5)) {
        const char *semi = strstr(url, ";base64,");
        if (semi) {
            p->media_type = ra_strndup(a, url + 5, (size_t)(semi - url - 5));
            p->data = semi + 8;
        }
    }
}

const char *image_url(recipe_arena *a, const recipe_part *p) {
    if (p->url) return p->url;
    if (!p->data) return "";
    const char *mt = p->media_type ? p->media_type : "image/png";
    size_t n = strlen(mt) + strlen(p->data) + 16;
    char *d = ra_alloc(a, n);
    if (!d) return "";
    snprintf(d, n, "data:%s;base64,%s", mt, p->data);
    return d;
}

const char *reasoning_text(recipe_arena *a, const recipe_part *p) {
    if (p->text) return p->text;
    if (!p->summary) return NULL;
    rj *sum = rj_parse(a, p->summary, strlen(p->summary), NULL, 0);
    if (!rj_is_array(sum)) return NULL;
    recipe_buf b = {0};
    size_t i;
    rj *v;
    rj_array_foreach(sum, i, v) {
        const char *t = rj_gets(v, "text");
        if (!t) continue;
        if (b.len) rb_puts(&b, "\n\n");
        rb_puts(&b, t);
    }
    const char *s = b.data ? ra_strndup(a, b.data, b.len) : NULL;
    recipe_buf_free(&b);
    return s;
}

#include <time.h>
const char *default_id(recipe_arena *a, const char *prefix, const void *obj) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char tmp[64];
    mint_id(tmp, sizeof tmp, prefix, (uint64_t)ts.tv_nsec * 1000003u ^ (uint64_t)ts.tv_sec ^ (uintptr_t)obj);
    return ra_strndup(a, tmp, strlen(tmp));
}
