/* grammar_fuzz.h - shared driver of the grammar fuzz harnesses (header-only, static): the input
 * is split at the first NUL into a spec and a walk seed; the spec is compiled under tight limits
 * (a clean error is fine), then seeded random walks over a byte vocabulary check the engine's
 * invariants at every step: a token picked from the mask is accepted, EOS is in the mask exactly
 * when the match is complete, a dead end (empty mask while not complete) never happens, rollback
 * and re-accept give the same mask, and every complete walk is re-accepted from scratch by a new
 * matcher and handed to the harness's validator (an independent oracle where one exists). Any
 * violation aborts. */
#ifndef CINFER_FUZZ_GRAMMAR_FUZZ_H
#define CINFER_FUZZ_GRAMMAR_FUZZ_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/grammar.h"

#define GF_EOS 256u
/* Bytes per walk. The Earley matcher is cubic in the input length on highly ambiguous grammars
 * ((a*a)*a(a|b){5}: four 200-byte walks took 15 s, past libFuzzer's 10 s timeout; the GBNF
 * [^",]+++++++{1,3} took 12 s at 64 bytes); 32 keeps inputs under it. The cost itself is a known
 * limit (docs/grammar.md). */
#define GF_MAX_STEPS 32

typedef int (*gf_validator)(const char *spec, size_t spec_len, const uint8_t *out, size_t len, void *ctx);

static cinfer_grammar_vocab *gf_vocab(void) {
    static uint8_t bytes[256];
    cinfer_grammar_token toks[257];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (uint8_t)i;
        toks[i] = (cinfer_grammar_token){&bytes[i], 1, 0};
    }
    toks[256] = (cinfer_grammar_token){NULL, 0, 1};
    uint32_t eos = GF_EOS;
    return cinfer_grammar_vocab_new(toks, 257, &eos, 1, NULL);
}

static void gf_fail(const char *what) {
    fprintf(stderr, "grammar fuzz invariant violated: %s\n", what);
    abort();
}

static int gf_bit(const uint32_t *mask, uint32_t t) { return (int)(mask[t / 32] >> (t % 32) & 1); }

static void gf_walk(cinfer_grammar *g, const cinfer_grammar_vocab *v, uint64_t seed, const char *spec, size_t spec_len,
                    gf_validator validate, void *ctx) {
    uint32_t mask[9], again[9];
    uint8_t out[256];
    size_t n = 0;
    cinfer_grammar_matcher *m = cinfer_grammar_matcher_new(g, v, NULL);
    if (!m) gf_fail("matcher_new");
    for (int step = 0; step < GF_MAX_STEPS; step++) {
        int count = cinfer_grammar_matcher_fill_mask(m, mask, 9);
        int accepting = cinfer_grammar_matcher_is_accepting(m);
        if (gf_bit(mask, GF_EOS) != accepting) gf_fail("EOS in the mask iff complete");
        if (count == 0 && cinfer_grammar_matcher_limit_error(m)) break; /* the item limit, reported */
        if (count == 0) gf_fail("dead end: empty mask");
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t pick = (uint32_t)(seed >> 33) % 257;
        for (uint32_t k = 0; k < 257 && !gf_bit(mask, pick); k++) pick = (pick + 1) % 257;
        if (pick == GF_EOS || n == sizeof out) {
            if (!accepting) break; /* out of room before completing: nothing to validate */
            break;
        }
        if (cinfer_grammar_matcher_accept(m, pick, NULL)) gf_fail("a token from the mask was refused");
        out[n++] = (uint8_t)pick;
        if (step % 9 == 4) {
            if (cinfer_grammar_matcher_rollback(m, 1)) gf_fail("rollback");
            cinfer_grammar_matcher_fill_mask(m, again, 9);
            if (memcmp(again, mask, sizeof mask)) gf_fail("mask after rollback differs");
            if (cinfer_grammar_matcher_accept(m, pick, NULL)) gf_fail("re-accept after rollback");
        }
    }
    if (cinfer_grammar_matcher_is_accepting(m)) {
        cinfer_grammar_matcher *fresh = cinfer_grammar_matcher_new(g, v, NULL);
        if (!fresh || cinfer_grammar_matcher_accept_bytes(fresh, out, n, NULL) ||
            !cinfer_grammar_matcher_is_accepting(fresh))
            gf_fail("a complete walk is not accepted from scratch");
        cinfer_grammar_matcher_free(fresh);
        if (validate && !validate(spec, spec_len, out, n, ctx)) {
            fprintf(stderr, "spec: %.*s\noutput: %.*s\n", (int)spec_len, spec, (int)n, (const char *)out);
            gf_fail("the oracle rejects a complete walk");
        }
    }
    cinfer_grammar_matcher_free(m);
}

/* Compiles data (up to the first NUL) as `kind` and walks with seeds from the rest. */
static void gf_run(cinfer_grammar_kind kind, const uint8_t *data, size_t size, gf_validator validate, void *ctx) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t spec_len = nul ? (size_t)(nul - data) : size;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (size_t i = spec_len; i < size; i++) seed = (seed ^ data[i]) * 0x100000001b3ull;
    cinfer_grammar_spec spec = {kind, (const char *)data, spec_len, 0};
    cinfer_grammar_limits lim = {.max_compile_ms = 500, .max_rules = 50000, .max_depth = 32, .max_set_items = 1000};
    cinfer_grammar_error err;
    cinfer_grammar *g = cinfer_grammar_compile(&spec, &lim, &err);
    if (!g) {
        if (!memchr(err.msg, 0, sizeof err.msg) || !err.msg[0]) gf_fail("compile failed without a message");
        return;
    }
    cinfer_grammar_vocab *v = gf_vocab();
    for (int w = 0; w < 4; w++) gf_walk(g, v, seed + (uint64_t)w * 7919, spec.text, spec_len, validate, ctx);
    cinfer_grammar_vocab_free(v);
    cinfer_grammar_release(g);
}

#endif
