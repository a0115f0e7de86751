/* test_rjson.c - the recipe JSON reader against jansson (rjson_oracle.h) on valid and
 * invalid texts chosen for the edges (escapes, surrogates, UTF-8, numbers at the
 * int64 / double limits, nesting depth, whitespace, duplicate keys), the raw text
 * of values (compact, verbatim escapes), opaque objects built on first access, and
 * error positions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rjson_oracle.h"
#include "testutil.h"

static void agree(const char *text) {
    const char *bad = rjson_check(text, strlen(text));
    CHECKF(!bad, "%s: %s", text, bad ? bad : "");
}

static void cases(void) {
    static const char *const texts[] = {
        "{}",
        "[]",
        " \t\r\n{ } \n",
        "[1,2,3]",
        "{\"a\":1,\"b\":[true,false,null],\"c\":{\"d\":\"e\"}}",
        "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]",
        "[\"\\u00e9\\u4e2d\\ud83d\\ude00\"]",
        "[\"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\"]",
        "[\"\\u0000\"]",
        "[\"\\ud800\"]",
        "[\"\\udc00\"]",
        "[\"\\ud800\\u0041\"]",
        "[\"\\u12\"]",
        "[\"\\x\"]",
        "[\"\xc0\x80\"]",
        "[\"\xed\xa0\x80\"]",
        "[\"\xf4\x90\x80\x80\"]",
        "[\"\xe4\xb8\"]",
        "[\"\x80\"]",
        "[\"a\nb\"]",
        "[\"tab\there\"]",
        "[\"unterminated]",
        "[\"0123456789abcdef0123456789abcdef\\n0123456789abcdef\"]",
        "[0,-0,1,-1,9223372036854775807,-9223372036854775808]",
        "[9223372036854775808]",
        "[-9223372036854775809]",
        "[99999999999999999999999]",
        "[0.5,-0.25,1e3,1E-3,2.5e+2,0.1,0.2,0.3,123456.789,1.7976931348623157e308]",
        "[1e400]",
        "[-1e400]",
        "[1e-400]",
        "[4.9e-324]",
        "[0.1234567890123456789]",
        "[12345678901234567.5]",
        "[01]",
        "[1.]",
        "[.5]",
        "[-]",
        "[+1]",
        "[1e]",
        "[1e+]",
        "[0x10]",
        "[NaN]",
        "[Infinity]",
        "[tru]",
        "[nul]",
        "[falsey]",
        "[1,]",
        "[,1]",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\":1,}",
        "{a:1}",
        "{\"a\":1 \"b\":2}",
        "{\"a\":1,\"a\":2}",
        "{\"\":0}",
        "[1] [2]",
        "[1]x",
        "\"str\"",
        "1",
        "null",
        "",
        "   ",
        "[",
        "{",
        "]",
        "{\"k\" : [ 1 , { \"x\" : \"y z\" } ] , \"s\" : \" spaced \\t out \" }",
        "{\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}},\"x\":1}",
        "{\"parameters\": { \"type\" : \"object\" } }",
        "{\"input_schema\":[1, 2]}",
        "{\"schema\":\"text\"}",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) agree(texts[i]);
}

/* nesting: 2048 levels are accepted (jansson's limit), 2049 rejected, both by both */
static void depth(void) {
    for (int n = 2047; n <= 2050; n++) {
        char *t = malloc(2 * (size_t)n + 1);
        memset(t, '[', (size_t)n);
        memset(t + n, ']', (size_t)n);
        t[2 * n] = 0;
        const char *bad = rjson_check(t, 2 * (size_t)n);
        CHECKF(!bad, "depth %d: %s", n, bad ? bad : "");
        free(t);
    }
}

static void raw_and_lazy(void) {
    recipe_arena a = {0};
    const char *text =
        "{ \"parameters\" : { \"type\": \"object\", \"required\": [ \"x\" ], \"d\": \"a \\\"q\\\" \\u00e9\" },"
        " \"metadata\": {\"k\":\"v\"}, \"arr\": [ 1, 2 ] }";
    rj *root = rj_parse(&a, text, strlen(text), NULL, 0);
    CHECK(root && rj_is_object(root) && !root->compact);
    rj *p = rj_get(root, "parameters");
    CHECK(p && p->lazy && rj_is_object(p));
    /* raw text of an opaque object without building it: whitespace gone, escapes verbatim */
    const char *raw = rj_raw(&a, p);
    CHECKF(raw && !strcmp(raw, "{\"type\":\"object\",\"required\":[\"x\"],\"d\":\"a \\\"q\\\" \\u00e9\"}"), "raw: %s",
           raw ? raw : "(null)");
    CHECK(p->lazy);
    /* first access builds it */
    CHECK(!strcmp(rj_gets(p, "type"), "object") && !p->lazy && p->n == 3);
    CHECK(!strcmp(rj_gets(p, "d"), "a \"q\" \xc3\xa9"));
    CHECK(rj_size(rj_get(p, "required")) == 1 && !strcmp(rj_str(rj_at(rj_get(p, "required"), 0)), "x"));
    rj *m = rj_get(root, "metadata");
    CHECK(m && m->lazy && m->compact);
    raw = rj_raw(&a, m);
    CHECK(raw && !strcmp(raw, "{\"k\":\"v\"}"));
    rj *arr = rj_get(root, "arr");
    CHECK(rj_size(arr) == 2 && rj_int(rj_at(arr, 1)) == 2 && !rj_at(arr, 2));
    raw = rj_raw(&a, arr);
    CHECK(raw && !strcmp(raw, "[1,2]"));
    CHECK(!rj_raw(&a, NULL) && !rj_get(arr, "x") && !rj_at(root, 0));
    ra_free(&a);
}

static void duplicates_and_errors(void) {
    recipe_arena a = {0};
    const char *text = "{\"a\":1,\"b\":2,\"a\":3}";
    rj *root = rj_parse(&a, text, strlen(text), NULL, 0);
    CHECK(root && rj_int(rj_get(root, "a")) == 3);
    rj *v[2];
    static const jkey keys[2] = {JKEY("a"), JKEY("b")};
    jpick(root, keys, 2, v);
    CHECK(rj_int(v[0]) == 3 && rj_int(v[1]) == 2);
    char why[96];
    CHECK(!rj_parse(&a, "{\"a\":[1,2,}", 11, why, sizeof why));
    CHECKF(strstr(why, "at byte 10") != NULL, "why: %s", why);
    CHECK(!rj_parse(&a, "[\"\xff\"]", 5, why, sizeof why) && strstr(why, "UTF-8"));
    CHECK(!rj_parse(&a, "[1] 2", 5, why, sizeof why) && strstr(why, "end of data"));
    ra_free(&a);
}

/* every string lands NUL-terminated in the pool even when escapes shrink it */
static void pool_bounds(void) {
    recipe_arena a = {0};
    char text[4096];
    size_t n = 0;
    text[n++] = '[';
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s\"\\u00e9\\n%d\"", i ? "," : "", i);
    text[n++] = ']';
    rj *root = rj_parse(&a, text, n, NULL, 0);
    CHECK(root && rj_size(root) == 200 && !strcmp(rj_str(rj_at(root, 199)), "\xc3\xa9\n199"));
    ra_free(&a);
}

/* the pool's tag bytes: clean only for strings whose JSON form is the bytes between quotes */
static void clean_tags(void) {
    recipe_arena a = {0};
    const char *text = "[\"plain ascii text that is long enough\",\"with \\\"escape\\\" inside it......\","
                       "\"caf\xc3\xa9 non-ascii string long enough....\",\"short\"]";
    rj_pool pool;
    rj *root = rj_parse_pool(&a, text, strlen(text), NULL, 0, &pool);
    CHECK(root && rj_size(root) == 4);
    CHECK(rj_pool_clean(&pool, rj_str(rj_at(root, 0))));
    CHECK(!rj_pool_clean(&pool, rj_str(rj_at(root, 1))) &&
          !strcmp(rj_str(rj_at(root, 1)), "with \"escape\" inside it......"));
    CHECK(!rj_pool_clean(&pool, rj_str(rj_at(root, 2))));
    /* the last string has fewer than 16 bytes of input left: read by the general path, not tagged clean */
    CHECK(!rj_pool_clean(&pool, rj_str(rj_at(root, 3))) && !strcmp(rj_str(rj_at(root, 3)), "short"));
    /* strings outside the pool, and pointers into the middle of pool strings, are never clean */
    char *other = strdup("plain");
    CHECK(!rj_pool_clean(&pool, other) && !rj_pool_clean(&pool, rj_str(rj_at(root, 0)) + 3));
    free(other);
    ra_free(&a);
}

int main(void) {
    clean_tags();
    cases();
    depth();
    raw_and_lazy();
    duplicates_and_errors();
    pool_bounds();
    return test_finish();
}
