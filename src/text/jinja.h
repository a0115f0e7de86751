/* jinja.h - internal interface of the Jinja2-subset interpreter behind
 * chat_template.h (lexer, parser, values, evaluator, filters).
 *
 * Ownership: everything is allocated from a jarena (bump allocator with a hard
 * byte cap). A parsed template owns one arena holding its AST; each render
 * owns a fresh arena holding every value it creates, freed in one go when the
 * render ends. Values are therefore plain structs copied by value; lists and
 * dicts are never mutated after construction except namespaces (by design:
 * Hugging Face renders in an ImmutableSandboxedEnvironment) and lists/dicts
 * under construction. Strings built from the JSON context point into the
 * caller's json_t, which outlives the render.
 *
 * Errors: the lexer, parser and evaluator report errors by jfail(), which
 * formats "chat template line N: ..." into the job's cf_err and longjmps back
 * to the entry point; no partial result escapes. */
#ifndef CINFER_TEXT_JINJA_H
#define CINFER_TEXT_JINJA_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* ---- limits (bounded work for hostile templates) ---- */
#define JINJA_MAX_ARENA (256u << 20) /* bytes allocated per render / parse */
#define JINJA_MAX_OUTPUT (16u << 20) /* bytes of rendered text (and of any one string) */
#define JINJA_MAX_DEPTH 128 /* nested macro calls / parser recursion */
#define JINJA_MAX_WORK (5u * 1000u * 1000u) /* evaluation steps + items touched + bytes built / 16 */

/* ---- arena ---- */
typedef struct jchunk jchunk;
typedef struct jarena {
    jchunk *head;
    size_t used_total;
    size_t cap;
} jarena;

/* Error/escape context shared by lexer, parser and evaluator. */
typedef struct jjob {
    jmp_buf jb;
    cf_err *err;
    jarena *arena;
    uint64_t work; /* charged by the evaluator and by every string append */
    uint64_t work_limit; /* 0: unlimited (parsing) */
} jjob;

_Noreturn void jfail(jjob *j, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void jarena_init(jarena *a, size_t cap);
void jarena_free(jarena *a);
/* Allocates n zeroed bytes or fails the job ("memory limit exceeded"). */
void *jalloc(jjob *j, size_t n);
char *jstrndup(jjob *j, const char *s, size_t n);

/* ---- values ---- */
typedef enum {
    JV_UNDEF,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,
    JV_DICT,
    JV_NS,
    JV_MACRO,
    JV_FUNC,
    JV_LOOP
} jvtype;

typedef struct jstr {
    const char *p;
    size_t n;
} jstr;
typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jloop jloop;
typedef struct jmacro jmacro;

typedef struct jv {
    uint8_t t;
    uint8_t tuple; /* JV_LIST: 1 tuple (printed (a, b)), 2 generator; JV_STR: JV_MARKUP */
    uint8_t func; /* JV_FUNC: builtin id */
    union {
        bool b;
        int64_t i;
        double f;
        jstr *s;
        jlist *l;
        jdict *d; /* JV_DICT and JV_NS */
        jloop *loop;
        jmacro *m;
        const char *undef_name; /* JV_UNDEF: what was missing (may be NULL) */
    } u;
} jv;

struct jlist {
    jv *v;
    size_t n, cap;
};
struct jdict {
    jv *k;
    jv *v;
    size_t n, cap;
};

typedef struct jnode jnode;
typedef struct jscope jscope;

struct jloop {
    jv *items;
    int64_t n, i;
    int depth;
};
struct jmacro {
    const jnode *def;
    jscope *closure;
};

/* builtin ids of JV_FUNC; JF_METHOD is a bound method seen through attribute
 * access without a call (`d.items`): defined and true, but not callable later */
enum { JF_RAISE = 1, JF_STRFTIME, JF_NAMESPACE, JF_RANGE, JF_DICT, JF_METHOD };

jv jv_undef(const char *name);
jv jv_none(void);
jv jv_bool(bool b);
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_str(jjob *j, const char *p, size_t n); /* points at p (no copy) */
jv jv_strcpy(jjob *j, const char *p, size_t n);
jv jv_cstr(jjob *j, const char *s);
jv jv_newlist(jjob *j, size_t cap);
jv jv_newdict(jjob *j, size_t cap);
void jlist_push(jjob *j, jlist *l, jv v);
void jdict_set(jjob *j, jdict *d, jv k, jv v);
/* Looks up a string key; NULL if absent. */
jv *jdict_get(const jdict *d, const char *k, size_t n);
jv *jdict_getv(const jdict *d, jv k);

/* Fails with the message an operation on this Undefined raises. */
_Noreturn void jfail_undefined(jjob *j, int line, jv v);
bool jv_truthy(jv v);
bool jv_eq(jv a, jv b); /* charges one step per node compared to the current job */
void jv_set_current_job(jjob *j);
const char *jv_typename(jv v);
bool jv_is_str(jv v, const char *s);

/* ---- growable string buffer (arena-backed) ---- */
typedef struct jbuf {
    char *p;
    size_t n, cap;
    size_t limit;
} jbuf;
void jbuf_put(jjob *j, jbuf *b, const char *s, size_t n);
void jbuf_putc(jjob *j, jbuf *b, char c);
void jbuf_puts(jjob *j, jbuf *b, const char *s);
jv jbuf_take(jjob *j, jbuf *b);

/* Python str() / repr() of a value appended to b. */
void jv_str_into(jjob *j, jbuf *b, jv v);
void jv_repr_into(jjob *j, jbuf *b, jv v);
jv jv_to_str(jjob *j, jv v);
/* markupsafe: a JV_STR with tuple == JV_MARKUP is "safe"; Markup + str escapes the str */
#define JV_MARKUP 1
jv jv_html_escape(jjob *j, jv s); /* str(v) as a JV_STR (identity for strings) */
void py_float_repr(double f, char *out, size_t cap);
/* json.dumps(v, ensure_ascii=False, indent=indent (<0: None)); fails on non-JSON values. */
void jv_tojson_into(jjob *j, int line, jbuf *b, jv v, int indent, int level);

/* ---- lexer ---- */
typedef enum {
    TK_EOF,
    TK_TEXT,
    TK_BLOCK_BEGIN,
    TK_BLOCK_END,
    TK_VAR_BEGIN,
    TK_VAR_END,
    TK_NAME,
    TK_STRING,
    TK_INT,
    TK_FLOAT,
    TK_OP
} jtokkind;

/* operator codes (TK_OP) */
enum {
    OP_ADD = 1,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_FLOORDIV,
    OP_MOD,
    OP_POW,
    OP_TILDE,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_LE,
    OP_GT,
    OP_GE,
    OP_ASSIGN,
    OP_LPAREN,
    OP_RPAREN,
    OP_LBRACKET,
    OP_RBRACKET,
    OP_LBRACE,
    OP_RBRACE,
    OP_COMMA,
    OP_DOT,
    OP_COLON,
    OP_PIPE,
    OP_SEMI,
    /* evaluator-only binary ops */
    OP_IN,
    OP_NOTIN,
    OP_AND,
    OP_OR
};

typedef struct jtok {
    uint8_t kind;
    uint8_t op;
    int line;
    const char *p; /* TEXT/NAME: source text; STRING: unescaped (arena) */
    size_t n;
    int64_t i;
    double f;
} jtok;

/* Tokenizes src (whitespace control as HF: trim_blocks, lstrip_blocks). */
void jinja_lex(jjob *j, const char *src, size_t len, jtok **toks, size_t *ntoks);

/* ---- AST ---- */
typedef enum {
    /* statements */
    N_TEXT,
    N_OUTPUT,
    N_IF,
    N_FOR,
    N_SET,
    N_SETATTR,
    N_SETBLOCK,
    N_MACRO,
    N_CALLBLOCK,
    N_FILTERBLOCK,
    N_BREAK,
    N_CONTINUE,
    /* expressions */
    N_LIT,
    N_NAME,
    N_ATTR,
    N_ITEM,
    N_SLICE,
    N_CALL,
    N_FILTER,
    N_TEST,
    N_NEG,
    N_POS,
    N_NOT,
    N_BINOP,
    N_COMPARE,
    N_COND,
    N_LIST,
    N_TUPLE,
    N_DICT
} jnodekind;

struct jnode {
    uint8_t kind;
    uint8_t op;
    uint8_t neg; /* N_TEST: 'is not' */
    int line;
    const char *name; /* identifiers: NAME, ATTR, FILTER, TEST, SET, MACRO, ... */
    jv lit; /* N_LIT; N_TEXT (string) */
    jnode *a, *b, *c; /* operands / condition / iterable / slice parts */
    jnode **kids;
    int nkids; /* args, items, body */
    jnode **kids2;
    int nkids2; /* else body, dict values, defaults */
    const char **names;
    int nnames; /* kwarg names (parallel to kids2 for calls), targets, params */
    uint8_t *ops; /* N_COMPARE: op per comparison (a, then kids) */
};

typedef struct jtemplate {
    jarena arena;
    jnode **body;
    int nbody;
} jtemplate;

/* Parses into t (t->arena must be initialised); longjmps on error. */
void jinja_parse(jjob *j, jtemplate *t, const char *src, size_t len);

/* ---- evaluation ---- */
typedef struct jctx jctx;
struct jscope {
    jscope *parent;
    bool captured; /* a macro closes over this scope: never recycle it */
    const char **names;
    jv *vals;
    int n, cap;
};

struct jctx {
    jjob *job;
    jscope *globals;
    jbuf *out; /* current output (captures push/pop) */
    int depth;
    int64_t now; /* seconds since epoch for strftime_now (UTC fields) */
    int flow; /* pending break (1) / continue (2) in the current loop body */
};

void jctx_charge(jctx *c, int line, uint64_t n);
jv jeval(jctx *c, jscope *s, const jnode *e);
void jexec_body(jctx *c, jscope *s, jnode *const *body, int n);
jv jscope_lookup(jscope *s, const char *name);
void jscope_set(jjob *j, jscope *s, const char *name, jv v);
jscope *jscope_new(jjob *j, jscope *parent);
/* chat_template.c: renders t with the globals `fill` sets (it may jfail); the entry points of
 * chat_template.h and chat_template_req.c. *out is malloc'd. */
int jinja_render(const jtemplate *t, int64_t now, void (*fill)(jjob *j, jscope *globals, const void *arg),
                 const void *arg, char **out, size_t *out_len, cf_err *err);
/* A jansson value as an interpreter value (strings point into x, which outlives the render). */
struct json_t;
jv jv_from_json(jjob *j, const struct json_t *x, int depth);
struct chat_template;
const jtemplate *chat_template_jinja(const struct chat_template *t);

/* filters.c: filter by name, test by name, method call on a value */
jv jfilter_apply(jctx *c, jscope *s, int line, const char *name, jv v, jv *args, int nargs, const char **kwn, jv *kwv,
                 int nkw);
bool jfilter_known(const char *name);
bool jtest_known(const char *name);
bool jtest_apply(jctx *c, int line, const char *name, jv v, jv *args, int nargs);
/* Returns true and sets *out if obj has method `name`. */
bool jmethod_call(jctx *c, int line, jv obj, const char *name, jv *args, int nargs, const char **kwn, jv *kwv, int nkw,
                  jv *out);
/* Python ordering (<): -1/0/1; fails for unorderable types */
int jv_compare(jctx *c, int line, jv a, jv b);
/* printf-style "%s %d %r %%" formatting (the format filter and str % args) */
jv jstr_percent(jctx *c, int line, jv fmt, jv *args, int nargs);
/* Iterable -> list of items (dict: keys; string: characters; undefined: empty). */
jlist *jv_iterate(jctx *c, int line, jv v);
int64_t jv_length(jctx *c, int line, jv v);

#endif
