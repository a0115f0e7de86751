/* test_tokenizer_bpe.c - byte-level BPE ("gpt2") and WordPiece ("bert")
 * tokenizers against llama.cpp.
 *
 * Covers: every tokenizer vector (.inp/.out) of the gpt-2, deepseek-llm,
 * deepseek-coder, falcon, mpt, refact, starcoder, bert-bge and
 * tiny-deepseek2 vocabularies, plus the detokenized round trip of each case
 * (BPE: must give the input back; WordPiece: lowercases and re-spaces, so only
 * counted); the input_ids / pieces / detokenized text of the tiny-deepseek2
 * llama.cpp fixtures; special-token injection (user text spelling control
 * tokens gives only ordinary tokens) on the deepseek, gpt-2 and SPM vocabs;
 * concurrent encoding from several threads; a long single word (the merge
 * loop must not be quadratic); the piece memo of long texts against
 * line-by-line encoding; the pre types without shipped vectors (llama3,
 * qwen2, deepseek-v3, gpt-neox, default) told apart by digit grouping;
 * WordPiece specifics; and tokenizer data built with gguf_writer (malformed
 * merges are errors, missing merges / unknown pre types are not). */
#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format/gguf.h"
#include "testutil.h"
#include "text/tokenizer.h"

/* ------------------------------------------------------------ helpers */

static tokenizer *load_tok(const char *path) {
    gguf_file *f = NULL;
    tokenizer *t = NULL;
    cf_err err = {{0}};
    if (gguf_open(path, &f, &err) != 0) {
        fprintf(stderr, "open %s: %s\n", path, err.msg);
        return NULL;
    }
    if (tokenizer_load_gguf(f, &t, &err) != 0) fprintf(stderr, "tokenizer %s: %s\n", path, err.msg);
    gguf_close(f);
    return t;
}

static bool encode(const tokenizer *t, const char *s, size_t len, bool add_special, bool parse_special, int32_t **ids,
                   size_t *n) {
    cf_err err = {{0}};
    if (tokenizer_encode(t, s, len, add_special, parse_special, ids, n, &err) != 0) {
        fprintf(stderr, "encode: %s\n", err.msg);
        return false;
    }
    return true;
}

static void print_ids(const char *label, const int32_t *v, size_t n) {
    fprintf(stderr, "  %s:", label);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", v[i]);
    fputc('\n', stderr);
}

static size_t parse_id_line(const char *line, size_t len, int32_t *out, size_t cap) {
    size_t n = 0, i = 0;
    char buf[32];
    while (i < len) {
        while (i < len && line[i] == ' ') i++;
        size_t k = 0;
        while (i < len && line[i] != ' ' && k < sizeof buf - 1) buf[k++] = line[i++];
        if (k == 0) break;
        buf[k] = 0;
        if (n < cap) out[n] = (int32_t)strtol(buf, NULL, 10);
        n++;
    }
    return n;
}

static char *unhex(const char *hex, size_t *len) {
    size_t n = strlen(hex) / 2;
    char *b = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        b[i] = (char)v;
    }
    b[n] = 0;
    *len = n;
    return b;
}

/* Detokenizes ids (no special rendering, no space strip) into a malloc'd
 * buffer; *len set. */
static char *detok_all(const tokenizer *t, const int32_t *ids, size_t n, bool strip, size_t *len) {
    size_t cap = 64 + tokenizer_max_token_len(t);
    char *out = malloc((n + 1) * cap + 1);
    detok_stream d;
    detok_init(&d, t, strip, false);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += detok_push(&d, ids[i], out + o, cap);
    o += detok_flush(&d, out + o, cap);
    out[o] = 0;
    *len = o;
    return out;
}

static bool contains_type(const tokenizer *t, const int32_t *v, size_t n, int type) {
    for (size_t i = 0; i < n; i++)
        if (tokenizer_token_type(t, v[i]) == type) return true;
    return false;
}

/* ------------------------------------------------------- vocab vectors */

/* Checks every .inp/.out case; counts round trips. `must_roundtrip`: every
 * case whose ids decode to something else than the input is a failure. */
static void test_vocab_vectors(const char *name, bool must_roundtrip) {
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/vocab/%s", name);
    tokenizer *t = load_tok(shared_path(rel));
    CHECKF(t != NULL, "%s", name);
    if (!t) return;
    snprintf(rel, sizeof rel, "fixtures/vocab/%s.inp", name);
    size_t inp_len = 0, out_len = 0;
    char *inp = read_file(shared_path(rel), &inp_len);
    snprintf(rel, sizeof rel, "fixtures/vocab/%s.out", name);
    char *out = read_file(shared_path(rel), &out_len);
    CHECK(inp && out);
    if (!inp || !out) {
        free(inp);
        free(out);
        tokenizer_free(t);
        return;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    const char *p = inp, *end = inp + inp_len, *line = out, *out_end = out + out_len;
    int cases = 0, passed = 0, round = 0;
    while (p < end) {
        const char *s = memmem(p, (size_t)(end - p), sep, sep_len);
        if (!s) break;
        const char *nl = memchr(line, '\n', (size_t)(out_end - line));
        size_t line_len = nl ? (size_t)(nl - line) : (size_t)(out_end - line);
        int32_t want[4096];
        size_t n_want = parse_id_line(line, line_len, want, 4096);
        int32_t *ids = NULL;
        size_t n = 0, in_len = (size_t)(s - p);
        cases++;
        if (encode(t, p, in_len, false, false, &ids, &n) && n == n_want &&
            (n == 0 || !memcmp(ids, want, n * sizeof *ids))) {
            passed++;
        } else {
            fprintf(stderr, "%s case %d mismatch: '%.*s'\n", name, cases, (int)in_len, p);
            print_ids("want", want, n_want);
            print_ids("got ", ids, n);
        }
        size_t dl = 0;
        char *dec = detok_all(t, want, n_want, false, &dl);
        if (dl == in_len && !memcmp(dec, p, in_len)) {
            round++;
        } else if (must_roundtrip) {
            CHECKF(false, "%s case %d: '%.*s' decodes to '%s'", name, cases, (int)in_len, p, dec);
        }
        free(dec);
        free(ids);
        p = s + sep_len;
        line = nl ? nl + 1 : out_end;
    }
    fprintf(stderr, "%s: %d/%d vectors pass, %d/%d round-trip\n", name, passed, cases, round, cases);
    CHECKF(cases >= 40 && passed == cases, "%s: %d/%d", name, passed, cases);
    free(inp);
    free(out);
    tokenizer_free(t);
}

/* --------------------------------------------------- llama.cpp fixtures */

static int32_t *json_ids(json_t *a, size_t *n) {
    *n = json_array_size(a);
    int32_t *v = malloc((*n + 1) * sizeof *v);
    for (size_t i = 0; i < *n; i++) v[i] = (int32_t)json_integer_value(json_array_get(a, i));
    return v;
}

static void check_fixture(const tokenizer *t, const char *path, const char *fname) {
    json_error_t jerr;
    json_t *j = json_load_file(path, 0, &jerr);
    CHECKF(j != NULL, "%s: %s", path, jerr.text);
    if (!j) return;
    size_t plen = 0, nw = 0, ng = 0, n = 0;
    char *prompt = unhex(json_string_value(json_object_get(j, "prompt_text_hex")), &plen);
    int32_t *want = json_ids(json_object_get(j, "input_ids"), &nw);
    int32_t *ids = NULL;
    bool ok = encode(t, prompt, plen, true, false, &ids, &n);
    CHECKF(ok && n == nw && !memcmp(ids, want, n * sizeof *ids), "%s: input_ids differ", fname);
    if (!(ok && n == nw && !memcmp(ids, want, n * sizeof *ids))) {
        print_ids("want", want, nw);
        print_ids("got ", ids, n);
    }
    json_t *jp = json_object_get(j, "input_pieces_hex");
    int bad = 0;
    for (size_t i = 0; i < nw; i++) {
        char buf[512], hex[1040];
        size_t k = tokenizer_token_bytes(t, want[i], true, buf, sizeof buf);
        for (size_t b = 0; b < k && b < sizeof buf; b++) sprintf(hex + 2 * b, "%02x", (unsigned char)buf[b]);
        hex[2 * (k < sizeof buf ? k : sizeof buf)] = 0;
        if (strcmp(hex, json_string_value(json_array_get(jp, i))) != 0) bad++;
    }
    CHECKF(bad == 0, "%s: %d input pieces differ", fname, bad);
    /* full text = detokenized prompt (without BOS) + greedy continuation */
    int32_t *g = json_ids(json_object_get(j, "greedy_ids"), &ng);
    int32_t *all = malloc((nw + ng + 1) * sizeof *all);
    memcpy(all, want, nw * sizeof *all);
    memcpy(all + nw, g, ng * sizeof *all);
    /* full_text_hex holds the raw bytes (possibly invalid UTF-8); the
     * streaming detokenizer's output must equal them where they are valid */
    size_t fl = 0, dl = 0, rl = 0;
    const char *fhex = json_string_value(json_object_get(j, "full_text_hex"));
    CHECKF(fhex != NULL, "%s: no full_text_hex", fname);
    if (fhex) {
        char *full = unhex(fhex, &fl);
        char *raw = malloc(fl + 64 * (nw + ng) + 1);
        for (size_t i = 0; i < nw + ng; i++) rl += tokenizer_token_bytes(t, all[i], false, raw + rl, 64);
        CHECKF(rl == fl && !memcmp(raw, full, fl), "%s: raw full text differs", fname);
        char *dec = detok_all(t, all, nw + ng, false, &dl);
        if (!json_is_true(json_object_get(j, "full_text_utf8_lossy")))
            CHECKF(dl == fl && !memcmp(dec, full, fl), "%s: full text differs: '%s'", fname, dec);
        free(dec);
        free(raw);
        free(full);
    }
    free(all);
    free(g);
    free(want);
    free(ids);
    free(prompt);
    json_decref(j);
}

static void test_fixtures(void) {
    tokenizer *t = load_tok(shared_path("models/tiny/tiny-deepseek2.gguf"));
    CHECK(t != NULL);
    if (!t) return;
    const char *dir = shared_path("fixtures/llama-cpp");
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int count = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t nl = strlen(e->d_name);
        if (strncmp(e->d_name, "tiny-deepseek2.", 15) != 0 || nl < 5 || strcmp(e->d_name + nl - 5, ".json") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        check_fixture(t, path, e->d_name);
        count++;
    }
    if (d) closedir(d);
    fprintf(stderr, "tiny-deepseek2: %d llama.cpp fixtures checked\n", count);
    CHECKF(count >= 3, "only %d fixtures", count);
    tokenizer_free(t);
}

/* ------------------------------------------------ special-token injection */

static void check_injection(const char *vocab, const char *text, int32_t special_id, bool roundtrip) {
    tokenizer *t = load_tok(shared_path(vocab));
    CHECKF(t != NULL, "%s", vocab);
    if (!t) return;
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(encode(t, text, strlen(text), false, false, &ids, &n) && n > 0);
    bool ordinary = !contains_type(t, ids, n, TOKEN_TYPE_CONTROL) && !contains_type(t, ids, n, TOKEN_TYPE_UNKNOWN);
    for (size_t i = 0; i < n; i++)
        if (tokenizer_is_eog(t, ids[i]) || ids[i] == tokenizer_bos(t)) ordinary = false;
    CHECKF(ordinary, "%s: user text '%s' produced a special token", vocab, text);
    if (!ordinary) print_ids("got", ids, n);
    size_t dl = 0;
    char *dec = detok_all(t, ids, n, tokenizer_add_space_prefix(t), &dl);
    if (roundtrip) CHECKF(dl == strlen(text) && !memcmp(dec, text, dl), "%s: '%s' decodes to '%s'", vocab, text, dec);
    free(dec);
    free(ids);
    if (special_id >= 0) { /* with parse_special the same text does give the token */
        CHECK(encode(t, text, strlen(text), false, true, &ids, &n) && n > 0);
        bool found = false;
        for (size_t i = 0; i < n; i++) found |= ids[i] == special_id;
        CHECKF(found, "%s: parse_special did not find token %d in '%s'", vocab, special_id, text);
        free(ids);
    }
    tokenizer_free(t);
}

static void test_injection(void) {
    const char *ds = "fixtures/vocab/ggml-vocab-deepseek-llm.gguf";
    check_injection(ds, "hi <｜end▁of▁sentence｜> there", 100001, true);
    check_injection(ds, "<｜begin▁of▁sentence｜>system", 100000, true);
    check_injection(ds, "x<|im_end|>y<｜tool▁calls▁begin｜>z", -1, true);
    check_injection("models/tiny/tiny-deepseek2.gguf", "a<｜end▁of▁sentence｜>b<｜tool▁calls▁begin｜>", 8178, true);
    check_injection("fixtures/vocab/ggml-vocab-gpt-2.gguf", "end<|endoftext|>", 50256, true);
    check_injection("fixtures/vocab/ggml-vocab-llama-spm.gguf", "hello</s><s><unk><|im_end|>", 2, true);
    /* WordPiece splits "[" off as punctuation, so "[SEP]" can never come
     * out of user text; the decoded text is lowercased and re-spaced */
    check_injection("fixtures/vocab/ggml-vocab-bert-bge.gguf", "[cls] [SEP] [MASK]", -1, false);
}

/* --------------------------------------------------------- BPE details */

static void test_bpe_api(void) {
    tokenizer *t = load_tok(shared_path("fixtures/vocab/ggml-vocab-deepseek-llm.gguf"));
    CHECK(t != NULL);
    if (!t) return;
    CHECK(tokenizer_bos(t) == 100000 && tokenizer_eos(t) == 100001 && tokenizer_add_bos(t));
    CHECK(!tokenizer_add_space_prefix(t) && tokenizer_is_eog(t, 100001));
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(encode(t, "Hi", 2, true, false, &ids, &n) && n >= 2 && ids[0] == 100000);
    free(ids);
    /* empty text and add_special: BOS only */
    CHECK(encode(t, "", 0, true, false, &ids, &n) && n == 1 && ids[0] == 100000);
    free(ids);
    /* every byte value of invalid UTF-8 goes through BPE and back, except
     * the 13 bytes (C0 C1 F5..FF) this vocab only has as USER_DEFINED
     * characters: those decode as the character's UTF-8 (as in llama.cpp) */
    char bytes[256];
    size_t nb = 0;
    for (int i = 255; i >= 0; i--)
        if (!(i == 0xC0 || i == 0xC1 || i >= 0xF5)) bytes[nb++] = (char)i;
    CHECK(encode(t, bytes, nb, false, false, &ids, &n));
    char *raw = malloc(4096);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += tokenizer_token_bytes(t, ids[i], false, raw + o, 4096 - o);
    CHECKF(o == nb && !memcmp(raw, bytes, nb), "raw byte round trip: %zu bytes", o);
    free(ids);
    CHECK(encode(t, "\xFC", 1, false, false, &ids, &n) && n == 1 && ids[0] == 100014);
    CHECK(tokenizer_token_bytes(t, 100014, false, raw, 16) == 2 && !memcmp(raw, "\xC3\xBC", 2));
    free(ids);
    free(raw);
    /* token bytes: "Ġ" is a space, "Ċ" a newline */
    char buf[16];
    int32_t sp = -1;
    for (int32_t id = 0; id < 1000 && sp < 0; id++)
        if (!strcmp(tokenizer_token_text(t, id), "\xC4\xA0")) sp = id;
    CHECK(sp >= 0 && tokenizer_token_bytes(t, sp, false, buf, sizeof buf) == 1 && buf[0] == ' ');
    CHECK(tokenizer_token_bytes(t, 100001, false, buf, sizeof buf) == 0);
    CHECK(tokenizer_token_bytes(t, 100001, true, buf, sizeof buf) == strlen("<｜end▁of▁sentence｜>"));
    tokenizer_free(t);
}

/* A 200 000-letter word (one pre-token): O(n log n) merging is instant, a
 * quadratic rescan would take minutes. */
static void test_long_word(void) {
    tokenizer *t = load_tok(shared_path("fixtures/vocab/ggml-vocab-gpt-2.gguf"));
    CHECK(t != NULL);
    if (!t) return;
    size_t len = 200000;
    char *s = malloc(len);
    for (size_t i = 0; i < len; i++) s[i] = "abcdefghij"[(i * 7 + i / 13) % 10];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(encode(t, s, len, false, false, &ids, &n) && n > 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double sec = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    CHECKF(sec < 5.0, "long word took %.2f s", sec);
    size_t dl = 0;
    char *dec = detok_all(t, ids, n, false, &dl);
    CHECK(dl == len && !memcmp(dec, s, len));
    free(dec);
    free(ids);
    free(s);
    /* GPT-2 has all 256 byte characters: any bytes round-trip */
    char bytes[512];
    for (int i = 0; i < 512; i++) bytes[i] = (char)(i * 37 + 11);
    CHECK(encode(t, bytes, 512, false, false, &ids, &n));
    char *raw = malloc(8192);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += tokenizer_token_bytes(t, ids[i], false, raw + o, 8192 - o);
    CHECKF(o == 512 && !memcmp(raw, bytes, 512), "gpt-2 raw byte round trip: %zu bytes", o);
    free(raw);
    free(ids);
    tokenizer_free(t);
}

/* Long texts go through the per-call piece memo, short ones do not:
 * deepseek-llm's first pattern makes every newline its own piece, so a long
 * text must encode to the concatenation of its lines encoded one by one. */
static void test_memo_consistency(void) {
    tokenizer *t = load_tok(shared_path("fixtures/vocab/ggml-vocab-deepseek-llm.gguf"));
    size_t inp_len = 0;
    char *inp = read_file(shared_path("fixtures/vocab/ggml-vocab-deepseek-llm.gguf.inp"), &inp_len);
    CHECK(t && inp);
    if (!t || !inp) {
        free(inp);
        tokenizer_free(t);
        return;
    }
    size_t copies = 16384 / (inp_len + 1) + 1, len = copies * inp_len;
    char *text = malloc(len);
    for (size_t k = 0; k < copies; k++) memcpy(text + k * inp_len, inp, inp_len);
    int32_t *all = NULL, *part = NULL, *want = malloc((len + 1) * sizeof *want);
    size_t n_all = 0, n_part = 0, n_want = 0;
    CHECK(len >= 8192 && encode(t, text, len, false, false, &all, &n_all));
    for (size_t a = 0; a < len;) {
        const char *nl = memchr(text + a, '\n', len - a);
        size_t b = nl ? (size_t)(nl - text) : len;
        if (b > a && encode(t, text + a, b - a, false, false, &part, &n_part)) {
            memcpy(want + n_want, part, n_part * sizeof *part);
            n_want += n_part;
        }
        free(part);
        part = NULL;
        if (nl && encode(t, "\n", 1, false, false, &part, &n_part)) {
            memcpy(want + n_want, part, n_part * sizeof *part);
            n_want += n_part;
        }
        free(part);
        part = NULL;
        a = b + 1;
    }
    CHECKF(n_all == n_want && !memcmp(all, want, n_all * sizeof *all), "memoized long text: %zu ids vs %zu", n_all,
           n_want);
    free(all);
    free(want);
    free(text);
    free(inp);
    tokenizer_free(t);
}

/* ------------------------------------------------------------- threads */

typedef struct thr_arg {
    const tokenizer *t;
    const char *text;
    size_t len;
    const int32_t *want;
    size_t n_want;
    int bad;
} thr_arg;

static void *thr_main(void *p) {
    thr_arg *a = p;
    for (int it = 0; it < 20; it++) {
        int32_t *ids = NULL;
        size_t n = 0;
        cf_err err = {{0}};
        if (tokenizer_encode(a->t, a->text, a->len, true, it & 1, &ids, &n, &err) != 0 || n != a->n_want ||
            memcmp(ids, a->want, n * sizeof *ids) != 0)
            a->bad++;
        free(ids);
    }
    return NULL;
}

static void test_threads(void) {
    tokenizer *t = load_tok(shared_path("fixtures/vocab/ggml-vocab-deepseek-coder.gguf"));
    CHECK(t != NULL);
    if (!t) return;
    const char *text = "def f(x):\n    return x * 2  # 你好, world! 12345\n\n\tÜber café 🦙";
    int32_t *want = NULL;
    size_t nw = 0;
    CHECK(encode(t, text, strlen(text), true, false, &want, &nw));
    pthread_t th[4];
    thr_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thr_arg){t, text, strlen(text), want, nw, 0};
        pthread_create(&th[i], NULL, thr_main, &args[i]);
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += args[i].bad;
    }
    CHECKF(bad == 0, "%d concurrent encodes differ", bad);
    free(want);
    tokenizer_free(t);
}

/* --------------------------------------------- synthetic vocabularies */

static const char *const mini_tokens[] = {"a",
                                          "b",
                                          "c",
                                          "ab",
                                          "abc",
                                          "\xC4\xA0",
                                          ("\xC4\xA0"
                                           "a"),
                                          "<|end|>"};
#define MINI_N (sizeof mini_tokens / sizeof mini_tokens[0])

static void (*g_tweak)(gguf_writer *);

static int build_bpe(void (*tweak)(gguf_writer *), tokenizer **out, cf_err *err) {
    gguf_writer *w = gguf_writer_create();
    int32_t types[MINI_N];
    for (size_t i = 0; i < MINI_N; i++) types[i] = TOKEN_TYPE_NORMAL;
    types[MINI_N - 1] = TOKEN_TYPE_CONTROL;
    static const char *const merges[] = {"a b", "ab c", "\xC4\xA0 a"};
    gguf_set_str(w, "general.architecture", "gpt2");
    gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_set_str(w, "tokenizer.ggml.pre", "gpt-2");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", mini_tokens, MINI_N);
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", types, MINI_N);
    gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, 3);
    if (tweak) tweak(w);
    char path[256];
    temp_path(path, sizeof path, "bpe.gguf");
    gguf_file *f = NULL;
    int rc = gguf_writer_write(w, path, err);
    if (rc == 0) rc = gguf_open(path, &f, err);
    if (rc == 0) rc = tokenizer_load_gguf(f, out, err);
    gguf_close(f);
    unlink(path);
    gguf_writer_free(w);
    return rc;
}

static void no_merges(gguf_writer *w) { gguf_writer_remove_key(w, "tokenizer.ggml.merges"); }
static void bad_pre(gguf_writer *w) { gguf_set_str(w, "tokenizer.ggml.pre", "no-such-pre"); }
static void no_pre(gguf_writer *w) { gguf_writer_remove_key(w, "tokenizer.ggml.pre"); }
static void merge_no_space(gguf_writer *w) {
    static const char *const m[] = {"a b", "abc"};
    gguf_set_arr_str(w, "tokenizer.ggml.merges", m, 2);
}
static void merge_leading_space(gguf_writer *w) {
    static const char *const m[] = {" ab"};
    gguf_set_arr_str(w, "tokenizer.ggml.merges", m, 1);
}
static void merges_not_strings(gguf_writer *w) {
    int32_t v[2] = {1, 2};
    gguf_set_arr_i32(w, "tokenizer.ggml.merges", v, 2);
}
static void pre_not_string(gguf_writer *w) { gguf_set_u32(w, "tokenizer.ggml.pre", 3); }

static bool encodes_to(const tokenizer *t, const char *s, const int32_t *want, size_t n_want) {
    int32_t *ids = NULL;
    size_t n = 0;
    bool ok = encode(t, s, strlen(s), false, false, &ids, &n) && n == n_want &&
              (n == 0 || !memcmp(ids, want, n * sizeof *ids));
    if (!ok) {
        fprintf(stderr, "'%s':\n", s);
        print_ids("want", want, n_want);
        print_ids("got ", ids, n);
    }
    free(ids);
    return ok;
}

static void test_synthetic(void) {
    tokenizer *t = NULL;
    cf_err err = {{0}};
    CHECKF(build_bpe(NULL, &t, &err) == 0, "%s", err.msg);
    if (t) {
        CHECK(encodes_to(t, "abc", (int32_t[]){4}, 1));
        CHECK(encodes_to(t, "abc a", (int32_t[]){4, 6}, 2));
        CHECK(encodes_to(t, "cab", (int32_t[]){2, 3}, 2));
        /* characters without a token are dropped (llama.cpp does the same) */
        CHECK(encodes_to(t, "axb", (int32_t[]){0, 1}, 2));
        CHECK(encodes_to(t, "xx\nxx", NULL, 0)); /* words of dropped characters (memoized as empty) */
        CHECK(tokenizer_bos(t) == -1 && !tokenizer_add_bos(t)); /* default 11 is out of range */
        tokenizer_free(t);
        t = NULL;
    }
    /* not errors: merge-less and unknown/missing pre types */
    void (*ok_tweaks[])(gguf_writer *) = {no_merges, bad_pre, no_pre};
    for (size_t i = 0; i < 3; i++) {
        CHECKF(build_bpe(ok_tweaks[i], &t, &err) == 0, "tweak %zu: %s", i, err.msg);
        if (t && i == 0) CHECK(encodes_to(t, "abc", (int32_t[]){0, 1, 2}, 3));
        if (t && i > 0) CHECK(encodes_to(t, "abc", (int32_t[]){4}, 1));
        tokenizer_free(t);
        t = NULL;
    }
    /* errors */
    struct {
        void (*tweak)(gguf_writer *);
        const char *needle;
    } bad[] = {{merge_no_space, "merges[1]"},
               {merge_leading_space, "merges[0]"},
               {merges_not_strings, "tokenizer.ggml.merges"},
               {pre_not_string, "tokenizer.ggml.pre"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = build_bpe(bad[i].tweak, &t, &err);
        CHECKF(rc != 0 && t == NULL && strstr(err.msg, bad[i].needle), "want error '%s', got rc %d '%s'", bad[i].needle,
               rc, err.msg);
        tokenizer_free(t);
        t = NULL;
    }
    (void)g_tweak;
}

/* WordPiece: [CLS] ... [SEP] with add_special, accents/case folded, [UNK]
 * for words no pieces cover, decoding glues continuation pieces. */
static void test_wpm(void) {
    tokenizer *t = load_tok(shared_path("fixtures/vocab/ggml-vocab-bert-bge.gguf"));
    CHECK(t != NULL);
    if (!t) return;
    int32_t *ids = NULL, *b = NULL;
    size_t n = 0, nb = 0;
    CHECK(tokenizer_bos(t) == 101 && tokenizer_add_bos(t) && tokenizer_add_space_prefix(t));
    CHECK(encode(t, "Hello", 5, true, false, &ids, &n) && n == 3 && ids[0] == 101 && ids[2] == 102);
    free(ids);
    CHECK(encode(t, "CAFÉ naïve", strlen("CAFÉ naïve"), false, false, &ids, &n));
    CHECK(encode(t, "cafe naive", 10, false, false, &b, &nb));
    CHECK(n == nb && n > 0 && !memcmp(ids, b, n * sizeof *ids));
    free(ids);
    free(b);
    CHECK(encode(t, "\xF0\x9F\xA6\x99", 4, false, false, &ids, &n) && n == 1 && ids[0] == 100); /* llama emoji */
    free(ids);
    const char *txt = "Tokenization isn't trivial, is it?";
    CHECK(encode(t, txt, strlen(txt), false, false, &ids, &n) && n > 6);
    size_t dl = 0;
    char *dec = detok_all(t, ids, n, true, &dl);
    CHECKF(!strcmp(dec, "tokenization isn ' t trivial , is it ?"), "wpm decode: '%s'", dec);
    free(dec);
    free(ids);
    tokenizer_free(t);
}

/* --------------------------------- pre types without shipped vectors */

static const char *g_pre_name;
static void set_pre(gguf_writer *w) { gguf_set_str(w, "tokenizer.ggml.pre", g_pre_name); }

/* The gpt-2 vocabulary re-labelled with another pre type. */
static tokenizer *gpt2_with_pre(const char *pre) {
    gguf_file *src = NULL;
    cf_err err = {{0}};
    if (gguf_open(shared_path("fixtures/vocab/ggml-vocab-gpt-2.gguf"), &src, &err) != 0) return NULL;
    gguf_writer *w = gguf_writer_create();
    tokenizer *t = NULL;
    g_pre_name = pre;
    char path[256];
    temp_path(path, sizeof path, "pre.gguf");
    gguf_file *f = NULL;
    if (gguf_writer_copy_kv(w, src, &err) == 0) {
        set_pre(w);
        if (gguf_writer_write(w, path, &err) == 0 && gguf_open(path, &f, &err) == 0) tokenizer_load_gguf(f, &t, &err);
    }
    if (!t) fprintf(stderr, "pre %s: %s\n", pre, err.msg);
    gguf_close(f);
    gguf_close(src);
    unlink(path);
    gguf_writer_free(w);
    return t;
}

/* The pieces of `text` joined with '|' into out. */
static void pieces(const tokenizer *t, const char *text, char *out, size_t cap) {
    int32_t *ids = NULL;
    size_t n = 0, o = 0;
    out[0] = 0;
    if (!encode(t, text, strlen(text), false, false, &ids, &n)) return;
    for (size_t i = 0; i < n && o + 70 < cap; i++) {
        if (i) out[o++] = '|';
        o += tokenizer_token_bytes(t, ids[i], true, out + o, 64);
    }
    out[o] = 0;
    free(ids);
}

/* The regex sequences of llama3 / qwen2 / deepseek-v3 / gpt-neox / default
 * (no .inp/.out shipped): digit grouping and contraction case-folding show
 * which one ran; every text still round-trips. */
static void test_pre_types(void) {
    static const struct {
        const char *pre, *text, *want;
    } cases[] = {
        /* gpt-2 itself: one number word, BPE gives 123|45|67 */
        {"gpt-2", "1234567", "123|45|67"},       {"gpt-neox", "1234567", "123|45|67"},
        {"llama-bpe", "1234567", "123|456|7"}, /* \p{N}{1,3} */
        {"llama3", "a1234567", "a|123|456|7"},   {"qwen2", "12345", "1|2|3|4|5"}, /* \p{N} */
        {"deepseek-v3", "1234567", "123|456|7"}, {"default", "1234567", "123|456|7"}, /* [0-9][0-9][0-9] after \p{N}+ */
        {"no-such-pre", "1234567", "123|456|7"}, /* falls back to the default */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tokenizer *t = gpt2_with_pre(cases[i].pre);
        CHECKF(t != NULL, "%s", cases[i].pre);
        if (!t) continue;
        char got[512];
        pieces(t, cases[i].text, got, sizeof got);
        CHECKF(!strcmp(got, cases[i].want), "pre %s: '%s' -> '%s', want '%s'", cases[i].pre, cases[i].text, got,
               cases[i].want);
        const char *mix = "Hello,  world!\n\n\tdef f(x): return 12345 # 你好 ÜBER café 🦙 I'd they're \r\n ";
        int32_t *ids = NULL;
        size_t n = 0, dl = 0;
        CHECK(encode(t, mix, strlen(mix), false, false, &ids, &n));
        char *dec = detok_all(t, ids, n, false, &dl);
        CHECKF(dl == strlen(mix) && !memcmp(dec, mix, dl), "pre %s: round trip '%s'", cases[i].pre, dec);
        free(dec);
        free(ids);
        tokenizer_free(t);
    }
}

int main(void) {
    static const char *const bpe_vocabs[] = {
        "ggml-vocab-gpt-2.gguf",
        "ggml-vocab-deepseek-llm.gguf",
        "ggml-vocab-deepseek-coder.gguf",
        "ggml-vocab-falcon.gguf",
        "ggml-vocab-mpt.gguf",
        "ggml-vocab-refact.gguf",
        "ggml-vocab-starcoder.gguf",
        "derived-vocab-tiny-deepseek2.gguf",
    };
    for (size_t i = 0; i < sizeof bpe_vocabs / sizeof bpe_vocabs[0]; i++) test_vocab_vectors(bpe_vocabs[i], true);
    test_vocab_vectors("ggml-vocab-bert-bge.gguf", false);
    test_fixtures();
    test_injection();
    test_bpe_api();
    test_long_word();
    test_memo_consistency();
    test_threads();
    test_synthetic();
    test_wpm();
    test_pre_types();
    return test_finish();
}
