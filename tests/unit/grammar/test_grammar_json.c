/* test_grammar_json.c - the JSON Schema front end beyond the conformance suite: the errors that
 * name the unsupported keyword (never a silent fallback), type-specific keywords (integer and
 * number ranges, multipleOf, string lengths, formats), objects (required, additional properties
 * and its exclusion of declared names, min/maxProperties), arrays (prefixItems, items,
 * min/maxItems), $ref recursion, anyOf/oneOf/allOf, enum filtered by sibling keywords, choice
 * lists, json_object, whitespace handling (flexible vs compact). */
#include <stdio.h>
#include <string.h>

#include "grammar_testutil.h"
#include "testutil.h"

static const cinfer_grammar_vocab *V;

static void expect(const char *schema, uint32_t flags, const char *s, int want) {
    cinfer_grammar_error err;
    cinfer_grammar *g = gt_compile(CINFER_GRAMMAR_JSON_SCHEMA, schema, flags, &err);
    CHECKF(g != NULL, "compile %s: %s", schema, err.msg);
    if (!g) return;
    int got = gt_accepts(g, V, s, strlen(s));
    CHECKF(got == want, "schema %s on %s: got %d want %d", schema, s, got, want);
    cinfer_grammar_release(g);
}

static void expect_unsupported(const char *schema, const char *keyword) {
    cinfer_grammar_error err;
    cinfer_grammar *g = gt_compile(CINFER_GRAMMAR_JSON_SCHEMA, schema, 0, &err);
    CHECKF(g == NULL, "%s should be refused", schema);
    CHECKF(g || !strcmp(err.keyword, keyword), "%s: keyword '%s' want '%s' (%s)", schema, err.keyword, keyword,
           err.msg);
    cinfer_grammar_release(g);
}

#define C CINFER_GRAMMAR_JSON_COMPACT

/* Length limits beside class-run patterns, shared limit rules, and class-run patternProperties. */
static void test_pattern_limits(void) {
    /* length limits with a pattern that is one repeated character class (json_pattern_len.c) */
    static const char anch[] = "{\"type\":\"string\",\"pattern\":\"^[a-z_.]+$\",\"maxLength\":3}";
    expect(anch, C, "\"ab\"", 1);
    expect(anch, C, "\"a.c\"", 1);
    expect(anch, C, "\"\"", 0);
    expect(anch, C, "\"abcd\"", 0);
    expect(anch, C, "\"aB\"", 0);
    static const char anch_min[] = "{\"type\":\"string\",\"pattern\":\"^[a-z]*$\",\"minLength\":2}";
    expect(anch_min, C, "\"a\"", 0);
    expect(anch_min, C, "\"abcdef\"", 1);
    expect(anch_min, C, "\"ab1\"", 0);
    static const char search[] = "{\"type\":\"string\",\"pattern\":\"[0-9a-f]+\",\"minLength\":4,\"maxLength\":4}";
    expect(search, C, "\"zzz1\"", 1);
    expect(search, C, "\"1zzz\"", 1);
    expect(search, C,
           "\"\xc3\xa9\xc3\xa9\xc3\xa9"
           "a\"",
           1);
    expect(search, C, "\"zzzz\"", 0);
    expect(search, C, "\"12\"", 0);
    expect(search, C, "\"z1zzz\"", 0);
    static const char search_min[] = "{\"type\":\"string\",\"pattern\":\"\\\\d+\",\"minLength\":3}";
    expect(search_min, C, "\"ab1\"", 1);
    expect(search_min, C, "\"xxxxxx9\"", 1);
    expect(search_min, C, "\"1xyzzzz\"", 1);
    expect(search_min, C, "\"1\"", 0);
    expect(search_min, C, "\"xyzw\"", 0);
    static const char star[] = "{\"type\":\"string\",\"pattern\":\"[a-z]*\",\"maxLength\":2}";
    expect(star, C, "\"12\"", 1);
    expect(star, C, "\"123\"", 0);
    /* equal length limits share one rule: four 60000-character limits fit the size limit */
    static const char big[] = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":60000},"
                              "\"b\":{\"type\":\"string\",\"maxLength\":60000},\"c\":{\"type\":\"string\","
                              "\"maxLength\":60000},\"d\":{\"type\":\"string\",\"maxLength\":60000}}}";
    expect(big, C, "{\"a\":\"x\",\"d\":\"y\"}", 1);
    /* patternProperties with a class-run pattern: its names typed by it, the others by additionalProperties */
    static const char pp[] = "{\"type\":\"object\",\"patternProperties\":{\"^\\\\d+$\":{\"type\":\"integer\"}},"
                             "\"additionalProperties\":{\"type\":\"string\"}}";
    expect(pp, C, "{\"12\":3,\"x\":\"y\",\"\":\"e\",\"1a\":\"z\"}", 1);
    expect(pp, C, "{\"12\":\"3\"}", 0);
    expect(pp, C, "{\"1a\":3}", 0);
    expect(pp, C, "{\"\":3}", 0);
    static const char pp_any[] = "{\"type\":\"object\",\"patternProperties\":{\"[a-z]+\":{\"type\":\"integer\"}}}";
    expect(pp_any, C, "{\"1a\":3,\"12\":[true]}", 1);
    expect(pp_any, C, "{\"1a\":\"3\"}", 0);
    static const char pp_univ[] = "{\"type\":\"object\",\"patternProperties\":{\"^[a-z]*\":{\"type\":\"integer\"}}}";
    expect(pp_univ, C, "{\"1\":3}", 1);
    expect(pp_univ, C, "{\"1\":\"3\"}", 0);
    expect_unsupported("{\"properties\":{\"a\":{}},\"patternProperties\":{\"^\\\\d+$\":{}}}", "patternProperties");
    expect_unsupported("{\"type\":\"string\",\"pattern\":\"^(ab)+$\",\"maxLength\":4}", "maxLength");
    expect_unsupported("{\"type\":\"string\",\"pattern\":\"^[a-z]+$\",\"maxLength\":0}", "maxLength");
    expect_unsupported("{\"type\":\"string\",\"pattern\":\"^[a-z]+\",\"maxLength\":4}", "maxLength");
    expect("{\"type\":\"string\",\"format\":\"date\"}", C, "\"2024-02-29\"", 1);
    expect("{\"type\":\"string\",\"format\":\"date\"}", C, "\"2023-02-29\"", 0);
    expect("{\"type\":\"string\",\"format\":\"uuid\"}", C, "\"123e4567-e89b-12d3-a456-426614174000\"", 1);
    expect("{\"type\":\"string\",\"format\":\"date\"}", C | CINFER_GRAMMAR_FORMAT_ANNOTATION, "\"x\"", 1);
}

int main(void) {
    cinfer_grammar_vocab *v = gt_byte_vocab();
    V = v;
    /* unsupported keywords are errors naming them */
    expect_unsupported("{\"type\":\"array\",\"uniqueItems\":true}", "uniqueItems");
    expect_unsupported("{\"not\":{}}", "not");
    expect_unsupported("{\"if\":{},\"then\":{}}", "if");
    expect_unsupported("{\"properties\":{\"a\":{\"contains\":{}}}}", "contains");
    expect_unsupported("{\"patternProperties\":{\"^x\":{}}}", "patternProperties");
    expect_unsupported("{\"$ref\":\"http://example.com/s.json\"}", "$ref");
    expect_unsupported("{\"type\":\"string\",\"format\":\"bogus\"}", "format");
    expect_unsupported("{\"oneOf\":[{\"type\":\"string\"},{\"minLength\":2}]}", "oneOf");
    /* oneOf branches told apart by object keywords only when objects are the only shared type */
    expect_unsupported("{\"oneOf\":[{\"required\":[\"k\"],\"properties\":{\"k\":{\"const\":1}}},"
                       "{\"required\":[\"k\"],\"properties\":{\"k\":{\"const\":2}}}]}",
                       "oneOf");
    static const char one_req[] = "{\"type\":\"object\",\"oneOf\":[{\"required\":[\"a\"],\"properties\":{\"a\":{},"
                                  "\"b\":{}},\"additionalProperties\":false},{\"required\":[\"c\"],"
                                  "\"properties\":{\"c\":{}},\"additionalProperties\":false}]}";
    expect(one_req, C, "{\"a\":1,\"b\":2}", 1);
    expect(one_req, C, "{\"c\":1}", 1);
    expect(one_req, C, "{\"a\":1,\"c\":2}", 0);
    expect(one_req, C, "{}", 0);
    expect_unsupported("{\"type\":\"number\",\"minimum\":1.5}", "minimum");
    expect_unsupported("{\"type\":\"string\",\"pattern\":\"(?=a)\"}", "pattern");
    cinfer_grammar_error err;
    CHECK(gt_compile(CINFER_GRAMMAR_JSON_SCHEMA, "{\"type\":", 0, &err) == NULL && err.position >= 0);
    CHECK(gt_compile(CINFER_GRAMMAR_JSON_SCHEMA, "false", 0, &err) == NULL);
    /* integers and numbers */
    expect("{\"type\":\"integer\",\"minimum\":-5,\"exclusiveMaximum\":120}", C, "119", 1);
    expect("{\"type\":\"integer\",\"minimum\":-5,\"exclusiveMaximum\":120}", C, "120", 0);
    expect("{\"type\":\"integer\",\"minimum\":-5,\"exclusiveMaximum\":120}", C, "-5", 1);
    expect("{\"type\":\"integer\",\"minimum\":-5,\"exclusiveMaximum\":120}", C, "-6", 0);
    expect("{\"type\":\"integer\",\"minimum\":-5,\"exclusiveMaximum\":120}", C, "007", 0);
    expect("{\"type\":\"integer\",\"minimum\":100}", C, "99999999999999999999999", 1);
    expect("{\"type\":\"integer\",\"multipleOf\":7}", C, "-49", 1);
    expect("{\"type\":\"integer\",\"multipleOf\":7}", C, "50", 0);
    expect("{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", C, "0.999", 1);
    expect("{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", C, "1.0", 1);
    expect("{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", C, "1.01", 0);
    expect("{\"type\":\"number\",\"exclusiveMinimum\":-2,\"maximum\":0}", C, "-1.99", 1);
    expect("{\"type\":\"number\",\"exclusiveMinimum\":-2,\"maximum\":0}", C, "-2", 0);
    expect("{\"type\":\"number\",\"exclusiveMinimum\":-2,\"maximum\":0}", C, "-0.5", 1);
    expect("{\"type\":\"number\",\"exclusiveMinimum\":-2,\"maximum\":0}", C, "0", 1);
    expect("{\"type\":\"number\"}", C, "-1.5e+10", 1);
    /* strings */
    expect("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", C, "\"\xc3\xa9\xc3\xa9\"", 1);
    expect("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", C, "\"abcd\"", 0);
    test_pattern_limits();
    /* objects */
    static const char obj[] = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":"
                              "\"string\"}},\"required\":[\"b\"],\"additionalProperties\":{\"type\":\"boolean\"}}";
    expect(obj, C, "{\"b\":\"x\"}", 1);
    expect(obj, C, "{\"a\":1}", 0);
    expect(obj, C, "{\"a\":1,\"b\":\"x\",\"zz\":true}", 1);
    expect(obj, C, "{\"b\":\"x\",\"a\":true}", 0); /* "a" is declared: not an additional property */
    expect(obj, C, "{\"b\":\"x\",\"ab\":false}", 1);
    expect(obj, 0, "{ \"b\": \"x\" }", 1);
    expect(obj, C, "{ \"b\": \"x\" }", 0);
    expect("{\"type\":\"object\",\"minProperties\":1,\"maxProperties\":2}", C, "{}", 0);
    expect("{\"type\":\"object\",\"minProperties\":1,\"maxProperties\":2}", C, "{\"x\":1,\"y\":[]}", 1);
    expect("{\"type\":\"object\",\"minProperties\":1,\"maxProperties\":2}", C, "{\"x\":1,\"y\":2,\"z\":3}", 0);
    /* arrays */
    static const char arr[] = "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"}],\"items\":{\"type\":"
                              "\"integer\"},\"minItems\":2,\"maxItems\":3}";
    expect(arr, C, "[\"a\",1]", 1);
    expect(arr, C, "[\"a\"]", 0);
    expect(arr, C, "[\"a\",1,2,3]", 0);
    expect(arr, C, "[1,1]", 0);
    /* recursion and combinators */
    static const char tree[] =
        "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
        "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"],"
        "\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}";
    expect(tree, C, "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3}]},{\"v\":4}]}", 1);
    expect(tree, C, "{\"v\":1,\"kids\":[{\"kids\":[]}]}", 0);
    expect("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":1}]}", C, "\"a\"", 1);
    expect("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":1}]}", C, "\"ab\"", 0);
    expect(
        "{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"},\"x\":{\"type\":\"integer\"}},"
        "\"required\":[\"k\"]},{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"b\"}},\"required\":[\"k\"]}]}",
        C, "{\"k\":\"a\",\"x\":1}", 1);
    expect("{\"allOf\":[{\"type\":\"integer\",\"minimum\":1},{\"maximum\":3}]}", C, "3", 1);
    expect("{\"allOf\":[{\"type\":\"integer\",\"minimum\":1},{\"maximum\":3}]}", C, "4", 0);
    expect("{\"enum\":[1,\"a\",null,{\"x\":[1]}],\"type\":[\"string\",\"object\"]}", C, "\"a\"", 1);
    expect("{\"enum\":[1,\"a\",null,{\"x\":[1]}],\"type\":[\"string\",\"object\"]}", C, "1", 0);
    expect("{\"enum\":[1,\"a\",null,{\"x\":[1]}],\"type\":[\"string\",\"object\"]}", C, "{\"x\":[1]}", 1);
    expect("{\"enum\":[\"ab\",\"abc\"],\"maxLength\":2}", C, "\"abc\"", 0);
    /* choice and json_object */
    cinfer_grammar *g = gt_compile(CINFER_GRAMMAR_CHOICE, "[\"yes\",\"no\"]", 0, &err);
    CHECK(g && gt_accepts(g, v, "no", 2) == 1 && gt_accepts(g, v, "n", 1) == 0);
    cinfer_grammar_release(g);
    CHECK(gt_compile(CINFER_GRAMMAR_CHOICE, "[1]", 0, &err) == NULL);
    g = gt_compile(CINFER_GRAMMAR_JSON_OBJECT, NULL, 0, &err);
    CHECK(g && gt_accepts(g, v, "{\"a\": [1, {}]}", 14) == 1 && gt_accepts(g, v, "[1]", 3) == 0);
    cinfer_grammar_release(g);
    cinfer_grammar_vocab_free(v);
    return test_finish();
}
