/* tokenizer.h - text <-> token ids for the vocabularies GGUF files carry.
 *
 * One tokenizer object per model, built from the GGUF `tokenizer.ggml.*`
 * keys. `tokenizer.ggml.model` selects the algorithm, each bit-compatible
 * with llama.cpp on its test vectors:
 *  - "llama": SentencePiece BPE (score-driven merges, byte fallback <0xXX>,
 *    leading-space handling via add_space_prefix);
 *  - "gpt2": byte-level BPE: the pre-tokenizer regexes of
 *    tokenizer.ggml.pre (PCRE2; unknown/missing type: default regexes and a
 *    warning), rank-ordered merges from tokenizer.ggml.merges, GPT-2
 *    byte<->unicode mapping (see src/text/bpe.c);
 *  - "bert": WordPiece (BERT basic pre-tokenization, greedy longest match,
 *    [UNK] for uncovered words; [CLS] text [SEP] with add_special).
 * Other models ("t5", "rwkv", ...) are rejected with "tokenizer model 't5'
 * is not supported yet". The tokenizer copies what it needs:
 * the gguf_file may be closed after load. Immutable after load; safe to use
 * from several threads (per-call scratch only).
 *
 * Load validates: token/score/type counts agree, scores finite, types 0..6,
 * token texts NUL-free valid UTF-8, BYTE tokens spelled <0xXX>. Special ids
 * (bos/eos/unk/padding/eot/eom) outside [0, n_vocab), e.g. 4294967295, are
 * ignored and the default stays (llama: bos 1, eos 2, unk 0, others none).
 * Defaults (llama.cpp's): llama: bos 1, eos 2, unk 0, add_bos, add_space_prefix;
 * gpt2: bos = eos = 11, no unk, no add_bos, no space prefix; bert: bos =
 * [CLS] 101 (or cls_token_id), unk 100, sep 102 (seperator_token_id), add_bos.
 * EOG = eos, eot, eom and the CONTROL/USER_DEFINED tokens named
 * <|eot_id|> <|im_end|> <|end|> <end_of_turn> <|endoftext|> <|eom_id|> <EOT>.
 *
 * Special tokens (as llama.cpp's tokenizer_st_partition): the texts of
 * CONTROL and UNKNOWN tokens in the input are matched only with
 * parse_special; USER_DEFINED token texts always (they are ordinary added
 * pieces, never control). Candidates are tried longest first; the text
 * between matches is encoded on its own, and with add_space_prefix each such
 * piece that starts the text or follows a special token gets the leading
 * space (llama.cpp does the same). User content must be encoded with
 * parse_special = false. Byte-level BPE vocabularies use the same rule, which
 * matters for DeepSeek's USER_DEFINED byte characters ("ü" etc.; see
 * src/text/bpe.c) and e.g. MPT's USER_DEFINED runs of spaces. */
#ifndef CINFER_TEXT_TOKENIZER_H
#define CINFER_TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "format/gguf.h"

/* llama.cpp token types (tokenizer.ggml.token_type) */
enum {
    TOKEN_TYPE_UNDEFINED = 0,
    TOKEN_TYPE_NORMAL = 1,
    TOKEN_TYPE_UNKNOWN = 2,
    TOKEN_TYPE_CONTROL = 3,
    TOKEN_TYPE_USER_DEFINED = 4,
    TOKEN_TYPE_UNUSED = 5,
    TOKEN_TYPE_BYTE = 6,
};

typedef struct tokenizer tokenizer;

int tokenizer_load_gguf(const gguf_file *f, tokenizer **out, cf_err *err);
void tokenizer_free(tokenizer *t);

int32_t tokenizer_n_vocab(const tokenizer *t);
int32_t tokenizer_bos(const tokenizer *t); /* -1 if none */
int32_t tokenizer_eos(const tokenizer *t); /* -1 if none */
bool tokenizer_add_bos(const tokenizer *t);
bool tokenizer_add_eos(const tokenizer *t);
/* Whether a space is put in front of the text (and so the first piece of a
 * decoded text starts with one to strip): SentencePiece with
 * add_space_prefix, and always WordPiece (every word starts with "▁"). */
bool tokenizer_add_space_prefix(const tokenizer *t);
/* End-of-generation: EOS, EOT and similar control tokens. */
bool tokenizer_is_eog(const tokenizer *t, int32_t id);
int tokenizer_token_type(const tokenizer *t, int32_t id);
/* The raw vocabulary string of a token (e.g. "▁Once", "<0x0A>"). */
const char *tokenizer_token_text(const tokenizer *t, int32_t id);
/* Length in bytes of the longest token text (bounds any single piece). */
size_t tokenizer_max_token_len(const tokenizer *t);

/* Encodes `len` bytes of `text`. add_special adds BOS/EOS per the GGUF flags.
 * On success returns 0 and a malloc'd array in *ids (caller frees, also when
 * *n_ids is 0) with *n_ids entries. Invalid UTF-8 is tolerated (its bytes
 * become byte tokens, or unk where the vocab has none). Time O(n log n) in
 * the text length; fails only when out of memory or for texts > ~700 MB. */
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                     int32_t **ids, size_t *n_ids, cf_err *err);

/* The bytes a token stands for (llama.cpp's token_to_piece with lstrip = 0):
 * NORMAL: the text with "▁" -> " " (llama, bert) or mapped back through
 * GPT-2's unicode->byte table (gpt2); BYTE <0xXX>: that byte; USER_DEFINED: the
 * text; CONTROL and UNKNOWN: "" unless `special`, then the text (llama.cpp
 * renders UNKNOWN as its text too, e.g. "<unk>"); UNUSED/UNDEFINED and
 * out-of-range ids: "". Returns the byte count (may exceed cap: then nothing
 * past cap is written; buf may be NULL when cap is 0). */
size_t tokenizer_token_bytes(const tokenizer *t, int32_t id, bool special, char *buf, size_t cap);

/* Streaming detokenizer: feed ids one at a time, get back only complete
 * UTF-8 (bytes of an incomplete sequence are held until completed or until a
 * following byte proves them invalid, then they are emitted as U+FFFD; bytes
 * that can start no sequence become U+FFFD at once). Output is always valid
 * UTF-8. With strip_leading_space, the single leading space SentencePiece adds
 * is removed from the first non-empty piece of a non-CONTROL token (as
 * llama2.c does after BOS; BOS itself does not use it up). Plain struct: no
 * resources, nothing to free; one stream per sequence. */
typedef struct detok_stream {
    const tokenizer *tok;
    bool special; /* render CONTROL tokens */
    bool strip_leading; /* still to strip the first leading space */
    unsigned char pend[8];
    size_t n_pend;
} detok_stream;

void detok_init(detok_stream *d, const tokenizer *t, bool strip_leading_space, bool special);
/* Writes the complete UTF-8 produced by token `id` to out (at most cap
 * bytes; cap >= 64 + tokenizer_max_token_len() is always enough, anything
 * beyond cap is dropped). Returns bytes written. */
size_t detok_push(detok_stream *d, int32_t id, char *out, size_t cap);
/* Emits what is still held (invalid tail as U+FFFD). Returns bytes written. */
size_t detok_flush(detok_stream *d, char *out, size_t cap);

#endif
