/* bpe.c - byte-level BPE (tokenizer.ggml.model = "gpt2"), bit-compatible
 * with llama.cpp's llm_tokenizer_bpe on its test vectors.
 *
 * Owns the bpe_model hanging off tokenizer.bpe: the compiled pre-tokenizer
 * regexes (PCRE2, UTF | UCP | MATCH_INVALID_UTF | DOLLAR_ENDONLY, JIT when
 * available), the merge table and the GPT-2 byte<->unicode maps. Immutable
 * after load; all per-call state (match data, JIT stack, symbols, heap,
 * piece memo) lives in the caller's bpe_ws, so several threads may encode
 * at once.
 *
 * Encoding one raw fragment:
 *  1. Pre-tokenize: the pattern sequence of the pre type (bpe_pre.h) splits
 *     the text into words (matches and the gaps between them), depth first:
 *     each piece pattern k yields goes through patterns k+1.. at once, which
 *     gives the same words in the same order as llama.cpp's pattern-by-
 *     pattern passes. Patterns are skipped on pieces that contain none of
 *     the bytes a match can start with (from PCRE2's own pattern analysis).
 *     Invalid UTF-8 never matches, so it ends up in gaps; no input is
 *     rejected; a matcher error (e.g. JIT stack limit) leaves the rest of the
 *     piece as a gap.
 *  2. Each word's bytes become one symbol each, with the id of the token
 *     spelled by the byte's GPT-2 character (-1 if the vocab lacks it).
 *     (With ignore_merges, a word that is a whole token is emitted as is.)
 *  3. Merges: a min-heap of adjacent pairs keyed by (rank, left position);
 *     pop, skip if stale (either side merged or grown: ids changed), else
 *     merge and push the new pairs with both neighbours. < 3n pushes per
 *     word, O(n log n).
 *  4. Emit the ids of the remaining symbols (symbols without a token are
 *     dropped, as llama.cpp does when no single-byte token exists).
 * Words repeat a lot, so each call on a text of >= 2 KB memoizes (pattern
 * level, piece) -> ids for short pieces (bpe_ws.cache; per call, nothing
 * shared between threads).
 * Merge table: key = (left id, right id) -> (rank, result id). A merge line is
 * "A B" split at the first space after its first byte (as llama.cpp); a line
 * without one is malformed (load error). Merges whose halves or result are
 * not vocabulary tokens can never fire on ids and are skipped (counted in a
 * debug message); duplicates keep the lowest rank.
 *
 * USER_DEFINED byte characters: DeepSeek vocabularies hold the GPT-2
 * characters of the 13 bytes that never occur in valid UTF-8 (C0 C1 F5..FF:
 * "À" "Á" "õ" ... "ÿ") only as USER_DEFINED tokens. Raw text spelling such a
 * character (e.g. "ü" in "Führer") is split out as that token by the
 * special-token partition, as llama.cpp does (its vectors pin this down:
 * "Führer" -> 37 100014 71 6245), and the token decodes as its text. BPE of
 * the raw byte FC reaches the same id, so invalid UTF-8 containing those 13
 * bytes cannot round-trip with these vocabularies (nor in llama.cpp). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "text/bpe_pre.h"
#include "text/tok_internal.h"

typedef struct bpe_merge {
    uint64_t key; /* ((left + 1) << 32) | right; 0 = empty slot */
    int32_t rank, result;
} bpe_merge;

struct bpe_model {
    pcre2_code *re[BPE_MAX_RE];
    int n_re;
    bool re_jit[BPE_MAX_RE]; /* JIT-compiled: call pcre2_jit_match */
    bool re_first[BPE_MAX_RE][256]; /* bytes a match can start with (all true if unknown) */
    size_t re_minlen[BPE_MAX_RE]; /* shortest possible match in bytes */
    bool ignore_merges;
    bpe_merge *merges; /* mmask + 1 slots */
    size_t mmask;
    char byte_enc[256][3]; /* GPT-2 character of each byte, UTF-8 */
    uint8_t byte_enc_len[256];
    int32_t byte_id[256]; /* token of that character, or -1 */
    int16_t cp_byte[324]; /* code point -> byte, or -1 */
};

/* ------------------------------------------------------------ byte maps */

static bool byte_is_printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174); }

static void build_byte_maps(bpe_model *m, const tokenizer *t) {
    int extra = 0;
    for (int i = 0; i < 324; i++) m->cp_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int cp = byte_is_printable(b) ? b : 256 + extra++;
        m->cp_byte[cp] = (int16_t)b;
        if (cp < 0x80) {
            m->byte_enc[b][0] = (char)cp;
            m->byte_enc_len[b] = 1;
        } else {
            m->byte_enc[b][0] = (char)(0xC0 | (cp >> 6));
            m->byte_enc[b][1] = (char)(0x80 | (cp & 0x3F));
            m->byte_enc_len[b] = 2;
        }
        m->byte_id[b] = tok_lookup(t, m->byte_enc[b], m->byte_enc_len[b]);
    }
}

/* ---------------------------------------------------------------- merges */

static uint64_t merge_key(int32_t l, int32_t r) { return ((uint64_t)(uint32_t)(l + 1) << 32) | (uint32_t)r; }

static size_t merge_slot(const bpe_model *m, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 31)) & m->mmask;
}

/* Rank and result of merging ids l and r; false if no such merge. */
static bool merge_find(const bpe_model *m, int32_t l, int32_t r, int32_t *rank, int32_t *result) {
    if (!m->merges) return false;
    uint64_t key = merge_key(l, r);
    for (size_t i = merge_slot(m, key);; i = (i + 1) & m->mmask) {
        const bpe_merge *e = &m->merges[i];
        if (e->key == 0) return false;
        if (e->key == key) {
            *rank = e->rank;
            *result = e->result;
            return true;
        }
    }
}

static void merge_insert(bpe_model *m, int32_t l, int32_t r, int32_t rank, int32_t result) {
    uint64_t key = merge_key(l, r);
    for (size_t i = merge_slot(m, key);; i = (i + 1) & m->mmask) {
        bpe_merge *e = &m->merges[i];
        if (e->key == key) return; /* duplicate: the first (lowest) rank stays */
        if (e->key == 0) {
            *e = (bpe_merge){key, rank, result};
            return;
        }
    }
}

static int load_merges(bpe_model *m, const tokenizer *t, const gguf_file *f, cf_err *err) {
    const gguf_str *strs = NULL;
    uint64_t n = 0;
    int rc = gguf_get_arr_str(f, "tokenizer.ggml.merges", &strs, &n, err);
    if (rc < 0) return -1;
    if (rc > 0 || n == 0) {
        LOG_WARN("%s: tokenizer.ggml.merges missing: BPE will not merge", gguf_path(f));
        return 0;
    }
    if (n > INT32_MAX / 4) return cf_fail(err, "%s: tokenizer.ggml.merges has too many entries", gguf_path(f));
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    m->merges = calloc(cap, sizeof *m->merges);
    if (!m->merges) return cf_fail(err, "tokenizer: out of memory");
    m->mmask = cap - 1;
    char *buf = malloc(2 * t->max_token_len + 2);
    if (!buf) return cf_fail(err, "tokenizer: out of memory");
    uint64_t skipped = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s = strs[i].s;
        size_t len = strs[i].len;
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp) {
            free(buf);
            return cf_fail(err, "%s: tokenizer.ggml.merges[%llu] '%.40s' is not two pieces separated by a space",
                           gguf_path(f), (unsigned long long)i, s);
        }
        size_t ll = (size_t)(sp - s), rl = len - ll - 1;
        int32_t l = tok_lookup(t, s, ll), r = tok_lookup(t, sp + 1, rl), res = -1;
        if (l >= 0 && r >= 0 && ll + rl <= t->max_token_len) {
            memcpy(buf, s, ll);
            memcpy(buf + ll, sp + 1, rl);
            res = tok_lookup(t, buf, ll + rl);
        }
        if (res < 0) {
            skipped++;
            continue;
        }
        merge_insert(m, l, r, (int32_t)i, res);
    }
    free(buf);
    if (skipped)
        LOG_DEBUG("%s: %llu BPE merges name non-tokens and are ignored", gguf_path(f), (unsigned long long)skipped);
    return 0;
}

/* --------------------------------------------------------------- regexes */

static const bpe_pre_def *find_pre(const gguf_file *f, cf_err *err, int *rc) {
    gguf_str pre;
    *rc = gguf_get_str(f, "tokenizer.ggml.pre", &pre, err);
    if (*rc < 0) return NULL;
    *rc = 0;
    const size_t n_defs = sizeof bpe_pre_defs / sizeof bpe_pre_defs[0];
    if (gguf_find_key(f, "tokenizer.ggml.pre") < 0) {
        LOG_WARN("%s: tokenizer.ggml.pre missing: using the default BPE pre-tokenizer", gguf_path(f));
        return &bpe_pre_defs[0];
    }
    for (size_t d = 0; d < n_defs; d++)
        for (size_t k = 0; bpe_pre_defs[d].names[k]; k++)
            if (!strcmp(pre.s, bpe_pre_defs[d].names[k])) return &bpe_pre_defs[d];
    LOG_WARN("%s: unknown tokenizer.ggml.pre '%s': using the default BPE pre-tokenizer", gguf_path(f), pre.s);
    return &bpe_pre_defs[0];
}

/* From PCRE2's own start-of-match analysis: the bytes a match can begin
 * with, and the minimum match length. A segment containing none of those
 * bytes (or shorter than the minimum) cannot match, so the matcher need not
 * be called: exact, and it skips most calls of the later patterns of a
 * sequence (e.g. the CJK pattern on ASCII words). */
static void start_filter(const pcre2_code *re, bool first[256], size_t *minlen) {
    uint32_t type = 0, unit = 0, ml = 0;
    const uint8_t *bitmap = NULL;
    for (int b = 0; b < 256; b++) first[b] = true;
    *minlen = pcre2_pattern_info(re, PCRE2_INFO_MINLENGTH, &ml) == 0 ? ml : 0; /* in characters <= bytes */
    if (pcre2_pattern_info(re, PCRE2_INFO_FIRSTCODETYPE, &type) != 0) return;
    if (type == 1 && pcre2_pattern_info(re, PCRE2_INFO_FIRSTCODEUNIT, &unit) == 0) {
        uint32_t caseless = 0;
        pcre2_pattern_info(re, PCRE2_INFO_FIRSTCODEUNIT, &unit);
        if (pcre2_pattern_info(re, PCRE2_INFO_ALLOPTIONS, &caseless) == 0 && (caseless & PCRE2_CASELESS)) return;
        for (int b = 0; b < 256; b++) first[b] = (uint32_t)b == unit;
    } else if (type == 0 && pcre2_pattern_info(re, PCRE2_INFO_FIRSTBITMAP, &bitmap) == 0 && bitmap) {
        for (int b = 0; b < 256; b++) first[b] = (bitmap[b / 8] >> (b % 8)) & 1;
    }
}

static int compile_regexes(bpe_model *m, const bpe_pre_def *def, cf_err *err) {
    const uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
    for (int i = 0; i < BPE_MAX_RE && def->re[i]; i++) {
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)def->re[i], PCRE2_ZERO_TERMINATED, opts, &ec, &eo, NULL);
        if (!re) {
            PCRE2_UCHAR msg[120];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return cf_fail(err, "tokenizer: pre-tokenizer regex %d of '%s' does not compile: %s", i, def->names[0],
                           (const char *)msg);
        }
        m->re_jit[m->n_re] = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0; /* else interpreted */
        start_filter(re, m->re_first[m->n_re], &m->re_minlen[m->n_re]);
        m->re[m->n_re++] = re;
    }
    return 0;
}

/* ------------------------------------------------------------------ load */

void bpe_free(bpe_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_re; i++) pcre2_code_free(m->re[i]);
    free(m->merges);
    free(m);
}

int bpe_load(tokenizer *t, const gguf_file *f, cf_err *err) {
    bpe_model *m = calloc(1, sizeof *m);
    if (!m) return cf_fail(err, "tokenizer: out of memory");
    t->bpe = m;
    int rc;
    const bpe_pre_def *def = find_pre(f, err, &rc);
    if (rc < 0) return -1;
    m->ignore_merges = def->ignore_merges;
    build_byte_maps(m, t);
    if (compile_regexes(m, def, err) != 0 || load_merges(m, t, f, err) != 0) return -1;
    return 0;
}

/* -------------------------------------------------------------- scratch */

typedef struct bpe_sym {
    int32_t prev, next, id; /* id -2 once merged away */
} bpe_sym;

typedef struct bpe_pair {
    int32_t rank, left, right, lid, rid, result;
} bpe_pair;

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* Piece memo: open addressing over CACHE_SLOTS slots, cleared when half full;
 * word bytes and ids live in two growable arenas. */
#define CACHE_SLOTS 8192
#define CACHE_MAX_WORD 32

typedef struct cache_slot {
    uint64_t h; /* 0 = empty */
    uint32_t woff, wlen, ioff, nid;
    int level;
} cache_slot;

typedef struct word_cache {
    cache_slot slot[CACHE_SLOTS];
    size_t used;
    char *words;
    size_t words_n, words_cap;
    int32_t *ids;
    size_t ids_n, ids_cap;
} word_cache;

static void cache_free(word_cache *c) {
    if (!c) return;
    free(c->words);
    free(c->ids);
    free(c);
}

static uint64_t word_hash(const unsigned char *w, size_t len, int level) {
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)level;
    for (size_t i = 0; i < len; i++) h = (h ^ w[i]) * 0x100000001b3ull;
    return h | 1;
}

/* The slot holding (level, w), or the empty slot where it would go. */
static cache_slot *cache_find(word_cache *c, const unsigned char *w, size_t len, int level, uint64_t h) {
    for (size_t i = (size_t)(h >> 17) & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
        cache_slot *s = &c->slot[i];
        if (s->h == 0 || (s->h == h && s->wlen == len && s->level == level && !memcmp(c->words + s->woff, w, len)))
            return s;
    }
}

static void cache_store(word_cache *c, cache_slot *s, const unsigned char *w, size_t len, int level, uint64_t h,
                        const int32_t *ids, size_t nid) {
    if (c->used >= CACHE_SLOTS / 2) { /* full: start afresh (keeps memory bounded) */
        memset(c->slot, 0, sizeof c->slot);
        c->used = c->words_n = c->ids_n = 0;
        s = cache_find(c, w, len, level, h);
    }
    if (grow((void **)&c->words, &c->words_cap, c->words_n + len, 1) != 0 ||
        grow((void **)&c->ids, &c->ids_cap, c->ids_n + nid, sizeof *c->ids) != 0)
        return;
    memcpy(c->words + c->words_n, w, len);
    if (nid) memcpy(c->ids + c->ids_n, ids, nid * sizeof *ids);
    *s = (cache_slot){h, (uint32_t)c->words_n, (uint32_t)len, (uint32_t)c->ids_n, (uint32_t)nid, level};
    c->words_n += len;
    c->ids_n += nid;
    c->used++;
}

void bpe_ws_free(bpe_ws *ws) {
    if (!ws) return;
    cache_free(ws->cache);
    pcre2_match_data_free(ws->md);
    pcre2_match_context_free(ws->mctx);
    pcre2_jit_stack_free(ws->jit_stack);
    free(ws->sym);
    free(ws->heap);
    free(ws->buf);
    memset(ws, 0, sizeof *ws);
}

/* Texts shorter than this are not worth the memo's 256 KB table. */
#define CACHE_MIN_TEXT 2048

static int ws_prepare(bpe_ws *ws, size_t len) {
    if (len >= CACHE_MIN_TEXT && !ws->cache && !(ws->cache = calloc(1, sizeof(word_cache)))) return -1;
    if (ws->md) return 0;
    ws->md = pcre2_match_data_create(4, NULL);
    ws->mctx = pcre2_match_context_create(NULL);
    ws->jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL);
    if (!ws->md || !ws->mctx) return -1;
    if (ws->jit_stack) pcre2_jit_stack_assign(ws->mctx, NULL, ws->jit_stack);
    return 0;
}

/* -------------------------------------------------------- pre-tokenize */

/* Splits every segment of `in` by `re` (matches and gaps) into *out. */
static bool may_match(const bpe_model *m, int r, const unsigned char *s, size_t len) {
    if (len < m->re_minlen[r]) return false;
    for (size_t i = 0; i < len; i++)
        if (m->re_first[r][s[i]]) return true;
    return false;
}

/* ---------------------------------------------------------------- heap */

static bool pair_before(const bpe_pair *a, const bpe_pair *b) {
    if (a->rank != b->rank) return a->rank < b->rank;
    return a->left < b->left;
}

static void heap_push(bpe_pair *h, size_t *n, bpe_pair p) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!pair_before(&p, &h[up])) break;
        h[i] = h[up];
        i = up;
    }
    h[i] = p;
}

static bpe_pair heap_pop(bpe_pair *h, size_t *n) {
    bpe_pair top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && pair_before(&h[c + 1], &h[c])) c++;
        if (!pair_before(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

/* --------------------------------------------------------------- merge */

static void try_pair(const bpe_model *m, const bpe_sym *sym, int32_t l, int32_t r, bpe_pair *h, size_t *nh) {
    if (l < 0 || r < 0 || sym[l].id < 0 || sym[r].id < 0) return;
    int32_t rank, result;
    if (!merge_find(m, sym[l].id, sym[r].id, &rank, &result)) return;
    heap_push(h, nh, (bpe_pair){rank, l, r, sym[l].id, sym[r].id, result});
}

/* Whether the whole word (GPT-2 encoded) is a token; sets *id. */
static int whole_word(const tokenizer *t, bpe_ws *ws, const unsigned char *w, size_t len, int32_t *id) {
    const bpe_model *m = t->bpe;
    if (grow((void **)&ws->buf, &ws->buf_cap, 2 * len + 1, 1) != 0) return -1;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        memcpy(ws->buf + o, m->byte_enc[w[i]], m->byte_enc_len[w[i]]);
        o += m->byte_enc_len[w[i]];
    }
    *id = o <= t->max_token_len ? tok_lookup(t, ws->buf, o) : -1;
    return 0;
}

static int encode_word(const tokenizer *t, bpe_ws *ws, const unsigned char *w, size_t len, tok_idvec *out) {
    const bpe_model *m = t->bpe;
    if (len == 1) { return m->byte_id[w[0]] >= 0 ? tok_idvec_push(out, m->byte_id[w[0]]) : 0; }
    if (m->ignore_merges) {
        int32_t id;
        if (whole_word(t, ws, w, len, &id) != 0) return -1;
        if (id >= 0) return tok_idvec_push(out, id);
    }
    if (len > INT32_MAX / 4) return -1;
    if (grow(&ws->sym, &ws->sym_cap, len, sizeof(bpe_sym)) != 0 ||
        grow(&ws->heap, &ws->heap_cap, 3 * len, sizeof(bpe_pair)) != 0)
        return -1;
    bpe_sym *sym = ws->sym;
    bpe_pair *h = ws->heap;
    size_t nh = 0;
    int32_t n = (int32_t)len;
    for (int32_t i = 0; i < n; i++) sym[i] = (bpe_sym){i - 1, i + 1 < n ? i + 1 : -1, m->byte_id[w[i]]};
    for (int32_t i = 0; i + 1 < n; i++) try_pair(m, sym, i, i + 1, h, &nh);
    while (nh > 0) {
        bpe_pair p = heap_pop(h, &nh);
        bpe_sym *L = &sym[p.left], *R = &sym[p.right];
        if (L->id != p.lid || R->id != p.rid) continue; /* stale */
        L->id = p.result;
        R->id = -2;
        L->next = R->next;
        if (R->next >= 0) sym[R->next].prev = p.left;
        try_pair(m, sym, L->prev, p.left, h, &nh);
        try_pair(m, sym, p.left, L->next, h, &nh);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next)
        if (sym[i].id >= 0 && tok_idvec_push(out, sym[i].id) != 0) return -1;
    return 0;
}

/* --------------------------------------------------------------- encode */

static int emit_piece(const tokenizer *t, bpe_ws *ws, const unsigned char *s, size_t len, int level, bool in_memo,
                      tok_idvec *out);

/* Splits s[0..len) by pattern `level` into matches and gaps, each handed on
 * to the next level in order. */
static int split_level(const tokenizer *t, bpe_ws *ws, const unsigned char *s, size_t len, int level, bool in_memo,
                       tok_idvec *out) {
    const bpe_model *m = t->bpe;
    if (!may_match(m, level, s, len)) return emit_piece(t, ws, s, len, level + 1, in_memo, out);
    pcre2_match_data *md = ws->md; /* shared by all levels: the ovector is read before recursing */
    const pcre2_code *re = m->re[level];
    size_t pos = 0, gap = 0;
    while (pos < len) {
        int rc = m->re_jit[level] ? pcre2_jit_match(re, s, len, pos, 0, md, ws->mctx)
                                  : pcre2_match(re, s, len, pos, 0, md, ws->mctx);
        if (rc < 0) break; /* no match (or a matcher limit): the rest is a gap */
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], b = ov[1];
        if (b <= a) { /* empty match: not a piece; move on one byte */
            pos = a + 1;
            continue;
        }
        if (a > gap && emit_piece(t, ws, s + gap, a - gap, level + 1, in_memo, out) != 0) return -1;
        if (emit_piece(t, ws, s + a, b - a, level + 1, in_memo, out) != 0) return -1;
        pos = gap = b;
    }
    return gap < len ? emit_piece(t, ws, s + gap, len - gap, level + 1, in_memo, out) : 0;
}

/* A piece that patterns [0, level) have produced: runs the remaining
 * patterns and BPE on it. Short pieces are memoized per (level, bytes): the
 * result depends on nothing else, and words repeat a lot. Only the outermost
 * short piece is memoized (in_memo: an enclosing piece already is), so a
 * word costs one memo entry, not one per level. */
static int emit_piece(const tokenizer *t, bpe_ws *ws, const unsigned char *s, size_t len, int level, bool in_memo,
                      tok_idvec *out) {
    const bpe_model *m = t->bpe;
    if (len == 0) return 0;
    word_cache *c = ws->cache;
    bool memo = c && !in_memo && len >= 2 && len <= CACHE_MAX_WORD;
    uint64_t h = 0;
    if (memo) {
        h = word_hash(s, len, level);
        const cache_slot *hit = cache_find(c, s, len, level, h);
        if (hit->h != 0) {
            if (tok_idvec_reserve(out, hit->nid) != 0) return -1;
            if (hit->nid) memcpy(out->v + out->n, c->ids + hit->ioff, hit->nid * sizeof *out->v);
            out->n += hit->nid;
            return 0;
        }
    }
    size_t before = out->n;
    int rc =
        level >= m->n_re ? encode_word(t, ws, s, len, out) : split_level(t, ws, s, len, level, in_memo || memo, out);
    if (rc == 0 && memo) /* find the slot again: the recursion may have filled it */
        cache_store(c, cache_find(c, s, len, level, h), s, len, level, h, out->v + before, out->n - before);
    return rc;
}

int bpe_encode(const tokenizer *t, bpe_ws *ws, const char *text, size_t len, tok_idvec *out, cf_err *err) {
    if (len == 0) return 0;
    if (ws_prepare(ws, len) != 0) return cf_fail(err, "tokenize: out of memory");
    if (emit_piece(t, ws, (const unsigned char *)text, len, 0, false, out) != 0)
        return cf_fail(err, "tokenize: out of memory");
    return 0;
}

/* ---------------------------------------------------------- token bytes */

size_t bpe_token_bytes(const tokenizer *t, const tok_token *k, char *buf, size_t cap) {
    const bpe_model *m = t->bpe;
    size_t o = 0;
    const unsigned char *s = (const unsigned char *)k->text;
    for (size_t i = 0; i < k->len;) {
        size_t n = 1;
        uint32_t cp = s[i];
        if (s[i] >= 0xC0 && s[i] < 0xE0 && i + 1 < k->len) {
            cp = ((uint32_t)(s[i] & 0x1F) << 6) | (s[i + 1] & 0x3F);
            n = 2;
        } else if (s[i] >= 0xE0) {
            n = s[i] >= 0xF0 ? 4 : 3;
            cp = 0xFFFFFFFF;
        }
        if (n > k->len - i) n = k->len - i;
        if (cp < 324 && m->cp_byte[cp] >= 0) {
            if (o < cap) buf[o] = (char)m->cp_byte[cp];
            o++;
        } else { /* not a GPT-2 byte character: copy as is */
            for (size_t j = 0; j < n; j++, o++)
                if (o < cap) buf[o] = (char)s[i + j];
        }
        i += n;
    }
    return o;
}
