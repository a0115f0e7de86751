/* rjson.c - the recipe JSON reader (see rjson.h): an iterative parser that
 * validates exactly like jansson's json_loads (flags 0) and, when building,
 * allocates nodes from the arena's bump pointer, unescapes strings into one pool
 * sized by the input (every string's tag byte, unescaped bytes and NUL fit in its
 * quoted span, so the pool never overflows), and collects container elements on a
 * scratch stack that is copied into one arena array per container at its close.
 * The same code validates without building (rj_text_is_object: no writes, no
 * allocation) for the encoders' verbatim copy of tool-call arguments. */
#include "recipe/rjson.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipe/recipe_internal.h"

#define RJ_MAX_DEPTH 2048 /* jansson's JSON_PARSER_MAX_DEPTH */
#define RJ_STACK0 256

typedef struct rjp {
    const unsigned char *p, *e, *base;
    bool build;
    recipe_arena *a;
    char *pool; /* next free byte of the string pool (build) */
    rj *slab; /* nodes handed out from arena blocks of slab_next nodes */
    size_t slab_left, slab_next;
    rj **stack; /* scratch: elements of the open containers */
    size_t sp, cap;
    bool stack_heap;
    size_t ws; /* whitespace bytes skipped so far (compactness of spans) */
    bool opaque; /* leave opaque objects unbuilt (rjson.h) */
    int depth;
    const char *why; /* first error */
    size_t why_at;
    rj *inline_stack[RJ_STACK0];
} rjp;

static bool fail(rjp *P, const char *why) {
    if (!P->why) P->why = why, P->why_at = (size_t)(P->p - P->base);
    return false;
}

static void skip_ws_run(rjp *P) {
    const unsigned char *p = P->p;
    while (p < P->e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    P->ws += (size_t)(p - P->p);
    P->p = p;
}

/* compact input (the common case) costs one compare per call */
static inline void skip_ws(rjp *P) {
    if (P->p<P->e && * P->p> ' ') return;
    skip_ws_run(P);
}

static int hex4(const unsigned char *p) {
    int x = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d = c >= '0' && c <= '9'   ? c - '0'
                          : c >= 'a' && c <= 'f' ? c - 'a' + 10
                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
        if (d < 0) return -1;
        x = x * 16 + d;
    }
    return x;
}

static char *put_utf8(char *d, unsigned cp) {
    if (cp < 0x80) *d++ = (char)cp;
    else if (cp < 0x800) *d++ = (char)(0xC0 | cp >> 6), *d++ = (char)(0x80 | (cp & 0x3F));
    else if (cp < 0x10000)
        *d++ = (char)(0xE0 | cp >> 12), *d++ = (char)(0x80 | (cp >> 6 & 0x3F)), *d++ = (char)(0x80 | (cp & 0x3F));
    else
        *d++ = (char)(0xF0 | cp >> 18), *d++ = (char)(0x80 | (cp >> 12 & 0x3F)), *d++ = (char)(0x80 | (cp >> 6 & 0x3F)),
        *d++ = (char)(0x80 | (cp & 0x3F));
    return d;
}

#ifdef __SSE2__
#include <emmintrin.h>
/* Bytes before the first '"', '\\', control or non-ASCII byte in p[0..16) (16: none). */
static inline unsigned plain16(const unsigned char *p) {
    __m128i x = _mm_loadu_si128((const __m128i *)p);
    __m128i sp =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
                     _mm_cmplt_epi8(x, _mm_set1_epi8(0x20))); /* signed: also >= 0x80 */
    unsigned m = (unsigned)_mm_movemask_epi8(sp);
    return m ? (unsigned)__builtin_ctz(m) : 16;
}
#else
#define ONES 0x0101010101010101ull
#define HIGH 0x8080808080808080ull
static inline unsigned plain16(const unsigned char *p) {
    for (int h = 0; h < 2; h++) {
        uint64_t x, q, b;
        memcpy(&x, p + 8 * h, 8);
        q = x ^ (ONES * '"'), b = x ^ (ONES * '\\');
        /* the lowest flagged byte is exact (borrows only disturb the bytes above it) */
        uint64_t m = (((q - ONES) & ~q) | ((b - ONES) & ~b) | (x - ONES * 0x20) | x) & HIGH;
        if (m) return 8 * (unsigned)h + (unsigned)__builtin_ctzll(m) / 8;
    }
    return 16;
}
#endif

/* P->p at the opening quote. On success (*out, *len): the unescaped string in the pool (build).
 * The pool has 16 bytes of slack past the input length, so whole 16-byte blocks are stored
 * before they are checked. */
static bool pstring_slow(rjp *P, const char **out, size_t *len) {
    const unsigned char *p = P->p + 1, *e = P->e;
    /* the write cursor as an integer: without a pool (validation only, P->pool NULL) it still
     * advances but is never turned into a pointer, so no arithmetic on NULL happens */
    uintptr_t d0 = (uintptr_t)P->pool + 1, d = d0; /* after the tag byte (rjson.h: RJ_TAG_*) */
    const bool build = P->build;
    for (;;) {
        while (e - p >= 16) {
            if (build) memcpy((char *)d, p, 16);
            unsigned k = plain16(p);
            p += k;
            d += k;
            if (k < 16) break;
        }
        if (p >= e) {
            P->p = p;
            return fail(P, "unterminated string");
        }
        unsigned c = *p;
        if (c == '"') {
            P->p = p + 1;
            if (build) {
                *(char *)d = 0;
                ((char *)d0)[-1] = (char)RJ_TAG_OTHER;
                *out = (const char *)d0;
                *len = (size_t)(d - d0);
                P->pool = (char *)d + 1;
            }
            return true;
        }
        if (c < 0x20) {
            P->p = p;
            return fail(P, "control character in a string");
        }
        if (c == '\\') {
            if (e - p < 2) {
                P->p = p;
                return fail(P, "unterminated string");
            }
            unsigned k = p[1];
            char ch;
            switch (k) {
            case '"': ch = '"'; break;
            case '\\': ch = '\\'; break;
            case '/': ch = '/'; break;
            case 'b': ch = '\b'; break;
            case 'f': ch = '\f'; break;
            case 'n': ch = '\n'; break;
            case 'r': ch = '\r'; break;
            case 't': ch = '\t'; break;
            case 'u': {
                int u = e - p >= 6 ? hex4(p + 2) : -1;
                P->p = p;
                if (u < 0) return fail(P, "invalid \\u escape");
                if (u == 0) return fail(P, "\\u0000 is not allowed");
                p += 6;
                unsigned cp = (unsigned)u;
                if (u >= 0xDC00 && u <= 0xDFFF) return fail(P, "invalid Unicode surrogate");
                if (u >= 0xD800 && u <= 0xDBFF) {
                    int l = e - p >= 6 && p[0] == '\\' && p[1] == 'u' ? hex4(p + 2) : -1;
                    if (l < 0xDC00 || l > 0xDFFF) return fail(P, "invalid Unicode surrogate pair");
                    cp = 0x10000 + (((unsigned)u - 0xD800) << 10) + ((unsigned)l - 0xDC00);
                    p += 6;
                }
                if (build) d = (uintptr_t)put_utf8((char *)d, cp);
                continue;
            }
            default: P->p = p; return fail(P, "invalid escape in a string");
            }
            if (build) *(char *)d++ = ch;
            p += 2;
            continue;
        }
        if (c < 0x80) {
            if (build) *(char *)d++ = (char)c;
            p++;
            continue;
        }
        /* a UTF-8 sequence */
        size_t n;
        unsigned min, cp;
        if (c >= 0xC2 && c <= 0xDF) n = 2, min = 0x80;
        else if (c >= 0xE0 && c <= 0xEF) n = 3, min = 0x800;
        else if (c >= 0xF0 && c <= 0xF4) n = 4, min = 0x10000;
        else {
            P->p = p;
            return fail(P, "invalid UTF-8");
        }
        if ((size_t)(e - p) < n) {
            P->p = p;
            return fail(P, "invalid UTF-8");
        }
        cp = c & (0x3Fu >> (n - 1));
        for (size_t i = 1; i < n; i++) {
            if ((p[i] & 0xC0) != 0x80) {
                P->p = p;
                return fail(P, "invalid UTF-8");
            }
            cp = cp << 6 | (p[i] & 0x3Fu);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            P->p = p;
            return fail(P, "invalid UTF-8");
        }
        if (build) memcpy((char *)d, p, n), d += n;
        p += n;
    }
}

/* P->p at '-' or a digit (anything else: invalid token). */
static bool pnumber(rjp *P, rj *v) {
    const unsigned char *s = P->p, *p = s, *e = P->e;
    bool neg = false, real = false;
    if (p < e && *p == '-') neg = true, p++;
    if (p >= e || *p < '0' || *p > '9') return fail(P, "invalid token");
    uint64_t m = 0;
    bool over = false;
    if (*p == '0') p++;
    else
        while (p < e && *p >= '0' && *p <= '9') {
            unsigned dgt = *p++ - '0';
            if (m > (UINT64_MAX - dgt) / 10) over = true;
            else m = m * 10 + dgt;
        }
    const unsigned char *frac_start = NULL, *frac_end = NULL;
    bool exp_seen = false;
    if (p < e && *p == '.') {
        real = true;
        p++;
        if (p >= e || *p < '0' || *p > '9') return P->p = p, fail(P, "invalid number");
        frac_start = p;
        while (p < e && *p >= '0' && *p <= '9') {
            unsigned dgt = *p++ - '0';
            if (m > (UINT64_MAX - dgt) / 10) over = true;
            else m = m * 10 + dgt;
        }
        frac_end = p;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        exp_seen = true;
        real = true;
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || *p < '0' || *p > '9') return P->p = p, fail(P, "invalid number");
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    if (!real) {
        if (over || m > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) return fail(P, "integer out of range");
        if (v) v->type = RJ_INT, v->u.i = neg ? (int64_t)(0 - m) : (int64_t)m;
    } else if (!over && m < (1ull << 53) && p - s <= 24 && frac_end && !exp_seen &&
               (size_t)(frac_end - frac_start) <= 22) {
        /* digits '.' digits with an exact mantissa: m / 10^k is one correctly rounded division */
        static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
        double d = (double)m / p10[frac_end - frac_start];
        if (v) v->type = RJ_REAL, v->u.d = neg ? -d : d;
    } else {
        size_t n = (size_t)(p - s);
        char tmp[128], *t = tmp;
        if (n >= sizeof tmp && !(t = malloc(n + 1))) return fail(P, "out of memory");
        memcpy(t, s, n);
        t[n] = 0;
        errno = 0;
        double d = strtod(t, NULL);
        bool bad = errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL);
        if (t != tmp) free(t);
        if (bad) return fail(P, "real number overflow");
        if (v) v->type = RJ_REAL, v->u.d = d;
    }
    P->p = p;
    return true;
}

static bool push_grow(rjp *P, rj *v) {
    size_t cap = P->cap * 2;
    rj **s = P->stack_heap ? realloc(P->stack, cap * sizeof *s) : malloc(cap * sizeof *s);
    if (!s) return fail(P, "out of memory");
    if (!P->stack_heap) memcpy(s, P->stack, P->sp * sizeof *s);
    P->stack = s;
    P->cap = cap;
    P->stack_heap = true;
    P->stack[P->sp++] = v;
    return true;
}

static inline bool push(rjp *P, rj *v) {
    if (P->sp == P->cap) return push_grow(P, v);
    P->stack[P->sp++] = v;
    return true;
}

static rj *slab_grow(rjp *P) {
    if (!(P->slab = ra_alloc_raw(P->a, P->slab_next * sizeof *P->slab))) return NULL;
    P->slab_left = P->slab_next;
    if (P->slab_next < 1024) P->slab_next *= 2;
    P->slab_left--;
    return P->slab++;
}

static inline rj *new_node(rjp *P) {
    if (!P->slab_left) return slab_grow(P);
    P->slab_left--;
    return P->slab++;
}

/* an open container */
typedef struct frame {
    rj *node; /* NULL when validating */
    size_t sp0, ws0; /* scratch stack height and whitespace count at its start */
    bool obj;
    bool opaque; /* validated only: building resumes at its close */
} frame;

/* Member names whose object values are passed on as text (rjson.h: opaque objects). */
static bool opaque_key(const char *k, size_t n) {
    switch (n) {
    case 6: return !memcmp(k, "schema", 6);
    case 8: return !memcmp(k, "metadata", 8);
    case 10: return !memcmp(k, "parameters", 10) || !memcmp(k, "logit_bias", 10);
    case 12: return !memcmp(k, "input_schema", 12);
    case 13: return !memcmp(k, "cache_control", 13);
    default: return false;
    }
}
#define RJ_FRAMES0 64

/* The hot paths below work on a local cursor (c) and pool pointer (pool) that stay in
 * registers; P->p / P->pool are synchronized (SYNC) before any out-of-line call and
 * reloaded (LOAD) after it. */
#define SYNC() (P->p = c, P->pool = pool)
#define LOAD() (c = P->p, pool = P->pool)

/* A plain ASCII string without escapes, with 16 bytes of input left at each step: stored into the
 * pool while scanned (and tagged clean: JSON-escaping it changes nothing). false: not that kind of string (nothing consumed; use pstring_slow). */
static inline bool str_fast(const unsigned char **cp, const unsigned char *e, char **poolp, bool build,
                            const char **out, size_t *len) {
    const unsigned char *p = *cp + 1;
    uintptr_t d0 = (uintptr_t)*poolp + 1, d = d0; /* after the tag byte; an integer, as in pstring_slow */
    while (e - p >= 16) {
        if (build) memcpy((char *)d, p, 16);
        unsigned k = plain16(p);
        p += k;
        d += k;
        if (k == 16) continue;
        if (*p != '"') return false;
        *cp = p + 1;
        if (build) {
            *(char *)d = 0;
            ((char *)d0)[-1] = (char)RJ_TAG_CLEAN;
            *out = (const char *)d0;
            *len = (size_t)(d - d0);
            *poolp = (char *)d + 1;
        }
        return true;
    }
    return false;
}

/* One JSON value (the document) at P->p, iteratively: an explicit stack of open containers
 * instead of recursion. */
static bool parse_doc(rjp *P, rj **root) {
    frame frames0[RJ_FRAMES0], *fr = frames0;
    size_t depth = 0, fcap = RJ_FRAMES0;
    const char *key = NULL;
    size_t klen = 0;
    uint32_t ksig = 0;
    bool ok = false;
    const bool build0 = P->build;
    bool build = build0;
    const unsigned char *c = P->p, *const e = P->e;
    char *pool = P->pool;
    rj *v;

#define WS()                                                    \
    do {                                                        \
        if (!(c<e && * c> ' ')) SYNC(), skip_ws_run(P), LOAD(); \
    } while (0)
#define FAIL(msg)     \
    do {              \
        SYNC();       \
        fail(P, msg); \
        goto out;     \
    } while (0)
/* consumes byte ch, after whitespace if needed; else goes on */
#define EAT(ch)                        \
    (c < e && *c == (ch) ? (c++, true) \
     : c<e && * c> ' '   ? false       \
                         : (SYNC(), skip_ws_run(P), LOAD(), c < e && *c == (ch) ? (c++, true) : false))
#define STRING(outp, lenp)                                \
    do {                                                  \
        if (!str_fast(&c, e, &pool, build, outp, lenp)) { \
            SYNC();                                       \
            P->build = build;                             \
            bool sok = pstring_slow(P, outp, lenp);       \
            LOAD();                                       \
            if (!sok) goto out;                           \
        }                                                 \
    } while (0)

value: /* a value at c (member key, if any, in key/klen) */
    WS();
    if (c >= e) FAIL("unexpected end of input");
    v = NULL;
    if (build) {
        if (!(v = new_node(P))) FAIL("out of memory");
        v->compact = true;
        v->lazy = false;
        v->key = key;
        v->klen = (uint32_t)klen;
        v->ksig = ksig;
        v->n = 0;
        v->raw = (const char *)c;
    }
    switch (*c) {
    case '{':
    case '[': {
        bool obj = *c == '{';
        if (depth == RJ_MAX_DEPTH) FAIL("nesting too deep");
        if (depth == fcap) {
            frame *nf = fr == frames0 ? malloc(2 * fcap * sizeof *nf) : realloc(fr, 2 * fcap * sizeof *nf);
            if (!nf) FAIL("out of memory");
            if (fr == frames0) memcpy(nf, frames0, sizeof frames0);
            fr = nf;
            fcap *= 2;
        }
        bool opaque = obj && v && P->opaque && key && opaque_key(key, klen);
        fr[depth++] = (frame){v, P->sp, P->ws, obj, opaque};
        if (opaque) build = false;
        c++;
        if (EAT(obj ? '}' : ']')) goto close;
        goto element;
    }
    case '"': {
        const char *str = NULL;
        size_t n = 0;
        STRING(&str, &n);
        if (v) v->type = RJ_STRING, v->u.s = str, v->n = n;
        break;
    }
    case 't':
        if (e - c < 4 || memcmp(c, "true", 4)) FAIL("invalid token");
        c += 4;
        if (v) v->type = RJ_TRUE;
        break;
    case 'f':
        if (e - c < 5 || memcmp(c, "false", 5)) FAIL("invalid token");
        c += 5;
        if (v) v->type = RJ_FALSE;
        break;
    case 'n':
        if (e - c < 4 || memcmp(c, "null", 4)) FAIL("invalid token");
        c += 4;
        if (v) v->type = RJ_NULL;
        break;
    default: {
        SYNC();
        bool nok = pnumber(P, v);
        LOAD();
        if (!nok) goto out;
    }
    }
    if (v) v->raw_len = (size_t)((const char *)c - v->raw);
    goto after_value;

element: /* the start of an element of the innermost container (after its bracket or a comma) */
    if (fr[depth - 1].obj) {
        WS();
        if (c >= e || *c != '"') FAIL("expected a string key");
        STRING(&key, &klen);
        ksig = build && klen && klen < 256 ? JKEY_SIG(klen, key[0], key[klen - 1]) : 0;
        if (!EAT(':')) FAIL("expected ':'");
    } else key = NULL, klen = 0, ksig = 0;
    goto value;

close : /* the innermost container's closing bracket was consumed */
{
    frame *f = &fr[--depth];
    v = f->node;
    if (f->opaque) {
        build = true;
        v->type = RJ_OBJECT;
        v->lazy = true;
        v->n = 0;
        v->compact = P->ws == f->ws0;
        v->u.arena = P->a;
        v->raw_len = (size_t)((const char *)c - v->raw);
    } else if (v) {
        size_t n = P->sp - f->sp0;
        v->type = f->obj ? RJ_OBJECT : RJ_ARRAY;
        v->n = n;
        v->compact = P->ws == f->ws0;
        v->u.items = NULL;
        v->raw_len = (size_t)((const char *)c - v->raw);
        if (n) {
            if (!(v->u.items = ra_alloc_raw(P->a, n * sizeof *v->u.items))) FAIL("out of memory");
            memcpy(v->u.items, P->stack + f->sp0, n * sizeof *v->u.items);
        }
        P->sp = f->sp0;
    }
}

after_value: /* v (NULL when validating) is complete */
    if (depth == 0) {
        if (root) *root = v;
        ok = true;
        SYNC();
        goto out;
    }
    if (v && !push(P, v)) goto out;
    if (EAT(',')) goto element;
    if (c < e && *c == (fr[depth - 1].obj ? '}' : ']')) {
        c++;
        goto close;
    }
    FAIL(fr[depth - 1].obj ? "expected ',' or '}'" : "expected ',' or ']'");

out:
#undef WS
#undef FAIL
#undef EAT
#undef STRING
    P->build = build0;
    if (fr != frames0) free(fr);
    return ok;
}

static bool run(rjp *P, rj **root) {
    skip_ws(P);
    if (P->p >= P->e || (*P->p != '{' && *P->p != '[')) return fail(P, "expected an object or an array");
    if (!parse_doc(P, root)) return false;
    skip_ws(P);
    if (P->p != P->e) return fail(P, "end of data expected");
    return true;
}

static void init(rjp *P, const char *text, size_t len, bool build) {
    P->p = P->base = (const unsigned char *)text;
    P->e = P->p + len;
    P->build = build;
    P->opaque = build;
    P->a = NULL;
    P->pool = NULL;
    P->slab = NULL;
    P->slab_left = 0;
    P->slab_next = 64;
    P->stack = P->inline_stack;
    P->sp = 0;
    P->cap = RJ_STACK0;
    P->stack_heap = false;
    P->ws = 0;
    P->depth = 0;
    P->why = NULL;
    P->why_at = 0;
}

rj *rj_parse(recipe_arena *a, const char *text, size_t len, char *why, size_t why_cap) {
    return rj_parse_pool(a, text, len, why, why_cap, NULL);
}

rj *rj_parse_pool(recipe_arena *a, const char *text, size_t len, char *why, size_t why_cap, rj_pool *pool) {
    rjp P;
    init(&P, text, len, true);
    P.a = a;
    rj *root = NULL;
    bool ok = (P.pool = ra_alloc_raw(a, len + 16)) != NULL;
    if (pool) *pool = (rj_pool){P.pool, P.pool ? P.pool + len + 16 : NULL};
    if (!ok) fail(&P, "out of memory");
    else ok = run(&P, &root);
    if (P.stack_heap) free(P.stack);
    if (!ok) {
        if (why && why_cap) snprintf(why, why_cap, "%s at byte %zu", P.why ? P.why : "invalid JSON", P.why_at);
        return NULL;
    }
    return root;
}

bool rj_text_is_object(const char *s, size_t n) {
    rjp P;
    init(&P, s, n, false);
    skip_ws(&P);
    if (P.p >= P.e || *P.p != '{') return false;
    return run(&P, NULL);
}

bool rj_expand(rj *o) {
    if (!o->lazy) return true;
    rjp P;
    init(&P, o->raw, o->raw_len, true);
    P.opaque = false; /* build all of it */
    P.a = o->u.arena;
    o->lazy = false;
    o->n = 0;
    o->u.items = NULL;
    rj *root = NULL;
    bool ok = (P.pool = ra_alloc_raw(P.a, o->raw_len + 16)) != NULL && run(&P, &root);
    if (P.stack_heap) free(P.stack);
    if (!ok || !root) return false;
    o->n = root->n;
    o->u.items = root->u.items;
    return true;
}

rj *rj_getn(const rj *o, const char *key, size_t klen) {
    if (!o || o->type != RJ_OBJECT) return NULL;
    rj **items = rj_items(o);
    for (size_t i = o->n; i-- > 0;) {
        rj *m = items[i];
        if (m->klen == klen && !memcmp(m->key, key, klen)) return m;
    }
    return NULL;
}

const char *rj_raw(recipe_arena *a, const rj *v) {
    if (!v || v->type == RJ_NULL) return NULL;
    if (v->compact) return ra_strndup(a, v->raw, v->raw_len);
    char *d = ra_alloc_raw(a, v->raw_len + 1), *w = d;
    if (!d) return NULL;
    const char *p = v->raw, *e = p + v->raw_len;
    while (p < e) {
        char c = *p++;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        *w++ = c;
        if (c != '"') continue;
        while (p < e) { /* inside a string: copy up to the closing quote */
            char s = *p++;
            *w++ = s;
            if (s == '\\' && p < e) *w++ = *p++;
            else if (s == '"') break;
        }
    }
    *w = 0;
    return d;
}
