/* ugm.c - Unigram encoding (tokenizer.ggml.model = "t5"), as the Hugging Face
 * `tokenizers` Unigram model after a Metaspace pre-tokenizer.
 *
 * For one raw fragment:
 *  1. Escape: ' ' -> "▁"; with space_prefix one "▁" goes in front.
 *  2. With metaspace_split, the text is cut before every "▁" (each word
 *     starts with its ▁); otherwise it is one word.
 *  3. Viterbi per word over byte offsets at character boundaries: from each
 *     reachable offset every vocabulary token (not UNUSED) that matches there
 *     extends the path by its score (tokenizer.hf.scores_f64 when present: the
 *     f64 values `tokenizers` adds, so near-ties break the same way), adding
 *     token score + path score in that order; when no token covers exactly the next
 *     character, an "unknown" step of that one character scores
 *     t->ugm_unk_score (lowest token score - 10). An offset keeps the first
 *     best path found (ties: earlier start, then shorter token), as
 *     `tokenizers` does.
 *  4. Back-track; consecutive unknown steps fuse into one piece, which
 *     becomes its bytes as <0xXX> tokens with byte_fallback (when all exist)
 *     or else the unk id (dropped when there is none).
 * Scratch (escaped text, per-offset best arrays) lives in the caller's ugm_ws. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/utf8.h"

typedef struct ugm_node {
    double score;
    uint32_t start; /* the path's last step starts here */
    int32_t id; /* that step's token, -1 = unknown */
    bool set;
} ugm_node;

static int grow(void **p, size_t *cap, size_t n, size_t elem) {
    if (n <= *cap) return 0;
    void *q = realloc(*p, n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

void ugm_ws_free(ugm_ws *ws) {
    if (!ws) return;
    free(ws->buf);
    free(ws->nodes);
    free(ws->steps);
    *ws = (ugm_ws){0};
}

static bool is_boundary(const char *w, size_t n, size_t at) { return at >= n || ((unsigned char)w[at] & 0xC0) != 0x80; }

static void relax(ugm_node *nodes, size_t to, double score, uint32_t start, int32_t id) {
    if (!nodes[to].set || score > nodes[to].score) nodes[to] = (ugm_node){score, start, id, true};
}

static void viterbi(const tokenizer *t, const char *w, size_t n, ugm_node *nodes) {
    for (size_t i = 0; i <= n; i++) nodes[i].set = false;
    nodes[0] = (ugm_node){0, 0, -1, true};
    for (size_t pos = 0; pos < n; pos++) {
        if (!nodes[pos].set || !is_boundary(w, n, pos)) continue;
        size_t clen = utf8_lead_len((unsigned char)w[pos]);
        if (clen > n - pos) clen = n - pos;
        while (clen > 1 && !is_boundary(w, n, pos + clen)) clen--;
        bool single = false;
        size_t max = t->max_token_len < n - pos ? t->max_token_len : n - pos;
        for (size_t len = 1; len <= max; len++) {
            if (!is_boundary(w, n, pos + len)) continue;
            int32_t id = tok_lookup(t, w + pos, len);
            if (id < 0 || t->tokens[id].type == TOKEN_TYPE_UNUSED) continue;
            double sc = t->ugm_scores ? t->ugm_scores[id] : t->tokens[id].score;
            relax(nodes, pos + len, sc + nodes[pos].score, (uint32_t)pos, id);
            if (len == clen) single = true;
        }
        if (!single) relax(nodes, pos + clen, nodes[pos].score + t->ugm_unk_score, (uint32_t)pos, -1);
    }
}

/* One fused unknown piece: byte tokens (byte_fallback, all present) or unk. */
static int emit_unknown(const tokenizer *t, const char *s, size_t len, tok_idvec *out) {
    bool bytes = t->byte_fallback;
    for (size_t i = 0; bytes && i < len; i++)
        if (t->byte_tok[(unsigned char)s[i]] < 0 || t->tokens[t->byte_tok[(unsigned char)s[i]]].type != TOKEN_TYPE_BYTE)
            bytes = false;
    if (!bytes) return t->unk >= 0 ? tok_idvec_push(out, t->unk) : 0;
    for (size_t i = 0; i < len; i++)
        if (tok_idvec_push(out, t->byte_tok[(unsigned char)s[i]]) != 0) return -1;
    return 0;
}

typedef struct ugm_step {
    uint32_t start;
    int32_t id; /* -1 = unknown */
} ugm_step;

/* Back-tracks word w (nodes from viterbi) and appends its ids in order. */
static int emit_word(const tokenizer *t, ugm_ws *ws, const char *w, size_t n, tok_idvec *out) {
    const ugm_node *nodes = ws->nodes;
    size_t steps = 0;
    for (size_t at = n; at > 0; at = nodes[at].start) steps++;
    if (grow(&ws->steps, &ws->steps_cap, steps ? steps : 1, sizeof(ugm_step)) != 0) return -1;
    ugm_step *path = ws->steps;
    size_t k = steps;
    for (size_t at = n; at > 0; at = nodes[at].start) path[--k] = (ugm_step){nodes[at].start, nodes[at].id};
    for (size_t i = 0; i < steps;) {
        if (path[i].id >= 0) {
            if (tok_idvec_push(out, path[i++].id) != 0) return -1;
            continue;
        }
        size_t j = i;
        while (j < steps && path[j].id < 0) j++;
        size_t end = j < steps ? path[j].start : n;
        if (emit_unknown(t, w + path[i].start, end - path[i].start, out) != 0) return -1;
        i = j;
    }
    return 0;
}

int ugm_encode(const tokenizer *t, ugm_ws *ws, const char *text, size_t len, bool space_prefix, tok_idvec *out,
               cf_err *err) {
    if (len > (UINT32_MAX - 3) / 3 / 2) return cf_fail(err, "tokenize: text too long (%zu bytes)", len);
    size_t cap = 3 * len + 3;
    if (grow((void **)&ws->buf, &ws->buf_cap, cap, 1) != 0 ||
        grow(&ws->nodes, &ws->nodes_cap, cap + 1, sizeof(ugm_node)) != 0)
        return cf_fail(err, "tokenize: out of memory");
    static const char mark[3] = {'\xE2', '\x96', '\x81'};
    char *o = ws->buf;
    if (space_prefix) memcpy(o, mark, 3), o += 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') memcpy(o, mark, 3), o += 3;
        else *o++ = text[i];
    }
    size_t n = (size_t)(o - ws->buf), start = 0;
    while (start < n) {
        size_t end = n;
        if (t->metaspace_split)
            for (size_t i = start + 1; i + 3 <= n; i++)
                if (!memcmp(ws->buf + i, mark, 3)) {
                    end = i;
                    break;
                }
        viterbi(t, ws->buf + start, end - start, ws->nodes);
        if (emit_word(t, ws, ws->buf + start, end - start, out) != 0) return cf_fail(err, "tokenize: out of memory");
        start = end;
    }
    return 0;
}
