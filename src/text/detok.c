/* detok.c - the streaming detokenizer (detok_* in tokenizer.h).
 *
 * State: pend[0..n_pend) is a proper prefix of one well-formed UTF-8
 * sequence (so n_pend <= 3); everything before it has been emitted. Each
 * byte of a token's piece is fed through a small decoder: ASCII and completed
 * sequences are emitted, a byte that cannot continue the pending prefix turns
 * that prefix into one U+FFFD and is then decoded afresh, a byte that cannot
 * start a sequence becomes U+FFFD (the "maximal subpart" practice of Unicode
 * ch. 3). Output never exceeds `cap`; bytes beyond it are dropped, which
 * cannot happen when cap >= 64 + tokenizer_max_token_len() because token
 * texts are valid UTF-8 (at most one U+FFFD for the held bytes plus the
 * piece itself). */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/utf8.h"

typedef struct sink {
    char *out;
    size_t cap, n;
} sink;

static void sink_put(sink *s, const void *p, size_t n) {
    size_t room = s->cap > s->n ? s->cap - s->n : 0;
    size_t k = n < room ? n : room;
    if (k) memcpy(s->out + s->n, p, k);
    s->n += k;
}

static void feed_byte(detok_stream *d, unsigned char c, sink *s) {
    for (;;) {
        if (d->n_pend == 0) {
            size_t len = utf8_seq_len(c);
            if (len == 1) sink_put(s, &c, 1);
            else if (len == 0) sink_put(s, UTF8_REPLACEMENT, 3);
            else d->pend[d->n_pend++] = c;
            return;
        }
        if (utf8_cont_ok(d->pend[0], d->n_pend, c)) {
            d->pend[d->n_pend++] = c;
            if (d->n_pend == utf8_seq_len(d->pend[0])) {
                sink_put(s, d->pend, d->n_pend);
                d->n_pend = 0;
            }
            return;
        }
        sink_put(s, UTF8_REPLACEMENT, 3); /* the held prefix is invalid; retry c */
        d->n_pend = 0;
    }
}

void detok_init(detok_stream *d, const tokenizer *t, bool strip_leading_space, bool special) {
    memset(d, 0, sizeof *d);
    d->tok = t;
    d->special = special;
    d->strip_leading = strip_leading_space;
}

size_t detok_push(detok_stream *d, int32_t id, char *out, size_t cap) {
    char local[256];
    char *piece = local;
    size_t n = tokenizer_token_bytes(d->tok, id, d->special, local, sizeof local);
    if (n > sizeof local) {
        piece = malloc(n);
        if (!piece) return 0;
        tokenizer_token_bytes(d->tok, id, d->special, piece, n);
    }
    size_t start = 0;
    int type = tokenizer_token_type(d->tok, id);
    if (d->strip_leading && n > 0 && type != TOKEN_TYPE_CONTROL && type != TOKEN_TYPE_UNKNOWN) {
        if (piece[0] == ' ') start = 1;
        d->strip_leading = false;
    }
    sink s = {out, cap, 0};
    for (size_t i = start; i < n; i++) feed_byte(d, (unsigned char)piece[i], &s);
    if (piece != local) free(piece);
    return s.n;
}

size_t detok_flush(detok_stream *d, char *out, size_t cap) {
    sink s = {out, cap, 0};
    if (d->n_pend) sink_put(&s, UTF8_REPLACEMENT, 3);
    d->n_pend = 0;
    return s.n;
}
