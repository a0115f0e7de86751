/* grammar_testutil.h - helpers for the grammar tests: a byte vocabulary (token i < 256 is the
 * byte i, token 256 is EOS, token 257 a special token) and a one-call "does this grammar accept
 * these bytes" check through the public matcher API. Header-only (static functions). */
#ifndef CINFER_TESTS_GRAMMAR_TESTUTIL_H
#define CINFER_TESTS_GRAMMAR_TESTUTIL_H

#include <stdlib.h>
#include <string.h>

#include "cinfer/grammar.h"

#define GT_EOS 256u
#define GT_SPECIAL 257u

static inline cinfer_grammar_vocab *gt_byte_vocab(void) {
    static uint8_t bytes[256];
    cinfer_grammar_token toks[258];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (uint8_t)i;
        toks[i] = (cinfer_grammar_token){.bytes = &bytes[i], .len = 1, .special = 0};
    }
    toks[256] = (cinfer_grammar_token){.bytes = NULL, .len = 0, .special = 1};
    toks[257] = (cinfer_grammar_token){.bytes = NULL, .len = 0, .special = 1};
    uint32_t eos = GT_EOS;
    return cinfer_grammar_vocab_new(toks, 258, &eos, 1, NULL);
}

static inline cinfer_grammar *gt_compile(cinfer_grammar_kind kind, const char *text, uint32_t flags,
                                         cinfer_grammar_error *err) {
    cinfer_grammar_spec spec = {.kind = kind, .text = text, .len = text ? strlen(text) : 0, .flags = flags};
    return cinfer_grammar_compile(&spec, NULL, err);
}

/* 1 if g accepts exactly s (as a complete match), 0 if not, -1 on error. */
static inline int gt_accepts(cinfer_grammar *g, const cinfer_grammar_vocab *v, const char *s, size_t len) {
    cinfer_grammar_matcher *m = cinfer_grammar_matcher_new(g, v, NULL);
    if (!m) return -1;
    int ok = cinfer_grammar_matcher_accept_bytes(m, (const uint8_t *)s, len, NULL) == 0 &&
             cinfer_grammar_matcher_is_accepting(m);
    cinfer_grammar_matcher_free(m);
    return ok;
}

#endif
