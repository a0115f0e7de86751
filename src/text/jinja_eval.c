/* jinja_eval.c - executes the AST: scopes, statements, expressions, macros,
 * builtin globals (raise_exception, strftime_now, namespace, range, dict).
 *
 * Scoping follows Jinja2: each for-loop iteration and each macro call gets a
 * fresh scope whose parent is the enclosing one (sets inside do not leak out
 * and do not carry to the next iteration); if-blocks share their scope;
 * macros resolve free names through the scope they were defined in.
 * Undefined follows jinja2.Undefined: prints as "", is false, iterates as
 * empty, has length 0, and raises on attribute access, calls and arithmetic.
 * Every evaluation step is charged to the work budget and nesting is bounded
 * (JINJA_MAX_DEPTH), so hostile templates terminate with an error. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "text/jinja.h"

#define MAX_EVAL_DEPTH (JINJA_MAX_DEPTH * 3)

enum { FLOW_NONE, FLOW_BREAK, FLOW_CONTINUE };

void jctx_charge(jctx *c, int line, uint64_t n) {
    c->job->work += n;
    if (c->job->work > JINJA_MAX_WORK) jfail(c->job, line, "evaluation step limit exceeded");
}

/* ---- scopes ---- */
jscope *jscope_new(jjob *j, jscope *parent) {
    jscope *s = jalloc(j, sizeof *s);
    s->parent = parent;
    return s;
}

void jscope_set(jjob *j, jscope *s, const char *name, jv v) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) {
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 8;
        const char **nn = jalloc(j, (size_t)nc * sizeof *nn);
        jv *nv = jalloc(j, (size_t)nc * sizeof *nv);
        if (s->n) {
            memcpy(nn, s->names, (size_t)s->n * sizeof *nn);
            memcpy(nv, s->vals, (size_t)s->n * sizeof *nv);
        }
        s->names = nn;
        s->vals = nv;
        s->cap = nc;
    }
    s->names[s->n] = name;
    s->vals[s->n++] = v;
}

jv jscope_lookup(jscope *s, const char *name) {
    for (; s; s = s->parent)
        for (int i = s->n - 1; i >= 0; i--)
            if (!strcmp(s->names[i], name)) return s->vals[i];
    static const struct {
        const char *n;
        int id;
    } builtins[] = {
        {"raise_exception", JF_RAISE},
        {"strftime_now", JF_STRFTIME},
        {"namespace", JF_NAMESPACE},
        {"range", JF_RANGE},
        {"dict", JF_DICT},
    };
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (!strcmp(builtins[i].n, name)) {
            jv v = {.t = JV_FUNC, .func = (uint8_t)builtins[i].id};
            return v;
        }
    return jv_undef(name);
}

/* undef_name starting with '\1' is a full message (e.g. "list object has no element 3") */
static jv undef_msg(jctx *c, const char *fmt, const char *a, int64_t i) {
    char buf[200];
    buf[0] = 1;
    snprintf(buf + 1, sizeof buf - 1, fmt, a ? a : "", (long long)i);
    return jv_undef(jstrndup(c->job, buf, strlen(buf)));
}

static _Noreturn void undefined_error(jctx *c, int line, jv v) { jfail_undefined(c->job, line, v); }

/* ---- output ---- */
static void emit(jctx *c, jv v) { jv_str_into(c->job, c->out, v); }

/* ---- attribute / item access ---- */
static size_t u8len(unsigned char b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

/* code point start offsets of s (n+1 entries incl. end); returns count */
static size_t cp_index(jctx *c, jstr *s, size_t **offs) {
    size_t cnt = 0;
    for (size_t i = 0; i < s->n; i += u8len((unsigned char)s->p[i])) cnt++;
    size_t *o = jalloc(c->job, (cnt + 1) * sizeof *o);
    size_t k = 0;
    for (size_t i = 0; i < s->n; i += u8len((unsigned char)s->p[i])) o[k++] = i;
    o[cnt] = s->n;
    *offs = o;
    jctx_charge(c, 0, cnt / 16);
    return cnt;
}

static jv loop_attr(jctx *c, jloop *l, const char *name) {
    (void)c;
    int64_t i = l->i, n = l->n;
    if (!strcmp(name, "index")) return jv_int(i + 1);
    if (!strcmp(name, "index0")) return jv_int(i);
    if (!strcmp(name, "revindex")) return jv_int(n - i);
    if (!strcmp(name, "revindex0")) return jv_int(n - i - 1);
    if (!strcmp(name, "first")) return jv_bool(i == 0);
    if (!strcmp(name, "last")) return jv_bool(i == n - 1);
    if (!strcmp(name, "length")) return jv_int(n);
    if (!strcmp(name, "depth")) return jv_int(l->depth);
    if (!strcmp(name, "depth0")) return jv_int(l->depth - 1);
    if (!strcmp(name, "previtem")) return i > 0 ? l->items[i - 1] : jv_undef("previtem");
    if (!strcmp(name, "nextitem")) return i + 1 < n ? l->items[i + 1] : jv_undef("nextitem");
    return jv_undef(name);
}

static jv bound_method(const char *name) {
    jv v = {.t = JV_FUNC, .func = JF_METHOD};
    v.u.undef_name = name;
    return v;
}

static jv get_attr(jctx *c, int line, jv obj, const char *name) {
    switch (obj.t) {
    case JV_UNDEF: undefined_error(c, line, obj);
    case JV_DICT: {
        /* Jinja2 tries getattr() before obj[name]: dict methods win over keys,
         * and the sandbox hides the mutating ones */
        static const char *const methods[] = {"items", "keys", "values", "get", "copy", NULL};
        static const char *const unsafe[] = {"pop", "popitem", "update", "clear", "setdefault", NULL};
        for (int i = 0; methods[i]; i++)
            if (!strcmp(name, methods[i])) return bound_method(name);
        for (int i = 0; unsafe[i]; i++)
            if (!strcmp(name, unsafe[i]))
                return undef_msg(c, "access to attribute '%.100s' of 'dict' object is unsafe", name, 0);
    }
    /* fallthrough */
    case JV_NS: {
        jv *v = jdict_get(obj.u.d, name, strlen(name));
        return v ? *v : undef_msg(c, "'dict object' has no attribute '%.100s'", name, 0);
    }
    case JV_LOOP: return loop_attr(c, obj.u.loop, name);
    case JV_STR: {
        static const char *const methods[] = {"strip",   "lstrip", "rstrip", "split", "startswith", "endswith",
                                              "replace", "upper",  "lower",  "title", "capitalize", "format",
                                              "find",    "count",  "join",   NULL};
        for (int i = 0; methods[i]; i++)
            if (!strcmp(name, methods[i])) return bound_method(name);
        return jv_undef(name);
    }
    default: return jv_undef(name);
    }
}

static jv get_item(jctx *c, int line, jv obj, jv key) {
    switch (obj.t) {
    case JV_UNDEF: undefined_error(c, line, obj);
    case JV_DICT:
    case JV_NS: {
        jv *v = jdict_getv(obj.u.d, key);
        if (v) return *v;
        if (key.t == JV_STR)
            return undef_msg(c, "'dict object' has no attribute '%.100s'", jstrndup(c->job, key.u.s->p, key.u.s->n), 0);
        return jv_undef(NULL);
    }
    case JV_LIST:
        if (obj.tuple == 2) jfail(c->job, line, "'generator' object is not subscriptable");
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t i = key.t == JV_INT ? key.u.i : key.u.b, n = (int64_t)obj.u.l->n;
            if (i < 0) i += n;
            if (i < 0 || i >= n)
                return undef_msg(c, "list object has no element %s%lld", NULL, key.t == JV_INT ? key.u.i : key.u.b);
            return obj.u.l->v[i];
        }
        return jv_undef(NULL);
    case JV_STR:
        if (key.t == JV_INT) {
            size_t *o;
            int64_t n = (int64_t)cp_index(c, obj.u.s, &o), i = key.u.i;
            if (i < 0) i += n;
            if (i < 0 || i >= n) return jv_undef(NULL);
            return jv_str(c->job, obj.u.s->p + o[i], o[i + 1] - o[i]);
        }
        return jv_undef(NULL);
    case JV_LOOP:
        if (key.t == JV_STR) return loop_attr(c, obj.u.loop, jstrndup(c->job, key.u.s->p, key.u.s->n));
        return jv_undef(NULL);
    default: return jv_undef(NULL);
    }
}

static int64_t slice_arg(jctx *c, int line, jv v, bool *given) {
    *given = false;
    if (v.t == JV_NONE || v.t == JV_UNDEF) return 0;
    if (v.t != JV_INT && v.t != JV_BOOL) jfail(c->job, line, "slice indices must be integers or None");
    *given = true;
    return v.t == JV_INT ? v.u.i : v.u.b;
}

static jv do_slice(jctx *c, int line, jv obj, jv a, jv b, jv st) {
    bool ga, gb, gs;
    int64_t start = slice_arg(c, line, a, &ga), stop = slice_arg(c, line, b, &gb), step = slice_arg(c, line, st, &gs);
    if (!gs) step = 1;
    if (step == 0) jfail(c->job, line, "slice step cannot be zero");
    int64_t n;
    size_t *offs = NULL;
    if (obj.t == JV_LIST && obj.tuple == 2) jfail(c->job, line, "'generator' object is not subscriptable");
    if (obj.t == JV_LIST) n = (int64_t)obj.u.l->n;
    else if (obj.t == JV_STR) n = (int64_t)cp_index(c, obj.u.s, &offs);
    else if (obj.t == JV_UNDEF) undefined_error(c, line, obj);
    else jfail(c->job, line, "'%s' object is not subscriptable", jv_typename(obj));
    /* CPython PySlice_AdjustIndices */
    if (!ga) start = step < 0 ? n - 1 : 0;
    else if (start < 0) {
        start += n;
        if (start < 0) start = step < 0 ? -1 : 0;
    } else if (start >= n) start = step < 0 ? n - 1 : n;
    if (!gb) stop = step < 0 ? -1 : n;
    else if (stop < 0) {
        stop += n;
        if (stop < 0) stop = step < 0 ? -1 : 0;
    } else if (stop >= n) stop = step < 0 ? n - 1 : n;
    jctx_charge(c, line, (uint64_t)n);
    if (obj.t == JV_LIST) {
        jv r = jv_newlist(c->job, 0);
        r.tuple = obj.tuple;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) jlist_push(c->job, r.u.l, obj.u.l->v[i]);
        return r;
    }
    if (step == 1) return jv_str(c->job, obj.u.s->p + offs[start], start < stop ? offs[stop] - offs[start] : 0);
    jbuf bb = {0};
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        jbuf_put(c->job, &bb, obj.u.s->p + offs[i], offs[i + 1] - offs[i]);
    if (!bb.p) return jv_str(c->job, "", 0);
    return jbuf_take(c->job, &bb);
}

/* ---- arithmetic ---- */
static bool isnum(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double fnum(jv v) { return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : (double)v.u.b; }
static int64_t inum(jv v) { return v.t == JV_INT ? v.u.i : (int64_t)v.u.b; }

static const char *opname(int op) {
    switch (op) {
    case OP_ADD: return "+";
    case OP_SUB: return "-";
    case OP_MUL: return "*";
    case OP_DIV: return "/";
    case OP_FLOORDIV: return "//";
    case OP_MOD: return "%";
    case OP_POW: return "**";
    case OP_LT: return "<";
    case OP_LE: return "<=";
    case OP_GT: return ">";
    case OP_GE: return ">=";
    default: return "?";
    }
}

static jv repeat(jctx *c, int line, jv seq, int64_t times) {
    if (times < 0) times = 0;
    if (seq.t == JV_STR) {
        size_t n = seq.u.s->n;
        if (n && (uint64_t)times > JINJA_MAX_OUTPUT / n) jfail(c->job, line, "string too long");
        size_t total = n * (size_t)times;
        jctx_charge(c, line, total / 16);
        char *p = jalloc(c->job, total + 1);
        if (total) {
            memcpy(p, seq.u.s->p, n);
            for (size_t have = n; have < total;) { /* doubling copies */
                size_t k = have < total - have ? have : total - have;
                memcpy(p + have, p, k);
                have += k;
            }
        }
        return jv_str(c->job, p, total);
    }
    if ((uint64_t)times > JINJA_MAX_WORK) jfail(c->job, line, "list too long");
    jctx_charge(c, line, (uint64_t)times * (seq.u.l->n + 1));
    jv r = jv_newlist(c->job, 0);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.u.l->n; k++) jlist_push(c->job, r.u.l, seq.u.l->v[k]);
    return r;
}

static jv arith(jctx *c, int line, int op, jv a, jv b) {
    if (a.t == JV_UNDEF) undefined_error(c, line, a);
    if (b.t == JV_UNDEF) undefined_error(c, line, b);
    if (isnum(a) && isnum(b)) {
        bool fl = a.t == JV_FLOAT || b.t == JV_FLOAT;
        if (op == OP_DIV) {
            if (fnum(b) == 0) jfail(c->job, line, "division by zero");
            return jv_float(fnum(a) / fnum(b));
        }
        if (fl) {
            double x = fnum(a), y = fnum(b);
            switch (op) {
            case OP_ADD: return jv_float(x + y);
            case OP_SUB: return jv_float(x - y);
            case OP_MUL: return jv_float(x * y);
            case OP_FLOORDIV:
                if (y == 0) jfail(c->job, line, "float floor division by zero");
                return jv_float(floor(x / y));
            case OP_MOD: {
                if (y == 0) jfail(c->job, line, "float modulo");
                double m = fmod(x, y);
                if (m != 0 && ((m < 0) != (y < 0))) m += y;
                return jv_float(m);
            }
            case OP_POW: return jv_float(pow(x, y));
            }
        }
        int64_t x = inum(a), y = inum(b), r;
        switch (op) {
        case OP_ADD:
            if (__builtin_add_overflow(x, y, &r)) goto ovf;
            return jv_int(r);
        case OP_SUB:
            if (__builtin_sub_overflow(x, y, &r)) goto ovf;
            return jv_int(r);
        case OP_MUL:
            if (__builtin_mul_overflow(x, y, &r)) goto ovf;
            return jv_int(r);
        case OP_FLOORDIV:
        case OP_MOD: {
            if (y == 0) jfail(c->job, line, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) goto ovf;
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {
                q--;
                m += y;
            }
            return jv_int(op == OP_MOD ? m : q);
        }
        case OP_POW: {
            if (y < 0) return jv_float(pow((double)x, (double)y));
            r = 1;
            for (int64_t k = 0; k < y; k++) {
                if (__builtin_mul_overflow(r, x, &r)) goto ovf;
                if (r == 0 || r == 1) break;
                if (k > 64 && r == -1) {
                    r = (y % 2) ? -1 : 1;
                    break;
                }
            }
            return jv_int(r);
        }
        }
    ovf:
        jfail(c->job, line, "integer overflow");
    }
    if (op == OP_ADD && a.t == JV_STR && b.t == JV_STR) {
        bool markup = a.tuple == JV_MARKUP || b.tuple == JV_MARKUP;
        if (markup && a.tuple != JV_MARKUP) a = jv_html_escape(c->job, a);
        if (markup && b.tuple != JV_MARKUP) b = jv_html_escape(c->job, b);
        if (a.u.s->n + b.u.s->n > JINJA_MAX_OUTPUT) jfail(c->job, line, "string too long");
        char *p = jalloc(c->job, a.u.s->n + b.u.s->n + 1);
        memcpy(p, a.u.s->p, a.u.s->n);
        memcpy(p + a.u.s->n, b.u.s->p, b.u.s->n);
        jctx_charge(c, line, (a.u.s->n + b.u.s->n) / 64);
        jv r = jv_str(c->job, p, a.u.s->n + b.u.s->n);
        if (markup) r.tuple = JV_MARKUP;
        return r;
    }
    if (op == OP_ADD && a.t == JV_LIST && b.t == JV_LIST && a.tuple == b.tuple && a.tuple != 2) {
        jv r = jv_newlist(c->job, a.u.l->n + b.u.l->n);
        r.tuple = a.tuple;
        for (size_t i = 0; i < a.u.l->n; i++) jlist_push(c->job, r.u.l, a.u.l->v[i]);
        for (size_t i = 0; i < b.u.l->n; i++) jlist_push(c->job, r.u.l, b.u.l->v[i]);
        jctx_charge(c, line, r.u.l->n);
        return r;
    }
    if (op == OP_MOD && a.t == JV_STR) { /* "%s" % x, "%s %s" % (a, b) */
        if (b.t == JV_LIST && b.tuple == 1) return jstr_percent(c, line, a, b.u.l->v, (int)b.u.l->n);
        return jstr_percent(c, line, a, &b, 1);
    }
    if (op == OP_MUL && (a.t == JV_STR || a.t == JV_LIST) && (b.t == JV_INT || b.t == JV_BOOL))
        return repeat(c, line, a, inum(b));
    if (op == OP_MUL && (b.t == JV_STR || b.t == JV_LIST) && (a.t == JV_INT || a.t == JV_BOOL))
        return repeat(c, line, b, inum(a));
    jfail(c->job, line, "unsupported operand type(s) for %s: '%s' and '%s'", opname(op), jv_typename(a),
          jv_typename(b));
}

static int cmp_order(jctx *c, int line, int op, jv a, jv b);
int jv_compare(jctx *c, int line, jv a, jv b) { return cmp_order(c, line, OP_LT, a, b); }

static int cmp_order(jctx *c, int line, int op, jv a, jv b) {
    if (++c->depth > MAX_EVAL_DEPTH) jfail(c->job, line, "recursion limit exceeded");
    c->depth--; /* depth only guards the list recursion below */
    if (isnum(a) && isnum(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) {
            double x = fnum(a), y = fnum(b);
            return x < y ? -1 : x > y ? 1 : 0; /* NaN compares as equal here; rare */
        }
        int64_t x = inum(a), y = inum(b);
        return x < y ? -1 : x > y;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s->n < b.u.s->n ? a.u.s->n : b.u.s->n;
        int r = memcmp(a.u.s->p, b.u.s->p, n);
        if (r) return r < 0 ? -1 : 1;
        return a.u.s->n < b.u.s->n ? -1 : a.u.s->n > b.u.s->n;
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++)
            if (!jv_eq(a.u.l->v[i], b.u.l->v[i])) {
                c->depth++;
                int r = cmp_order(c, line, op, a.u.l->v[i], b.u.l->v[i]);
                c->depth--;
                return r;
            }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    if (a.t == JV_UNDEF) undefined_error(c, line, a);
    if (b.t == JV_UNDEF) undefined_error(c, line, b);
    jfail(c->job, line, "'%s' not supported between instances of '%s' and '%s'", opname(op), jv_typename(a),
          jv_typename(b));
}

static bool contains(jctx *c, int line, jv hay, jv needle) {
    switch (hay.t) {
    case JV_STR:
        if (needle.t == JV_UNDEF) undefined_error(c, line, needle);
        if (needle.t != JV_STR)
            jfail(c->job, line, "'in <string>' requires string as left operand, not %s", jv_typename(needle));
        jctx_charge(c, line, hay.u.s->n / 64);
        return needle.u.s->n == 0 || memmem(hay.u.s->p, hay.u.s->n, needle.u.s->p, needle.u.s->n) != NULL;
    case JV_LIST:
        jctx_charge(c, line, hay.u.l->n);
        for (size_t i = 0; i < hay.u.l->n; i++)
            if (jv_eq(hay.u.l->v[i], needle)) return true;
        return false;
    case JV_DICT:
    case JV_NS: jctx_charge(c, line, hay.u.d->n); return jdict_getv(hay.u.d, needle) != NULL;
    case JV_UNDEF: return false;
    default: jfail(c->job, line, "argument of type '%s' is not iterable", jv_typename(hay));
    }
}

/* ---- calls ---- */
static jv call_macro(jctx *c, int line, jmacro *m, jv *args, int nargs, const char **kwn, jv *kwv, int nkw, jv caller) {
    const jnode *d = m->def;
    const char *mname = d->name ? d->name : "caller";
    if (nargs > d->nnames) jfail(c->job, line, "macro '%s' takes not more than %d argument(s)", mname, d->nnames);
    jscope *s = jscope_new(c->job, m->closure);
    bool *set = jalloc(c->job, (size_t)d->nnames + 1);
    for (int i = 0; i < nargs; i++) {
        jscope_set(c->job, s, d->names[i], args[i]);
        set[i] = true;
    }
    for (int k = 0; k < nkw; k++) {
        int i;
        for (i = 0; i < d->nnames; i++)
            if (!strcmp(d->names[i], kwn[k])) break;
        if (i == d->nnames) jfail(c->job, line, "macro '%s' takes no keyword argument '%s'", mname, kwn[k]);
        if (set[i]) jfail(c->job, line, "macro '%s' got multiple values for argument '%s'", mname, kwn[k]);
        jscope_set(c->job, s, d->names[i], kwv[k]);
        set[i] = true;
    }
    for (int i = 0; i < d->nnames; i++)
        if (!set[i])
            jscope_set(c->job, s, d->names[i],
                       d->kids2 && d->kids2[i] ? jeval(c, s, d->kids2[i]) : jv_undef(d->names[i]));
    if (caller.t == JV_MACRO) jscope_set(c->job, s, "caller", caller);
    jbuf buf = {.limit = JINJA_MAX_OUTPUT};
    jbuf *saved = c->out;
    c->out = &buf;
    jexec_body(c, s, d->kids, d->nkids);
    c->flow = FLOW_NONE;
    c->out = saved;
    return buf.p ? jbuf_take(c->job, &buf) : jv_str(c->job, "", 0);
}

static jv call_builtin(jctx *c, int line, int id, jv *args, int nargs, const char **kwn, jv *kwv, int nkw) {
    switch (id) {
    case JF_RAISE: {
        jv m = nargs ? jv_to_str(c->job, args[0]) : jv_str(c->job, "", 0);
        jfail(c->job, line, "%.*s", (int)(m.u.s->n > 300 ? 300 : m.u.s->n), m.u.s->p);
    }
    case JF_STRFTIME: {
        if (nargs != 1 || args[0].t != JV_STR) jfail(c->job, line, "strftime_now expects one format string");
        time_t t = (time_t)c->now;
        struct tm tm;
        gmtime_r(&t, &tm);
        char fmt[256], out[512];
        if (args[0].u.s->n >= sizeof fmt) jfail(c->job, line, "strftime_now: format too long");
        memcpy(fmt, args[0].u.s->p, args[0].u.s->n);
        fmt[args[0].u.s->n] = 0;
        size_t n = strftime(out, sizeof out, fmt, &tm);
        return jv_strcpy(c->job, out, n);
    }
    case JF_NAMESPACE:
    case JF_DICT: {
        jv d = jv_newdict(c->job, 0);
        if (id == JF_NAMESPACE) d.t = JV_NS;
        for (int i = 0; i < nargs; i++) {
            if (args[i].t != JV_DICT)
                jfail(c->job, line, "%s() positional argument must be a mapping", id == JF_DICT ? "dict" : "namespace");
            for (size_t k = 0; k < args[i].u.d->n; k++) jdict_set(c->job, d.u.d, args[i].u.d->k[k], args[i].u.d->v[k]);
        }
        for (int k = 0; k < nkw; k++) jdict_set(c->job, d.u.d, jv_cstr(c->job, kwn[k]), kwv[k]);
        return d;
    }
    case JF_RANGE: {
        int64_t a = 0, b = 0, st = 1;
        for (int i = 0; i < nargs; i++)
            if (args[i].t != JV_INT) jfail(c->job, line, "range() arguments must be integers");
        if (nargs == 1) b = args[0].u.i;
        else if (nargs == 2 || nargs == 3) {
            a = args[0].u.i;
            b = args[1].u.i;
            if (nargs == 3) st = args[2].u.i;
        } else jfail(c->job, line, "range expected 1 to 3 arguments");
        if (st == 0) jfail(c->job, line, "range() arg 3 must not be zero");
        jv r = jv_newlist(c->job, 0);
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st) {
            jctx_charge(c, line, 1);
            jlist_push(c->job, r.u.l, jv_int(i));
            if ((st > 0 && i > INT64_MAX - st) || (st < 0 && i < INT64_MIN - st)) break;
        }
        return r;
    }
    case JF_METHOD: jfail(c->job, line, "calling a stored method is not supported");
    default: jfail(c->job, line, "unknown function");
    }
}

static jv call_value_caller(jctx *c, int line, jv fn, jv *args, int nargs, const char **kwn, jv *kwv, int nkw,
                            jv caller) {
    if (fn.t == JV_MACRO) {
        if (++c->depth > JINJA_MAX_DEPTH) jfail(c->job, line, "recursion limit exceeded");
        jv r = call_macro(c, line, fn.u.m, args, nargs, kwn, kwv, nkw, caller);
        c->depth--;
        return r;
    }
    if (fn.t == JV_FUNC) return call_builtin(c, line, fn.func, args, nargs, kwn, kwv, nkw);
    if (fn.t == JV_UNDEF) undefined_error(c, line, fn);
    jfail(c->job, line, "'%s' object is not callable", jv_typename(fn));
}

static void eval_args(jctx *c, jscope *s, const jnode *e, jv **args, jv **kwv) {
    *args = e->nkids ? jalloc(c->job, (size_t)e->nkids * sizeof(jv)) : NULL;
    *kwv = e->nkids2 ? jalloc(c->job, (size_t)e->nkids2 * sizeof(jv)) : NULL;
    for (int i = 0; i < e->nkids; i++) (*args)[i] = jeval(c, s, e->kids[i]);
    for (int i = 0; i < e->nkids2; i++) (*kwv)[i] = jeval(c, s, e->kids2[i]);
}

static jv eval_call(jctx *c, jscope *s, const jnode *e, jv caller) {
    jv *args, *kwv;
    if (e->a->kind == N_ATTR) {
        jv obj = jeval(c, s, e->a->a);
        eval_args(c, s, e, &args, &kwv);
        jv r;
        if (jmethod_call(c, e->line, obj, e->a->name, args, e->nkids, e->names, kwv, e->nkids2, &r)) return r;
        jv fn = get_attr(c, e->line, obj, e->a->name);
        return call_value_caller(c, e->line, fn, args, e->nkids, e->names, kwv, e->nkids2, caller);
    }
    jv fn = jeval(c, s, e->a);
    eval_args(c, s, e, &args, &kwv);
    return call_value_caller(c, e->line, fn, args, e->nkids, e->names, kwv, e->nkids2, caller);
}

/* Applies a filter chain whose innermost operand is NULL to `v`. */
static jv apply_filter_chain(jctx *c, jscope *s, const jnode *f, jv v) {
    if (++c->depth > MAX_EVAL_DEPTH) jfail(c->job, f->line, "recursion limit exceeded");
    if (f->a) v = apply_filter_chain(c, s, f->a, v);
    c->depth--;
    jv *args, *kwv;
    eval_args(c, s, f, &args, &kwv);
    return jfilter_apply(c, s, f->line, f->name, v, args, f->nkids, f->names, kwv, f->nkids2);
}

/* ---- expressions ---- */
jv jeval(jctx *c, jscope *s, const jnode *e) {
    jctx_charge(c, e->line, 1);
    if (++c->depth > MAX_EVAL_DEPTH) jfail(c->job, e->line, "recursion limit exceeded");
    jv r;
    switch (e->kind) {
    case N_LIT: r = e->lit; break;
    case N_NAME: r = jscope_lookup(s, e->name); break;
    case N_ATTR: r = get_attr(c, e->line, jeval(c, s, e->a), e->name); break;
    case N_ITEM: {
        jv o = jeval(c, s, e->a);
        jv k = jeval(c, s, e->b);
        r = get_item(c, e->line, o, k);
        break;
    }
    case N_SLICE: {
        jv o = jeval(c, s, e->a);
        jv p[3];
        for (int i = 0; i < 3; i++) p[i] = e->kids[i] ? jeval(c, s, e->kids[i]) : jv_none();
        r = do_slice(c, e->line, o, p[0], p[1], p[2]);
        break;
    }
    case N_CALL: r = eval_call(c, s, e, jv_undef(NULL)); break;
    case N_FILTER: {
        jv v = jeval(c, s, e->a);
        jv *args, *kwv;
        eval_args(c, s, e, &args, &kwv);
        r = jfilter_apply(c, s, e->line, e->name, v, args, e->nkids, e->names, kwv, e->nkids2);
        break;
    }
    case N_TEST: {
        jv v = jeval(c, s, e->a);
        jv *args, *kwv;
        eval_args(c, s, e, &args, &kwv);
        bool b = jtest_apply(c, e->line, e->name, v, args, e->nkids);
        r = jv_bool(e->neg ? !b : b);
        break;
    }
    case N_NEG:
    case N_POS: {
        jv v = jeval(c, s, e->a);
        if (v.t == JV_UNDEF) undefined_error(c, e->line, v);
        if (!isnum(v))
            jfail(c->job, e->line, "bad operand type for unary %s: '%s'", e->kind == N_NEG ? "-" : "+", jv_typename(v));
        if (e->kind == N_POS) r = v.t == JV_BOOL ? jv_int(v.u.b) : v;
        else if (v.t == JV_FLOAT) r = jv_float(-v.u.f);
        else if (inum(v) == INT64_MIN) jfail(c->job, e->line, "integer overflow");
        else r = jv_int(-inum(v));
        break;
    }
    case N_NOT: r = jv_bool(!jv_truthy(jeval(c, s, e->a))); break;
    case N_BINOP: {
        jv a = jeval(c, s, e->a);
        if (e->op == OP_AND) {
            r = jv_truthy(a) ? jeval(c, s, e->b) : a;
            break;
        }
        if (e->op == OP_OR) {
            r = jv_truthy(a) ? a : jeval(c, s, e->b);
            break;
        }
        jv b = jeval(c, s, e->b);
        if (e->op == OP_TILDE) {
            jbuf bb = {.limit = JINJA_MAX_OUTPUT};
            jv_str_into(c->job, &bb, a);
            jv_str_into(c->job, &bb, b);
            jctx_charge(c, e->line, bb.n / 64);
            r = bb.p ? jbuf_take(c->job, &bb) : jv_str(c->job, "", 0);
        } else r = arith(c, e->line, e->op, a, b);
        break;
    }
    case N_COMPARE: {
        jv a = jeval(c, s, e->a);
        bool ok = true;
        for (int i = 0; i < e->nkids && ok; i++) {
            jv b = jeval(c, s, e->kids[i]);
            switch (e->ops[i]) {
            case OP_EQ: ok = jv_eq(a, b); break;
            case OP_NE: ok = !jv_eq(a, b); break;
            case OP_LT: ok = cmp_order(c, e->line, OP_LT, a, b) < 0; break;
            case OP_LE: ok = cmp_order(c, e->line, OP_LE, a, b) <= 0; break;
            case OP_GT: ok = cmp_order(c, e->line, OP_GT, a, b) > 0; break;
            case OP_GE: ok = cmp_order(c, e->line, OP_GE, a, b) >= 0; break;
            case OP_IN: ok = contains(c, e->line, b, a); break;
            case OP_NOTIN: ok = !contains(c, e->line, b, a); break;
            }
            a = b;
        }
        r = jv_bool(ok);
        break;
    }
    case N_COND:
        if (jv_truthy(jeval(c, s, e->a))) r = jeval(c, s, e->b);
        else r = e->c ? jeval(c, s, e->c) : jv_undef(NULL);
        break;
    case N_LIST:
    case N_TUPLE: {
        r = jv_newlist(c->job, (size_t)e->nkids);
        r.tuple = e->kind == N_TUPLE;
        for (int i = 0; i < e->nkids; i++) jlist_push(c->job, r.u.l, jeval(c, s, e->kids[i]));
        break;
    }
    case N_DICT: {
        r = jv_newdict(c->job, (size_t)e->nkids);
        for (int i = 0; i < e->nkids; i++) {
            jv k = jeval(c, s, e->kids[i]);
            if (k.t == JV_LIST && !k.tuple) jfail(c->job, e->line, "unhashable type: 'list'");
            if (k.t == JV_DICT) jfail(c->job, e->line, "unhashable type: 'dict'");
            jdict_set(c->job, r.u.d, k, jeval(c, s, e->kids2[i]));
        }
        break;
    }
    default: jfail(c->job, e->line, "internal error: bad expression node %d", e->kind);
    }
    c->depth--;
    return r;
}

/* ---- statements ---- */
static void bind_targets(jctx *c, jscope *s, const jnode *n, jv item) {
    if (n->nnames == 1) {
        jscope_set(c->job, s, n->names[0], item);
        return;
    }
    jlist *l = NULL;
    if (item.t == JV_LIST) l = item.u.l;
    else if (item.t == JV_STR || item.t == JV_DICT) l = jv_iterate(c, n->line, item);
    else jfail(c->job, n->line, "cannot unpack non-iterable %s object", jv_typename(item));
    if ((int)l->n != n->nnames)
        jfail(c->job, n->line, "%s values to unpack (expected %d, got %zu)",
              (int)l->n < n->nnames ? "not enough" : "too many", n->nnames, l->n);
    for (int i = 0; i < n->nnames; i++) jscope_set(c->job, s, n->names[i], l->v[i]);
}

static void exec_for(jctx *c, jscope *s, const jnode *n) {
    jv it = jeval(c, s, n->b);
    jlist *items = jv_iterate(c, n->line, it);
    if (n->a) { /* {% for x in xs if cond %}: filter first, loop.* sees the filtered list */
        jv f = jv_newlist(c->job, 0);
        for (size_t i = 0; i < items->n; i++) {
            jscope *ts = jscope_new(c->job, s);
            bind_targets(c, ts, n, items->v[i]);
            if (jv_truthy(jeval(c, ts, n->a))) jlist_push(c->job, f.u.l, items->v[i]);
        }
        items = f.u.l;
    }
    jloop *lp = jalloc(c->job, sizeof *lp);
    lp->items = items->v;
    lp->n = (int64_t)items->n;
    lp->depth = 1;
    jv lv = {.t = JV_LOOP};
    lv.u.loop = lp;
    jscope *is = NULL;
    for (size_t i = 0; i < items->n; i++) {
        jctx_charge(c, n->line, 1);
        lp->i = (int64_t)i;
        /* a fresh scope per iteration; recycled unless a macro captured it */
        if (!is || is->captured) is = jscope_new(c->job, s);
        else is->n = 0;
        jscope_set(c->job, is, "loop", lv);
        bind_targets(c, is, n, items->v[i]);
        jexec_body(c, is, n->kids, n->nkids);
        int fl = c->flow;
        c->flow = FLOW_NONE;
        if (fl == FLOW_BREAK) break;
    }
    if (items->n == 0 && n->nkids2) jexec_body(c, s, n->kids2, n->nkids2);
}

static jv capture(jctx *c, jscope *s, jnode *const *body, int n) {
    jbuf buf = {.limit = JINJA_MAX_OUTPUT};
    jbuf *saved = c->out;
    c->out = &buf;
    jexec_body(c, s, body, n);
    c->out = saved;
    return buf.p ? jbuf_take(c->job, &buf) : jv_str(c->job, "", 0);
}

static void exec_stmt(jctx *c, jscope *s, const jnode *n) {
    jctx_charge(c, n->line, 1);
    if (++c->depth > MAX_EVAL_DEPTH) jfail(c->job, n->line, "recursion limit exceeded");
    switch (n->kind) {
    case N_TEXT: jbuf_put(c->job, c->out, n->lit.u.s->p, n->lit.u.s->n); break;
    case N_OUTPUT: emit(c, jeval(c, s, n->a)); break;
    case N_IF: /* elif chains are nested ifs in the else body */
        if (jv_truthy(jeval(c, s, n->a))) jexec_body(c, s, n->kids, n->nkids);
        else jexec_body(c, s, n->kids2, n->nkids2);
        break;
    case N_FOR: exec_for(c, s, n); break;
    case N_SET: {
        jv v = jeval(c, s, n->a);
        if (n->name) jscope_set(c->job, s, n->name, v);
        else {
            jnode tmp = *n;
            bind_targets(c, s, &tmp, v);
        }
        break;
    }
    case N_SETATTR: {
        jv ns = jscope_lookup(s, n->name);
        if (ns.t != JV_NS) jfail(c->job, n->line, "cannot assign attribute on non-namespace object");
        jv v = jeval(c, s, n->a);
        jdict_set(c->job, ns.u.d, jv_cstr(c->job, n->names[0]), v);
        break;
    }
    case N_SETBLOCK: {
        jv v = capture(c, s, n->kids, n->nkids);
        if (n->c) v = apply_filter_chain(c, s, n->c, v);
        jscope_set(c->job, s, n->name, v);
        break;
    }
    case N_MACRO: {
        for (jscope *q = s; q; q = q->parent) q->captured = true;
        jmacro *m = jalloc(c->job, sizeof *m);
        m->def = n;
        m->closure = s;
        jv v = {.t = JV_MACRO};
        v.u.m = m;
        jscope_set(c->job, s, n->name, v);
        break;
    }
    case N_CALLBLOCK: {
        for (jscope *q = s; q; q = q->parent) q->captured = true;
        jmacro *m = jalloc(c->job, sizeof *m);
        m->def = n;
        m->closure = s;
        jv cv = {.t = JV_MACRO};
        cv.u.m = m;
        emit(c, eval_call(c, s, n->a, cv));
        break;
    }
    case N_FILTERBLOCK: emit(c, apply_filter_chain(c, s, n->c, capture(c, s, n->kids, n->nkids))); break;
    case N_BREAK: c->flow = FLOW_BREAK; break;
    case N_CONTINUE: c->flow = FLOW_CONTINUE; break;
    default: jfail(c->job, n->line, "internal error: bad statement node %d", n->kind);
    }
    c->depth--;
}

void jexec_body(jctx *c, jscope *s, jnode *const *body, int n) {
    for (int i = 0; i < n && c->flow == FLOW_NONE; i++) exec_stmt(c, s, body[i]);
}
