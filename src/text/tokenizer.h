/* tokenizer.h - text <-> token ids for the vocabularies GGUF files carry.
 *
 * One tokenizer object per model, built from the GGUF `tokenizer.ggml.*`
 * keys. `tokenizer.ggml.model` selects the algorithm: "llama" (SentencePiece
 * BPE: score-driven merges, byte fallback <0xXX>, leading-space handling via
 * add_space_prefix). Other models ("gpt2" byte-level BPE, "bert" WordPiece)
 * plug in behind the same interface (issue: tokenizers). Immutable after
 * load; safe to use from several threads.
 *
 * Special tokens: with parse_special, the texts of CONTROL and USER_DEFINED
 * tokens in the input are matched (longest first) and emitted as those ids;
 * without it, they are ordinary text. User content is always encoded with
 * parse_special = false. */
#ifndef CINFER_TEXT_TOKENIZER_H
#define CINFER_TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "model/gguf.h"

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
/* SentencePiece: whether a space is put in front of the text (and so the
 * first piece of a decoded text starts with one to strip). */
bool tokenizer_add_space_prefix(const tokenizer *t);
/* End-of-generation: EOS, EOT and similar control tokens. */
bool tokenizer_is_eog(const tokenizer *t, int32_t id);
int tokenizer_token_type(const tokenizer *t, int32_t id);
/* The raw vocabulary string of a token (e.g. "▁Once", "<0x0A>"). */
const char *tokenizer_token_text(const tokenizer *t, int32_t id);
/* Length in bytes of the longest token text (bounds any single piece). */
size_t tokenizer_max_token_len(const tokenizer *t);

/* Encodes `len` bytes of `text`. add_special adds BOS/EOS per the GGUF flags.
 * On success returns 0 and a malloc'd array in *ids (caller frees) with
 * *n_ids entries. Invalid UTF-8 is tolerated (bytes become byte tokens). */
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                     int32_t **ids, size_t *n_ids, cf_err *err);

/* The bytes a token stands for (like llama.cpp's token_to_piece with
 * lstrip = 0): "▁" -> " ", <0xXX> -> that byte; CONTROL tokens give "" unless
 * `special`. Returns the byte count (may exceed cap: then nothing past cap is
 * written). */
size_t tokenizer_token_bytes(const tokenizer *t, int32_t id, bool special, char *buf, size_t cap);

/* Streaming detokenizer: feed ids one at a time, get back only complete
 * UTF-8 (bytes of an incomplete sequence are held until completed or until a
 * following byte proves them invalid, then they are emitted as U+FFFD).
 * With strip_leading_space, the single leading space SentencePiece adds to the
 * first piece of the output is removed (as llama2.c does after BOS). */
typedef struct detok_stream {
    const tokenizer *tok;
    bool special;        /* render CONTROL tokens */
    bool strip_leading;  /* still to strip the first leading space */
    unsigned char pend[8];
    size_t n_pend;
} detok_stream;

void detok_init(detok_stream *d, const tokenizer *t, bool strip_leading_space, bool special);
/* Appends the complete UTF-8 produced by token `id` to out (at most cap
 * bytes; cap >= 64 + longest token is always enough). Returns bytes written. */
size_t detok_push(detok_stream *d, int32_t id, char *out, size_t cap);
/* Emits what is still held (invalid tail as U+FFFD). Returns bytes written. */
size_t detok_flush(detok_stream *d, char *out, size_t cap);

#endif
