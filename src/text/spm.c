/* spm.c - SentencePiece BPE encoding, bit-compatible with llama.cpp's
 * llm_tokenizer_spm (tokenizer.ggml.model = "llama").
 *
 * Algorithm, for one fragment of raw text:
 *  1. Escape: every ' ' becomes U+2581 "▁"; with space_prefix one "▁" goes
 *     in front.
 *  2. Split into symbols, one per UTF-8 character as utf8_lead_len() counts
 *     them (invalid bytes are single symbols; a truncated sequence at the end
 *     is cut short). Symbols form a doubly linked list over an array.
 *  3. Every adjacent pair whose concatenation is a vocab token goes into a
 *     max-heap keyed by (token score, then leftmost position). Pop the best;
 *     skip it if stale (either side already merged away or grown: the sizes
 *     no longer add up); otherwise merge right into left and push the new
 *     pairs with the left and right neighbours. Each merge adds at most two
 *     entries, so the heap sees < 3n pushes: O(n log n) overall.
 *  4. Walk the list: a symbol that is a vocab token is emitted as that id;
 *     any other symbol is emitted byte by byte as <0xXX> tokens (or unk).
 *     (llama.cpp's "resegment" also consults a reverse-merge map, but every
 *     merged symbol is a vocab token by construction, so only the single
 *     characters of step 2 can miss the vocabulary; the byte fallback is the
 *     whole of it.)
 * Candidate pairs longer than the longest token are not looked up.
 * Scratch memory lives in the caller's spm_ws and is reused across calls. */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/utf8.h"

typedef struct spm_sym {
    int32_t prev, next; /* -1 at the ends */
    uint32_t off, n; /* bytes [off, off + n) of the escaped buffer; n = 0 once merged away */
} spm_sym;

typedef struct spm_bigram {
    float score;
    int32_t left, right;
    uint32_t size;
} spm_bigram;

typedef struct spm_heap {
    spm_bigram *v;
    size_t n;
} spm_heap;

/* a goes before b: higher score first, then the leftmost pair. */
static bool bigram_before(const spm_bigram *a, const spm_bigram *b) {
    if (a->score != b->score) return a->score > b->score;
    return a->left < b->left;
}

static void heap_push(spm_heap *h, spm_bigram b) {
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_before(&b, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
}

static spm_bigram heap_pop(spm_heap *h) {
    spm_bigram top = h->v[0];
    spm_bigram last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_before(&h->v[c + 1], &h->v[c])) c++;
        if (!bigram_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (n > 0) h->v[i] = last;
    return top;
}

void spm_ws_free(spm_ws *ws) {
    if (!ws) return;
    free(ws->buf);
    free(ws->sym);
    free(ws->heap);
    memset(ws, 0, sizeof *ws);
}

/* Grows *p to hold at least `need` elements of `elem` bytes. */
static int ensure_cap(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Writes the escaped text into ws->buf; returns its length. */
static size_t escape_text(spm_ws *ws, const char *text, size_t len, bool space_prefix) {
    static const char sp[3] = {'\xE2', '\x96', '\x81'};
    char *o = ws->buf;
    if (space_prefix) {
        memcpy(o, sp, 3);
        o += 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(o, sp, 3);
            o += 3;
        } else *o++ = text[i];
    }
    return (size_t)(o - ws->buf);
}

static size_t split_symbols(spm_sym *sym, const char *buf, size_t len) {
    size_t n = 0, off = 0;
    while (off < len) {
        size_t cl = utf8_lead_len((unsigned char)buf[off]);
        if (cl > len - off) cl = len - off;
        sym[n].prev = (int32_t)n - 1;
        sym[n].off = (uint32_t)off;
        sym[n].n = (uint32_t)cl;
        off += cl;
        sym[n].next = off == len ? -1 : (int32_t)n + 1;
        n++;
    }
    return n;
}

static void try_add_bigram(const tokenizer *t, const char *buf, const spm_sym *sym, spm_heap *h, int32_t left,
                           int32_t right) {
    if (left < 0 || right < 0) return;
    size_t size = (size_t)sym[left].n + sym[right].n;
    if (size > t->max_token_len) return;
    int32_t id = tok_lookup(t, buf + sym[left].off, size);
    if (id < 0) return;
    spm_bigram b = {t->tokens[id].score, left, right, (uint32_t)size};
    heap_push(h, b);
}

static void merge_all(const tokenizer *t, const char *buf, spm_sym *sym, size_t n, spm_heap *h) {
    for (size_t i = 1; i < n; i++) try_add_bigram(t, buf, sym, h, (int32_t)i - 1, (int32_t)i);
    while (h->n > 0) {
        spm_bigram b = heap_pop(h);
        spm_sym *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        try_add_bigram(t, buf, sym, h, l->prev, b.left);
        try_add_bigram(t, buf, sym, h, b.left, l->next);
    }
}

static int emit_symbols(const tokenizer *t, const char *buf, const spm_sym *sym, tok_idvec *out) {
    for (int32_t i = 0; i != -1; i = sym[i].next) {
        int32_t id = tok_lookup(t, buf + sym[i].off, sym[i].n);
        if (id >= 0) {
            if (tok_idvec_push(out, id) != 0) return -1;
            continue;
        }
        for (uint32_t k = 0; k < sym[i].n; k++) {
            int32_t b = tok_byte_fallback(t, (unsigned char)buf[sym[i].off + k]);
            if (b >= 0 && tok_idvec_push(out, b) != 0) return -1;
        }
    }
    return 0;
}

int spm_encode(const tokenizer *t, spm_ws *ws, const char *text, size_t len, bool space_prefix, tok_idvec *out,
               cf_err *err) {
    if (len > (UINT32_MAX - 3) / 3 / 2) return cf_fail(err, "tokenize: text too long (%zu bytes)", len);
    size_t cap = 3 * len + 3;
    if (ensure_cap((void **)&ws->buf, &ws->buf_cap, cap, 1) != 0) return cf_fail(err, "tokenize: out of memory");
    size_t blen = escape_text(ws, text, len, space_prefix);
    if (blen == 0) return 0;
    /* at most blen symbols; < 3 * blen heap pushes in total */
    if (ensure_cap(&ws->sym, &ws->sym_cap, blen, sizeof(spm_sym)) != 0 ||
        ensure_cap(&ws->heap, &ws->heap_cap, 3 * blen, sizeof(spm_bigram)) != 0)
        return cf_fail(err, "tokenize: out of memory");
    spm_sym *sym = ws->sym;
    size_t n = split_symbols(sym, ws->buf, blen);
    spm_heap h = {ws->heap, 0};
    merge_all(t, ws->buf, sym, n, &h);
    if (emit_symbols(t, ws->buf, sym, out) != 0) return cf_fail(err, "tokenize: out of memory");
    return 0;
}
