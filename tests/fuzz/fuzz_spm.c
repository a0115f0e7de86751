/* fuzz_spm.c - libFuzzer harness for the SentencePiece tokenizer and the
 * streaming detokenizer.
 *
 * No files are needed: at start-up a small SPM vocabulary (byte tokens,
 * pieces with colliding scores, multi-byte pieces, CONTROL / USER_DEFINED /
 * UNKNOWN specials) is written with gguf_writer to a temp file, read back into
 * memory, the temp file removed, and the tokenizer loaded with
 * gguf_open_memory. Each input is encoded with parse_special off and on; the
 * ids must be in range, and decoding them must give valid UTF-8 which, for
 * valid UTF-8 input without special tokens, equals the input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/gguf.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

static tokenizer *g_tok;
static void *g_image;
static gguf_file *g_file;

#define SP "\xE2\x96\x81"
static const char *const g_pieces[] = {
    SP,
    "a",
    "b",
    "c",
    "ab",
    "bc",
    "abc",
    SP "a",
    SP "ab",
    SP SP,
    SP SP SP,
    "\xC3\xA9",
    "\xE2\x82\xAC",
    "\xF0\x9F\xA6\x99",
    "a\xC3\xA9",
    "\xE4\xB8\xAD",
    "\xE4\xB8\xAD\xE6\x96\x87",
    "\n",
    "\n\n",
    "x",
    "xx",
    "xxx",
};

static void die(const char *what, const cf_err *e) {
    fprintf(stderr, "fuzz_spm init: %s: %s\n", what, e ? e->msg : "");
    abort();
}

static void *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    void *p = n > 0 ? malloc((size_t)n) : NULL;
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *size = p ? (size_t)n : 0;
    return p;
}

static void build_vocab(void) {
    enum { NP = sizeof g_pieces / sizeof g_pieces[0] };
    enum { N = 3 + 256 + NP + 3 };
    static char bytes[256][7];
    const char *texts[N];
    float scores[N];
    int32_t types[N];
    size_t n = 0;
    texts[n] = "<unk>", scores[n] = 0, types[n++] = TOKEN_TYPE_UNKNOWN;
    texts[n] = "<s>", scores[n] = 0, types[n++] = TOKEN_TYPE_CONTROL;
    texts[n] = "</s>", scores[n] = 0, types[n++] = TOKEN_TYPE_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        texts[n] = bytes[b], scores[n] = 0, types[n++] = TOKEN_TYPE_BYTE;
    }
    for (size_t i = 0; i < NP; i++) /* some equal scores on purpose (tie-breaking) */
        texts[n] = g_pieces[i], scores[n] = -(float)(i % 5), types[n++] = TOKEN_TYPE_NORMAL;
    texts[n] = "<tag>", scores[n] = 0, types[n++] = TOKEN_TYPE_USER_DEFINED;
    texts[n] = "<|im_end|>", scores[n] = 0, types[n++] = TOKEN_TYPE_CONTROL;
    texts[n] = "<|im", scores[n] = 0, types[n++] = TOKEN_TYPE_CONTROL;

    gguf_writer *w = gguf_writer_create();
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", texts, n);
    gguf_set_arr_f32(w, "tokenizer.ggml.scores", scores, n);
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", types, n);
    gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_spm-%d.gguf", (int)getpid());
    cf_err e = {{0}};
    if (gguf_writer_write(w, path, &e) != 0) die("write", &e);
    gguf_writer_free(w);
    size_t size = 0;
    g_image = read_all(path, &size);
    unlink(path);
    if (!g_image) die("read back", NULL);
    if (gguf_open_memory(g_image, size, "fuzz-vocab", &g_file, &e) != 0) die("open", &e);
    if (tokenizer_load_gguf(g_file, &g_tok, &e) != 0) die("tokenizer", &e);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    build_vocab();
    return 0;
}

/* Decodes ids; returns the malloc'd text (valid UTF-8 is asserted). */
static char *decode(const int32_t *ids, size_t n, bool special, size_t *len) {
    size_t cap = 64 + tokenizer_max_token_len(g_tok);
    char *out = malloc(n * cap + cap);
    detok_stream d;
    detok_init(&d, g_tok, true, special);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += detok_push(&d, ids[i], out + o, cap);
    o += detok_flush(&d, out + o, cap);
    if (!utf8_valid(out, o)) abort();
    *len = o;
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    for (int ps = 0; ps < 2; ps++) {
        int32_t *ids = NULL;
        size_t n = 0;
        cf_err e;
        if (tokenizer_encode(g_tok, text, size, true, ps, &ids, &n, &e) != 0) abort();
        bool has_special = false;
        for (size_t i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= tokenizer_n_vocab(g_tok)) abort();
            int ty = tokenizer_token_type(g_tok, ids[i]);
            if (i > 0 && ty != TOKEN_TYPE_NORMAL && ty != TOKEN_TYPE_BYTE) has_special = true;
        }
        size_t len = 0;
        free(decode(ids, n, true, &len)); /* control tokens rendered: still valid UTF-8 */
        char *out = decode(ids, n, false, &len);
        /* no unknown bytes here: every byte has a byte token, so valid UTF-8
         * without special texts round-trips (U+2581 comes back as ' ') */
        if (!has_special && utf8_valid(text, size) && !memmem(text, size, SP, 3) &&
            (len != size || memcmp(out, text, size) != 0))
            abort();
        free(out);
        free(ids);
    }
    return 0;
}
