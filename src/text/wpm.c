/* wpm.c - WordPiece (placeholder while BPE lands). */
#include "text/tok_internal.h"

int wpm_encode(const tokenizer *t, const char *text, size_t len, tok_idvec *out, cf_err *err) {
    (void)t, (void)text, (void)len, (void)out;
    return cf_fail(err, "tokenize: WordPiece is not implemented yet");
}
