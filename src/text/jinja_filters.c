/* jinja_filters.c - Jinja2 builtin filters and tests, and the methods of
 * str / dict / loop values that templates call, with Hugging Face's tojson
 * (json.dumps, ensure_ascii=False, optional indent).
 *
 * Generators: map/select/reject/selectattr/rejectattr/unique/items return
 * lists flagged as generators (jv.tuple == 2) so that, as in Jinja2, they are
 * always truthy, have no length and are not JSON serializable until passed
 * through |list. Filter and test names are validated at parse time
 * (jfilter_known / jtest_known), like Jinja2's compile-time check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja.h"
#include "text/jinja_strings.h"

#define GEN 2

static const char *const g_filters[] = {
    "tojson",     "trim",       "length",  "count", "default",  "d",      "join", "first", "last",    "selectattr",
    "rejectattr", "select",     "reject",  "map",   "list",     "string", "int",  "float", "upper",   "lower",
    "title",      "capitalize", "replace", "items", "unique",   "indent", "safe", "abs",   "reverse", "sum",
    "escape",     "e",          "format",  "sort",  "dictsort", "min",    "max",  NULL};
static const char *const g_tests[] = {
    "defined", "undefined", "none",    "string", "mapping",  "iterable", "number", "sequence",    "true",
    "false",   "boolean",   "integer", "float",  "callable", "even",     "odd",    "divisibleby", "eq",
    "equalto", "==",        "ne",      "!=",     "lt",       "<",        "le",     "<=",          "gt",
    ">",       "ge",        ">=",      "in",     "lower",    "upper",    "sameas", NULL};

static bool known(const char *const *list, const char *name) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], name)) return true;
    return false;
}
bool jfilter_known(const char *name) { return known(g_filters, name); }
bool jtest_known(const char *name) { return known(g_tests, name); }

static _Noreturn void undef_err(jctx *c, int line, jv v) { jfail_undefined(c->job, line, v); }

jlist *jv_iterate(jctx *c, int line, jv v) {
    jjob *j = c->job;
    switch (v.t) {
    case JV_LIST: jctx_charge(c, line, v.u.l->n); return v.u.l;
    case JV_UNDEF: return jv_newlist(j, 0).u.l;
    case JV_DICT: {
        jv r = jv_newlist(j, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) jlist_push(j, r.u.l, v.u.d->k[i]);
        jctx_charge(c, line, v.u.d->n);
        return r.u.l;
    }
    case JV_STR: {
        jv r = jv_newlist(j, 0);
        const char *s = v.u.s->p;
        for (size_t i = 0; i < v.u.s->n;) {
            unsigned char b = (unsigned char)s[i];
            size_t k = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
            if (i + k > v.u.s->n) k = v.u.s->n - i;
            jlist_push(j, r.u.l, jv_str(j, s + i, k));
            i += k;
        }
        jctx_charge(c, line, r.u.l->n);
        return r.u.l;
    }
    default: jfail(j, line, "'%s' object is not iterable", jv_typename(v));
    }
}

int64_t jv_length(jctx *c, int line, jv v) {
    switch (v.t) {
    case JV_UNDEF: return 0;
    case JV_STR: {
        int64_t n = 0;
        for (size_t i = 0; i < v.u.s->n; i++) n += ((unsigned char)v.u.s->p[i] & 0xC0) != 0x80;
        return n;
    }
    case JV_LIST:
        if (v.tuple == GEN) jfail(c->job, line, "object of type 'generator' has no len()");
        return (int64_t)v.u.l->n;
    case JV_DICT: return (int64_t)v.u.d->n;
    default: jfail(c->job, line, "object of type '%s' has no len()", jv_typename(v));
    }
}

/* ---- tests ---- */
static bool is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }

bool jtest_apply(jctx *c, int line, const char *name, jv v, jv *args, int nargs) {
#define IS(s) (!strcmp(name, s))
#define NEEDARG()                                                                \
    do {                                                                         \
        if (nargs < 1) jfail(c->job, line, "test '%s' needs an argument", name); \
    } while (0)
    if (IS("defined")) return v.t != JV_UNDEF;
    if (IS("undefined")) return v.t == JV_UNDEF;
    if (IS("none")) return v.t == JV_NONE;
    if (IS("string")) return v.t == JV_STR;
    if (IS("mapping")) return v.t == JV_DICT;
    if (IS("iterable")) return v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_UNDEF;
    if (IS("sequence")) return v.t == JV_STR || (v.t == JV_LIST && v.tuple != GEN) || v.t == JV_DICT || v.t == JV_UNDEF;
    if (IS("number")) return is_num(v);
    if (IS("integer")) return v.t == JV_INT;
    if (IS("float")) return v.t == JV_FLOAT;
    if (IS("boolean")) return v.t == JV_BOOL;
    if (IS("true")) return v.t == JV_BOOL && v.u.b;
    if (IS("false")) return v.t == JV_BOOL && !v.u.b;
    if (IS("callable")) return v.t == JV_MACRO || v.t == JV_FUNC;
    if (IS("lower") || IS("upper")) {
        if (v.t != JV_STR) return false;
        jv o = jstr_case(c->job, v, IS("lower") ? JCASE_LOWER : JCASE_UPPER);
        return jv_eq(o, v);
    }
    if (IS("even") || IS("odd") || IS("divisibleby")) {
        if (v.t == JV_UNDEF) undef_err(c, line, v);
        if (v.t != JV_INT && v.t != JV_BOOL) jfail(c->job, line, "test '%s' needs an integer", name);
        int64_t x = v.t == JV_INT ? v.u.i : v.u.b;
        if (IS("even")) return x % 2 == 0;
        if (IS("odd")) return x % 2 != 0;
        NEEDARG();
        if (args[0].t != JV_INT || args[0].u.i == 0) jfail(c->job, line, "divisibleby needs a non-zero integer");
        return x % args[0].u.i == 0;
    }
    NEEDARG();
    if (IS("eq") || IS("equalto") || IS("==")) return jv_eq(v, args[0]);
    if (IS("ne") || IS("!=")) return !jv_eq(v, args[0]);
    if (IS("sameas")) return jv_eq(v, args[0]) && v.t == args[0].t;
    if (IS("in")) {
        jv h = args[0];
        if (h.t == JV_STR && v.t == JV_STR) return memmem(h.u.s->p, h.u.s->n, v.u.s->p, v.u.s->n) != NULL || !v.u.s->n;
        if (h.t == JV_LIST) {
            for (size_t i = 0; i < h.u.l->n; i++)
                if (jv_eq(h.u.l->v[i], v)) return true;
            return false;
        }
        if (h.t == JV_DICT) return jdict_getv(h.u.d, v) != NULL;
        if (h.t == JV_UNDEF) return false;
        jfail(c->job, line, "argument of type '%s' is not iterable", jv_typename(h));
    }
    /* ordering tests */
    jv a = v, b = args[0];
    int r;
    if (is_num(a) && is_num(b)) {
        double x = a.t == JV_FLOAT ? a.u.f : a.t == JV_INT ? (double)a.u.i : a.u.b;
        double y = b.t == JV_FLOAT ? b.u.f : b.t == JV_INT ? (double)b.u.i : b.u.b;
        r = x < y ? -1 : x > y;
    } else if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s->n < b.u.s->n ? a.u.s->n : b.u.s->n;
        r = memcmp(a.u.s->p, b.u.s->p, n);
        if (!r) r = a.u.s->n < b.u.s->n ? -1 : a.u.s->n > b.u.s->n;
    } else jfail(c->job, line, "test '%s': cannot compare '%s' and '%s'", name, jv_typename(a), jv_typename(b));
    if (IS("lt") || IS("<")) return r < 0;
    if (IS("le") || IS("<=")) return r <= 0;
    if (IS("gt") || IS(">")) return r > 0;
    if (IS("ge") || IS(">=")) return r >= 0;
    jfail(c->job, line, "unknown test '%s'", name);
#undef NEEDARG
#undef IS
}

/* ---- helpers ---- */
static jv kwarg(const char **kwn, jv *kwv, int nkw, const char *name, jv *args, int nargs, int pos, jv dflt) {
    for (int i = 0; i < nkw; i++)
        if (!strcmp(kwn[i], name)) return kwv[i];
    if (pos >= 0 && pos < nargs) return args[pos];
    return dflt;
}

static void check_kw(jctx *c, int line, const char *fname, const char **kwn, int nkw, const char *const *allowed) {
    for (int i = 0; i < nkw; i++) {
        int k;
        for (k = 0; allowed[k]; k++)
            if (!strcmp(allowed[k], kwn[i])) break;
        if (!allowed[k]) jfail(c->job, line, "%s() got an unexpected keyword argument '%s'", fname, kwn[i]);
    }
}

static jv as_str(jctx *c, jv v) { return jv_to_str(c->job, v); }

static int64_t as_int(jctx *c, int line, jv v, const char *what) {
    if (v.t == JV_INT) return v.u.i;
    if (v.t == JV_BOOL) return v.u.b;
    jfail(c->job, line, "%s must be an integer, not %s", what, jv_typename(v));
}

/* attribute lookup for selectattr/map: dotted path, dict keys or list indices */
static jv attr_path(jctx *c, jv v, jv attr) {
    if (attr.t == JV_INT) {
        if (v.t == JV_LIST && attr.u.i >= 0 && (size_t)attr.u.i < v.u.l->n) return v.u.l->v[attr.u.i];
        return jv_undef(NULL);
    }
    jv a = as_str(c, attr);
    const char *p = a.u.s->p, *end = p + a.u.s->n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        const char *e = dot ? dot : end;
        if (v.t == JV_DICT || v.t == JV_NS) {
            jv *x = jdict_get(v.u.d, p, (size_t)(e - p));
            v = x ? *x : jv_undef(jstrndup(c->job, p, (size_t)(e - p)));
        } else if (v.t == JV_LIST && e > p && p[0] >= '0' && p[0] <= '9') {
            size_t idx = (size_t)strtoul(p, NULL, 10);
            v = idx < v.u.l->n ? v.u.l->v[idx] : jv_undef(NULL);
        } else v = jv_undef(jstrndup(c->job, p, (size_t)(e - p)));
        if (!dot) break;
        p = dot + 1;
    }
    return v;
}

static jv select_reject(jctx *c, int line, jv v, jv *args, int nargs, bool attr_mode, bool select) {
    /* Jinja2: `if value:` guards the loop, so falsy inputs (None, '') give nothing */
    jlist *items = jv_truthy(v) ? jv_iterate(c, line, v) : jv_newlist(c->job, 0).u.l;
    jv r = jv_newlist(c->job, 0);
    r.tuple = GEN;
    int off = attr_mode ? 1 : 0;
    if (attr_mode && nargs < 1) jfail(c->job, line, "%s needs an attribute name", select ? "selectattr" : "rejectattr");
    const char *test = NULL;
    if (nargs > off) {
        jv t = args[off];
        if (t.t != JV_STR) jfail(c->job, line, "test name must be a string");
        test = jstrndup(c->job, t.u.s->p, t.u.s->n);
        if (!jtest_known(test)) jfail(c->job, line, "no test named '%s'", test);
    }
    for (size_t i = 0; i < items->n; i++) {
        jv x = items->v[i];
        jv probe = attr_mode ? attr_path(c, x, args[0]) : x;
        bool ok = test ? jtest_apply(c, line, test, probe, args + off + 1, nargs - off - 1) : jv_truthy(probe);
        if (ok == select) jlist_push(c->job, r.u.l, x);
    }
    return r;
}

static jv tojson_filter(jctx *c, int line, jv v, jv *args, int nargs, const char **kwn, jv *kwv, int nkw) {
    static const char *const allowed[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    check_kw(c, line, "tojson", kwn, nkw, allowed);
    jv ea = kwarg(kwn, kwv, nkw, "ensure_ascii", args, nargs, 0, jv_bool(false));
    jv ind = kwarg(kwn, kwv, nkw, "indent", args, nargs, 1, jv_none());
    jv sep = kwarg(kwn, kwv, nkw, "separators", args, nargs, 2, jv_none());
    jv sk = kwarg(kwn, kwv, nkw, "sort_keys", args, nargs, 3, jv_bool(false));
    if (jv_truthy(ea)) jfail(c->job, line, "tojson: ensure_ascii=True is not supported");
    if (sep.t != JV_NONE) jfail(c->job, line, "tojson: separators are not supported");
    if (jv_truthy(sk)) jfail(c->job, line, "tojson: sort_keys=True is not supported");
    int indent = -1;
    if (ind.t == JV_INT) indent = ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : (int)ind.u.i;
    else if (ind.t != JV_NONE) jfail(c->job, line, "tojson: indent must be an integer");
    jbuf b = {.limit = JINJA_MAX_OUTPUT};
    if (v.t == JV_LIST && v.tuple == GEN) jfail(c->job, line, "Object of type generator is not JSON serializable");
    jv_tojson_into(c->job, line, &b, v, indent, 0);
    jctx_charge(c, line, b.n / 64);
    return jbuf_take(c->job, &b);
}

static bool is_line_break(const char *s, size_t n, size_t i, size_t *len) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '\r') {
        *len = (i + 1 < n && s[i + 1] == '\n') ? 2 : 1;
        return true;
    }
    if (ch == '\n' || ch == '\v' || ch == '\f' || (ch >= 0x1c && ch <= 0x1e)) {
        *len = 1;
        return true;
    }
    if (ch == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] == 0x85) {
        *len = 2;
        return true;
    }
    if (ch == 0xE2 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
        ((unsigned char)s[i + 2] == 0xA8 || (unsigned char)s[i + 2] == 0xA9)) {
        *len = 3;
        return true;
    }
    return false;
}

static jv indent_filter(jctx *c, int line, jv v, jv *args, int nargs, const char **kwn, jv *kwv, int nkw) {
    static const char *const allowed[] = {"width", "first", "blank", NULL};
    check_kw(c, line, "indent", kwn, nkw, allowed);
    jv w = kwarg(kwn, kwv, nkw, "width", args, nargs, 0, jv_int(4));
    bool first = jv_truthy(kwarg(kwn, kwv, nkw, "first", args, nargs, 1, jv_bool(false)));
    bool blank = jv_truthy(kwarg(kwn, kwv, nkw, "blank", args, nargs, 2, jv_bool(false)));
    jv ind;
    if (w.t == JV_STR) ind = w;
    else {
        int64_t n = as_int(c, line, w, "indent width");
        if (n < 0) n = 0;
        if (n > 4096) jfail(c->job, line, "indent width too large");
        char *p = jalloc(c->job, (size_t)n + 1);
        memset(p, ' ', (size_t)n);
        ind = jv_str(c->job, p, (size_t)n);
    }
    jv s = as_str(c, v);
    /* lines = (s + "\n").splitlines(); rv = lines[0] + "\n" + "\n".join(indent + l if l or blank) */
    jbuf src = {0};
    jbuf_put(c->job, &src, s.u.s->p, s.u.s->n);
    jbuf_putc(c->job, &src, '\n');
    const char *p = src.p;
    size_t n = src.n;
    jbuf b = {.limit = JINJA_MAX_OUTPUT};
    if (first) jbuf_put(c->job, &b, ind.u.s->p, ind.u.s->n);
    size_t i = 0, ls = 0;
    bool first_line = true;
    while (i < n) {
        size_t bl = 0;
        if (!is_line_break(p, n, i, &bl)) {
            i++;
            continue;
        }
        if (!first_line) {
            jbuf_putc(c->job, &b, '\n');
            if (blank || i > ls) jbuf_put(c->job, &b, ind.u.s->p, ind.u.s->n);
        }
        jbuf_put(c->job, &b, p + ls, i - ls);
        first_line = false;
        i += bl;
        ls = i;
    }
    jctx_charge(c, line, b.n / 64);
    return b.p ? jbuf_take(c->job, &b) : jv_str(c->job, "", 0);
}

/* "%s %d %%" % args (the format filter); other conversions are rejected */
jv jstr_percent(jctx *c, int line, jv fmt, jv *args, int nargs) {
    jbuf b = {.limit = JINJA_MAX_OUTPUT};
    int k = 0;
    for (size_t i = 0; i < fmt.u.s->n; i++) {
        char ch = fmt.u.s->p[i];
        if (ch != '%') {
            jbuf_putc(c->job, &b, ch);
            continue;
        }
        if (++i >= fmt.u.s->n) jfail(c->job, line, "format: incomplete format");
        ch = fmt.u.s->p[i];
        if (ch == '%') {
            jbuf_putc(c->job, &b, '%');
            continue;
        }
        if (k >= nargs) jfail(c->job, line, "format: not enough arguments for format string");
        jv a = args[k++];
        if (ch == 's') jv_str_into(c->job, &b, a);
        else if (ch == 'r') jv_repr_into(c->job, &b, a);
        else if ((ch == 'd' || ch == 'i') && (a.t == JV_INT || a.t == JV_BOOL || a.t == JV_FLOAT)) {
            char tmp[32];
            snprintf(tmp, sizeof tmp, "%lld",
                     a.t == JV_INT    ? (long long)a.u.i
                     : a.t == JV_BOOL ? (long long)a.u.b
                                      : (long long)a.u.f);
            jbuf_puts(c->job, &b, tmp);
        } else jfail(c->job, line, "format: unsupported conversion '%%%c'", ch);
    }
    if (k < nargs) jfail(c->job, line, "format: not all arguments converted during string formatting");
    return b.p ? jbuf_take(c->job, &b) : jv_str(c->job, "", 0);
}

/* sort key: attribute path, lower-cased strings unless case_sensitive */
static jv sort_key(jctx *c, jv x, jv attr, bool cs) {
    if (attr.t != JV_NONE && attr.t != JV_UNDEF) x = attr_path(c, x, attr);
    if (!cs && x.t == JV_STR) x = jstr_case(c->job, x, JCASE_LOWER);
    return x;
}

/* stable merge sort of items by keys (parallel arrays) */
static void msort(jctx *c, int line, jv *items, jv *keys, size_t n, bool rev, jv *tmpi, jv *tmpk) {
    if (n < 2) return;
    size_t h = n / 2;
    msort(c, line, items, keys, h, rev, tmpi, tmpk);
    msort(c, line, items + h, keys + h, n - h, rev, tmpi, tmpk);
    size_t i = 0, k = h, o = 0;
    while (i < h || k < n) {
        bool take_left;
        if (i >= h) take_left = false;
        else if (k >= n) take_left = true;
        else {
            int r = jv_compare(c, line, keys[k], keys[i]);
            take_left = rev ? r <= 0 : r >= 0; /* right < left (or > when reversed) takes right */
        }
        size_t from = take_left ? i++ : k++;
        tmpi[o] = items[from];
        tmpk[o++] = keys[from];
    }
    memcpy(items, tmpi, n * sizeof *items);
    memcpy(keys, tmpk, n * sizeof *keys);
    jctx_charge(c, line, n);
}

static jv sorted(jctx *c, int line, jlist *l, jv attr, bool cs, bool rev, int by_pair_elem) {
    size_t n = l->n;
    jv r = jv_newlist(c->job, n);
    jv *keys = jalloc(c->job, (n + 1) * sizeof(jv)), *ti = jalloc(c->job, (n + 1) * sizeof(jv)),
       *tk = jalloc(c->job, (n + 1) * sizeof(jv));
    for (size_t i = 0; i < n; i++) {
        jv x = l->v[i];
        jlist_push(c->job, r.u.l, x);
        if (by_pair_elem >= 0) x = x.u.l->v[by_pair_elem];
        keys[i] = sort_key(c, x, attr, cs);
    }
    msort(c, line, r.u.l->v, keys, n, rev, ti, tk);
    return r;
}

jv jfilter_apply(jctx *c, jscope *s, int line, const char *name, jv v, jv *args, int nargs, const char **kwn, jv *kwv,
                 int nkw) {
    jjob *j = c->job;
    (void)s;
#define IS(x) (!strcmp(name, x))
    jctx_charge(c, line, 1);
    if (IS("tojson")) return tojson_filter(c, line, v, args, nargs, kwn, kwv, nkw);
    if (IS("safe")) {
        if (v.t != JV_STR) v = as_str(c, v);
        v.tuple = JV_MARKUP;
        return v;
    }
    if (IS("string")) return as_str(c, v);
    if (IS("trim")) {
        jv chars = kwarg(kwn, kwv, nkw, "chars", args, nargs, 0, jv_none());
        return jstr_strip(j, as_str(c, v), chars.t == JV_STR ? chars.u.s : NULL, true, true);
    }
    if (IS("upper")) return jstr_case(j, as_str(c, v), JCASE_UPPER);
    if (IS("lower")) return jstr_case(j, as_str(c, v), JCASE_LOWER);
    if (IS("capitalize")) return jstr_case(j, as_str(c, v), JCASE_CAPITALIZE);
    if (IS("title")) return jstr_case(j, as_str(c, v), JCASE_JTITLE);
    if (IS("length") || IS("count")) return jv_int(jv_length(c, line, v));
    if (IS("default") || IS("d")) {
        jv dv = kwarg(kwn, kwv, nkw, "default_value", args, nargs, 0, jv_str(j, "", 0));
        bool boolean = jv_truthy(kwarg(kwn, kwv, nkw, "boolean", args, nargs, 1, jv_bool(false)));
        if (v.t == JV_UNDEF || (boolean && !jv_truthy(v))) return dv;
        return v;
    }
    if (IS("join")) {
        jv sep = kwarg(kwn, kwv, nkw, "d", args, nargs, 0, jv_str(j, "", 0));
        jv attr = kwarg(kwn, kwv, nkw, "attribute", args, nargs, 1, jv_none());
        jlist *items = jv_iterate(c, line, v);
        jbuf b = {.limit = JINJA_MAX_OUTPUT};
        sep = as_str(c, sep);
        for (size_t i = 0; i < items->n; i++) {
            if (i) jbuf_put(j, &b, sep.u.s->p, sep.u.s->n);
            jv x = items->v[i];
            if (attr.t != JV_NONE) x = attr_path(c, x, attr);
            jv_str_into(j, &b, x);
        }
        jctx_charge(c, line, b.n / 64);
        return b.p ? jbuf_take(j, &b) : jv_str(j, "", 0);
    }
    if (IS("first")) {
        jlist *l = jv_iterate(c, line, v);
        return l->n ? l->v[0] : jv_undef(NULL);
    }
    if (IS("last")) {
        if (v.t == JV_LIST && v.tuple == GEN) jfail(j, line, "'generator' object is not reversible");
        if (v.t == JV_DICT) jfail(j, line, "'dict' object is not reversible");
        jlist *l = jv_iterate(c, line, v);
        return l->n ? l->v[l->n - 1] : jv_undef(NULL);
    }
    if (IS("list")) {
        jlist *l = jv_iterate(c, line, v);
        jv r = jv_newlist(j, l->n);
        for (size_t i = 0; i < l->n; i++) jlist_push(j, r.u.l, l->v[i]);
        return r;
    }
    if (IS("reverse")) {
        if (v.t == JV_STR) {
            jlist *l = jv_iterate(c, line, v);
            jbuf b = {0};
            for (size_t i = l->n; i-- > 0;) jbuf_put(j, &b, l->v[i].u.s->p, l->v[i].u.s->n);
            return b.p ? jbuf_take(j, &b) : jv_str(j, "", 0);
        }
        jlist *l = jv_iterate(c, line, v);
        jv r = jv_newlist(j, l->n);
        r.tuple = GEN;
        for (size_t i = l->n; i-- > 0;) jlist_push(j, r.u.l, l->v[i]);
        return r;
    }
    if (IS("selectattr")) return select_reject(c, line, v, args, nargs, true, true);
    if (IS("rejectattr")) return select_reject(c, line, v, args, nargs, true, false);
    if (IS("select")) return select_reject(c, line, v, args, nargs, false, true);
    if (IS("reject")) return select_reject(c, line, v, args, nargs, false, false);
    if (IS("map")) {
        jlist *l = jv_truthy(v) ? jv_iterate(c, line, v) : jv_newlist(j, 0).u.l;
        jv r = jv_newlist(j, l->n);
        r.tuple = GEN;
        jv attr = kwarg(kwn, kwv, nkw, "attribute", NULL, 0, -1, jv_undef(NULL));
        if (attr.t != JV_UNDEF) {
            jv dflt = kwarg(kwn, kwv, nkw, "default", NULL, 0, -1, jv_undef(NULL));
            for (size_t i = 0; i < l->n; i++) {
                jv x = attr_path(c, l->v[i], attr);
                if (x.t == JV_UNDEF && dflt.t != JV_UNDEF) x = dflt;
                jlist_push(j, r.u.l, x);
            }
            return r;
        }
        if (nargs < 1 || args[0].t != JV_STR) jfail(j, line, "map: expected a filter name or attribute=");
        const char *fname = jstrndup(j, args[0].u.s->p, args[0].u.s->n);
        if (!jfilter_known(fname)) jfail(j, line, "no filter named '%s'", fname);
        for (size_t i = 0; i < l->n; i++)
            jlist_push(j, r.u.l, jfilter_apply(c, s, line, fname, l->v[i], args + 1, nargs - 1, kwn, kwv, nkw));
        return r;
    }
    if (IS("unique")) {
        bool cs = jv_truthy(kwarg(kwn, kwv, nkw, "case_sensitive", args, nargs, 0, jv_bool(false)));
        jv attr = kwarg(kwn, kwv, nkw, "attribute", args, nargs, 1, jv_none());
        jlist *l = jv_iterate(c, line, v);
        jv r = jv_newlist(j, 0), seen = jv_newlist(j, 0);
        r.tuple = GEN;
        for (size_t i = 0; i < l->n; i++) {
            jv key = attr.t != JV_NONE ? attr_path(c, l->v[i], attr) : l->v[i];
            if (!cs && key.t == JV_STR) key = jstr_case(j, key, JCASE_LOWER);
            bool dup = false;
            for (size_t k = 0; k < seen.u.l->n && !dup; k++) dup = jv_eq(seen.u.l->v[k], key);
            jctx_charge(c, line, seen.u.l->n);
            if (dup) continue;
            jlist_push(j, seen.u.l, key);
            jlist_push(j, r.u.l, l->v[i]);
        }
        return r;
    }
    if (IS("items")) {
        if (v.t == JV_UNDEF) {
            jv r = jv_newlist(j, 0);
            r.tuple = GEN;
            return r;
        }
        if (v.t != JV_DICT) jfail(j, line, "Can only get item pairs from a mapping.");
        jv r = jv_newlist(j, v.u.d->n);
        r.tuple = GEN;
        for (size_t i = 0; i < v.u.d->n; i++) {
            jv pair = jv_newlist(j, 2);
            pair.tuple = 1;
            jlist_push(j, pair.u.l, v.u.d->k[i]);
            jlist_push(j, pair.u.l, v.u.d->v[i]);
            jlist_push(j, r.u.l, pair);
        }
        jctx_charge(c, line, v.u.d->n);
        return r;
    }
    if (IS("sort")) {
        bool rev = jv_truthy(kwarg(kwn, kwv, nkw, "reverse", args, nargs, 0, jv_bool(false)));
        bool cs = jv_truthy(kwarg(kwn, kwv, nkw, "case_sensitive", args, nargs, 1, jv_bool(false)));
        jv attr = kwarg(kwn, kwv, nkw, "attribute", args, nargs, 2, jv_none());
        return sorted(c, line, jv_iterate(c, line, v), attr, cs, rev, -1);
    }
    if (IS("dictsort")) {
        bool cs = jv_truthy(kwarg(kwn, kwv, nkw, "case_sensitive", args, nargs, 0, jv_bool(false)));
        jv by = kwarg(kwn, kwv, nkw, "by", args, nargs, 1, jv_str(j, "key", 3));
        bool rev = jv_truthy(kwarg(kwn, kwv, nkw, "reverse", args, nargs, 2, jv_bool(false)));
        if (v.t != JV_DICT) jfail(j, line, "dictsort: value must be a mapping");
        int pos = jv_is_str(by, "key") ? 0 : jv_is_str(by, "value") ? 1 : -1;
        if (pos < 0) jfail(j, line, "You can only sort by either \"key\" or \"value\"");
        jv pairs = jv_newlist(j, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) {
            jv pair = jv_newlist(j, 2);
            pair.tuple = 1;
            jlist_push(j, pair.u.l, v.u.d->k[i]);
            jlist_push(j, pair.u.l, v.u.d->v[i]);
            jlist_push(j, pairs.u.l, pair);
        }
        return sorted(c, line, pairs.u.l, jv_none(), cs, rev, pos);
    }
    if (IS("min") || IS("max")) {
        bool cs = jv_truthy(kwarg(kwn, kwv, nkw, "case_sensitive", args, nargs, 0, jv_bool(false)));
        jv attr = kwarg(kwn, kwv, nkw, "attribute", args, nargs, 1, jv_none());
        jlist *l = jv_iterate(c, line, v);
        if (!l->n) return jv_undef("no items");
        size_t best = 0;
        jv bk = sort_key(c, l->v[0], attr, cs);
        for (size_t i = 1; i < l->n; i++) {
            jv k = sort_key(c, l->v[i], attr, cs);
            int r = jv_compare(c, line, k, bk);
            if (IS("min") ? r < 0 : r > 0) {
                best = i;
                bk = k;
            }
        }
        return l->v[best];
    }
    if (IS("format")) return jstr_percent(c, line, as_str(c, v), args, nargs);
    if (IS("replace")) {
        if (nargs < 2) jfail(j, line, "replace needs old and new strings");
        jv cnt = kwarg(kwn, kwv, nkw, "count", args, nargs, 2, jv_none());
        return jstr_replace(c, line, as_str(c, v), as_str(c, args[0]), as_str(c, args[1]),
                            cnt.t == JV_NONE ? -1 : as_int(c, line, cnt, "count"));
    }
    if (IS("indent")) return indent_filter(c, line, v, args, nargs, kwn, kwv, nkw);
    if (IS("int")) {
        jv dflt = kwarg(kwn, kwv, nkw, "default", args, nargs, 0, jv_int(0));
        if (v.t == JV_INT) return v;
        if (v.t == JV_BOOL) return jv_int(v.u.b);
        if (v.t == JV_FLOAT) return isfinite(v.u.f) && fabs(v.u.f) < 9.2e18 ? jv_int((int64_t)v.u.f) : dflt;
        if (v.t == JV_STR) {
            jv t = jstr_strip(j, v, NULL, true, true);
            char buf[64];
            if (t.u.s->n == 0 || t.u.s->n >= sizeof buf) return dflt;
            memcpy(buf, t.u.s->p, t.u.s->n);
            buf[t.u.s->n] = 0;
            char *end;
            long long x = strtoll(buf, &end, 10);
            if (*end == 0) return jv_int(x);
            double f = strtod(buf, &end);
            if (*end == 0 && isfinite(f) && fabs(f) < 9.2e18) return jv_int((int64_t)f);
        }
        return dflt;
    }
    if (IS("float")) {
        jv dflt = kwarg(kwn, kwv, nkw, "default", args, nargs, 0, jv_float(0.0));
        if (v.t == JV_FLOAT) return v;
        if (v.t == JV_INT) return jv_float((double)v.u.i);
        if (v.t == JV_BOOL) return jv_float(v.u.b);
        if (v.t == JV_STR) {
            jv t = jstr_strip(j, v, NULL, true, true);
            char buf[64];
            if (t.u.s->n == 0 || t.u.s->n >= sizeof buf) return dflt;
            memcpy(buf, t.u.s->p, t.u.s->n);
            buf[t.u.s->n] = 0;
            char *end;
            double f = strtod(buf, &end);
            if (*end == 0) return jv_float(f);
        }
        return dflt;
    }
    if (IS("abs")) {
        if (v.t == JV_INT) {
            if (v.u.i == INT64_MIN) jfail(j, line, "integer overflow");
            return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        }
        if (v.t == JV_FLOAT) return jv_float(fabs(v.u.f));
        if (v.t == JV_BOOL) return jv_int(v.u.b);
        jfail(j, line, "bad operand type for abs(): '%s'", jv_typename(v));
    }
    if (IS("sum")) {
        jv attr = kwarg(kwn, kwv, nkw, "attribute", args, nargs, 0, jv_none());
        jv start = kwarg(kwn, kwv, nkw, "start", args, nargs, 1, jv_int(0));
        jlist *l = jv_iterate(c, line, v);
        jv acc = start;
        for (size_t i = 0; i < l->n; i++) {
            jv x = attr.t != JV_NONE ? attr_path(c, l->v[i], attr) : l->v[i];
            if (!is_num(acc) || !is_num(x))
                jfail(j, line, "sum: unsupported operand types '%s' and '%s'", jv_typename(acc), jv_typename(x));
            if (acc.t == JV_FLOAT || x.t == JV_FLOAT)
                acc = jv_float((acc.t == JV_FLOAT ? acc.u.f
                                : acc.t == JV_INT ? (double)acc.u.i
                                                  : acc.u.b) +
                               (x.t == JV_FLOAT ? x.u.f
                                : x.t == JV_INT ? (double)x.u.i
                                                : x.u.b));
            else {
                int64_t r;
                if (__builtin_add_overflow(acc.t == JV_INT ? acc.u.i : acc.u.b, x.t == JV_INT ? x.u.i : x.u.b, &r))
                    jfail(j, line, "integer overflow");
                acc = jv_int(r);
            }
        }
        return acc;
    }
    if (IS("escape") || IS("e")) {
        if (v.t == JV_STR && v.tuple == JV_MARKUP) return v;
        jv r = jv_html_escape(j, as_str(c, v));
        r.tuple = JV_MARKUP;
        return r;
    }
    jfail(j, line, "unknown filter '%s'", name);
#undef IS
}

/* ---- methods ---- */
bool jmethod_call(jctx *c, int line, jv obj, const char *name, jv *args, int nargs, const char **kwn, jv *kwv, int nkw,
                  jv *out) {
    jjob *j = c->job;
#define IS(x) (!strcmp(name, x))
    if (obj.t == JV_STR) {
        if (IS("strip") || IS("lstrip") || IS("rstrip")) {
            jv ch = nargs ? args[0] : jv_none();
            if (ch.t != JV_NONE && ch.t != JV_STR) jfail(j, line, "%s arg must be None or str", name);
            *out = jstr_strip(j, obj, ch.t == JV_STR ? ch.u.s : NULL, name[0] != 'r', name[0] != 'l');
            return true;
        }
        if (IS("split")) {
            jv sep = kwarg(kwn, kwv, nkw, "sep", args, nargs, 0, jv_none());
            jv mx = kwarg(kwn, kwv, nkw, "maxsplit", args, nargs, 1, jv_int(-1));
            *out = jstr_split(c, line, obj, sep, as_int(c, line, mx, "maxsplit"));
            return true;
        }
        if (IS("startswith") || IS("endswith")) {
            if (nargs < 1) jfail(j, line, "%s() takes at least 1 argument", name);
            *out = jv_bool(jstr_affix(c, line, obj, args[0], name[0] == 's'));
            return true;
        }
        if (IS("replace")) {
            if (nargs < 2 || args[0].t != JV_STR || args[1].t != JV_STR) jfail(j, line, "replace() needs two strings");
            *out = jstr_replace(c, line, obj, args[0], args[1], nargs > 2 ? as_int(c, line, args[2], "count") : -1);
            return true;
        }
        if (IS("upper")) {
            *out = jstr_case(j, obj, JCASE_UPPER);
            return true;
        }
        if (IS("lower")) {
            *out = jstr_case(j, obj, JCASE_LOWER);
            return true;
        }
        if (IS("title")) {
            *out = jstr_case(j, obj, JCASE_PYTITLE);
            return true;
        }
        if (IS("capitalize")) {
            *out = jstr_case(j, obj, JCASE_CAPITALIZE);
            return true;
        }
        if (IS("format")) {
            *out = jstr_format(c, line, obj, args, nargs, kwn, kwv, nkw);
            return true;
        }
        if (IS("find") || IS("count")) {
            if (nargs < 1 || args[0].t != JV_STR) jfail(j, line, "%s() needs a string", name);
            jstr *h = obj.u.s, *nd = args[0].u.s;
            if (IS("find")) {
                const char *p = nd->n ? memmem(h->p, h->n, nd->p, nd->n) : h->p;
                int64_t cp = -1;
                if (p) {
                    cp = 0;
                    for (const char *q = h->p; q < p; q++) cp += ((unsigned char)*q & 0xC0) != 0x80;
                }
                *out = jv_int(cp);
            } else {
                int64_t n = 0;
                if (!nd->n) n = jv_length(c, line, obj) + 1;
                else
                    for (size_t i = 0; i + nd->n <= h->n;) {
                        const char *p = memmem(h->p + i, h->n - i, nd->p, nd->n);
                        if (!p) break;
                        n++;
                        i = (size_t)(p - h->p) + nd->n;
                    }
                *out = jv_int(n);
            }
            return true;
        }
        if (IS("join")) {
            if (nargs < 1) jfail(j, line, "join() takes exactly one argument");
            jlist *l = jv_iterate(c, line, args[0]);
            jbuf b = {.limit = JINJA_MAX_OUTPUT};
            for (size_t i = 0; i < l->n; i++) {
                if (l->v[i].t != JV_STR)
                    jfail(j, line, "sequence item %zu: expected str instance, %s found", i, jv_typename(l->v[i]));
                if (i) jbuf_put(j, &b, obj.u.s->p, obj.u.s->n);
                jbuf_put(j, &b, l->v[i].u.s->p, l->v[i].u.s->n);
            }
            *out = b.p ? jbuf_take(j, &b) : jv_str(j, "", 0);
            return true;
        }
        return false;
    }
    if (obj.t == JV_DICT) {
        if (IS("items") || IS("keys") || IS("values")) {
            jv r = jv_newlist(j, obj.u.d->n);
            for (size_t i = 0; i < obj.u.d->n; i++) {
                if (name[0] == 'k') jlist_push(j, r.u.l, obj.u.d->k[i]);
                else if (name[0] == 'v') jlist_push(j, r.u.l, obj.u.d->v[i]);
                else {
                    jv pair = jv_newlist(j, 2);
                    pair.tuple = 1;
                    jlist_push(j, pair.u.l, obj.u.d->k[i]);
                    jlist_push(j, pair.u.l, obj.u.d->v[i]);
                    jlist_push(j, r.u.l, pair);
                }
            }
            jctx_charge(c, line, obj.u.d->n);
            *out = r;
            return true;
        }
        if (IS("get")) {
            if (nargs < 1) jfail(j, line, "get expected at least 1 argument");
            jv *x = jdict_getv(obj.u.d, args[0]);
            *out = x ? *x : nargs > 1 ? args[1] : jv_none();
            return true;
        }
        if (IS("update") || IS("pop") || IS("setdefault") || IS("clear") || IS("popitem"))
            jfail(j, line, "access to attribute '%s' of 'dict' object is unsafe (immutable sandbox)", name);
        return false;
    }
    if (obj.t == JV_LOOP && IS("cycle")) {
        if (nargs < 1) jfail(j, line, "no items for cycling given");
        *out = args[obj.u.loop->i % nargs];
        return true;
    }
    if (obj.t == JV_LIST &&
        (IS("append") || IS("pop") || IS("insert") || IS("extend") || IS("remove") || IS("clear") || IS("sort")))
        jfail(j, line, "access to attribute '%s' of '%s' object is unsafe (immutable sandbox)", name, jv_typename(obj));
    return false;
#undef IS
}
