/* test_chat_template.c - chat templates against the Jinja2 oracle.
 *
 * For every template in $CINFER_SHARED/fixtures/templates/ (*.jinja) and every
 * conversation in tests/data/chat/ (*.json), the rendering must equal
 * tests/data/chat/expected/<template>__<conversation>.txt byte for byte, or
 * fail where the oracle raised (<...>.err). The expectations are produced by
 * tests/oracles/render_templates.py (render.py fixes strftime_now to
 * 2026-11-29; the C side renders with the same clock). Also covers the
 * language features directly, error messages, limits and the ChatML
 * fallback. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "testutil.h"
#include "text/chat_template.h"

#define FIXED_NOW 1795910400LL /* 2026-11-29T00:00:00Z */

/* repository path: $CINFER_SRC, else derived from this file's compile-time path */
static char *src_path(const char *rel) {
    static char buf[8][1024];
    static int slot;
    char *b = buf[slot++ % 8];
    const char *root = getenv("CINFER_SRC");
    if (root && *root) {
        snprintf(b, 1024, "%s/%s", root, rel);
        return b;
    }
    const char *me = __FILE__, *tail = strstr(me, "tests/unit/text/");
    int rl = tail ? (int)(tail - me) : 0;
    snprintf(b, 1024, "%.*s%s", rl, me, rel);
    return b;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* sorted names in dir ending with ext (suffix stripped); returns count */
static int list_dir(const char *dir, const char *ext, char ***out) {
    DIR *d = opendir(dir);
    int n = 0, cap = 0;
    char **v = NULL;
    if (!d) return -1;
    struct dirent *e;
    size_t el = strlen(ext);
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l <= el || strcmp(e->d_name + l - el, ext)) continue;
        if (n == cap) v = realloc(v, sizeof *v * (size_t)(cap = cap ? cap * 2 : 32));
        v[n++] = strndup(e->d_name, l - el);
    }
    closedir(d);
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    *out = v;
    return n;
}

static void free_list(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

static int g_ok, g_err_ok, g_total;

static void check_pair(const char *tdir, const char *tname, const char *cdir, const char *cname) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s.jinja", tdir, tname);
    size_t tlen;
    char *tsrc = read_file(path, &tlen);
    CHECKF(tsrc != NULL, "%s", path);
    if (!tsrc) return;
    snprintf(path, sizeof path, "%s/%s.json", cdir, cname);
    json_error_t je;
    json_t *ctx = json_load_file(path, 0, &je);
    CHECKF(ctx != NULL, "%s: %s", path, je.text);
    snprintf(path, sizeof path, "%s/expected/%s__%s.txt", cdir, tname, cname);
    size_t elen = 0;
    char *expect = read_file(path, &elen);
    bool want_err = false;
    if (!expect) {
        snprintf(path, sizeof path, "%s/expected/%s__%s.err", cdir, tname, cname);
        char *e = read_file(path, &elen);
        if (e && getenv("CHAT_TEMPLATE_VERBOSE")) fprintf(stderr, "%s x %s: oracle: %s", tname, cname, e);
        CHECKF(e != NULL, "no expectation for %s x %s (run tests/oracles/render_templates.py)", tname, cname);
        want_err = e != NULL;
        free(e);
        if (!e) {
            free(tsrc);
            json_decref(ctx);
            return;
        }
    }
    g_total++;
    chat_template *t = NULL;
    cf_err err = {{0}};
    int rc = chat_template_parse(tsrc, tlen, &t, &err);
    CHECKF(rc == 0, "%s: parse: %s", tname, err.msg);
    if (rc == 0 && ctx) {
        char *out = NULL;
        size_t olen = 0;
        rc = chat_template_render_at(t, ctx, FIXED_NOW, &out, &olen, &err);
        if (want_err) {
            CHECKF(rc != 0, "%s x %s: expected an error, rendered %zu bytes", tname, cname, olen);
            if (rc != 0) {
                if (getenv("CHAT_TEMPLATE_VERBOSE")) fprintf(stderr, "    ours: %s\n", err.msg);
                CHECKF(strncmp(err.msg, "chat template", 13) == 0, "%s", err.msg);
                g_err_ok++;
            }
        } else {
            CHECKF(rc == 0, "%s x %s: %s", tname, cname, err.msg);
            if (rc == 0) {
                bool same = olen == elen && memcmp(out, expect, olen) == 0;
                if (!same) {
                    size_t k = 0;
                    while (k < olen && k < elen && out[k] == expect[k]) k++;
                    size_t from = k > 60 ? k - 60 : 0;
                    fprintf(stderr,
                            "%s x %s: differs at byte %zu (got %zu bytes, want %zu)\n  got:  %.*s\n  want: %.*s\n",
                            tname, cname, k, olen, elen, (int)(olen - from < 160 ? olen - from : 160), out + from,
                            (int)(elen - from < 160 ? elen - from : 160), expect + from);
                }
                CHECKF(same, "%s x %s byte-identical", tname, cname);
                if (same) g_ok++;
            }
        }
        free(out);
    }
    chat_template_free(t);
    free(expect);
    free(tsrc);
    json_decref(ctx);
}

static void test_oracle_matrix(void) {
    const char *tdir = shared_path("fixtures/templates");
    char tdir_copy[1024];
    snprintf(tdir_copy, sizeof tdir_copy, "%s", tdir);
    const char *cdir = src_path("tests/data/chat");
    char **tn, **cn;
    int nt = list_dir(tdir_copy, ".jinja", &tn);
    int nc = list_dir(cdir, ".json", &cn);
    CHECKF(nt > 0, "no templates in %s", tdir_copy);
    CHECKF(nc > 0, "no conversations in %s", cdir);
    for (int i = 0; i < nt; i++)
        for (int k = 0; k < nc; k++) check_pair(tdir_copy, tn[i], cdir, cn[k]);
    fprintf(stderr, "oracle matrix: %d/%d byte-identical renderings, %d/%d expected errors, %d pairs\n", g_ok, g_total,
            g_err_ok, g_total, g_total);
    if (nt > 0) free_list(tn, nt);
    if (nc > 0) free_list(cn, nc);
}

/* renders src against ctx_json; returns malloc'd output or NULL (err filled) */
static char *render(const char *src, const char *ctx_json, cf_err *err) {
    chat_template *t = NULL;
    if (chat_template_parse(src, strlen(src), &t, err) != 0) return NULL;
    json_error_t je;
    json_t *ctx = json_loads(ctx_json ? ctx_json : "{}", 0, &je);
    char *out = NULL;
    size_t n;
    if (!ctx) snprintf(err->msg, sizeof err->msg, "bad test json: %s", je.text);
    else chat_template_render_at(t, ctx, FIXED_NOW, &out, &n, err);
    json_decref(ctx);
    chat_template_free(t);
    return out;
}

static void expect_out(const char *src, const char *ctx, const char *want) {
    cf_err err = {{0}};
    char *got = render(src, ctx, &err);
    CHECKF(got && strcmp(got, want) == 0, "template %s\n  got:  [%s]%s\n  want: [%s]", src, got ? got : "(error)",
           got ? "" : err.msg, want);
    free(got);
}

static void expect_err(const char *src, const char *ctx, const char *substr) {
    cf_err err = {{0}};
    char *got = render(src, ctx, &err);
    CHECKF(!got && strstr(err.msg, substr), "template %s: want error containing '%s', got %s [%s]", src, substr,
           got ? "output" : "error", got ? got : err.msg);
    free(got);
}

static void test_language(void) {
    expect_out("{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 % 3 }}|{{ 3 / 2 }}|{{ 2 ** 10 }}|{{ 'a' ~ 1 ~ none }}", NULL,
               "7|3|2|1.5|1024|a1None");
    expect_out("{{ [1, 'a', none, true, 2.5] }}|{{ {'k': [1]} }}|{{ (1,) }}|{{ 1e20 }}|{{ 0.1 + 0.2 }}", NULL,
               "[1, 'a', None, True, 2.5]|{'k': [1]}|(1,)|1e+20|0.30000000000000004");
    expect_out("{{ 'abc'[::-1] }}|{{ [1,2,3,4][1:3] }}|{{ 'héllo'[1] }}|{{ [1,2][-1] }}", NULL, "cba|[2, 3]|é|2");
    expect_out(
        "{% for x in [1,2,3] if x != 2 %}{{ loop.index }}/{{ loop.length }}{{ ',' if not loop.last }}{% endfor %}",
        NULL, "1/2,2/2");
    expect_out("{% for x in [] %}no{% else %}empty{% endfor %}", NULL, "empty");
    expect_out("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", NULL, "a=1;b=2;");
    expect_out("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
               NULL, "6");
    expect_out("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", NULL, "1");
    expect_out("{% macro m(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}", NULL, "<1B><23>");
    expect_out("{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}in{% endcall %}", NULL, "[in]");
    expect_out("{% filter upper %}abc{% endfilter %}{% set b %}x{{ 1 }}{% endset %}{{ b }}", NULL, "ABCx1");
    expect_out("{% for i in range(10) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif "
               "%}{{ i }}{% endfor %}",
               NULL, "02");
    expect_out("{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 'a' is string }}{{ {} is mapping }}{{ 3 is "
               "number }}",
               NULL, "FalseTrueTrueTrueTrueTrue");
    expect_out(
        "{{ '  a b  '|trim }}|{{ ' x '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'ab'.startswith('a') }}|{{ 'Hi'|upper }}",
        NULL, "a b|x|['a', 'b']|True|HI");
    expect_out("{{ {'a': 'é', 'b': [1, 2.0, none, true]}|tojson }}", NULL,
               "{\"a\": \"é\", \"b\": [1, 2.0, null, true]}");
    expect_out("{{ {'a': [1, {}]}|tojson(indent=2) }}", NULL, "{\n  \"a\": [\n    1,\n    {}\n  ]\n}");
    expect_out(
        "{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='c')|join(',') }}",
        "{\"msgs\":[{\"role\":\"user\",\"c\":\"a\"},{\"role\":\"bot\",\"c\":\"b\"},{\"role\":\"user\",\"c\":\"d\"}]}",
        "a,d");
    expect_out("{{ x|default('dflt') }}|{{ [3,1]|first }}|{{ [3,1]|last }}|{{ 'abc'|length }}|{{ '12'|int + 1 }}", NULL,
               "dflt|3|1|3|13");
    expect_out("{{ 'a\\nb'|indent(2) }}|{{ 'a\\nb'|indent(2, first=true) }}", NULL, "a\n  b|  a\n  b");
    expect_out("  {% if true %}\n  x\n  {% endif %}\n", NULL, "  x\n");
    expect_out("a  {{- 'b' -}}  c {#- comment -#} d", NULL, "abcd");
    expect_out("{{ strftime_now('%d %b %Y') }}", NULL, "29 Nov 2026");
    expect_out("{{ 'x' if false }}|{{ 1 if 0 else 2 }}", NULL, "|2");
    expect_out("{{ 'a<'|safe + '<b>' }}|{{ '<' ~ 'x'|safe }}|{{ none|selectattr('x')|list }}", NULL,
               "a<&lt;b&gt;|<x|[]");
    expect_out(
        "{{ ['b', 'A', 'a']|sort }}|{{ {'b': 1, 'a': 2}|dictsort }}|{{ [3, 9, 1]|max }}|{{ '%s-%d' % ('x', 2) }}", NULL,
        "['A', 'a', 'b']|[('a', 2), ('b', 1)]|9|x-2");
    expect_out("a{% generation %}b{{ 1 }}{% endgeneration %}c", NULL, "ab1c");
    expect_out("{{ {'items': 1}.items is defined }}|{{ {'items': 1}['items'] }}|{{ ['\\u2028', '\\xa0'] }}", NULL,
               "True|1|['\\u2028', '\\xa0']");
    expect_out("{{ u }}{{ u|length }}{% for x in u %}no{% endfor %}", NULL, "0");
}

static void test_errors(void) {
    expect_err("{{ raise_exception('nope') }}", NULL, "chat template line 1: nope");
    expect_err("line1\n{{ x|foo }}", NULL, "chat template line 2: unknown filter 'foo'");
    expect_err("{% if x %}", NULL, "not closed");
    expect_err("{% endif %}", NULL, "unexpected 'endif'");
    expect_err("{{ x.y }}", NULL, "'x' is undefined");
    expect_err("{{ 1 + 'a' }}", NULL, "unsupported operand");
    expect_err("{{ 1 / 0 }}", NULL, "division by zero");
    expect_err("{% include 'x' %}", NULL, "unsupported statement 'include'");
    expect_err("{{ 'unterminated }}", NULL, "unterminated string");
    expect_err("{{ x|tojson }}", NULL, "not JSON serializable");
    /* limits */
    expect_err("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", NULL, "recursion limit");
    expect_err("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", NULL, "limit");
    expect_err("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% "
               "endfor %}",
               NULL, "limit");
    char deep[4096] = {0};
    strcat(deep, "{{ ");
    for (int i = 0; i < 1000; i++) strcat(deep, "(");
    strcat(deep, "1");
    for (int i = 0; i < 1000; i++) strcat(deep, ")");
    strcat(deep, " }}");
    expect_err(deep, NULL, "too deep");
}

static void test_fallback(void) {
    chat_template *t = NULL;
    cf_err err = {{0}};
    CHECK(chat_template_parse(chat_template_chatml, strlen(chat_template_chatml), &t, &err) == 0);
    json_t *ctx = json_loads("{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":[{"
                             "\"type\":\"text\",\"text\":\"U\"}]}],"
                             "\"add_generation_prompt\":true}",
                             0, NULL);
    char *out = NULL;
    size_t n = 0;
    CHECK(chat_template_render(t, ctx, &out, &n, &err) == 0);
    CHECKF(out &&
               strcmp(out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n") ==
                   0,
           "%s", out ? out : err.msg);
    free(out);
    json_decref(ctx);
    chat_template_free(t);
}

static void test_gguf(void) {
    char path[256];
    temp_path(path, sizeof path, "chat.gguf");
    for (int with = 0; with < 2; with++) {
        gguf_writer *w = gguf_writer_create();
        gguf_set_str(w, "general.architecture", "llama");
        if (with)
            gguf_set_str(w, "tokenizer.chat_template",
                         "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{% endfor %}");
        cf_err err = {{0}};
        CHECKF(gguf_writer_write(w, path, &err) == 0, "%s", err.msg);
        gguf_writer_free(w);
        gguf_file *f = NULL;
        CHECKF(gguf_open(path, &f, &err) == 0, "%s", err.msg);
        if (!f) continue;
        chat_template *t = NULL;
        bool fb = false;
        CHECKF(chat_template_from_gguf(f, &t, &fb, &err) == 0, "%s", err.msg);
        gguf_close(f); /* the template keeps its own copy */
        CHECK(fb == !with);
        json_t *ctx =
            json_loads("{\"bos_token\":\"<s>\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 0, NULL);
        char *out = NULL;
        size_t n = 0;
        CHECK(t && chat_template_render(t, ctx, &out, &n, &err) == 0);
        const char *want = with ? "<s>[user]" : "<|im_start|>user\nx<|im_end|>\n";
        CHECKF(out && strcmp(out, want) == 0, "%s", out ? out : err.msg);
        free(out);
        json_decref(ctx);
        chat_template_free(t);
    }
    remove(path);
}

int main(void) {
    test_gguf();
    test_language();
    test_errors();
    test_fallback();
    test_oracle_matrix();
    return test_finish();
}
