/* fuzz_bpe.c - libFuzzer harness for the byte-level BPE tokenizer (every
 * pre-tokenizer type), the WordPiece tokenizer and the detokenizer.
 *
 * No files are needed: at start-up small vocabularies are written with
 * gguf_writer to a temp file, read back into memory (the temp file removed)
 * and loaded with gguf_open_memory: one BPE vocabulary (all 256 GPT-2 byte
 * characters, a few merges including multi-byte and CJK ones, CONTROL and
 * USER_DEFINED specials) once per tokenizer.ggml.pre type, plus one BERT
 * WordPiece vocabulary. The first input byte picks the tokenizer, the rest
 * is the text, encoded with parse_special off and on. Checks: ids in range;
 * with parse_special off no CONTROL id appears (but WordPiece's [UNK]); BPE: the raw bytes of the
 * ids (specials rendered) give back the input exactly, whatever it is; the
 * streaming detokenizer always produces valid UTF-8, equal to the input
 * when that is valid UTF-8.
 * First byte >= 0xF0: the input is tokenizer data instead: line 1 is the
 * tokenizer.ggml.pre value, every further line a merge; a vocabulary of the
 * 256 byte characters plus each merge's concatenation (when valid UTF-8) is
 * written and loaded (errors are fine, crashes are not) and, when it loads,
 * the input itself is encoded and must round-trip byte for byte. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "format/gguf.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

static const char *const g_pres[] = {"gpt-2",  "deepseek-llm", "deepseek-coder", "deepseek-v3", "falcon",
                                     "llama3", "qwen2",        "starcoder",      "default",     "no-such-pre"};
#define N_PRE (sizeof g_pres / sizeof g_pres[0])
static tokenizer *g_tok[N_PRE + 1]; /* last: WordPiece */
static void *g_image[N_PRE + 1];
static gguf_file *g_file[N_PRE + 1];

static void die(const char *what, const cf_err *e) {
    fprintf(stderr, "fuzz_bpe init: %s: %s\n", what, e ? e->msg : "");
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

/* Writes w to a temp file, maps it back into memory, loads tokenizer i. */
static void finish_vocab(gguf_writer *w, size_t i) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_bpe-%d.gguf", (int)getpid());
    cf_err e = {{0}};
    if (gguf_writer_write(w, path, &e) != 0) die("write", &e);
    gguf_writer_free(w);
    size_t size = 0;
    g_image[i] = read_all(path, &size);
    unlink(path);
    if (!g_image[i]) die("read back", NULL);
    if (gguf_open_memory(g_image[i], size, "fuzz-vocab", &g_file[i], &e) != 0) die("open", &e);
    if (tokenizer_load_gguf(g_file[i], &g_tok[i], &e) != 0) die("tokenizer", &e);
}

/* GPT-2 character of byte b, UTF-8 into out (NUL-terminated). */
static void byte_char(int b, char out[3]) {
    static int extra[256];
    static int ready;
    if (!ready) {
        int n = 0;
        for (int i = 0; i < 256; i++)
            extra[i] = ((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174) ? i : 256 + n++;
        ready = 1;
    }
    int cp = extra[b];
    if (cp < 0x80) {
        out[0] = (char)cp, out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
    }
}

#define G "\xC4\xA0" /* "Ġ" = space */
static const char *const g_merged[] = {"th",
                                       "the",
                                       G "t",
                                       G "the",
                                       "in",
                                       "ing",
                                       G "a",
                                       G G,
                                       G G G G,
                                       "\xC4\x8A\xC4\x8A",
                                       "\xC3\xA4\xC2\xBD",
                                       "\xC3\xA4\xC2\xBD\xC5\x82" /* 你 */,
                                       "12",
                                       "123"};
static const char *const g_merges[] = {"t h",
                                       "th e",
                                       G " t",
                                       G "t he",
                                       "i n",
                                       "in g",
                                       G " a",
                                       G " " G,
                                       G G " " G G,
                                       "\xC4\x8A \xC4\x8A",
                                       "\xC3\xA4 \xC2\xBD",
                                       "\xC3\xA4\xC2\xBD \xC5\x82",
                                       "1 2",
                                       "12 3",
                                       "t he" /* half not a token: ignored */};

static void build_bpe(size_t i) {
    enum { NM = sizeof g_merged / sizeof g_merged[0] };
    enum { N = 256 + NM + 4 };
    static char chars[256][3];
    const char *texts[N];
    int32_t types[N];
    size_t n = 0;
    for (int b = 0; b < 256; b++) {
        byte_char(b, chars[b]);
        texts[n] = chars[b], types[n++] = TOKEN_TYPE_NORMAL;
    }
    for (size_t k = 0; k < NM; k++) texts[n] = g_merged[k], types[n++] = TOKEN_TYPE_NORMAL;
    texts[n] = "<|endoftext|>", types[n++] = TOKEN_TYPE_CONTROL;
    texts[n] = "<|im_end|>", types[n++] = TOKEN_TYPE_CONTROL;
    texts[n] = "<|im", types[n++] = TOKEN_TYPE_CONTROL;
    texts[n] = "<tag>", types[n++] = TOKEN_TYPE_USER_DEFINED;
    gguf_writer *w = gguf_writer_create();
    gguf_set_str(w, "general.architecture", "gpt2");
    gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_set_str(w, "tokenizer.ggml.pre", g_pres[i]);
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", texts, n);
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", types, n);
    gguf_set_arr_str(w, "tokenizer.ggml.merges", g_merges, sizeof g_merges / sizeof g_merges[0]);
    gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 256 + NM);
    gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 256 + NM);
    gguf_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    finish_vocab(w, i);
}

#define SP "\xE2\x96\x81"
static void build_wpm(size_t i) {
    static const char *const texts[] = {"[PAD]", "[UNK]",    "[CLS]", "[SEP]",    "[MASK]", SP "a", SP "b",
                                        "a",     "b",        "ab",    SP "hello", SP "!",   SP ",", SP "\xE4\xBD\xA0",
                                        SP "e",  "\xC3\xA9", SP "1",  "1",        SP SP};
    enum { N = sizeof texts / sizeof texts[0] };
    int32_t types[N];
    for (size_t k = 0; k < N; k++) types[k] = k < 5 ? TOKEN_TYPE_CONTROL : TOKEN_TYPE_NORMAL;
    gguf_writer *w = gguf_writer_create();
    gguf_set_str(w, "general.architecture", "bert");
    gguf_set_str(w, "tokenizer.ggml.model", "bert");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", texts, N);
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", types, N);
    gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 1);
    gguf_set_u32(w, "tokenizer.ggml.cls_token_id", 2);
    gguf_set_u32(w, "tokenizer.ggml.seperator_token_id", 3);
    finish_vocab(w, i);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    cf_log_level = CF_LOG_ERROR; /* fuzzed pre types / missing merges warn on every input */
    for (size_t i = 0; i < N_PRE; i++) build_bpe(i);
    build_wpm(N_PRE);
    return 0;
}

static char *decode(const tokenizer *t, const int32_t *ids, size_t n, bool special, size_t *len) {
    size_t cap = 64 + tokenizer_max_token_len(t);
    char *out = malloc(n * cap + cap);
    detok_stream d;
    detok_init(&d, t, tokenizer_add_space_prefix(t), special);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += detok_push(&d, ids[i], out + o, cap);
    o += detok_flush(&d, out + o, cap);
    if (!utf8_valid(out, o)) abort();
    *len = o;
    return out;
}

/* Round trip of text through t: raw token bytes (specials rendered) give
 * back the text exactly; aborts otherwise. */
static void check_bpe_roundtrip(const tokenizer *t, const char *text, size_t size, bool ps) {
    int32_t *ids = NULL;
    size_t n = 0, o = 0;
    cf_err e;
    if (tokenizer_encode(t, text, size, false, ps, &ids, &n, &e) != 0) abort();
    char *raw = malloc(size + 64 * n + 1);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tokenizer_n_vocab(t)) abort();
        o += tokenizer_token_bytes(t, ids[i], true, raw + o, 64);
    }
    if (o != size || memcmp(raw, text, size) != 0) abort();
    free(raw);
    free(ids);
}

static void fuzz_vocab(const char *s, size_t size) {
    enum { MAX_LINES = 64 };
    gguf_str lines[MAX_LINES];
    size_t nl = 0, start = 0;
    for (size_t i = 0; i <= size && nl < MAX_LINES; i++)
        if (i == size || s[i] == '\n') {
            lines[nl++] = (gguf_str){s + start, i - start};
            start = i + 1;
        }
    static char chars[256][3];
    gguf_str toks[256 + MAX_LINES + 1];
    int32_t types[256 + MAX_LINES + 1];
    char *cat[MAX_LINES] = {0};
    size_t nt = 0;
    for (int b = 0; b < 256; b++) {
        byte_char(b, chars[b]);
        toks[nt] = (gguf_str){chars[b], strlen(chars[b])}, types[nt++] = TOKEN_TYPE_NORMAL;
    }
    for (size_t k = 1; k < nl; k++) { /* the merge "A B" -> token "AB" */
        const char *sp = lines[k].len > 1 ? memchr(lines[k].s + 1, ' ', lines[k].len - 1) : NULL;
        if (!sp) continue;
        size_t ll = (size_t)(sp - lines[k].s), rl = lines[k].len - ll - 1;
        cat[k] = malloc(ll + rl + 1);
        memcpy(cat[k], lines[k].s, ll);
        memcpy(cat[k] + ll, sp + 1, rl);
        if (ll + rl == 0 || !utf8_valid(cat[k], ll + rl) || memchr(cat[k], 0, ll + rl)) continue;
        toks[nt] = (gguf_str){cat[k], ll + rl}, types[nt++] = TOKEN_TYPE_NORMAL;
    }
    toks[nt] = (gguf_str){"<tag>", 5}, types[nt++] = TOKEN_TYPE_USER_DEFINED;
    char pre[64];
    size_t pl = lines[0].len < sizeof pre - 1 ? lines[0].len : sizeof pre - 1;
    memcpy(pre, lines[0].s, pl);
    pre[pl] = 0;
    gguf_writer *w = gguf_writer_create();
    gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_set_str(w, "tokenizer.ggml.pre", pre);
    gguf_set_arr_str_len(w, "tokenizer.ggml.tokens", toks, nt);
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", types, nt);
    if (nl > 1) gguf_set_arr_str_len(w, "tokenizer.ggml.merges", lines + 1, nl - 1);
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_bpe-v-%d.gguf", (int)getpid());
    cf_err e = {{0}};
    gguf_file *f = NULL;
    tokenizer *t = NULL;
    if (gguf_writer_write(w, path, &e) == 0 && gguf_open(path, &f, &e) == 0 && tokenizer_load_gguf(f, &t, &e) == 0) {
        check_bpe_roundtrip(t, s, size, false);
        check_bpe_roundtrip(t, s, size, true);
    }
    tokenizer_free(t);
    gguf_close(f);
    unlink(path);
    gguf_writer_free(w);
    for (size_t k = 0; k < nl; k++) free(cat[k]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    if (data[0] >= 0xF0) {
        fuzz_vocab((const char *)data + 1, size - 1);
        return 0;
    }
    size_t which = data[0] % (N_PRE + 1);
    const tokenizer *t = g_tok[which];
    bool bpe = which < N_PRE;
    const char *text = (const char *)data + 1;
    size -= 1;
    for (int ps = 0; ps < 2; ps++) {
        int32_t *ids = NULL;
        size_t n = 0;
        cf_err e;
        if (tokenizer_encode(t, text, size, false, ps, &ids, &n, &e) != 0) abort();
        for (size_t i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= tokenizer_n_vocab(t)) abort();
            /* user text yields no CONTROL id (WordPiece's [UNK], id 1 here, is CONTROL in BERT vocabs) */
            if (!ps && tokenizer_token_type(t, ids[i]) == TOKEN_TYPE_CONTROL && (bpe || ids[i] != 1)) abort();
        }
        if (bpe) { /* exact byte round trip */
            char *raw = malloc(size + 64 * n + 1);
            size_t o = 0;
            for (size_t i = 0; i < n; i++) o += tokenizer_token_bytes(t, ids[i], true, raw + o, 64);
            if (o != size || memcmp(raw, text, size) != 0) abort();
            free(raw);
        }
        size_t len = 0;
        free(decode(t, ids, n, true, &len));
        char *out = decode(t, ids, n, false, &len);
        if (bpe && !ps && utf8_valid(text, size) && (len != size || memcmp(out, text, size) != 0)) abort();
        free(out);
        free(ids);
    }
    return 0;
}
