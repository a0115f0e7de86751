/* test_grammar_regex.c - the regex front end (CINFER_GRAMMAR_REGEX: whole-string match) and JSON
 * Schema `pattern` (search semantics inside a JSON string): classes, escapes, quantifiers,
 * alternation, groups, anchors, UTF-8, and the errors (backreferences, lookaround, \b, bad
 * syntax) with their position; regexes exponential for a DFA stay small. */
#include <stdio.h>
#include <string.h>

#include "grammar_testutil.h"
#include "testutil.h"

static const cinfer_grammar_vocab *V;

static void expect(const char *re, const char *s, int want) {
    cinfer_grammar_error err;
    cinfer_grammar *g = gt_compile(CINFER_GRAMMAR_REGEX, re, 0, &err);
    CHECKF(g != NULL, "compile '%s': %s", re, err.msg);
    if (!g) return;
    int got = gt_accepts(g, V, s, strlen(s));
    CHECKF(got == want, "regex '%s' on '%s': got %d want %d", re, s, got, want);
    cinfer_grammar_release(g);
}

static void expect_error(const char *re, const char *needle) {
    cinfer_grammar_error err;
    cinfer_grammar *g = gt_compile(CINFER_GRAMMAR_REGEX, re, 0, &err);
    CHECKF(g == NULL, "'%s' should not compile", re);
    CHECKF(g || strstr(err.msg, needle), "'%s': message '%s' lacks '%s'", re, err.msg, needle);
    cinfer_grammar_release(g);
}

static void expect_pattern(const char *pattern, const char *json_string, int want) {
    char schema[512];
    snprintf(schema, sizeof schema, "{\"type\":\"string\",\"pattern\":\"%s\"}", pattern);
    cinfer_grammar_error err;
    cinfer_grammar *g = gt_compile(CINFER_GRAMMAR_JSON_SCHEMA, schema, CINFER_GRAMMAR_JSON_COMPACT, &err);
    CHECKF(g != NULL, "compile %s: %s", schema, err.msg);
    if (!g) return;
    int got = gt_accepts(g, V, json_string, strlen(json_string));
    CHECKF(got == want, "pattern %s on %s: got %d want %d", pattern, json_string, got, want);
    cinfer_grammar_release(g);
}

int main(void) {
    cinfer_grammar_vocab *v = gt_byte_vocab();
    V = v;
    expect("abc", "abc", 1);
    expect("abc", "abcd", 0);
    expect("a|bc|", "", 1);
    expect("a|bc|", "bc", 1);
    expect("[a-c]+x?", "abcab", 1);
    expect("[a-c]+x?", "abcabxx", 0);
    expect("[^a-c]", "d", 1);
    expect("[^a-c]", "b", 0);
    expect("\\d{3}-\\d{2,}", "123-45678", 1);
    expect("\\d{3}-\\d{2,}", "12-45", 0);
    expect("\\w+\\s\\W", "ab_9 !", 1);
    expect("a{2,3}", "aaaa", 0);
    expect("a{2,3}", "aaa", 1);
    expect("(ab)*c", "ababc", 1);
    expect("(?:ab)+c", "c", 0);
    expect("(?<x>a)b", "ab", 1);
    expect(".", "\xc3\xa9", 1); /* one code point, two bytes */
    expect(".", "\n", 0);
    expect("[\xc3\xa0-\xc3\xbf]", "\xc3\xa9", 1); /* UTF-8 range */
    expect("\\u00e9\\x41",
           "\xc3\xa9"
           "A",
           1);
    expect("[\\u4e00-\\u9fff]+", "\xe4\xb8\xad\xe6\x96\x87", 1);
    expect("a{1}b{0}", "a", 1);
    expect("x*?y+?", "xxy", 1);
    expect("a\\.b\\*", "a.b*", 1);
    expect("^ab$", "ab", 1);
    expect_error("(a", "missing )");
    expect_error("a)", "unmatched )");
    expect_error("(a)\\1", "backreference");
    expect_error("u\\00e9", "octal"); /* \0 then a digit: legacy octal, refused (PCRE2 would read \00) */
    expect_error("(?=a)", "lookaround");
    expect_error("\\bx", "word boundary");
    expect_error("*a", "nothing to repeat");
    expect_error("[a", "unterminated");
    expect_error("a{5,2}", "n < m");
    expect_error("a{2,4}+", "nothing to repeat");
    expect_error("a**", "nothing to repeat");
    expect_error("a^b", "anchor");
    /* exponential for a DFA, linear here (Earley runs the NFA; rules are shared) */
    expect("(a|b)*a(a|b){20}", "bbbabbbbbbbbbbbbbbbbbbbb", 1);
    expect("(a|b)*a(a|b){20}", "bbbbabbbbbbbbbbbbbbbbbbb", 0);
    expect("(a{1000}){1000}b", "b", 0);
    /* JSON Schema pattern: unanchored search, JSON string encoding */
    expect_pattern("b", "\"abc\"", 1);
    expect_pattern("^b", "\"abc\"", 0);
    expect_pattern("c$", "\"abc\"", 1);
    expect_pattern("^a\\\\\\\\d$", "\"a\\\\d\"", 1); /* regex ^a\\d$ : a backslash d */
    expect_pattern("^\\\"$", "\"\\\"\"", 1); /* a quote must be escaped in the JSON string */
    expect_pattern("^.$", "\"\\n\"", 0);
    expect_pattern("^\\\\s$", "\"\\t\"", 1);
    cinfer_grammar_vocab_free(v);
    return test_finish();
}
