/* jinja_value.c - arena, error escape, value constructors, Python semantics of
 * values (truthiness, ==, str(), repr(), float repr) and json.dumps.
 *
 * Invariants: every allocation comes from the job's arena and is bounded by
 * its cap; jfail never returns. str()/repr() follow CPython 3 for the value
 * kinds a JSON context and templates can produce. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja.h"

struct jchunk {
    jchunk *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
};

void jarena_init(jarena *a, size_t cap) {
    a->head = NULL;
    a->used_total = 0;
    a->cap = cap;
}

void jarena_free(jarena *a) {
    jchunk *c = a->head;
    while (c) {
        jchunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->used_total = 0;
}

void jfail(jjob *j, int line, const char *fmt, ...) {
    if (j->err) {
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (line > 0) snprintf(j->err->msg, sizeof j->err->msg, "chat template line %d: %s", line, msg);
        else snprintf(j->err->msg, sizeof j->err->msg, "chat template: %s", msg);
    }
    longjmp(j->jb, 1);
}

void *jalloc(jjob *j, size_t n) {
    jarena *a = j->arena;
    n = (n + 15) & ~(size_t)15;
    if (n > a->cap || a->used_total + n > a->cap) jfail(j, 0, "memory limit exceeded");
    jchunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t sz = n > 65536 ? n : 65536;
        c = malloc(sizeof *c + sz);
        if (!c) jfail(j, 0, "out of memory");
        c->size = sz;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    a->used_total += n;
    memset(p, 0, n);
    return p;
}

char *jstrndup(jjob *j, const char *s, size_t n) {
    char *p = jalloc(j, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* ---- constructors ---- */
jv jv_undef(const char *name) {
    jv v = {.t = JV_UNDEF};
    v.u.undef_name = name;
    return v;
}
jv jv_none(void) { return (jv){.t = JV_NONE}; }
jv jv_bool(bool b) {
    jv v = {.t = JV_BOOL};
    v.u.b = b;
    return v;
}
jv jv_int(int64_t i) {
    jv v = {.t = JV_INT};
    v.u.i = i;
    return v;
}
jv jv_float(double f) {
    jv v = {.t = JV_FLOAT};
    v.u.f = f;
    return v;
}
jv jv_str(jjob *j, const char *p, size_t n) {
    jv v = {.t = JV_STR};
    v.u.s = jalloc(j, sizeof(jstr));
    v.u.s->p = p ? p : "";
    v.u.s->n = n;
    return v;
}
jv jv_strcpy(jjob *j, const char *p, size_t n) { return jv_str(j, jstrndup(j, p, n), n); }
jv jv_cstr(jjob *j, const char *s) { return jv_str(j, s, strlen(s)); }
jv jv_newlist(jjob *j, size_t cap) {
    jv v = {.t = JV_LIST};
    v.u.l = jalloc(j, sizeof(jlist));
    if (cap) {
        v.u.l->v = jalloc(j, cap * sizeof(jv));
        v.u.l->cap = cap;
    }
    return v;
}
jv jv_newdict(jjob *j, size_t cap) {
    jv v = {.t = JV_DICT};
    v.u.d = jalloc(j, sizeof(jdict));
    if (cap) {
        v.u.d->k = jalloc(j, cap * sizeof(jv));
        v.u.d->v = jalloc(j, cap * sizeof(jv));
        v.u.d->cap = cap;
    }
    return v;
}

void jlist_push(jjob *j, jlist *l, jv v) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 4;
        jv *nv = jalloc(j, nc * sizeof(jv));
        if (l->n) memcpy(nv, l->v, l->n * sizeof(jv));
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = v;
}

jv *jdict_getv(const jdict *d, jv k) {
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(d->k[i], k)) return &d->v[i];
    return NULL;
}

jv *jdict_get(const jdict *d, const char *k, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].u.s->n == n && memcmp(d->k[i].u.s->p, k, n) == 0) return &d->v[i];
    return NULL;
}

void jdict_set(jjob *j, jdict *d, jv k, jv v) {
    jv *slot = jdict_getv(d, k);
    if (slot) {
        *slot = v;
        return;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 4;
        jv *nk = jalloc(j, nc * sizeof(jv)), *nv = jalloc(j, nc * sizeof(jv));
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(jv));
            memcpy(nv, d->v, d->n * sizeof(jv));
        }
        d->k = nk;
        d->v = nv;
        d->cap = nc;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

/* ---- semantics ---- */
bool jv_truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s->n != 0;
    case JV_LIST: return v.u.l->n != 0;
    case JV_DICT: return v.u.d->n != 0;
    default: return true;
    }
}

static bool is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double num_f(jv v) { return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : (double)v.u.b; }
static int64_t num_i(jv v) { return v.t == JV_INT ? v.u.i : (int64_t)v.u.b; }

/* deeper than this compares unequal (values this deep only come from hostile loops) */
#define EQ_MAX_DEPTH 512
static bool eq_depth(jv a, jv b, int depth);
bool jv_eq(jv a, jv b) { return eq_depth(a, b, 0); }

/* The render in progress on this thread: == charges its work here, so that
 * comparing huge values in a loop stays within the step budget. */
static _Thread_local jjob *t_job;
void jv_set_current_job(jjob *j) { t_job = j; }

static bool eq_depth(jv a, jv b, int depth) {
    if (depth > EQ_MAX_DEPTH) return false;
    if (t_job && t_job->work_limit && ++t_job->work > t_job->work_limit)
        jfail(t_job, 0, "evaluation step limit exceeded");
    if (is_num(a) && is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR: return a.u.s->n == b.u.s->n && memcmp(a.u.s->p, b.u.s->p, a.u.s->n) == 0;
    case JV_LIST:
        if (a.u.l->n != b.u.l->n) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!eq_depth(a.u.l->v[i], b.u.l->v[i], depth + 1)) return false;
        return true;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv *o = jdict_getv(b.u.d, a.u.d->k[i]);
            if (!o || !eq_depth(a.u.d->v[i], *o, depth + 1)) return false;
        }
        return true;
    case JV_NS: return a.u.d == b.u.d;
    case JV_MACRO: return a.u.m == b.u.m;
    case JV_LOOP: return a.u.loop == b.u.loop;
    case JV_FUNC: return a.func == b.func;
    default: return false;
    }
}

const char *jv_typename(jv v) {
    static const char *const names[] = {"Undefined", "NoneType", "bool",      "int",   "float",    "str",
                                        "list",      "dict",     "Namespace", "Macro", "function", "LoopContext"};
    if (v.t == JV_LIST && v.tuple) return v.tuple == 1 ? "tuple" : "generator";
    return v.t < sizeof names / sizeof names[0] ? names[v.t] : "?";
}

bool jv_is_str(jv v, const char *s) {
    size_t n = strlen(s);
    return v.t == JV_STR && v.u.s->n == n && memcmp(v.u.s->p, s, n) == 0;
}

/* ---- buffers ---- */
void jbuf_put(jjob *j, jbuf *b, const char *s, size_t n) {
    if (!n) return;
    if (j->work_limit) {
        j->work += 1 + n / 16;
        if (j->work > j->work_limit) jfail(j, 0, "evaluation step limit exceeded");
    }
    if (b->limit && b->n + n > b->limit) jfail(j, 0, "output size limit exceeded");
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = jalloc(j, nc);
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
void jbuf_putc(jjob *j, jbuf *b, char c) { jbuf_put(j, b, &c, 1); }
void jbuf_puts(jjob *j, jbuf *b, const char *s) { jbuf_put(j, b, s, strlen(s)); }
jv jbuf_take(jjob *j, jbuf *b) {
    jv v = jv_str(j, b->p, b->n);
    b->p = NULL;
    b->n = b->cap = 0;
    return v;
}

/* CPython float repr: shortest round-trip digits, exponent form when
 * exp < -4 or exp >= 16. */
void py_float_repr(double f, char *out, size_t cap) {
    if (isnan(f)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    char buf[64];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
        if (strtod(buf, NULL) == f) break;
    }
    /* buf = [-]d.ddde[+-]xx */
    char digits[32];
    int nd = 0;
    const char *p = buf;
    bool negative = false;
    if (*p == '-') {
        negative = true;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char *o = out;
    size_t left = cap;
#define EMIT(...)                                 \
    do {                                          \
        int w_ = snprintf(o, left, __VA_ARGS__);  \
        if (w_ < 0 || (size_t)w_ >= left) return; \
        o += w_;                                  \
        left -= (size_t)w_;                       \
    } while (0)
    if (negative) EMIT("-");
    if (exp < -4 || exp >= 16) {
        EMIT("%c", digits[0]);
        if (nd > 1) EMIT(".%.*s", nd - 1, digits + 1);
        EMIT("e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (exp < 0) {
        EMIT("0.");
        for (int i = 0; i < -exp - 1; i++) EMIT("0");
        EMIT("%.*s", nd, digits);
    } else {
        for (int i = 0; i <= exp; i++) EMIT("%c", i < nd ? digits[i] : '0');
        EMIT(".");
        if (nd > exp + 1) EMIT("%.*s", nd - exp - 1, digits + exp + 1);
        else EMIT("0");
    }
#undef EMIT
}

/* Not str.isprintable() (approximation of the Unicode tables: controls,
 * separators other than ' ', format characters, private use, noncharacters). */
static bool py_unprintable(uint32_t cp) {
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) return true;
    if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) ||
        (cp >= 0x205f && cp <= 0x206f) || cp == 0x3000 || cp == 0xfeff || (cp >= 0xfff0 && cp <= 0xfffb) ||
        cp == 0xfffe || cp == 0xffff)
        return true;
    if (cp == 0x061c || cp == 0x180e || (cp >= 0x0600 && cp <= 0x0605) || cp == 0x06dd || cp == 0x070f) return true;
    if ((cp >= 0xe000 && cp <= 0xf8ff) || cp >= 0xf0000 || (cp >= 0xd800 && cp <= 0xdfff)) return true;
    if (cp >= 0xe0000 && cp <= 0xe007f) return true;
    return false;
}

/* decodes one UTF-8 character at s[i] (invalid bytes decode as themselves) */
static size_t utf8_at(const char *s, size_t n, size_t i, uint32_t *cp) {
    unsigned char c = (unsigned char)s[i];
    size_t k = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (c < 0x80 || c < 0xC0 || i + k > n) {
        *cp = c;
        return 1;
    }
    uint32_t v = c & (0xFF >> (k + 1));
    for (size_t q = 1; q < k; q++) {
        unsigned char d = (unsigned char)s[i + q];
        if ((d & 0xC0) != 0x80) {
            *cp = c;
            return 1;
        }
        v = (v << 6) | (d & 0x3F);
    }
    *cp = v;
    return k;
}

static void repr_str(jjob *j, jbuf *b, const char *s, size_t n) {
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jbuf_putc(j, b, q);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = utf8_at(s, n, i, &cp);
        char tmp[16];
        if (cp == (uint32_t)q || cp == '\\') {
            jbuf_putc(j, b, '\\');
            jbuf_putc(j, b, (char)cp);
        } else if (cp == '\n') jbuf_puts(j, b, "\\n");
        else if (cp == '\r') jbuf_puts(j, b, "\\r");
        else if (cp == '\t') jbuf_puts(j, b, "\\t");
        else if (py_unprintable(cp)) {
            if (cp < 0x100) snprintf(tmp, sizeof tmp, "\\x%02x", cp);
            else if (cp < 0x10000) snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            else snprintf(tmp, sizeof tmp, "\\U%08x", cp);
            jbuf_puts(j, b, tmp);
        } else jbuf_put(j, b, s + i, k);
        i += k;
    }
    jbuf_putc(j, b, q);
}

static void repr_depth(jjob *j, jbuf *b, jv v, int depth);
void jv_repr_into(jjob *j, jbuf *b, jv v) { repr_depth(j, b, v, 0); }

static void repr_depth(jjob *j, jbuf *b, jv v, int depth) {
    if (depth > JINJA_MAX_DEPTH * 4) jfail(j, 0, "value nested too deeply to print");
    switch (v.t) {
    case JV_STR: repr_str(j, b, v.u.s->p, v.u.s->n); return;
    case JV_LIST: {
        bool tup = v.tuple == 1; /* generators (2) print like lists */
        jbuf_putc(j, b, tup ? '(' : '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) jbuf_puts(j, b, ", ");
            repr_depth(j, b, v.u.l->v[i], depth + 1);
        }
        if (tup && v.u.l->n == 1) jbuf_putc(j, b, ',');
        jbuf_putc(j, b, tup ? ')' : ']');
        return;
    }
    case JV_DICT:
        jbuf_putc(j, b, '{');
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) jbuf_puts(j, b, ", ");
            repr_depth(j, b, v.u.d->k[i], depth + 1);
            jbuf_puts(j, b, ": ");
            repr_depth(j, b, v.u.d->v[i], depth + 1);
        }
        jbuf_putc(j, b, '}');
        return;
    case JV_UNDEF: return; /* Jinja prints Undefined as '' even inside containers' str? (repr is Undefined) */
    default: jv_str_into(j, b, v); return;
    }
}

void jv_str_into(jjob *j, jbuf *b, jv v) {
    char tmp[64];
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: jbuf_puts(j, b, "None"); return;
    case JV_BOOL: jbuf_puts(j, b, v.u.b ? "True" : "False"); return;
    case JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        jbuf_puts(j, b, tmp);
        return;
    case JV_FLOAT:
        py_float_repr(v.u.f, tmp, sizeof tmp);
        jbuf_puts(j, b, tmp);
        return;
    case JV_STR: jbuf_put(j, b, v.u.s->p, v.u.s->n); return;
    case JV_LIST:
    case JV_DICT: jv_repr_into(j, b, v); return;
    case JV_NS: jbuf_puts(j, b, "<Namespace>"); return;
    case JV_MACRO: jbuf_puts(j, b, "<Macro>"); return;
    case JV_LOOP: jbuf_puts(j, b, "<LoopContext>"); return;
    default:
        if (v.func == JF_METHOD) {
            jbuf_puts(j, b, "<built-in method ");
            jbuf_puts(j, b, v.u.undef_name);
            jbuf_putc(j, b, '>');
        } else jbuf_puts(j, b, "<function>");
        return;
    }
}

jv jv_to_str(jjob *j, jv v) {
    if (v.t == JV_STR) return v;
    jbuf b = {0};
    jv_str_into(j, &b, v);
    return jbuf_take(j, &b);
}

/* ---- json.dumps(ensure_ascii=False) ---- */
static void json_str(jjob *j, jbuf *b, const char *s, size_t n) {
    jbuf_putc(j, b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[8];
        switch (ch) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (ch < 0x20) {
                snprintf(tmp, sizeof tmp, "\\u%04x", ch);
                esc = tmp;
            }
        }
        if (esc) {
            jbuf_put(j, b, s + i - run, run);
            run = 0;
            jbuf_puts(j, b, esc);
        } else run++;
    }
    jbuf_put(j, b, s + n - run, run);
    jbuf_putc(j, b, '"');
}

static void json_nl(jjob *j, jbuf *b, int indent, int level) {
    jbuf_putc(j, b, '\n');
    for (int i = 0; i < indent * level; i++) jbuf_putc(j, b, ' ');
}

void jv_tojson_into(jjob *j, int line, jbuf *b, jv v, int indent, int level) {
    char tmp[64];
    if (level > JINJA_MAX_DEPTH) jfail(j, line, "tojson: nesting too deep");
    switch (v.t) {
    case JV_NONE: jbuf_puts(j, b, "null"); return;
    case JV_BOOL: jbuf_puts(j, b, v.u.b ? "true" : "false"); return;
    case JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        jbuf_puts(j, b, tmp);
        return;
    case JV_FLOAT:
        if (isnan(v.u.f)) jbuf_puts(j, b, "NaN");
        else if (isinf(v.u.f)) jbuf_puts(j, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else {
            py_float_repr(v.u.f, tmp, sizeof tmp);
            jbuf_puts(j, b, tmp);
        }
        return;
    case JV_STR: json_str(j, b, v.u.s->p, v.u.s->n); return;
    case JV_LIST:
        if (v.u.l->n == 0) {
            jbuf_puts(j, b, "[]");
            return;
        }
        jbuf_putc(j, b, '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) jbuf_puts(j, b, indent >= 0 ? "," : ", ");
            if (indent >= 0) json_nl(j, b, indent, level + 1);
            jv_tojson_into(j, line, b, v.u.l->v[i], indent, level + 1);
        }
        if (indent >= 0) json_nl(j, b, indent, level);
        jbuf_putc(j, b, ']');
        return;
    case JV_DICT:
        if (v.u.d->n == 0) {
            jbuf_puts(j, b, "{}");
            return;
        }
        jbuf_putc(j, b, '{');
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) jbuf_puts(j, b, indent >= 0 ? "," : ", ");
            if (indent >= 0) json_nl(j, b, indent, level + 1);
            jv k = v.u.d->k[i];
            if (k.t == JV_STR) json_str(j, b, k.u.s->p, k.u.s->n);
            else if (k.t == JV_INT || k.t == JV_FLOAT) {
                jbuf_putc(j, b, '"');
                jv_str_into(j, b, k);
                jbuf_putc(j, b, '"');
            } else if (k.t == JV_BOOL) jbuf_puts(j, b, k.u.b ? "\"true\"" : "\"false\"");
            else if (k.t == JV_NONE) jbuf_puts(j, b, "\"null\"");
            else jfail(j, line, "keys must be str, int, float, bool or None, not %s", jv_typename(k));
            jbuf_puts(j, b, ": ");
            jv_tojson_into(j, line, b, v.u.d->v[i], indent, level + 1);
        }
        if (indent >= 0) json_nl(j, b, indent, level);
        jbuf_putc(j, b, '}');
        return;
    default: jfail(j, line, "Object of type %s is not JSON serializable", jv_typename(v));
    }
}

jv jv_html_escape(jjob *j, jv v) {
    jbuf b = {0};
    for (size_t i = 0; i < v.u.s->n; i++) {
        char ch = v.u.s->p[i];
        switch (ch) {
        case '&': jbuf_puts(j, &b, "&amp;"); break;
        case '<': jbuf_puts(j, &b, "&lt;"); break;
        case '>': jbuf_puts(j, &b, "&gt;"); break;
        case '"': jbuf_puts(j, &b, "&#34;"); break;
        case '\'': jbuf_puts(j, &b, "&#39;"); break;
        default: jbuf_putc(j, &b, ch);
        }
    }
    return b.p ? jbuf_take(j, &b) : jv_str(j, "", 0);
}

void jfail_undefined(jjob *j, int line, jv v) {
    if (v.u.undef_name && v.u.undef_name[0] == 1) jfail(j, line, "%s", v.u.undef_name + 1);
    if (v.u.undef_name) jfail(j, line, "'%s' is undefined", v.u.undef_name);
    jfail(j, line, "value is undefined");
}
