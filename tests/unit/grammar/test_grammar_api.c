/* test_grammar_api.c - the public API contract of cinfer/grammar.h on the byte vocabulary:
 * compile cache (hit, miss, different flags), limits (size, time, depth, spec size) giving clean
 * errors, pathological specs (huge enum, deep $ref chains, exponential-looking regex) within the
 * limits, the matching item limit, EOS allowed only when complete and terminating the matcher, special tokens never
 * allowed, all-or-nothing accept_bytes, rollback (bounds, undoing EOS), fork independence,
 * forced bytes and forced token. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_testutil.h"
#include "testutil.h"

static int bit(const uint32_t *mask, uint32_t t) { return (int)(mask[t / 32] >> (t % 32) & 1); }

static void test_cache(void) {
    cinfer_grammar_cache *c = cinfer_grammar_cache_new(2);
    const char *s1 = "{\"type\":\"integer\"}", *s2 = "{\"type\":\"string\"}";
    cinfer_grammar_spec a = {CINFER_GRAMMAR_JSON_SCHEMA, s1, strlen(s1), 0},
                        b = {CINFER_GRAMMAR_JSON_SCHEMA, s2, strlen(s2), 0};
    cinfer_grammar_spec a2 = a;
    a2.flags = CINFER_GRAMMAR_JSON_COMPACT;
    int hit = -1;
    cinfer_grammar *g1 = cinfer_grammar_cache_get(c, &a, NULL, &hit, NULL);
    CHECK(g1 && hit == 0);
    cinfer_grammar *g2 = cinfer_grammar_cache_get(c, &a, NULL, &hit, NULL);
    CHECK(g2 == g1 && hit == 1);
    cinfer_grammar *g3 = cinfer_grammar_cache_get(c, &a2, NULL, &hit, NULL);
    CHECK(g3 && g3 != g1 && hit == 0);
    cinfer_grammar *g4 = cinfer_grammar_cache_get(c, &b, NULL, &hit, NULL); /* evicts the LRU */
    CHECK(g4 && hit == 0);
    cinfer_grammar_error err;
    cinfer_grammar_spec bad = {CINFER_GRAMMAR_JSON_SCHEMA, "{\"not\":{}}", 10, 0};
    CHECK(cinfer_grammar_cache_get(c, &bad, NULL, &hit, &err) == NULL && !strcmp(err.keyword, "not"));
    cinfer_grammar_release(g1);
    cinfer_grammar_release(g2);
    cinfer_grammar_release(g3);
    cinfer_grammar_release(g4);
    cinfer_grammar_cache_free(c);
}

static void test_limits(void) {
    cinfer_grammar_error err;
    /* a huge enum */
    size_t cap = 1 << 20, n = 0;
    char *big = malloc(cap);
    n += (size_t)snprintf(big + n, cap - n, "{\"enum\":[");
    for (int i = 0; i < 50000; i++) n += (size_t)snprintf(big + n, cap - n, "%s\"value-%d\"", i ? "," : "", i);
    n += (size_t)snprintf(big + n, cap - n, "]}");
    cinfer_grammar_spec s = {CINFER_GRAMMAR_JSON_SCHEMA, big, n, 0};
    cinfer_grammar_limits lim = {.max_rules = 10000};
    CHECK(cinfer_grammar_compile(&s, &lim, &err) == NULL && strstr(err.msg, "too large"));
    cinfer_grammar_limits fast = {.max_compile_ms = 0.01};
    CHECK(cinfer_grammar_compile(&s, &fast, &err) == NULL && strstr(err.msg, "time limit"));
    cinfer_grammar_limits small = {.max_spec_size = 100};
    CHECK(cinfer_grammar_compile(&s, &small, &err) == NULL && strstr(err.msg, "too large"));
    /* within the default size limits; the wall-clock limit is raised because a loaded machine under
     * ASan took over 2 s of wall time for 0.35 s of CPU */
    cinfer_grammar_limits roomy_clock = {.max_compile_ms = 60000};
    cinfer_grammar *g = cinfer_grammar_compile(&s, &roomy_clock, &err);
    CHECKF(g != NULL, "%s", err.msg);
    cinfer_grammar_release(g);
    /* deep nesting */
    n = 0;
    for (int i = 0; i < 200; i++) n += (size_t)snprintf(big + n, cap - n, "{\"items\":");
    n += (size_t)snprintf(big + n, cap - n, "{}");
    for (int i = 0; i < 200; i++) big[n++] = '}';
    s.len = n;
    CHECK(cinfer_grammar_compile(&s, NULL, &err) == NULL && strstr(err.msg, "depth"));
    /* a long chain of $refs, and mutual recursion */
    n = (size_t)snprintf(big, cap, "{\"$defs\":{");
    for (int i = 0; i < 50; i++)
        n += (size_t)snprintf(big + n, cap - n, "%s\"d%d\":{\"$ref\":\"#/$defs/d%d\"}", i ? "," : "", i, i + 1);
    n +=
        (size_t)snprintf(big + n, cap - n,
                         ",\"d50\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/d0\"}}},\"$ref\":\"#/$defs/d0\"}");
    s.len = n;
    g = cinfer_grammar_compile(&s, NULL, &err);
    CHECKF(g != NULL, "%s", err.msg);
    cinfer_grammar_vocab *v = gt_byte_vocab();
    CHECK(g && gt_accepts(g, v, "[[],[[]]]", 9) == 1);
    cinfer_grammar_release(g);
    cinfer_grammar_vocab_free(v);
    free(big);
}

static void test_matcher(void) {
    cinfer_grammar_vocab *v = gt_byte_vocab();
    cinfer_grammar_error err;
    cinfer_grammar *g = gt_compile(CINFER_GRAMMAR_JSON_SCHEMA,
                                   "{\"type\":\"object\",\"properties\":{\"answer\":{\"enum\":[\"yes\",\"no\"]}},"
                                   "\"required\":[\"answer\"],\"additionalProperties\":false}",
                                   CINFER_GRAMMAR_JSON_COMPACT, &err);
    CHECK(g != NULL);
    cinfer_grammar_matcher *m = cinfer_grammar_matcher_new(g, v, &err);
    size_t words = cinfer_grammar_mask_words(v);
    uint32_t *mask = calloc(words, 4);
    uint8_t forced[64];
    size_t nf = cinfer_grammar_matcher_forced_bytes(m, forced, sizeof forced);
    CHECK(nf == 11 && !memcmp(forced, "{\"answer\":\"", 11));
    uint32_t tok = 0;
    CHECK(cinfer_grammar_matcher_forced_token(m, &tok) == 1 && tok == '{');
    CHECK(cinfer_grammar_matcher_fill_mask(m, mask, words) == 1 && bit(mask, '{') && !bit(mask, GT_EOS));
    CHECK(cinfer_grammar_matcher_accept(m, GT_EOS, NULL) == -1);
    CHECK(cinfer_grammar_matcher_accept(m, GT_SPECIAL, NULL) == -1);
    CHECK(cinfer_grammar_matcher_accept_bytes(m, (const uint8_t *)"{\"answer\":\"maybe", 16, NULL) == -1);
    CHECK(cinfer_grammar_matcher_steps(m) == 0);
    CHECK(cinfer_grammar_matcher_accept_bytes(m, (const uint8_t *)"{\"answer\":\"", 11, NULL) == 0);
    CHECK(cinfer_grammar_matcher_fill_mask(m, mask, words) == 2 && bit(mask, 'y') && bit(mask, 'n'));
    cinfer_grammar_matcher *f = cinfer_grammar_matcher_fork(m, NULL);
    CHECK(cinfer_grammar_matcher_accept(m, 'y', NULL) == 0);
    CHECK(cinfer_grammar_matcher_accept(f, 'n', NULL) == 0);
    nf = cinfer_grammar_matcher_forced_bytes(m, forced, sizeof forced);
    CHECK(nf == 4 && !memcmp(forced, "es\"}", 4));
    nf = cinfer_grammar_matcher_forced_bytes(f, forced, sizeof forced);
    CHECK(nf == 3 && !memcmp(forced, "o\"}", 3));
    CHECK(cinfer_grammar_matcher_accept_bytes(m, forced, 0, NULL) == 0); /* an empty step */
    CHECK(cinfer_grammar_matcher_accept_bytes(m, (const uint8_t *)"es\"}", 4, NULL) == 0);
    CHECK(cinfer_grammar_matcher_is_accepting(m));
    CHECK(cinfer_grammar_matcher_fill_mask(m, mask, words) == 1 && bit(mask, GT_EOS));
    CHECK(cinfer_grammar_matcher_accept(m, GT_EOS, NULL) == 0 && cinfer_grammar_matcher_is_terminated(m));
    CHECK(cinfer_grammar_matcher_fill_mask(m, mask, words) == 0);
    CHECK(cinfer_grammar_matcher_accept(m, '}', NULL) == -1);
    CHECK(cinfer_grammar_matcher_rollback(m, 99) == -1);
    CHECK(cinfer_grammar_matcher_rollback(m, 1) == 0 && !cinfer_grammar_matcher_is_terminated(m));
    CHECK(cinfer_grammar_matcher_is_accepting(m));
    CHECK(cinfer_grammar_matcher_rollback(m, 3) == 0 && cinfer_grammar_matcher_steps(m) == 1);
    CHECK(cinfer_grammar_matcher_fill_mask(m, mask, words) == 2);
    CHECK(!cinfer_grammar_matcher_is_accepting(f));
    cinfer_grammar_matcher_free(f);
    cinfer_grammar_matcher_free(m);
    cinfer_grammar_release(g);
    CHECK(cinfer_grammar_mask_words(v) == (258 + 31) / 32);
    free(mask);
    cinfer_grammar_vocab_free(v);
    /* bad vocabularies */
    uint32_t eos = 5;
    cinfer_grammar_token t = {(const uint8_t *)"a", 1, 0};
    CHECK(cinfer_grammar_vocab_new(&t, 1, &eos, 1, &err) == NULL);
    CHECK(cinfer_grammar_vocab_new(NULL, 0, NULL, 0, &err) == NULL);
}

/* The matching item limit: an ambiguous grammar (a counted repetition of a nullable atom keeps
 * every count alive at each position) is refused at compile time when its start set is over the
 * limit, and past the start its over-limit continuations are left out of masks, refused by
 * accept with the limit's message and reported by limit_error; the same regex is matched
 * normally under the default limit. */
static void test_item_limit(void) {
    cinfer_grammar_vocab *v = gt_byte_vocab();
    cinfer_grammar_error err;
    size_t words = cinfer_grammar_mask_words(v);
    uint32_t *mask = calloc(words, 4);
    cinfer_grammar_limits lim = {.max_set_items = 300};
    cinfer_grammar_spec at_start = {CINFER_GRAMMAR_REGEX, "(a|){400}", 9, 0};
    CHECK(cinfer_grammar_compile(&at_start, &lim, &err) == NULL && strstr(err.msg, "too ambiguous"));
    cinfer_grammar_spec later = {CINFER_GRAMMAR_REGEX, "b(a|){400}", 10, 0};
    cinfer_grammar *g = cinfer_grammar_compile(&later, &lim, &err);
    CHECKF(g != NULL, "%s", err.msg);
    cinfer_grammar_matcher *m = cinfer_grammar_matcher_new(g, v, &err);
    CHECK(m && cinfer_grammar_matcher_limit_error(m) == NULL);
    CHECK(cinfer_grammar_matcher_fill_mask(m, mask, words) == 0 && cinfer_grammar_matcher_limit_error(m) != NULL);
    CHECK(cinfer_grammar_matcher_accept(m, 'b', &err) == -1 && strstr(err.msg, "max_set_items"));
    CHECK(cinfer_grammar_matcher_accept(m, 'c', &err) == -1 && strstr(err.msg, "not allowed"));
    cinfer_grammar_matcher_free(m);
    /* a second matcher of the grammar gets the (cached) empty mask and reports the limit as well */
    m = cinfer_grammar_matcher_new(g, v, &err);
    CHECK(m && cinfer_grammar_matcher_fill_mask(m, mask, words) == 0 && cinfer_grammar_matcher_limit_error(m) != NULL);
    cinfer_grammar_matcher_free(m);
    cinfer_grammar_release(g);
    g = cinfer_grammar_compile(&later, NULL, &err);
    CHECKF(g != NULL, "%s", err.msg);
    m = cinfer_grammar_matcher_new(g, v, &err);
    CHECK(m && cinfer_grammar_matcher_accept_bytes(m, (const uint8_t *)"baaaa", 5, &err) == 0);
    CHECK(cinfer_grammar_matcher_is_accepting(m) && cinfer_grammar_matcher_limit_error(m) == NULL);
    cinfer_grammar_matcher_free(m);
    cinfer_grammar_release(g);
    free(mask);
    cinfer_grammar_vocab_free(v);
}

int main(void) {
    test_cache();
    test_limits();
    test_item_limit();
    test_matcher();
    return test_finish();
}
