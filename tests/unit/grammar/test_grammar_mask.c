/* test_grammar_mask.c - token masks against brute force on a real vocabulary (llama-spm, 32k):
 * random walks through several grammars (JSON Schema with strings/numbers/enums/arrays/nested
 * objects, json_object, GBNF, regex); at every step the mask (cached context-independent part +
 * boundary replay + transition memo) must equal, token by token, "a fork of the matcher accepts
 * this token"; EOS is allowed exactly when the match is complete. Walks pick random allowed
 * tokens (seeded), and exercise rollback (re-computing a mask after undoing steps must give the
 * same mask as before) and fork. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/grammar.h"
#include "format/gguf.h"
#include "testutil.h"
#include "text/tokenizer.h"

static uint64_t rng = 0x1234567;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static cinfer_grammar_vocab *load_vocab(tokenizer **tok_out, uint32_t *eos_out) {
    const char *path = shared_path("fixtures/vocab/ggml-vocab-llama-spm.gguf");
    gguf_file *f;
    cf_err err;
    if (gguf_open(path, &f, &err) || tokenizer_load_gguf(f, tok_out, &err)) return NULL;
    gguf_close(f);
    int32_t n = tokenizer_n_vocab(*tok_out);
    cinfer_grammar_token *toks = calloc((size_t)n, sizeof *toks);
    char buf[512];
    for (int32_t i = 0; i < n; i++) {
        int type = tokenizer_token_type(*tok_out, i);
        size_t len = tokenizer_token_bytes(*tok_out, i, false, buf, sizeof buf);
        if (len > sizeof buf) len = sizeof buf;
        uint8_t *b = malloc(len ? len : 1);
        memcpy(b, buf, len);
        toks[i] = (cinfer_grammar_token){b, (uint32_t)len, (uint8_t)(type == 2 || type == 3 || type == 5 || len == 0)};
    }
    uint32_t eos = (uint32_t)tokenizer_eos(*tok_out);
    *eos_out = eos;
    cinfer_grammar_vocab *v = cinfer_grammar_vocab_new(toks, (uint32_t)n, &eos, 1, NULL);
    for (int32_t i = 0; i < n; i++) free((void *)toks[i].bytes);
    free(toks);
    return v;
}

static int bit(const uint32_t *mask, uint32_t t) { return (int)(mask[t / 32] >> (t % 32) & 1); }

/* Checks the mask of m against brute force; returns the number of allowed tokens. */
static int check_mask(cinfer_grammar_matcher *m, const uint32_t *mask, uint32_t n_vocab, const char *what) {
    int allowed = 0, bad = 0;
    for (uint32_t t = 0; t < n_vocab; t++) {
        cinfer_grammar_matcher *f = cinfer_grammar_matcher_fork(m, NULL);
        int ok = cinfer_grammar_matcher_accept(f, t, NULL) == 0;
        cinfer_grammar_matcher_free(f);
        if (ok != bit(mask, t) && bad++ < 5)
            fprintf(stderr, "%s: token %u mask %d brute %d\n", what, t, bit(mask, t), ok);
        allowed += ok;
    }
    CHECKF(bad == 0, "%s: %d tokens differ", what, bad);
    return allowed;
}

static void walk(cinfer_grammar_kind kind, const char *spec, const cinfer_grammar_vocab *v, uint32_t eos, int steps,
                 int brute_every) {
    cinfer_grammar_error err;
    cinfer_grammar_spec s = {kind, spec, spec ? strlen(spec) : 0, 0};
    cinfer_grammar *g = cinfer_grammar_compile(&s, NULL, &err);
    CHECKF(g != NULL, "compile %.60s: %s", spec ? spec : "(json_object)", err.msg);
    if (!g) return;
    uint32_t n = cinfer_grammar_vocab_size(v);
    size_t words = cinfer_grammar_mask_words(v);
    uint32_t *mask = malloc(words * 4), *again = malloc(words * 4);
    cinfer_grammar_matcher *m = cinfer_grammar_matcher_new(g, v, NULL);
    for (int step = 0; step < steps; step++) {
        int count = cinfer_grammar_matcher_fill_mask(m, mask, words);
        CHECK(bit(mask, eos) == cinfer_grammar_matcher_is_accepting(m));
        if (step % brute_every == 0) CHECK(check_mask(m, mask, n, spec ? spec : "json_object") == count);
        if (count == 0) break;
        /* pick a random allowed token (EOS only at the end) */
        uint32_t pick = 0;
        for (int tries = 0; tries < 100000; tries++) {
            pick = rnd(n);
            if (bit(mask, pick) && (pick != eos || count == 1)) break;
        }
        if (!bit(mask, pick)) break;
        CHECK(cinfer_grammar_matcher_accept(m, pick, NULL) == 0);
        if (pick == eos) break;
        if (step % 5 == 2) { /* rollback one step: the same mask again; then redo the step on a fork */
            CHECK(cinfer_grammar_matcher_rollback(m, 1) == 0);
            cinfer_grammar_matcher_fill_mask(m, again, words);
            CHECK(!memcmp(again, mask, words * 4));
            cinfer_grammar_matcher *f = cinfer_grammar_matcher_fork(m, NULL);
            CHECK(f && cinfer_grammar_matcher_accept(f, pick, NULL) == 0);
            cinfer_grammar_matcher_free(m);
            m = f;
        }
    }
    cinfer_grammar_matcher_free(m);
    cinfer_grammar_release(g);
    free(mask);
    free(again);
}

/* A counted string at its maxLength accepts no start of another character (an escape, a UTF-8
 * lead byte): the lexeme could never end, so such a token would be a dead end. One below it, the
 * whole character and the closing quote are accepted. */
static void no_dead_end_at_max(const cinfer_grammar_vocab *v) {
    static const char *spec = "{\"type\":\"string\",\"maxLength\":300}";
    char full[302], part[301]; /* '"' + 300 and 299 characters */
    full[0] = part[0] = '"';
    memset(full + 1, 'a', 300);
    memset(part + 1, 'a', 299);
    full[301] = part[300] = 0;
    cinfer_grammar_error err;
    cinfer_grammar_spec s = {CINFER_GRAMMAR_JSON_SCHEMA, spec, strlen(spec), 0};
    cinfer_grammar *g = cinfer_grammar_compile(&s, NULL, &err);
    CHECKF(g != NULL, "compile %s: %s", spec, err.msg);
    if (!g) return;
    const char *const cases[][2] = {{full, "\\"}, {full, "\xc3"}, {part, "\\n\""}, {part, "\xc3\xa9\""}};
    for (int i = 0; i < 4; i++) {
        cinfer_grammar_matcher *m = cinfer_grammar_matcher_new(g, v, NULL);
        CHECK(m &&
              cinfer_grammar_matcher_accept_bytes(m, (const uint8_t *)cases[i][0], strlen(cases[i][0]), NULL) == 0);
        int rc =
            m ? cinfer_grammar_matcher_accept_bytes(m, (const uint8_t *)cases[i][1], strlen(cases[i][1]), NULL) : -1;
        CHECKF((rc == 0) == (i >= 2), "maxLength 300, %zu characters read: bytes %s %s", strlen(cases[i][0]) - 1,
               cases[i][1], rc == 0 ? "accepted" : "refused");
        cinfer_grammar_matcher_free(m);
    }
    cinfer_grammar_release(g);
}

int main(void) {
    tokenizer *tok = NULL;
    uint32_t eos = 0;
    cinfer_grammar_vocab *v = load_vocab(&tok, &eos);
    if (!v) return tu_missing_fixture("fixtures/vocab/ggml-vocab-llama-spm.gguf");
    no_dead_end_at_max(v);
    walk(CINFER_GRAMMAR_JSON_SCHEMA,
         "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\","
         "\"minimum\":0,\"maximum\":150},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"bc\",\"d e\"]},"
         "\"maxItems\":3},\"score\":{\"type\":\"number\"},\"ok\":{\"type\":\"boolean\"},\"id\":{\"type\":\"string\","
         "\"pattern\":\"^[A-Z]{2}[0-9]{3}$\"},\"sub\":{\"$ref\":\"#\"}},\"required\":[\"name\",\"age\"]}",
         v, eos, 60, 3);
    walk(CINFER_GRAMMAR_JSON_OBJECT, NULL, v, eos, 40, 4);
    walk(CINFER_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"maxLength\":12}", v, eos, 20, 2);
    /* counted lexemes (lexeme_count.c): counts far past the longest token (masks shared across
     * positions by the clamped count), required lengths, unbounded, nullable, inside an object */
    walk(CINFER_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"minLength\":200,\"maxLength\":300}", v, eos, 70, 4);
    walk(CINFER_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"minLength\":150}", v, eos, 45, 5);
    /* counts within the longest token of maxLength: masks derived from the base count's walk by
     * what each token needs (mask_lexeme.c), every step checked */
    walk(CINFER_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"minLength\":5,\"maxLength\":40}", v, eos, 45, 1);
    walk(CINFER_GRAMMAR_JSON_SCHEMA, "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":9}}", v, eos, 45,
         1);
    walk(CINFER_GRAMMAR_JSON_SCHEMA,
         "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":1024},\"b\":{\"type\":"
         "[\"string\",\"null\"],\"minLength\":3,\"maxLength\":30}},\"required\":[\"a\",\"b\"]}",
         v, eos, 50, 5);
    walk(CINFER_GRAMMAR_GBNF, "root ::= \"<\" [a-z ]{20,300} \">\"", v, eos, 40, 5); /* one-byte elements */
    /* one string rule per distinct pattern (json_types.c), shared by properties, lexed once into
     * an unanchored search DFA with the delimited candidates' own budget (lexeme.c) */
    walk(CINFER_GRAMMAR_JSON_SCHEMA,
         "{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"string\",\"pattern\":\"\\\\w+\\\\.dll\"},"
         "\"q\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"pattern\":\"\\\\w+\\\\.dll\"}}},"
         "\"required\":[\"p\",\"q\"]}",
         v, eos, 40, 3);
    walk(CINFER_GRAMMAR_GBNF, "root ::= (\"yes\" | \"no\" | [0-9]+ \"!\") (\" \" root)?", v, eos, 30, 3);
    walk(CINFER_GRAMMAR_REGEX, "[a-c]{2,5}(x|yz)*\\.", v, eos, 20, 2);
    for (int seed = 0; seed < 3; seed++) {
        rng = 0x9e37 + (uint64_t)seed * 7919;
        walk(CINFER_GRAMMAR_JSON_SCHEMA,
             "{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"string\",\"minLength\":2}},"
             "\"additionalProperties\":{\"type\":\"number\",\"exclusiveMinimum\":0}}",
             v, eos, 40, 5);
    }
    cinfer_grammar_vocab_free(v);
    tokenizer_free(tok);
    return test_finish();
}
