/* jinja_lex.c - template text -> tokens, with Jinja2's whitespace control as
 * Hugging Face configures it: trim_blocks (one '\n' after a block or comment
 * tag is dropped), lstrip_blocks (spaces/tabs from the line start up to a
 * block or comment tag are dropped), '-' modifiers strip all whitespace on
 * that side, '+' disables lstrip. Comments vanish. Inside tags, end markers
 * are only recognised outside (), [] and {} like Jinja2's lexer.
 *
 * Output: an arena array of tokens ending with TK_EOF. String literals are
 * unescaped (Python rules) into the arena; TEXT/NAME point into the source. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja.h"

typedef struct {
    jjob *j;
    jtok *v;
    size_t n, cap;
} toklist;

static jtok *push(toklist *t, jtokkind k, int line) {
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        jtok *nv = jalloc(t->j, nc * sizeof(jtok));
        if (t->n) memcpy(nv, t->v, t->n * sizeof(jtok));
        t->v = nv;
        t->cap = nc;
    }
    jtok *k0 = &t->v[t->n++];
    memset(k0, 0, sizeof *k0);
    k0->kind = (uint8_t)k;
    k0->line = line;
    return k0;
}

static int count_lines(const char *s, size_t n) {
    int c = 0;
    for (size_t i = 0; i < n; i++) c += s[i] == '\n';
    return c;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static void put_utf8(char *o, size_t *k, unsigned cp) {
    if (cp < 0x80) o[(*k)++] = (char)cp;
    else if (cp < 0x800) {
        o[(*k)++] = (char)(0xC0 | (cp >> 6));
        o[(*k)++] = (char)(0x80 | (cp & 63));
    } else if (cp < 0x10000) {
        o[(*k)++] = (char)(0xE0 | (cp >> 12));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 63));
        o[(*k)++] = (char)(0x80 | (cp & 63));
    } else {
        o[(*k)++] = (char)(0xF0 | (cp >> 18));
        o[(*k)++] = (char)(0x80 | ((cp >> 12) & 63));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 63));
        o[(*k)++] = (char)(0x80 | (cp & 63));
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Lexes a quoted string at s[*i] (the quote); unescapes Python-style. */
static void lex_string(jjob *j, const char *s, size_t len, size_t *i, int *line, jtok *t) {
    char q = s[*i];
    size_t k0 = *i + 1, e = k0;
    while (e < len && s[e] != q) {
        if (s[e] == '\\') e++;
        e++;
    }
    if (e >= len) jfail(j, *line, "unterminated string literal");
    char *o = jalloc(j, e - k0 + 1);
    size_t k = 0;
    for (size_t p = k0; p < e; p++) {
        char c = s[p];
        if (c != '\\') {
            o[k++] = c;
            continue;
        }
        char d = s[++p];
        int nhex = 0;
        switch (d) {
        case 'n': o[k++] = '\n'; break;
        case 't': o[k++] = '\t'; break;
        case 'r': o[k++] = '\r'; break;
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'v': o[k++] = '\v'; break;
        case '0': o[k++] = '\0'; break;
        case '\n': break;
        case 'x': nhex = 2; break;
        case 'u': nhex = 4; break;
        case 'U': nhex = 8; break;
        default:
            o[k++] = '\\';
            o[k++] = d;
            break;
        }
        if (nhex) {
            unsigned cp = 0;
            if (p + (size_t)nhex >= e) jfail(j, *line, "truncated \\%c escape in string literal", d);
            for (int h = 0; h < nhex; h++) {
                int hv = hexval(s[p + 1 + (size_t)h]);
                if (hv < 0) jfail(j, *line, "bad \\%c escape in string literal", d);
                cp = cp * 16 + (unsigned)hv;
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) jfail(j, *line, "bad code point in string literal");
            p += (size_t)nhex;
            put_utf8(o, &k, cp); /* at most 4 bytes <= escape length */
        }
    }
    *line += count_lines(s + *i, e + 1 - *i);
    t->p = o;
    t->n = k;
    *i = e + 1;
}

static const struct {
    const char *s;
    uint8_t op;
} g_ops[] = {
    {"//", OP_FLOORDIV}, {"**", OP_POW},   {"==", OP_EQ},    {"!=", OP_NE},    {"<=", OP_LE},    {">=", OP_GE},
    {"+", OP_ADD},       {"-", OP_SUB},    {"*", OP_MUL},    {"/", OP_DIV},    {"%", OP_MOD},    {"~", OP_TILDE},
    {"<", OP_LT},        {">", OP_GT},     {"=", OP_ASSIGN}, {"(", OP_LPAREN}, {")", OP_RPAREN}, {"[", OP_LBRACKET},
    {"]", OP_RBRACKET},  {"{", OP_LBRACE}, {"}", OP_RBRACE}, {",", OP_COMMA},  {".", OP_DOT},    {":", OP_COLON},
    {"|", OP_PIPE},      {";", OP_SEMI},
};

/* Jinja2 reads the source as "\n".join(source.splitlines()): every line break
 * (\r\n, \r, \n, \v, \f, \x1c-\x1e, U+0085, U+2028, U+2029) becomes \n and a
 * single trailing line break is dropped (keep_trailing_newline=False). */
static char *normalize(jjob *j, const char *s, size_t len, size_t *out_len) {
    char *o = jalloc(j, len + 1);
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        size_t bl = 0;
        if (c == '\r') bl = (i + 1 < len && s[i + 1] == '\n') ? 2 : 1;
        else if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) bl = 1;
        else if (c == 0xC2 && i + 1 < len && (unsigned char)s[i + 1] == 0x85) bl = 2;
        else if (c == 0xE2 && i + 2 < len && (unsigned char)s[i + 1] == 0x80 &&
                 ((unsigned char)s[i + 2] == 0xA8 || (unsigned char)s[i + 2] == 0xA9))
            bl = 3;
        if (bl) {
            i += bl;
            if (i < len) o[k++] = '\n';
        } else o[k++] = s[i++];
    }
    o[k] = 0;
    *out_len = k;
    return o;
}

/* The next tag start at or after i: sets *k to it (len when none) and returns
 * its kind: 1 block, 2 var, 3 comment, 0 none. */
static int find_tag(const char *s, size_t len, size_t i, size_t *k) {
    for (*k = i; *k + 1 < len; (*k)++) {
        if (s[*k] != '{') continue;
        char c = s[*k + 1];
        if (c == '%') return 1;
        if (c == '{') return 2;
        if (c == '#') return 3;
    }
    *k = len;
    return 0;
}

/* The text s[i..k) before a tag of `kind` at k (0: none, the text runs to the end),
 * less what the tag's '-' or lstrip_blocks strips; pushed as TK_TEXT unless empty.
 * Returns where the tag's content starts (after its opener and modifier). */
static size_t lex_text(toklist *tl, const char *s, size_t len, size_t i, size_t k, int kind, bool line_starting,
                       int line) {
    size_t text_end = k;
    size_t after = k + 2;
    if (kind) {
        char m = after < len ? s[after] : 0;
        if (m == '-') {
            while (text_end > i && is_ws(s[text_end - 1])) text_end--;
            after++;
        } else if (m == '+') {
            after++;
        } else if (kind != 2) { /* lstrip_blocks */
            size_t lp = text_end;
            while (lp > i && s[lp - 1] != '\n') lp--;
            if (lp > i || line_starting) {
                bool only_ws = true;
                for (size_t q = lp; q < text_end; q++)
                    if (s[q] != ' ' && s[q] != '\t') {
                        only_ws = false;
                        break;
                    }
                if (only_ws) text_end = lp;
            }
        }
    }
    if (text_end > i) {
        jtok *t = push(tl, TK_TEXT, line);
        t->p = s + i;
        t->n = text_end - i;
    }
    return after;
}

/* Skips a comment tag opened at k (content from `after`); returns the index after it
 * and the whitespace its '-' or trim_blocks drops. */
static size_t skip_comment(jjob *j, const char *s, size_t len, size_t k, size_t after, int *line, int tag_line) {
    size_t e = after;
    while (e + 1 < len && !(s[e] == '#' && s[e + 1] == '}')) e++;
    if (e + 1 >= len) jfail(j, tag_line, "unclosed comment");
    *line += count_lines(s + k, e + 2 - k);
    size_t p = e + 2;
    if (e > after && s[e - 1] == '-') {
        while (p < len && is_ws(s[p])) {
            *line += s[p] == '\n';
            p++;
        }
    } else if (p < len && s[p] == '\n') {
        p++;
        (*line)++;
    }
    return p;
}

/* A name at s[p]; returns the index after it. */
static size_t lex_name(jjob *j, toklist *tl, const char *s, size_t len, size_t p, int line) {
    size_t q = p;
    while (q < len && (isalnum((unsigned char)s[q]) || s[q] == '_')) q++;
    jtok *t = push(tl, TK_NAME, line);
    t->p = jstrndup(j, s + p, q - p);
    t->n = q - p;
    return q;
}

/* An integer or float literal at s[p] ('_' separators allowed); returns the index after it. */
static size_t lex_number(jjob *j, toklist *tl, const char *s, size_t len, size_t p, int line) {
    size_t q = p;
    bool isf = false;
    while (q < len && (isdigit((unsigned char)s[q]) || s[q] == '_')) q++;
    if (q + 1 < len && s[q] == '.' && isdigit((unsigned char)s[q + 1])) {
        isf = true;
        q++;
        while (q < len && (isdigit((unsigned char)s[q]) || s[q] == '_')) q++;
    }
    if (q < len && (s[q] == 'e' || s[q] == 'E')) {
        size_t r = q + 1;
        if (r < len && (s[r] == '+' || s[r] == '-')) r++;
        if (r < len && isdigit((unsigned char)s[r])) {
            isf = true;
            q = r;
            while (q < len && isdigit((unsigned char)s[q])) q++;
        }
    }
    char buf[64];
    size_t bn = 0;
    for (size_t r = p; r < q && bn + 1 < sizeof buf; r++)
        if (s[r] != '_') buf[bn++] = s[r];
    buf[bn] = 0;
    if (q - p >= sizeof buf - 1) jfail(j, line, "number literal too long");
    jtok *t = push(tl, isf ? TK_FLOAT : TK_INT, line);
    if (isf) t->f = strtod(buf, NULL);
    else {
        errno = 0;
        long long v = strtoll(buf, NULL, 10);
        if (errno) jfail(j, line, "integer literal out of range");
        t->i = v;
    }
    return q;
}

/* An operator at s[p] (longest first); tracks the ()[]{} nesting in *bal. Returns the index after it. */
static size_t lex_operator(jjob *j, toklist *tl, const char *s, size_t len, size_t p, int line, int *bal) {
    int found = -1;
    for (size_t o = 0; o < sizeof g_ops / sizeof g_ops[0]; o++) {
        size_t ol = strlen(g_ops[o].s);
        if (p + ol <= len && memcmp(s + p, g_ops[o].s, ol) == 0) {
            found = (int)o;
            break;
        }
    }
    if (found < 0) jfail(j, line, "unexpected character '%c'", s[p]);
    jtok *t = push(tl, TK_OP, line);
    t->op = g_ops[found].op;
    if (t->op == OP_LPAREN || t->op == OP_LBRACKET || t->op == OP_LBRACE) (*bal)++;
    if ((t->op == OP_RPAREN || t->op == OP_RBRACKET || t->op == OP_RBRACE) && *bal > 0) (*bal)--;
    return p + strlen(g_ops[found].s);
}

/* The tokens of a block (kind 1) or variable (kind 2) tag from s[p] through its end
 * marker (TK_BLOCK_END / TK_VAR_END) and the whitespace its '-' or trim_blocks drops.
 * Returns the index after it. */
static size_t lex_tag(jjob *j, toklist *tl, const char *s, size_t len, size_t p, int kind, int *line, int tag_line) {
    const char endc = kind == 1 ? '%' : '}';
    int bal = 0;
    bool closed = false;
    while (p < len) {
        while (p < len && is_ws(s[p])) {
            *line += s[p] == '\n';
            p++;
        }
        if (p >= len) break;
        if (bal == 0) {
            bool dash = s[p] == '-' && p + 2 < len && s[p + 1] == endc && s[p + 2] == '}';
            bool plus = kind == 1 && s[p] == '+' && p + 2 < len && s[p + 1] == endc && s[p + 2] == '}';
            if (dash || plus || (s[p] == endc && p + 1 < len && s[p + 1] == '}')) {
                push(tl, kind == 1 ? TK_BLOCK_END : TK_VAR_END, *line);
                p += (dash || plus) ? 3 : 2;
                if (dash) {
                    while (p < len && is_ws(s[p])) {
                        *line += s[p] == '\n';
                        p++;
                    }
                } else if (kind == 1 && !plus && p < len && s[p] == '\n') {
                    p++;
                    (*line)++;
                }
                closed = true;
                break;
            }
        }
        char c = s[p];
        if (c == '\'' || c == '"') {
            jtok *t = push(tl, TK_STRING, *line);
            lex_string(j, s, len, &p, line, t);
        } else if (isalpha((unsigned char)c) || c == '_') {
            p = lex_name(j, tl, s, len, p, *line);
        } else if (isdigit((unsigned char)c)) {
            p = lex_number(j, tl, s, len, p, *line);
        } else {
            p = lex_operator(j, tl, s, len, p, *line, &bal);
        }
    }
    if (!closed) jfail(j, tag_line, "unexpected end of template inside a %s tag", kind == 1 ? "block" : "variable");
    return p;
}

/* {% raw %}...{% endraw %}: the text in between is literal. The {% raw %} tag's three
 * tokens are dropped; s[p] is just after it. Returns the index after {% endraw %}. */
static size_t lex_raw(jjob *j, toklist *tl, const char *s, size_t len, size_t p, int *line, int tag_line) {
    tl->n -= 3;
    size_t q = p, body_end = 0, after_end = 0;
    bool strip_body = false, strip_after = false;
    for (; q + 1 < len; q++) {
        if (s[q] != '{' || s[q + 1] != '%') continue;
        size_t r = q + 2;
        bool dash = r < len && s[r] == '-';
        if (r < len && (s[r] == '-' || s[r] == '+')) r++;
        while (r < len && is_ws(s[r])) r++;
        if (r + 6 > len || memcmp(s + r, "endraw", 6) != 0) continue;
        r += 6;
        while (r < len && is_ws(s[r])) r++;
        bool dash2 = r < len && s[r] == '-';
        if (dash2) r++;
        if (r + 1 < len && s[r] == '%' && s[r + 1] == '}') {
            body_end = q;
            after_end = r + 2;
            strip_body = dash;
            strip_after = dash2;
            break;
        }
    }
    if (!after_end) jfail(j, tag_line, "missing end of raw directive");
    size_t be = body_end;
    if (strip_body)
        while (be > p && is_ws(s[be - 1])) be--;
    if (be > p) {
        jtok *t = push(tl, TK_TEXT, *line);
        t->p = s + p;
        t->n = be - p;
    }
    *line += count_lines(s + p, after_end - p);
    p = after_end;
    if (strip_after) {
        while (p < len && is_ws(s[p])) {
            *line += s[p] == '\n';
            p++;
        }
    } else if (p < len && s[p] == '\n') {
        p++;
        (*line)++;
    }
    return p;
}

void jinja_lex(jjob *j, const char *src, size_t srclen, jtok **toks, size_t *ntoks) {
    toklist tl = {.j = j};
    size_t len;
    const char *s = normalize(j, src, srclen, &len);
    size_t i = 0;
    int line = 1;
    bool line_starting = true;
    while (i < len) {
        size_t k;
        int kind = find_tag(s, len, i, &k); /* 1 block, 2 var, 3 comment */
        size_t after = lex_text(&tl, s, len, i, k, kind, line_starting, line);
        line += count_lines(s + i, k - i);
        if (!kind) {
            i = len;
            break;
        }
        int tag_line = line;
        size_t p;
        if (kind == 3) {
            p = skip_comment(j, s, len, k, after, &line, tag_line);
        } else {
            push(&tl, kind == 1 ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, tag_line);
            p = lex_tag(j, &tl, s, len, after, kind, &line, tag_line);
            if (kind == 1 && tl.n >= 3 && tl.v[tl.n - 3].kind == TK_BLOCK_BEGIN && tl.v[tl.n - 2].kind == TK_NAME &&
                !strcmp(tl.v[tl.n - 2].p, "raw") && tl.v[tl.n - 1].kind == TK_BLOCK_END)
                p = lex_raw(j, &tl, s, len, p, &line, tag_line);
        }
        line_starting = s[p - 1] == '\n';
        i = p;
    }
    push(&tl, TK_EOF, line);
    *toks = tl.v;
    *ntoks = tl.n;
}
