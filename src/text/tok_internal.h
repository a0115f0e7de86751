/* tok_internal.h - the tokenizer object's layout and the pieces shared by the
 * tokenizer algorithms (not part of the public API; include only from
 * src/text/).
 *
 * Ownership: a tokenizer owns everything it points to (token records, one
 * arena holding every token text NUL-terminated, the text->id hash table, the
 * special-token list, the EOG bitmap). Nothing points into the gguf_file, so
 * the file may be closed after tokenizer_load_gguf(). After load nothing is
 * written, so concurrent use from several threads is safe; per-call scratch
 * lives in the caller-owned structures below (tok_idvec, spm_ws).
 *
 * Algorithms: SentencePiece (spm.c), byte-level BPE (bpe.c: pre-tokenizer
 * regexes, merge ranks, GPT-2 byte<->unicode map; its data hangs off
 * tokenizer.bpe), WordPiece (wpm.c, no extra data) and Unigram (ugm.c). Each has an encode
 * function for one raw fragment; tokenizer.c dispatches on `algo`. */
#ifndef CINFER_TEXT_TOK_INTERNAL_H
#define CINFER_TEXT_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "format/gguf.h"
#include "text/charsmap.h"
#include "text/tokenizer.h"

typedef enum tok_algo {
    TOK_ALGO_SPM = 0, /* tokenizer.ggml.model = "llama" */
    TOK_ALGO_BPE = 1, /* "gpt2": byte-level BPE */
    TOK_ALGO_WPM = 2, /* "bert": WordPiece */
    TOK_ALGO_UGM = 3, /* "t5": Unigram (Viterbi) */
} tok_algo;

typedef struct bpe_model bpe_model; /* bpe.c */

typedef struct tok_token {
    const char *text; /* into tokenizer.arena, NUL-terminated, valid UTF-8 */
    uint32_t len;
    float score; /* finite */
    uint8_t type; /* TOKEN_TYPE_* (0..6) */
    uint8_t strip; /* TOK_STRIP_* bits: whitespace a special-token match swallows */
} tok_token;

/* llama.cpp's LLAMA_TOKEN_ATTR_LSTRIP / RSTRIP: when partitioning finds this
 * token, ASCII whitespace right before it (LEFT) or right after it (RIGHT)
 * is dropped from the neighbouring raw text. GGUF does not carry them; they
 * are set from the model's name as llama.cpp does (tokenizer.c). */
#define TOK_STRIP_LEFT 1
#define TOK_STRIP_RIGHT 2

struct tokenizer {
    tok_algo algo;
    int32_t n_vocab; /* >= 1 */
    tok_token *tokens; /* [n_vocab] */
    char *arena; /* every token text, NUL-terminated */
    size_t max_token_len; /* longest token text in bytes */

    /* text -> id: open addressing, linear probing, hmask + 1 slots (power of
     * two, at least twice n_vocab); a slot holds an id or -1. Duplicate
     * texts: the highest id wins (as llama.cpp's token_to_id map). */
    int32_t *hslots;
    size_t hmask;

    int32_t bos, eos, unk, pad, eot, eom, sep; /* -1 if none; else in [0, n_vocab) */
    bool add_bos, add_eos, add_space_prefix;
    bool add_sep; /* WordPiece: [SEP] after the text with add_special */
    /* Where the space prefix goes (tokenizer.hf.prepend_scheme, from a Metaspace
     * pre-tokenizer): LLAMA = every fragment at the start or after a special token
     * (llama.cpp); FIRST = only a fragment at offset 0; ALWAYS = every fragment; the
     * last two skip a fragment that already starts with a space. */
    enum { TOK_PREPEND_LLAMA, TOK_PREPEND_FIRST, TOK_PREPEND_ALWAYS } prepend;
    bool metaspace_split; /* Unigram: words end before each "▁" */
    bool byte_fallback; /* Unigram: unknown pieces as <0xXX> tokens */
    /* WordPiece: BertNormalizer's lowercase and strip_accents (tokenizer.hf.bert_lowercase,
     * tokenizer.hf.bert_strip_accents; both true unless a key says false: llama.cpp's
     * BERT is uncased) */
    bool bert_lowercase, bert_strip_accents;
    double ugm_unk_score; /* Unigram: lowest token score - 10 */
    double *ugm_scores; /* Unigram: [n_vocab] tokenizer.hf.scores_f64 (exact scores), or NULL (owned) */
    bpe_model *bpe; /* BPE only: regexes and merges (owned) */
    charsmap *charsmap; /* Unigram: precompiled normalizer, NULL if none (owned) */
    uint8_t *eog; /* [n_vocab] 1 = ends generation */

    /* CONTROL, USER_DEFINED and UNKNOWN tokens with non-empty text, longest
     * text first (ties: lower id first): the candidates of special-token
     * partitioning. */
    int32_t *specials;
    size_t n_specials;

    /* Byte fallback: the id of "<0xXX>" for each byte (else of the one-byte
     * token, else -1). */
    int32_t byte_tok[256];
};

/* Growable id array. push returns 0, or -1 when out of memory. */
typedef struct tok_idvec {
    int32_t *v;
    size_t n, cap;
} tok_idvec;

int tok_idvec_reserve(tok_idvec *v, size_t extra);
int tok_idvec_push(tok_idvec *v, int32_t id);

/* The id of the token whose text is exactly s[0..len), or -1. */
int32_t tok_lookup(const tokenizer *t, const char *s, size_t len);

/* The fallback id for one byte of text no token covers (byte token, else unk,
 * else -1 meaning "drop"). */
int32_t tok_byte_fallback(const tokenizer *t, unsigned char b);

/* ---- SentencePiece (spm.c) ---- */

/* Scratch reused across the fragments of one encode call. Zero-initialize;
 * release with spm_ws_free(). */
typedef struct spm_ws {
    char *buf;
    size_t buf_cap;
    void *sym;
    size_t sym_cap;
    void *heap;
    size_t heap_cap;
} spm_ws;

void spm_ws_free(spm_ws *ws);

/* Encodes one raw-text fragment (no special tokens in it) the way
 * llama.cpp's llm_tokenizer_spm does and appends the ids to out. With
 * space_prefix, a space is put in front of the text first. */
int spm_encode(const tokenizer *t, spm_ws *ws, const char *text, size_t len, bool space_prefix, tok_idvec *out,
               cf_err *err);

/* ---- byte-level BPE (bpe.c) ---- */

/* Reads tokenizer.ggml.pre and tokenizer.ggml.merges into t->bpe. A missing
 * or unknown pre type falls back to the default regexes with a warning;
 * missing merges give a merge-less tokenizer (warning); malformed merges are
 * errors. */
int bpe_load(tokenizer *t, const gguf_file *f, cf_err *err);
void bpe_free(bpe_model *m);

/* Per-call scratch (regex match data, offsets, symbols, heap). Zero-init;
 * release with bpe_ws_free(). */
typedef struct bpe_ws {
    void *md, *mctx, *jit_stack; /* pcre2 match data / context / JIT stack */
    void *sym;
    size_t sym_cap;
    void *heap;
    size_t heap_cap;
    char *buf;
    size_t buf_cap;
    void *cache; /* word -> ids memo for this call (bpe.c) */
} bpe_ws;

void bpe_ws_free(bpe_ws *ws);
/* Pre-tokenizes and BPE-encodes one raw fragment, appending ids to out. */
int bpe_encode(const tokenizer *t, bpe_ws *ws, const char *text, size_t len, tok_idvec *out, cf_err *err);
/* The bytes of a NORMAL BPE token: its text through the GPT-2 unicode->byte
 * map (code points outside the map are copied as UTF-8). */
size_t bpe_token_bytes(const tokenizer *t, const tok_token *k, char *buf, size_t cap);

/* ---- Unigram (ugm.c) ---- */

/* Scratch reused across fragments. Zero-initialize; release with ugm_ws_free(). */
typedef struct ugm_ws {
    char *buf;
    size_t buf_cap;
    void *nodes, *steps;
    size_t nodes_cap, steps_cap;
} ugm_ws;

void ugm_ws_free(ugm_ws *ws);
/* Encodes one raw fragment as `tokenizers`' Unigram after Metaspace. */
int ugm_encode(const tokenizer *t, ugm_ws *ws, const char *text, size_t len, bool space_prefix, tok_idvec *out,
               cf_err *err);

/* ---- WordPiece (wpm.c) ---- */

/* Encodes one raw fragment as llama.cpp's llm_tokenizer_wpm: BERT basic
 * pre-tokenization then greedy longest match with "▁" word starts. */
int wpm_encode(const tokenizer *t, const char *text, size_t len, tok_idvec *out, cf_err *err);

#endif
