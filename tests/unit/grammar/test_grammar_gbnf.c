/* test_grammar_gbnf.c - the GBNF front end: literals and escapes, classes (negated, ranges,
 * UTF-8), `.`, groups, alternatives, * + ? {m} {m,} {m,n}, comments, rules referenced before
 * their definition, left and right recursion, multi-line rules; and the errors (undefined rule,
 * missing root, token references, syntax) with their byte offset. */
#include <string.h>

#include "grammar_testutil.h"
#include "testutil.h"

static const cinfer_grammar_vocab *V;

static void expect(const char *gbnf, const char *s, int want) {
    cinfer_grammar_error err;
    cinfer_grammar *g = gt_compile(CINFER_GRAMMAR_GBNF, gbnf, 0, &err);
    CHECKF(g != NULL, "compile '%s': %s", gbnf, err.msg);
    if (!g) return;
    int got = gt_accepts(g, V, s, strlen(s));
    CHECKF(got == want, "gbnf '%s' on '%s': got %d want %d", gbnf, s, got, want);
    cinfer_grammar_release(g);
}

static void expect_error(const char *gbnf, const char *needle, long pos) {
    cinfer_grammar_error err;
    cinfer_grammar *g = gt_compile(CINFER_GRAMMAR_GBNF, gbnf, 0, &err);
    CHECKF(g == NULL, "'%s' should not compile", gbnf);
    CHECKF(g || strstr(err.msg, needle), "'%s': message '%s' lacks '%s'", gbnf, err.msg, needle);
    CHECKF(g || pos < 0 || err.position == pos, "'%s': position %ld want %ld", gbnf, err.position, pos);
    cinfer_grammar_release(g);
}

static const char arithmetic[] = "# arithmetic, one equation per line\n"
                                 "root  ::= (expr \"=\" ws term \"\\n\")+\n"
                                 "expr  ::= term ([-+*/] term)*\n"
                                 "term  ::= ident | num | \"(\" ws expr \")\" ws\n"
                                 "ident ::= [a-z] [a-z0-9_]* ws\n"
                                 "num   ::= [0-9]+ ws\n"
                                 "ws    ::= [ \\t\\n]*\n";

int main(void) {
    cinfer_grammar_vocab *v = gt_byte_vocab();
    V = v;
    expect(arithmetic, "1+2=3\n", 1);
    expect(arithmetic, "x*(y+1)=2\nz=1\n", 1);
    expect(arithmetic, "1+=3\n", 0);
    expect("root ::= \"a\" b\nb ::= \"x\" | \"y\"", "ay", 1);
    expect("root ::= [^\\n]+ \"\\n\"", "h\xc3\xa9llo\n", 1);
    expect("root ::= [^\\n]+ \"\\n\"", "a\nb\n", 0);
    expect("root ::= . . .",
           "a\xe2\x82\xac"
           "b",
           1);
    expect("root ::= [\\u3041-\\u309f]+", "\xe3\x81\x82\xe3\x81\x84", 1);
    expect("root ::= \"\\x41\\u00e9\\U0001F600\"", "A\xc3\xa9\xf0\x9f\x98\x80", 1);
    expect("root ::= \"a\"{2,3} \"b\"{2} \"c\"{1,}", "aabbccc", 1);
    expect("root ::= \"a\"{2,3} \"b\"{2} \"c\"{1,}", "aaaabbc", 0);
    expect("root ::= x\nx ::= x \"a\" | \"b\"", "baaa", 1); /* left recursion */
    expect("root ::= x\nx ::= \"a\" x | \"b\"", "aaab", 1); /* right recursion */
    expect("root ::= (\n  \"a\" |\n  \"b\"\n)+ # trailing comment", "abba", 1);
    expect("root ::= \"a\" |\n  \"b\"", "b", 1);
    expect("root ::= item?\nitem ::= \"x\"", "", 1);
    expect_error("root ::= foo", "undefined rule 'foo'", 9);
    expect_error("x ::= \"a\"", "no `root` rule", -1);
    expect_error("root ::= \"a\"++", "stacked repetition", -1);
    expect_error("root ::= <think>", "token references", 9);
    expect_error("root ::= \"abc", "unterminated string", -1);
    expect_error("root ::= [a-", "unterminated", -1);
    expect_error("root ::= (\"a\"", "expected )", -1);
    expect_error("root ::= \"a\" )", "unmatched )", -1);
    expect_error("root = \"a\"", "expected a rule", 0);
    expect_error("root ::= \"a\"{3,1}", "bad repetition", -1);
    cinfer_grammar_vocab_free(v);
    return test_finish();
}
