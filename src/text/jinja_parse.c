/* jinja_parse.c - tokens -> AST, following Jinja2's grammar and operator
 * precedence (parser.py): condexpr < or < and < not < compare (==, !=, <, <=,
 * >, >=, in, not in) < + - < ~ < * / // % < ** < unary - + < postfix (.attr,
 * [item/slice], call) and filters/tests (| name, is [not] name).
 *
 * Statements: if/elif/else, for (targets, 'if' filter, else, recursive is
 * rejected), set (name, ns.attr, block set), macro, call, filter blocks,
 * break/continue. Anything else ('include', 'extends', 'raw', ...) is a
 * syntax error naming the statement. All nodes live in the template arena;
 * nesting depth is bounded by JINJA_MAX_DEPTH. */
#include <string.h>

#include "text/jinja.h"

typedef struct {
    jjob *j;
    jtok *t;
    size_t n, i;
    int depth;
} P;

static jtok *cur(P *p) { return &p->t[p->i]; }
static jtok *peek(P *p, size_t k) { return p->i + k < p->n ? &p->t[p->i + k] : &p->t[p->n - 1]; }
static void adv(P *p) {
    if (p->i + 1 < p->n) p->i++;
}
static bool is_op(P *p, int op) { return cur(p)->kind == TK_OP && cur(p)->op == op; }
static bool is_name(P *p, const char *s) { return cur(p)->kind == TK_NAME && strcmp(cur(p)->p, s) == 0; }
static bool skip_op(P *p, int op) {
    if (is_op(p, op)) {
        adv(p);
        return true;
    }
    return false;
}
static bool skip_name(P *p, const char *s) {
    if (is_name(p, s)) {
        adv(p);
        return true;
    }
    return false;
}

static const char *tokdesc(jtok *t) {
    switch (t->kind) {
    case TK_EOF: return "end of template";
    case TK_TEXT: return "text";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "'%}'";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "'}}'";
    case TK_NAME: return t->p;
    case TK_STRING: return "string";
    case TK_INT: return "integer";
    case TK_FLOAT: return "float";
    default: return "operator";
    }
}

static void expect_op(P *p, int op, const char *what) {
    if (!skip_op(p, op)) jfail(p->j, cur(p)->line, "expected '%s', got %s", what, tokdesc(cur(p)));
}
static const char *expect_name(P *p) {
    if (cur(p)->kind != TK_NAME) jfail(p->j, cur(p)->line, "expected a name, got %s", tokdesc(cur(p)));
    const char *s = cur(p)->p;
    adv(p);
    return s;
}
static void expect_block_end(P *p) {
    if (cur(p)->kind != TK_BLOCK_END)
        jfail(p->j, cur(p)->line, "expected end of statement '%%}', got %s", tokdesc(cur(p)));
    adv(p);
}

static jnode *mk(P *p, int kind, int line) {
    jnode *n = jalloc(p->j, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = line;
    return n;
}

/* growable node arrays during parsing */
typedef struct {
    jnode **v;
    int n, cap;
} nvec;
static void nv_push(P *p, nvec *v, jnode *x) {
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 8;
        jnode **nn = jalloc(p->j, (size_t)nc * sizeof *nn);
        if (v->n) memcpy(nn, v->v, (size_t)v->n * sizeof *nn);
        v->v = nn;
        v->cap = nc;
    }
    v->v[v->n++] = x;
}
typedef struct {
    const char **v;
    int n, cap;
} svec;
static void sv_push(P *p, svec *v, const char *x) {
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 8;
        const char **nn = jalloc(p->j, (size_t)nc * sizeof *nn);
        if (v->n) memcpy(nn, v->v, (size_t)v->n * sizeof *nn);
        v->v = nn;
        v->cap = nc;
    }
    v->v[v->n++] = x;
}

static void enter(P *p) {
    if (++p->depth > JINJA_MAX_DEPTH) jfail(p->j, cur(p)->line, "template nesting too deep");
}

static jnode *parse_expr(P *p, bool condexpr);
static jnode *parse_unary(P *p, bool with_filter);
static jnode *parse_or(P *p);

/* (args, name=value) after '(' has been seen (cursor at '(') */
static void parse_call_args(P *p, jnode *n) {
    expect_op(p, OP_LPAREN, "(");
    nvec args = {0}, kwv = {0};
    svec kwn = {0};
    while (!is_op(p, OP_RPAREN)) {
        if (args.n + kwv.n) expect_op(p, OP_COMMA, ",");
        if (is_op(p, OP_RPAREN)) break;
        if (is_op(p, OP_MUL) || is_op(p, OP_POW))
            jfail(p->j, cur(p)->line, "*args / **kwargs in calls are not supported");
        if (cur(p)->kind == TK_NAME && peek(p, 1)->kind == TK_OP && peek(p, 1)->op == OP_ASSIGN) {
            sv_push(p, &kwn, cur(p)->p);
            adv(p);
            adv(p);
            nv_push(p, &kwv, parse_expr(p, true));
        } else {
            if (kwv.n) jfail(p->j, cur(p)->line, "positional argument after keyword argument");
            nv_push(p, &args, parse_expr(p, true));
        }
    }
    expect_op(p, OP_RPAREN, ")");
    n->kids = args.v;
    n->nkids = args.n;
    n->kids2 = kwv.v;
    n->nkids2 = kwv.n;
    n->names = kwn.v;
    n->nnames = kwn.n;
}

static jnode *parse_primary(P *p) {
    jtok *t = cur(p);
    int line = t->line;
    enter(p);
    jnode *n;
    switch (t->kind) {
    case TK_NAME: {
        const char *s = t->p;
        adv(p);
        n = mk(p, N_LIT, line);
        if (!strcmp(s, "true") || !strcmp(s, "True")) n->lit = jv_bool(true);
        else if (!strcmp(s, "false") || !strcmp(s, "False")) n->lit = jv_bool(false);
        else if (!strcmp(s, "none") || !strcmp(s, "None")) n->lit = jv_none();
        else {
            n->kind = N_NAME;
            n->name = s;
        }
        break;
    }
    case TK_STRING: {
        /* adjacent string literals concatenate */
        size_t total = 0, k = p->i;
        while (k < p->n && p->t[k].kind == TK_STRING) total += p->t[k++].n;
        char *buf = jalloc(p->j, total + 1);
        size_t o = 0;
        while (cur(p)->kind == TK_STRING) {
            memcpy(buf + o, cur(p)->p, cur(p)->n);
            o += cur(p)->n;
            adv(p);
        }
        n = mk(p, N_LIT, line);
        n->lit = jv_str(p->j, buf, o);
        break;
    }
    case TK_INT:
        n = mk(p, N_LIT, line);
        n->lit = jv_int(t->i);
        adv(p);
        break;
    case TK_FLOAT:
        n = mk(p, N_LIT, line);
        n->lit = jv_float(t->f);
        adv(p);
        break;
    case TK_OP:
        if (t->op == OP_LPAREN) {
            adv(p);
            if (skip_op(p, OP_RPAREN)) {
                n = mk(p, N_TUPLE, line);
                break;
            }
            jnode *first = parse_expr(p, true);
            if (!is_op(p, OP_COMMA)) {
                expect_op(p, OP_RPAREN, ")");
                n = first;
                break;
            }
            nvec items = {0};
            nv_push(p, &items, first);
            while (skip_op(p, OP_COMMA)) {
                if (is_op(p, OP_RPAREN)) break;
                nv_push(p, &items, parse_expr(p, true));
            }
            expect_op(p, OP_RPAREN, ")");
            n = mk(p, N_TUPLE, line);
            n->kids = items.v;
            n->nkids = items.n;
            break;
        }
        if (t->op == OP_LBRACKET) {
            adv(p);
            nvec items = {0};
            while (!is_op(p, OP_RBRACKET)) {
                if (items.n) expect_op(p, OP_COMMA, ",");
                if (is_op(p, OP_RBRACKET)) break;
                nv_push(p, &items, parse_expr(p, true));
            }
            expect_op(p, OP_RBRACKET, "]");
            n = mk(p, N_LIST, line);
            n->kids = items.v;
            n->nkids = items.n;
            break;
        }
        if (t->op == OP_LBRACE) {
            adv(p);
            nvec keys = {0}, vals = {0};
            while (!is_op(p, OP_RBRACE)) {
                if (keys.n) expect_op(p, OP_COMMA, ",");
                if (is_op(p, OP_RBRACE)) break;
                nv_push(p, &keys, parse_expr(p, true));
                expect_op(p, OP_COLON, ":");
                nv_push(p, &vals, parse_expr(p, true));
            }
            expect_op(p, OP_RBRACE, "}");
            n = mk(p, N_DICT, line);
            n->kids = keys.v;
            n->nkids = keys.n;
            n->kids2 = vals.v;
            n->nkids2 = vals.n;
            break;
        }
        /* fallthrough */
    default: jfail(p->j, line, "unexpected %s in expression", tokdesc(t));
    }
    p->depth--;
    return n;
}

static jnode *parse_subscript(P *p, jnode *obj) {
    int line = cur(p)->line;
    if (skip_op(p, OP_DOT)) {
        if (cur(p)->kind == TK_INT) {
            jnode *n = mk(p, N_ITEM, line);
            n->a = obj;
            n->b = mk(p, N_LIT, line);
            n->b->lit = jv_int(cur(p)->i);
            adv(p);
            return n;
        }
        jnode *n = mk(p, N_ATTR, line);
        n->a = obj;
        n->name = expect_name(p);
        return n;
    }
    expect_op(p, OP_LBRACKET, "[");
    jnode *parts[3] = {NULL, NULL, NULL};
    bool slice = false;
    int k = 0;
    for (;;) {
        if (is_op(p, OP_COLON)) {
            adv(p);
            slice = true;
            if (++k > 2) jfail(p->j, line, "bad slice");
            continue;
        }
        if (is_op(p, OP_RBRACKET)) break;
        if (parts[k]) jfail(p->j, cur(p)->line, "expected ']' in subscript");
        parts[k] = parse_expr(p, true);
    }
    expect_op(p, OP_RBRACKET, "]");
    jnode *n;
    if (slice) {
        n = mk(p, N_SLICE, line);
        n->kids = jalloc(p->j, 3 * sizeof(jnode *));
        memcpy(n->kids, parts, sizeof parts);
        n->nkids = 3;
    } else {
        if (!parts[0]) jfail(p->j, line, "empty subscript");
        n = mk(p, N_ITEM, line);
        n->b = parts[0];
    }
    n->a = obj;
    return n;
}

static jnode *parse_postfix(P *p, jnode *n) {
    for (;;) {
        if (is_op(p, OP_DOT) || is_op(p, OP_LBRACKET)) n = parse_subscript(p, n);
        else if (is_op(p, OP_LPAREN)) {
            jnode *c = mk(p, N_CALL, cur(p)->line);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else return n;
    }
}

static const char *parse_dotted_name(P *p) {
    const char *s = expect_name(p);
    while (is_op(p, OP_DOT) && peek(p, 1)->kind == TK_NAME)
        jfail(p->j, cur(p)->line, "dotted filter/test names are not supported");
    return s;
}

static jnode *parse_filter(P *p, jnode *n) {
    /* cursor is on the name after '|' */
    jnode *f = mk(p, N_FILTER, cur(p)->line);
    int fline = cur(p)->line;
    f->name = parse_dotted_name(p);
    (void)fline; /* unknown filters fail when executed (Jinja2 3.1 defers them inside conditionals) */
    f->a = n;
    if (is_op(p, OP_LPAREN)) parse_call_args(p, f);
    return f;
}

static jnode *parse_filter_expr(P *p, jnode *n) {
    for (;;) {
        if (skip_op(p, OP_PIPE)) n = parse_filter(p, n);
        else if (is_name(p, "is")) {
            jnode *t = mk(p, N_TEST, cur(p)->line);
            adv(p);
            if (skip_name(p, "not")) t->neg = 1;
            int tline = cur(p)->line;
            t->name = parse_dotted_name(p);
            if (!jtest_known(t->name)) jfail(p->j, tline, "unknown test '%s'", t->name);
            t->a = n;
            jtok *c = cur(p);
            if (is_op(p, OP_LPAREN)) parse_call_args(p, t);
            else if ((c->kind == TK_NAME || c->kind == TK_STRING || c->kind == TK_INT || c->kind == TK_FLOAT ||
                      (c->kind == TK_OP && (c->op == OP_LBRACKET || c->op == OP_LBRACE))) &&
                     !(c->kind == TK_NAME && (!strcmp(c->p, "else") || !strcmp(c->p, "or") || !strcmp(c->p, "and")))) {
                if (is_name(p, "is")) jfail(p->j, c->line, "You cannot chain multiple tests with is");
                jnode *arg = parse_postfix(p, parse_primary(p));
                t->kids = jalloc(p->j, sizeof(jnode *));
                t->kids[0] = arg;
                t->nkids = 1;
            }
            n = t;
        } else if (is_op(p, OP_LPAREN)) {
            jnode *c = mk(p, N_CALL, cur(p)->line);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else return n;
    }
}

static jnode *parse_unary(P *p, bool with_filter) {
    int line = cur(p)->line;
    enter(p);
    jnode *n;
    if (skip_op(p, OP_SUB)) {
        n = mk(p, N_NEG, line);
        n->a = parse_unary(p, false);
    } else if (skip_op(p, OP_ADD)) {
        n = mk(p, N_POS, line);
        n->a = parse_unary(p, false);
    } else n = parse_primary(p);
    n = parse_postfix(p, n);
    if (with_filter) n = parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static jnode *binop(P *p, int op, jnode *a, jnode *b, int line) {
    jnode *n = mk(p, N_BINOP, line);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_pow(P *p) {
    jnode *n = parse_unary(p, true);
    while (is_op(p, OP_POW)) {
        int line = cur(p)->line;
        adv(p);
        n = binop(p, OP_POW, n, parse_unary(p, true), line);
    }
    return n;
}
static jnode *parse_math2(P *p) {
    jnode *n = parse_pow(p);
    while (is_op(p, OP_MUL) || is_op(p, OP_DIV) || is_op(p, OP_FLOORDIV) || is_op(p, OP_MOD)) {
        int op = cur(p)->op, line = cur(p)->line;
        adv(p);
        n = binop(p, op, n, parse_pow(p), line);
    }
    return n;
}
static jnode *parse_concat(P *p) {
    jnode *n = parse_math2(p);
    while (is_op(p, OP_TILDE)) {
        int line = cur(p)->line;
        adv(p);
        n = binop(p, OP_TILDE, n, parse_math2(p), line);
    }
    return n;
}
static jnode *parse_math1(P *p) {
    jnode *n = parse_concat(p);
    while (is_op(p, OP_ADD) || is_op(p, OP_SUB)) {
        int op = cur(p)->op, line = cur(p)->line;
        adv(p);
        n = binop(p, op, n, parse_concat(p), line);
    }
    return n;
}
static jnode *parse_compare(P *p) {
    int line = cur(p)->line;
    jnode *first = parse_math1(p);
    nvec rest = {0};
    uint8_t ops[64];
    for (;;) {
        int op = 0;
        jtok *t = cur(p);
        if (t->kind == TK_OP && t->op >= OP_EQ && t->op <= OP_GE) {
            op = t->op;
            adv(p);
        } else if (is_name(p, "in")) {
            op = OP_IN;
            adv(p);
        } else if (is_name(p, "not") && peek(p, 1)->kind == TK_NAME && !strcmp(peek(p, 1)->p, "in")) {
            op = OP_NOTIN;
            adv(p);
            adv(p);
        } else break;
        if (rest.n >= 64) jfail(p->j, line, "comparison chain too long");
        ops[rest.n] = (uint8_t)op;
        nv_push(p, &rest, parse_math1(p));
    }
    if (!rest.n) return first;
    jnode *n = mk(p, N_COMPARE, line);
    n->a = first;
    n->kids = rest.v;
    n->nkids = rest.n;
    n->ops = jalloc(p->j, (size_t)rest.n);
    memcpy(n->ops, ops, (size_t)rest.n);
    return n;
}
static jnode *parse_not(P *p) {
    if (is_name(p, "not")) {
        int line = cur(p)->line;
        adv(p);
        enter(p);
        jnode *n = mk(p, N_NOT, line);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}
static jnode *parse_and(P *p) {
    jnode *n = parse_not(p);
    while (is_name(p, "and")) {
        int line = cur(p)->line;
        adv(p);
        n = binop(p, OP_AND, n, parse_not(p), line);
    }
    return n;
}
static jnode *parse_or(P *p) {
    jnode *n = parse_and(p);
    while (is_name(p, "or")) {
        int line = cur(p)->line;
        adv(p);
        n = binop(p, OP_OR, n, parse_and(p), line);
    }
    return n;
}

static jnode *parse_expr(P *p, bool condexpr) {
    enter(p);
    jnode *n = parse_or(p);
    if (condexpr) {
        while (is_name(p, "if")) {
            int line = cur(p)->line;
            adv(p);
            jnode *c = mk(p, N_COND, line);
            c->b = n;
            c->a = parse_or(p);
            if (skip_name(p, "else")) c->c = parse_expr(p, true);
            n = c;
        }
    }
    p->depth--;
    return n;
}

/* expression or bare tuple "a, b" (as in {{ }} and set values) */
static jnode *parse_tuple(P *p, bool condexpr) {
    int line = cur(p)->line;
    jnode *first = parse_expr(p, condexpr);
    if (!is_op(p, OP_COMMA)) return first;
    nvec items = {0};
    nv_push(p, &items, first);
    while (skip_op(p, OP_COMMA)) {
        jtok *t = cur(p);
        if (t->kind == TK_BLOCK_END || t->kind == TK_VAR_END || is_name(p, "if") || is_op(p, OP_RPAREN)) break;
        nv_push(p, &items, parse_expr(p, condexpr));
    }
    jnode *n = mk(p, N_TUPLE, line);
    n->kids = items.v;
    n->nkids = items.n;
    return n;
}

/* ---- statements ---- */
static void parse_body(P *p, nvec *out, const char *const *ends, const char *opener);

/* Parses statements up to one of `ends` into n->kids; stops at the end tag's "{%". */
static void parse_kids(P *p, jnode *n, const char *const *ends, const char *opener) {
    nvec body = {0};
    parse_body(p, &body, ends, opener);
    n->kids = body.v;
    n->nkids = body.n;
}

/* Consumes "{% <end-name>" and the closing "%}" of a block's end tag. */
static void end_tag(P *p) {
    adv(p);
    adv(p);
    expect_block_end(p);
}

static bool at_end_tag(P *p, const char *const *ends) {
    if (cur(p)->kind != TK_BLOCK_BEGIN || peek(p, 1)->kind != TK_NAME) return false;
    for (int k = 0; ends && ends[k]; k++)
        if (!strcmp(peek(p, 1)->p, ends[k])) return true;
    return false;
}

/* {% if %} ... {% elif %} ... {% else %} ... {% endif %}: an elif is a nested N_IF in kids2. */
static jnode *parse_if(P *p, int line) {
    jnode *n = mk(p, N_IF, line), *top = n;
    n->a = parse_tuple(p, true);
    expect_block_end(p);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    for (;;) {
        nvec body = {0};
        parse_body(p, &body, ends, "if");
        n->kids = body.v;
        n->nkids = body.n;
        adv(p); /* {% */
        const char *e = cur(p)->p;
        int eline = cur(p)->line;
        adv(p);
        if (!strcmp(e, "elif")) {
            jnode *m = mk(p, N_IF, eline);
            m->a = parse_tuple(p, true);
            expect_block_end(p);
            n->kids2 = jalloc(p->j, sizeof(jnode *));
            n->kids2[0] = m;
            n->nkids2 = 1;
            n = m;
            continue;
        }
        if (!strcmp(e, "else")) {
            expect_block_end(p);
            static const char *const ends2[] = {"endif", NULL};
            nvec eb = {0};
            parse_body(p, &eb, ends2, "if");
            n->kids2 = eb.v;
            n->nkids2 = eb.n;
            adv(p);
            adv(p);
        }
        expect_block_end(p);
        break;
    }
    return top;
}

/* {% for targets in iterable [if cond] %} ... [{% else %} ...] {% endfor %} */
static jnode *parse_for(P *p, int line) {
    jnode *n = mk(p, N_FOR, line);
    svec targets = {0};
    do sv_push(p, &targets, expect_name(p));
    while (skip_op(p, OP_COMMA));
    n->names = targets.v;
    n->nnames = targets.n;
    if (!skip_name(p, "in")) jfail(p->j, cur(p)->line, "expected 'in' in for loop");
    n->b = parse_tuple(p, false);
    if (skip_name(p, "if")) n->a = parse_expr(p, true);
    if (is_name(p, "recursive")) jfail(p->j, line, "recursive for loops are not supported");
    expect_block_end(p);
    static const char *const ends[] = {"else", "endfor", NULL};
    parse_kids(p, n, ends, "for");
    adv(p);
    if (!strcmp(cur(p)->p, "else")) {
        adv(p);
        expect_block_end(p);
        static const char *const ends2[] = {"endfor", NULL};
        nvec eb = {0};
        parse_body(p, &eb, ends2, "for");
        n->kids2 = eb.v;
        n->nkids2 = eb.n;
        adv(p);
    }
    adv(p);
    expect_block_end(p);
    return n;
}

/* {% set ns.attr = v %}, {% set a, b = v %}, {% set x = v %} or a block set
 * {% set x [| filters] %} ... {% endset %} */
static jnode *parse_set(P *p, int line) {
    const char *name = expect_name(p);
    if (skip_op(p, OP_DOT)) {
        jnode *n = mk(p, N_SETATTR, line);
        n->name = name;
        svec nm = {0};
        sv_push(p, &nm, expect_name(p));
        n->names = nm.v;
        n->nnames = 1;
        expect_op(p, OP_ASSIGN, "=");
        n->a = parse_tuple(p, true);
        expect_block_end(p);
        return n;
    }
    if (is_op(p, OP_COMMA)) {
        jnode *n = mk(p, N_SET, line);
        svec nm = {0};
        sv_push(p, &nm, name);
        while (skip_op(p, OP_COMMA)) sv_push(p, &nm, expect_name(p));
        n->names = nm.v;
        n->nnames = nm.n;
        expect_op(p, OP_ASSIGN, "=");
        n->a = parse_tuple(p, true);
        expect_block_end(p);
        return n;
    }
    if (skip_op(p, OP_ASSIGN)) {
        jnode *n = mk(p, N_SET, line);
        n->name = name;
        n->a = parse_tuple(p, true);
        expect_block_end(p);
        return n;
    }
    jnode *n = mk(p, N_SETBLOCK, line);
    n->name = name;
    if (skip_op(p, OP_PIPE)) {
        jnode *f = parse_filter(p, NULL);
        while (skip_op(p, OP_PIPE)) f = parse_filter(p, f);
        n->c = f;
    }
    expect_block_end(p);
    static const char *const ends[] = {"endset", NULL};
    parse_kids(p, n, ends, "set");
    end_tag(p);
    return n;
}

/* {% macro name(params) %} ... {% endmacro [name] %} or {% call[(params)] expr(...) %} ... {% endcall %} */
static jnode *parse_macro_or_call(P *p, const char *k, int line) {
    bool is_call = k[0] == 'c';
    jnode *n = mk(p, is_call ? N_CALLBLOCK : N_MACRO, line);
    svec params = {0};
    nvec defs = {0};
    bool any_default = false;
    if (!is_call) n->name = expect_name(p);
    if (!is_call || is_op(p, OP_LPAREN)) {
        expect_op(p, OP_LPAREN, "(");
        while (!is_op(p, OP_RPAREN)) {
            if (params.n) expect_op(p, OP_COMMA, ",");
            if (is_op(p, OP_RPAREN)) break;
            sv_push(p, &params, expect_name(p));
            if (skip_op(p, OP_ASSIGN)) {
                nv_push(p, &defs, parse_expr(p, true));
                any_default = true;
            } else if (any_default) jfail(p->j, cur(p)->line, "non-default argument follows default argument");
            else nv_push(p, &defs, NULL);
        }
        expect_op(p, OP_RPAREN, ")");
    }
    n->names = params.v;
    n->nnames = params.n;
    /* defaults are parallel to params; NULL = required */
    n->kids2 = defs.v;
    n->nkids2 = defs.n;
    if (is_call) {
        n->a = parse_expr(p, true);
        if (n->a->kind != N_CALL) jfail(p->j, line, "expected a call after {%% call %%}");
    }
    expect_block_end(p);
    static const char *const endm[] = {"endmacro", NULL}, *const endc[] = {"endcall", NULL};
    parse_kids(p, n, is_call ? endc : endm, k);
    adv(p);
    adv(p);
    if (!is_call && cur(p)->kind == TK_NAME) adv(p); /* {% endmacro name %} */
    expect_block_end(p);
    return n;
}

/* {% filter name [| name ...] %} ... {% endfilter %} */
static jnode *parse_filter_block(P *p, int line) {
    jnode *n = mk(p, N_FILTERBLOCK, line);
    jnode *f = parse_filter(p, NULL);
    while (skip_op(p, OP_PIPE)) f = parse_filter(p, f);
    n->c = f;
    expect_block_end(p);
    static const char *const ends[] = {"endfilter", NULL};
    parse_kids(p, n, ends, "filter");
    end_tag(p);
    return n;
}

static void parse_stmt(P *p, nvec *out) {
    /* cursor on the statement keyword after {% */
    jtok *kw = cur(p);
    int line = kw->line;
    if (kw->kind != TK_NAME) jfail(p->j, line, "expected a statement name after '{%%'");
    const char *k = kw->p;
    adv(p);
    enter(p);
    if (!strcmp(k, "if")) {
        nv_push(p, out, parse_if(p, line));
    } else if (!strcmp(k, "for")) {
        nv_push(p, out, parse_for(p, line));
    } else if (!strcmp(k, "set")) {
        nv_push(p, out, parse_set(p, line));
    } else if (!strcmp(k, "macro") || !strcmp(k, "call")) {
        nv_push(p, out, parse_macro_or_call(p, k, line));
    } else if (!strcmp(k, "filter")) {
        nv_push(p, out, parse_filter_block(p, line));
    } else if (!strcmp(k, "generation")) {
        /* HF's AssistantTracker extension: {% generation %}...{% endgeneration %}
         * marks assistant text; rendering is unchanged, so the body is inlined */
        expect_block_end(p);
        static const char *const ends[] = {"endgeneration", NULL};
        parse_body(p, out, ends, "generation");
        end_tag(p);
    } else if (!strcmp(k, "break") || !strcmp(k, "continue")) {
        expect_block_end(p);
        nv_push(p, out, mk(p, k[0] == 'b' ? N_BREAK : N_CONTINUE, line));
    } else {
        jfail(p->j, line, "unknown or unsupported statement '%s'", k);
    }
    p->depth--;
}

static void parse_body(P *p, nvec *out, const char *const *ends, const char *opener) {
    for (;;) {
        jtok *t = cur(p);
        switch (t->kind) {
        case TK_EOF:
            if (ends)
                jfail(p->j, t->line, "unexpected end of template: '%s' block is not closed (expected '%s')", opener,
                      ends[0]);
            return;
        case TK_TEXT: {
            jnode *n = mk(p, N_TEXT, t->line);
            n->lit = jv_str(p->j, t->p, t->n);
            nv_push(p, out, n);
            adv(p);
            break;
        }
        case TK_VAR_BEGIN: {
            adv(p);
            jnode *n = mk(p, N_OUTPUT, t->line);
            n->a = parse_tuple(p, true);
            if (cur(p)->kind != TK_VAR_END) jfail(p->j, cur(p)->line, "expected '}}', got %s", tokdesc(cur(p)));
            adv(p);
            nv_push(p, out, n);
            break;
        }
        case TK_BLOCK_BEGIN:
            if (at_end_tag(p, ends)) return;
            if (peek(p, 1)->kind == TK_NAME) {
                const char *w = peek(p, 1)->p;
                if (!strncmp(w, "end", 3) || !strcmp(w, "else") || !strcmp(w, "elif"))
                    jfail(p->j, t->line, "unexpected '%s'%s%s%s", w, opener ? " inside '" : "", opener ? opener : "",
                          opener ? "' block" : "");
            }
            adv(p);
            parse_stmt(p, out);
            break;
        default: jfail(p->j, t->line, "unexpected %s", tokdesc(t));
        }
    }
}

void jinja_parse(jjob *j, jtemplate *t, const char *src, size_t len) {
    jtok *toks;
    size_t n;
    jinja_lex(j, src, len, &toks, &n);
    P p = {.j = j, .t = toks, .n = n};
    nvec body = {0};
    parse_body(&p, &body, NULL, NULL);
    t->body = body.v;
    t->nbody = body.n;
}
