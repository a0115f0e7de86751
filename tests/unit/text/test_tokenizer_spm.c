/* test_tokenizer_spm.c - the SentencePiece tokenizer against llama.cpp.
 *
 * Covers: every tokenizer vector (.inp/.out) of the llama-spm, phi-3 and
 * tiny-gemma2 vocabularies, plus tests/data/vocab/<vocab>.extra.* (phi-3:
 * whitespace after a matched special token, llama.cpp's RSTRIP); the input_ids / input_pieces_hex of every
 * stories260K, tiny-llama and tiny-gemma2 llama.cpp fixture, and their
 * continuation/full texts through the streaming detokenizer; special-token
 * parsing; the detokenizer's UTF-8 handling; a 100 KB timing check; and
 * malformed tokenizer data built with gguf_writer (errors, not crashes). */
#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format/gguf.h"
#include "testutil.h"
#include "text/tokenizer.h"

/* ------------------------------------------------------------ helpers */

static tokenizer *load_tok(const char *path, gguf_file **fout) {
    gguf_file *f = NULL;
    tokenizer *t = NULL;
    cf_err err = {{0}};
    if (gguf_open(path, &f, &err) != 0) {
        fprintf(stderr, "open %s: %s\n", path, err.msg);
        return NULL;
    }
    if (tokenizer_load_gguf(f, &t, &err) != 0) {
        fprintf(stderr, "tokenizer %s: %s\n", path, err.msg);
        gguf_close(f);
        return NULL;
    }
    if (fout) *fout = f;
    else gguf_close(f);
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

/* Parses " 1 2 3" into ids; returns the count. */
static size_t parse_id_line(const char *line, size_t len, int32_t *out, size_t cap) {
    size_t n = 0;
    char buf[32];
    size_t i = 0;
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

/* Hex string -> bytes (malloc'd); *len set. */
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

/* ------------------------------------------------------- vocab vectors */

/* Runs the vectors of inp_path (cases separated by "\n__ggml_vocab_test__\n")
 * against out_path (one line of ids per case): text only, no BOS, no special
 * parsing, as llama.cpp's test-tokenizer-0. */
static void run_vector_file(const tokenizer *t, const char *label, const char *inp_path, const char *out_path,
                            int min_cases) {
    size_t inp_len = 0, out_len = 0;
    char *inp = read_file(inp_path, &inp_len);
    char *out = read_file(out_path, &out_len);
    CHECKF(inp && out, "%s: cannot read %s / %s", label, inp_path, out_path);
    if (!inp || !out) {
        free(inp);
        free(out);
        return;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    const char *p = inp, *end = inp + inp_len, *line = out, *out_end = out + out_len;
    int cases = 0, passed = 0;
    while (p < end) {
        const char *s = memmem(p, (size_t)(end - p), sep, sep_len);
        if (!s) break;
        const char *nl = memchr(line, '\n', (size_t)(out_end - line));
        size_t line_len = nl ? (size_t)(nl - line) : (size_t)(out_end - line);
        int32_t want[4096];
        size_t n_want = parse_id_line(line, line_len, want, 4096);
        int32_t *ids = NULL;
        size_t n = 0;
        cases++;
        if (encode(t, p, (size_t)(s - p), false, false, &ids, &n) && n == n_want &&
            (n == 0 || !memcmp(ids, want, n * sizeof *ids))) {
            passed++;
        } else {
            fprintf(stderr, "%s case %d mismatch: '%.*s'\n", label, cases, (int)(s - p), p);
            print_ids("want", want, n_want);
            print_ids("got ", ids, n);
        }
        free(ids);
        p = s + sep_len;
        line = nl ? nl + 1 : out_end;
    }
    fprintf(stderr, "%s: %d/%d vectors pass\n", label, passed, cases);
    CHECKF(cases >= min_cases && passed == cases, "%s: %d/%d", label, passed, cases);
    free(inp);
    free(out);
}

/* The shared fixture's vectors of a vocabulary, and this repository's extra
 * ones (tests/data/vocab/<name>.extra.inp/.out) where there are any. */
static void test_vocab_vectors(const char *name) {
    char rel[256], rel_out[256];
    snprintf(rel, sizeof rel, "fixtures/vocab/%s", name);
    tokenizer *t = load_tok(shared_path(rel), NULL);
    CHECKF(t != NULL, "%s", name);
    if (!t) return;
    snprintf(rel, sizeof rel, "fixtures/vocab/%s.inp", name);
    snprintf(rel_out, sizeof rel_out, "fixtures/vocab/%s.out", name);
    run_vector_file(t, name, shared_path(rel), shared_path(rel_out), 40);
    snprintf(rel, sizeof rel, "tests/data/vocab/%s.extra.inp", name);
    snprintf(rel_out, sizeof rel_out, "tests/data/vocab/%s.extra.out", name);
    if (access(source_path(rel), F_OK) == 0) {
        char label[300];
        snprintf(label, sizeof label, "%s (extra)", name);
        run_vector_file(t, label, source_path(rel), source_path(rel_out), 1);
    }
    tokenizer_free(t);
}

/* --------------------------------------------------- llama.cpp fixtures */

static void check_detok_text(const tokenizer *t, json_t *j, const int32_t *ids, size_t n, bool strip, const char *field,
                             const char *fname) {
    const char *want = json_string_value(json_object_get(j, field));
    if (!want) return;
    size_t cap = 64 + tokenizer_max_token_len(t);
    char *buf = malloc(cap);
    size_t total_cap = 16 * n + 64, total = 0;
    char *text = malloc(total_cap + cap);
    detok_stream d;
    detok_init(&d, t, strip, false);
    for (size_t i = 0; i < n; i++) {
        size_t k = detok_push(&d, ids[i], buf, cap);
        if (total + k <= total_cap) memcpy(text + total, buf, k);
        total += k;
    }
    size_t k = detok_flush(&d, buf, cap);
    if (total + k <= total_cap) memcpy(text + total, buf, k);
    total += k;
    CHECKF(total == strlen(want) && !memcmp(text, want, total), "%s %s: got '%.*s'", fname, field, (int)total, text);
    free(buf);
    free(text);
}

/* llama2.c strips the space of the first piece after BOS. */
static void check_l2c(const tokenizer *t, json_t *j, const char *fname) {
    json_t *jids = json_object_get(j, "llama2c_ids");
    size_t n = json_array_size(jids);
    CHECKF(n > 0, "%s: no llama2c_ids", fname);
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, i));
    check_detok_text(t, j, ids, n, true, "llama2c_text", fname);
    free(ids);
}

static void check_fixture(const tokenizer *t, const char *path, const char *fname) {
    json_error_t jerr;
    json_t *j = json_load_file(path, 0, &jerr);
    CHECKF(j != NULL, "%s: %s", path, jerr.text);
    if (!j) return;
    if (!json_object_get(j, "input_ids")) { /* l2c-compare: llama2.c's text of the same ids */
        check_l2c(t, j, fname);
        json_decref(j);
        return;
    }
    size_t plen = 0;
    char *prompt = unhex(json_string_value(json_object_get(j, "prompt_text_hex")), &plen);
    json_t *jids = json_object_get(j, "input_ids"), *jpieces = json_object_get(j, "input_pieces_hex");
    int32_t *ids = NULL;
    size_t n = 0;
    bool ok = encode(t, prompt, plen, true, false, &ids, &n);
    bool same = ok && n == json_array_size(jids);
    for (size_t i = 0; same && i < n; i++) same = ids[i] == (int32_t)json_integer_value(json_array_get(jids, i));
    CHECKF(same, "%s: input_ids differ (got %zu ids, want %zu)", fname, n, json_array_size(jids));
    int piece_bad = 0;
    for (size_t i = 0; i < json_array_size(jids); i++) {
        int32_t id = (int32_t)json_integer_value(json_array_get(jids, i));
        char buf[512], hex[1040];
        size_t k = tokenizer_token_bytes(t, id, true, buf, sizeof buf);
        for (size_t b = 0; b < k && b < sizeof buf; b++) sprintf(hex + 2 * b, "%02x", (unsigned char)buf[b]);
        hex[2 * k] = 0;
        if (strcmp(hex, json_string_value(json_array_get(jpieces, i))) != 0) piece_bad++;
    }
    CHECKF(piece_bad == 0, "%s: %d input pieces differ", fname, piece_bad);
    /* detokenizer: llama_detokenize(greedy, remove_special=false) strips the
     * first piece's space when add_space_prefix; full text drops BOS only. */
    json_t *jg = json_object_get(j, "greedy_ids");
    size_t ng = json_array_size(jg);
    int32_t *all = malloc((n + ng + 1) * sizeof *all);
    for (size_t i = 0; i < json_array_size(jids); i++) all[i] = (int32_t)json_integer_value(json_array_get(jids, i));
    size_t ni = json_array_size(jids);
    for (size_t i = 0; i < ng; i++) all[ni + i] = (int32_t)json_integer_value(json_array_get(jg, i));
    check_detok_text(t, j, all + ni, ng, tokenizer_add_space_prefix(t), "continuation_text", fname);
    check_detok_text(t, j, all, ni + ng, false, "full_text", fname);
    free(all);
    free(ids);
    free(prompt);
    json_decref(j);
}

static void test_fixtures(const char *model_rel, const char *prefix, bool add_space_prefix) {
    tokenizer *t = load_tok(shared_path(model_rel), NULL);
    CHECKF(t != NULL, "%s", model_rel);
    if (!t) return;
    CHECK(tokenizer_add_space_prefix(t) == add_space_prefix);
    const char *dir = shared_path("fixtures/llama-cpp");
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int count = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t pl = strlen(prefix), nl = strlen(e->d_name);
        if (strncmp(e->d_name, prefix, pl) != 0 || e->d_name[pl] != '.' || nl < 5 ||
            strcmp(e->d_name + nl - 5, ".json") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        check_fixture(t, path, e->d_name);
        count++;
    }
    if (d) closedir(d);
    fprintf(stderr, "%s: %d llama.cpp fixtures checked\n", prefix, count);
    CHECKF(count >= 3, "%s: only %d fixtures", prefix, count);
    tokenizer_free(t);
}

/* ------------------------------------------------ special tokens, EOG */

static bool contains(const int32_t *v, size_t n, int32_t id) {
    for (size_t i = 0; i < n; i++)
        if (v[i] == id) return true;
    return false;
}

static void test_parse_special(void) {
    tokenizer *t = load_tok(shared_path("fixtures/vocab/ggml-vocab-llama-spm.gguf"), NULL);
    CHECK(t != NULL);
    if (!t) return;
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(encode(t, "<s>", 3, false, false, &ids, &n) && n > 1 && !contains(ids, n, 1));
    free(ids);
    CHECK(encode(t, "<s>", 3, false, true, &ids, &n) && n == 1 && ids[0] == 1);
    free(ids);
    /* text, special, text: the text after a special token gets the space
     * prefix again (llama.cpp: is_prev_special) */
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    const char *txt = "Hello</s>world";
    CHECK(encode(t, txt, strlen(txt), true, true, &ids, &n));
    CHECK(encode(t, "Hello", 5, false, false, &a, &na));
    CHECK(encode(t, "world", 5, false, false, &b, &nb));
    bool ok = n == 1 + na + 1 + nb && ids[0] == 1 && !memcmp(ids + 1, a, na * sizeof *a) && ids[1 + na] == 2 &&
              !memcmp(ids + 2 + na, b, nb * sizeof *b);
    CHECKF(ok, "Hello</s>world");
    free(ids);
    free(a);
    free(b);
    /* unknown token text is special too */
    CHECK(encode(t, "<unk>", 5, false, true, &ids, &n) && n == 1 && ids[0] == 0);
    free(ids);
    /* empty text: only BOS */
    CHECK(encode(t, "", 0, true, false, &ids, &n) && n == 1 && ids[0] == 1);
    free(ids);
    CHECK(tokenizer_bos(t) == 1 && tokenizer_eos(t) == 2 && tokenizer_add_bos(t) && !tokenizer_add_eos(t));
    CHECK(tokenizer_is_eog(t, 2) && !tokenizer_is_eog(t, 1) && !tokenizer_is_eog(t, -1) &&
          !tokenizer_is_eog(t, 1 << 30));
    CHECK(tokenizer_n_vocab(t) == 32000);
    CHECK(!strcmp(tokenizer_token_text(t, 13), "<0x0A>") && tokenizer_token_type(t, 13) == TOKEN_TYPE_BYTE);
    char buf[16];
    CHECK(tokenizer_token_bytes(t, 13, false, buf, sizeof buf) == 1 && buf[0] == '\n');
    CHECK(tokenizer_token_bytes(t, 1, false, buf, sizeof buf) == 0);
    CHECK(tokenizer_token_bytes(t, 1, true, buf, sizeof buf) == 3 && !memcmp(buf, "<s>", 3));
    CHECK(tokenizer_token_bytes(t, 0, false, buf, sizeof buf) == 0);
    CHECK(tokenizer_token_bytes(t, 0, true, buf, sizeof buf) == 5 && !memcmp(buf, "<unk>", 5));
    CHECK(tokenizer_token_bytes(t, -5, true, buf, sizeof buf) == 0);
    memset(buf, 'x', sizeof buf);
    CHECK(tokenizer_token_bytes(t, 0, true, buf, 2) == 5 && buf[2] == 'x'); /* capped */
    tokenizer_free(t);

    t = load_tok(shared_path("fixtures/vocab/ggml-vocab-phi-3.gguf"), NULL);
    CHECK(t != NULL);
    if (!t) return;
    CHECK(tokenizer_eos(t) == 32000 && tokenizer_is_eog(t, 32000) && tokenizer_is_eog(t, 32007));
    CHECK(!tokenizer_is_eog(t, 32010));
    const char *chat = "<|user|>\nHi<|end|>";
    CHECK(encode(t, chat, strlen(chat), false, true, &ids, &n) && n >= 3 && ids[0] == 32010 && ids[n - 1] == 32007);
    free(ids);
    CHECK(encode(t, chat, strlen(chat), false, false, &ids, &n) && !contains(ids, n, 32010) &&
          !contains(ids, n, 32007));
    free(ids);
    /* a whole chat turn: whitespace after <|user|>, <|end|> and <|assistant|> goes (RSTRIP for a
     * model named phi-3), then "SYS" gets the space prefix; llama.cpp's ids for this text */
    const char *turn = "<|user|>\nSYS\nHI<|end|>\n<|assistant|>\n";
    static const int32_t want_turn[] = {1, 32010, 317, 21554, 13, 17628, 32007, 32001};
    CHECK(encode(t, turn, strlen(turn), true, true, &ids, &n) && n == 8 && !memcmp(ids, want_turn, sizeof want_turn));
    free(ids);
    tokenizer_free(t);
}

/* ---------------------------------------------------------- detokenizer */

static size_t detok_all(const tokenizer *t, const int32_t *ids, size_t n, bool strip, char *out, size_t cap) {
    detok_stream d;
    detok_init(&d, t, strip, false);
    size_t o = 0;
    char buf[512];
    for (size_t i = 0; i < n; i++) {
        size_t k = detok_push(&d, ids[i], buf, sizeof buf);
        if (o + k <= cap) memcpy(out + o, buf, k);
        o += k;
    }
    size_t k = detok_flush(&d, buf, sizeof buf);
    if (o + k <= cap) memcpy(out + o, buf, k);
    return o + k;
}

static void test_detok(void) {
    tokenizer *t = load_tok(shared_path("fixtures/vocab/ggml-vocab-llama-spm.gguf"), NULL);
    CHECK(t != NULL);
    if (!t) return;
    const int32_t B = 3; /* <0x00> */
    detok_stream d;
    char out[256];
    /* "é" = C3 A9 and "€" = E2 82 AC as byte tokens: nothing until complete */
    detok_init(&d, t, false, false);
    CHECK(detok_push(&d, B + 0xC3, out, sizeof out) == 0);
    CHECK(detok_push(&d, B + 0xA9, out, sizeof out) == 2 && !memcmp(out, "\xC3\xA9", 2));
    CHECK(detok_push(&d, B + 0xE2, out, sizeof out) == 0);
    CHECK(detok_push(&d, B + 0x82, out, sizeof out) == 0);
    CHECK(detok_push(&d, B + 0xAC, out, sizeof out) == 3 && !memcmp(out, "\xE2\x82\xAC", 3));
    CHECK(detok_flush(&d, out, sizeof out) == 0);
    /* an incomplete sequence followed by ASCII: U+FFFD then the ASCII */
    CHECK(detok_push(&d, B + 0xE2, out, sizeof out) == 0);
    CHECK(detok_push(&d, B + 0x82, out, sizeof out) == 0);
    CHECK(detok_push(&d, B + 'A', out, sizeof out) == 4 && !memcmp(out,
                                                                   "\xEF\xBF\xBD"
                                                                   "A",
                                                                   4));
    /* a byte that starts nothing, an overlong lead, a surrogate */
    CHECK(detok_push(&d, B + 0xFF, out, sizeof out) == 3 && !memcmp(out, "\xEF\xBF\xBD", 3));
    CHECK(detok_push(&d, B + 0xC0, out, sizeof out) == 3);
    CHECK(detok_push(&d, B + 0xED, out, sizeof out) == 0);
    CHECK(detok_push(&d, B + 0xA0, out, sizeof out) == 6 && !memcmp(out, "\xEF\xBF\xBD\xEF\xBF\xBD", 6));
    /* pending bytes then a normal piece: U+FFFD then the piece */
    CHECK(detok_push(&d, B + 0xC3, out, sizeof out) == 0);
    size_t k = detok_push(&d, 15043 /* ▁Hello */, out, sizeof out);
    CHECK(k == 9 && !memcmp(out, "\xEF\xBF\xBD Hello", 9));
    /* held bytes at the end come out as U+FFFD on flush */
    CHECK(detok_push(&d, B + 0xF0, out, sizeof out) == 0);
    CHECK(detok_push(&d, B + 0x9F, out, sizeof out) == 0);
    CHECK(detok_flush(&d, out, sizeof out) == 3 && !memcmp(out, "\xEF\xBF\xBD", 3));
    CHECK(detok_flush(&d, out, sizeof out) == 0);
    /* strip: BOS (control, renders nothing) does not use up the strip */
    detok_init(&d, t, true, false);
    CHECK(detok_push(&d, 1, out, sizeof out) == 0);
    CHECK(detok_push(&d, 15043, out, sizeof out) == 5 && !memcmp(out, "Hello", 5));
    CHECK(detok_push(&d, 15043, out, sizeof out) == 6 && !memcmp(out, " Hello", 6));
    /* special: control tokens rendered */
    detok_init(&d, t, true, true);
    CHECK(detok_push(&d, 1, out, sizeof out) == 3 && !memcmp(out, "<s>", 3));
    CHECK(detok_push(&d, 15043, out, sizeof out) == 5 && !memcmp(out, "Hello", 5));
    /* a too-small buffer is never overrun */
    detok_init(&d, t, false, false);
    memset(out, 'x', sizeof out);
    CHECK(detok_push(&d, 15043, out, 3) == 3 && out[3] == 'x');

    /* round trip: encode with BOS, decode stripping the prefix space */
    static const char *const texts[] = {
        "Hello world",
        "  two leading spaces and trailing  ",
        "Tabs\tand\nnewlines\n\n",
        "Ünïcödé façade – naïve café",
        "中文字符测试，日本語のテキスト、한국어",
        "emoji 🦙🚀 and rare 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ᚠᛇᚻ",
        "",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        size_t len = strlen(texts[i]);
        CHECK(encode(t, texts[i], len, true, false, &ids, &n));
        char buf[1024];
        size_t got = detok_all(t, ids, n, true, buf, sizeof buf);
        CHECKF(got == len && !memcmp(buf, texts[i], len), "round trip '%s' -> '%.*s'", texts[i], (int)got, buf);
        free(ids);
    }
    /* a literal U+2581 in the text is indistinguishable from an escaped
     * space (as in llama.cpp): it decodes to ' ' */
    int32_t *ids = NULL;
    size_t n = 0;
    char buf[64];
    CHECK(encode(t, "x\xE2\x96\x81y", 5, false, false, &ids, &n));
    size_t got = detok_all(t, ids, n, true, buf, sizeof buf);
    CHECK(got == 3 && !memcmp(buf, "x y", 3));
    free(ids);
    /* invalid UTF-8 in the input becomes byte tokens; decoding gives U+FFFD */
    CHECK(encode(t,
                 "a\xFF"
                 "b\xC3",
                 4, false, false, &ids, &n) &&
          contains(ids, n, B + 0xFF) && contains(ids, n, B + 0xC3));
    got = detok_all(t, ids, n, true, buf, sizeof buf);
    CHECKF(got == 8 && !memcmp(buf,
                               "a\xEF\xBF\xBD"
                               "b\xEF\xBF\xBD",
                               8),
           "invalid input decode '%.*s'", (int)got, buf);
    free(ids);
    tokenizer_free(t);
}

/* ------------------------------------------------------------- timing */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if defined(__SANITIZE_ADDRESS__)
#define ENCODE_LIMIT_S 5.0 /* sanitizer builds run several times slower */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ENCODE_LIMIT_S 5.0
#endif
#endif
#ifndef ENCODE_LIMIT_S
#define ENCODE_LIMIT_S 1.0
#endif

static void time_encode(const tokenizer *t, const char *label, const char *text, size_t len) {
    int32_t *ids = NULL;
    size_t n = 0;
    double t0 = now_s();
    bool ok = encode(t, text, len, true, true, &ids, &n);
    double dt = now_s() - t0;
    fprintf(stderr, "encode %s (%zu bytes): %zu tokens in %.1f ms\n", label, len, n, dt * 1e3);
    CHECKF(ok && n > 0 && dt < ENCODE_LIMIT_S, "%s took %.3f s", label, dt);
    free(ids);
}

static void test_performance(void) {
    tokenizer *t = load_tok(shared_path("fixtures/vocab/ggml-vocab-phi-3.gguf"), NULL);
    CHECK(t != NULL);
    if (!t) return;
    size_t plen = 0;
    char *para = read_file(shared_path("fixtures/prompts/paragraph.txt"), &plen);
    CHECK(para != NULL && plen > 0);
    const size_t N = 100 * 1024;
    char *text = malloc(N);
    for (size_t i = 0; i < N; i++) text[i] = para ? para[i % plen] : 'x';
    time_encode(t, "prose", text, N);
    memset(text, 'a', N);
    time_encode(t, "one letter", text, N);
    memset(text, ' ', N);
    time_encode(t, "spaces", text, N);
    uint32_t x = 12345;
    for (size_t i = 0; i < N; i++) {
        x = x * 1664525u + 1013904223u;
        text[i] = (char)(x >> 24);
    }
    time_encode(t, "random bytes", text, N);
    for (size_t i = 0; i + 3 <= N; i += 3) memcpy(text + i, "中", 3);
    time_encode(t, "CJK", text, N - N % 3);
    free(text);
    free(para);
    tokenizer_free(t);
}

/* --------------------------------------------- synthetic vocabularies */

typedef struct vtok {
    const char *text;
    float score;
    int type;
} vtok;

/* Writes a vocab-only GGUF with the given tokens and opens a tokenizer from
 * it; `tweak` may add/replace keys. Returns 0/-1 with err filled. */
static int build_tok(const vtok *v, size_t n, void (*tweak)(gguf_writer *), tokenizer **out, cf_err *err) {
    gguf_writer *w = gguf_writer_create();
    const char **texts = malloc(n * sizeof *texts);
    float *scores = malloc(n * sizeof *scores);
    int32_t *types = malloc(n * sizeof *types);
    for (size_t i = 0; i < n; i++) {
        texts[i] = v[i].text;
        scores[i] = v[i].score;
        types[i] = v[i].type;
    }
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", texts, n);
    gguf_set_arr_f32(w, "tokenizer.ggml.scores", scores, n);
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", types, n);
    if (tweak) tweak(w);
    char path[256];
    temp_path(path, sizeof path, "vocab.gguf");
    gguf_file *f = NULL;
    int rc = gguf_writer_write(w, path, err);
    if (rc == 0) rc = gguf_open(path, &f, err);
    if (rc == 0) rc = tokenizer_load_gguf(f, out, err);
    gguf_close(f);
    unlink(path);
    gguf_writer_free(w);
    free(texts);
    free(scores);
    free(types);
    return rc;
}

#define N_ 1 /* TOKEN_TYPE_NORMAL */
static const vtok small_vocab[] = {
    {"<unk>", 0, TOKEN_TYPE_UNKNOWN},
    {"<s>", 0, TOKEN_TYPE_CONTROL},
    {"</s>", 0, TOKEN_TYPE_CONTROL},
    {"\xE2\x96\x81", -1, N_},
    {"a", -2, N_},
    {"b", -2, N_},
    {"c", -2, N_},
    {"ab", 1, N_},
    {"bc", 1, N_},
    {"\xE2\x96\x81"
     "a",
     0.5f, N_},
    {"<tag>", 0, TOKEN_TYPE_USER_DEFINED},
    {"<|im_end|>", 0, TOKEN_TYPE_CONTROL},
    {"<0x41>", 0, TOKEN_TYPE_BYTE}, /* 'A' only: other unknown bytes -> unk */
};
#define SMALL_N (sizeof small_vocab / sizeof small_vocab[0])

static void no_prefix(gguf_writer *w) { gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", false); }

static bool encodes_to(const tokenizer *t, const char *s, bool parse_special, const int32_t *want, size_t n_want) {
    int32_t *ids = NULL;
    size_t n = 0;
    bool ok = encode(t, s, strlen(s), false, parse_special, &ids, &n) && n == n_want &&
              (n == 0 || !memcmp(ids, want, n * sizeof *ids));
    if (!ok) {
        fprintf(stderr, "'%s':\n", s);
        print_ids("want", want, n_want);
        print_ids("got ", ids, n);
    }
    free(ids);
    return ok;
}

/* Whitespace next to a matched special token (llama.cpp's LSTRIP / RSTRIP
 * token attributes, set from the model's name since GGUF has no field for
 * them): kept by default; a "phi-3" model drops it after every special token
 * but <unk>, <s> and <|endoftext|>; jina-v2 drops it before "<mask>",
 * modern-bert before "[MASK]". The raw text after the token still gets the
 * space prefix. */
static const vtok strip_vocab[] = {
    {"<unk>", 0, TOKEN_TYPE_UNKNOWN},
    {"<s>", 0, TOKEN_TYPE_CONTROL},
    {"</s>", 0, TOKEN_TYPE_CONTROL},
    {"\xE2\x96\x81", -1, N_},
    {"a", -2, N_},
    {"\xE2\x96\x81"
     "a",
     0.5f, N_},
    {"<tag>", 0, TOKEN_TYPE_USER_DEFINED},
    {"<mask>", 0, TOKEN_TYPE_USER_DEFINED},
    {"<|end|>", 0, TOKEN_TYPE_CONTROL},
    {"[MASK]", 0, TOKEN_TYPE_USER_DEFINED},
};
#define STRIP_N (sizeof strip_vocab / sizeof strip_vocab[0])
static void name_phi3(gguf_writer *w) { gguf_set_str(w, "general.name", "Phi-3-mini-4k-instruct"); }
static void name_other(gguf_writer *w) { gguf_set_str(w, "general.name", "Llama-2-7b"); }
static void pre_jina(gguf_writer *w) { gguf_set_str(w, "tokenizer.ggml.pre", "jina-v2-code"); }
static void name_modern_bert(gguf_writer *w) { gguf_set_str(w, "general.name", "Modern-BERT-base"); }

static void test_strip_attrs(void) {
    void (*const tweaks[])(gguf_writer *) = {NULL, name_other, name_phi3, pre_jina, name_modern_bert};
    for (size_t k = 0; k < sizeof tweaks / sizeof tweaks[0]; k++) {
        tokenizer *t = NULL;
        cf_err err = {{0}};
        CHECKF(build_tok(strip_vocab, STRIP_N, tweaks[k], &t, &err) == 0, "%s", err.msg);
        if (!t) continue;
        bool phi = tweaks[k] == name_phi3, jina = tweaks[k] == pre_jina, mb = tweaks[k] == name_modern_bert;
        /* after a user-defined token: stripped only for phi-3 */
        CHECKF(phi ? encodes_to(t, "<tag> a", false, (int32_t[]){6, 5}, 2)
                   : encodes_to(t, "<tag> a", false, (int32_t[]){6, 3, 5}, 3),
               "tweak %zu", k);
        CHECKF(phi ? encodes_to(t, "<tag>\t\n a", false, (int32_t[]){6, 5}, 2)
                   : encodes_to(t, "<tag>", false, (int32_t[]){6}, 1),
               "tweak %zu", k);
        CHECKF(phi ? encodes_to(t, "<tag> ", false, (int32_t[]){6}, 1)
                   : encodes_to(t, "<tag> ", false, (int32_t[]){6, 3, 3}, 3),
               "tweak %zu", k);
        /* before one: never for phi-3 */
        CHECKF(encodes_to(t, "a <tag>", false, (int32_t[]){5, 3, 6}, 3), "tweak %zu", k);
        /* control tokens with parse_special: phi-3 strips after <|end|>, not after <s> */
        CHECKF(phi ? encodes_to(t, "<|end|> a", true, (int32_t[]){8, 5}, 2)
                   : encodes_to(t, "<|end|> a", true, (int32_t[]){8, 3, 5}, 3),
               "tweak %zu", k);
        CHECKF(encodes_to(t, "<s> a", true, (int32_t[]){1, 3, 5}, 3), "tweak %zu", k);
        /* <mask> strips to its left for jina-v2, [MASK] for modern-bert; neither to its right */
        CHECKF(jina ? encodes_to(t, "a <mask>", false, (int32_t[]){5, 7}, 2)
                    : encodes_to(t, "a <mask>", false, (int32_t[]){5, 3, 7}, 3),
               "tweak %zu", k);
        CHECKF(mb ? encodes_to(t, "a \t[MASK]", false, (int32_t[]){5, 9}, 2)
                  : encodes_to(t, "a [MASK]", false, (int32_t[]){5, 3, 9}, 3),
               "tweak %zu", k);
        CHECKF(phi ? encodes_to(t, "<mask> a", false, (int32_t[]){7, 5}, 2)
                   : encodes_to(t, "<mask> a", false, (int32_t[]){7, 3, 5}, 3),
               "tweak %zu", k);
        tokenizer_free(t);
    }
}

static void test_small_vocab(void) {
    tokenizer *t = NULL;
    cf_err err = {{0}};
    CHECKF(build_tok(small_vocab, SMALL_N, no_prefix, &t, &err) == 0, "%s", err.msg);
    if (!t) return;
    /* ab and bc tie at score 1: the leftmost pair wins */
    CHECK(encodes_to(t, "abc", false, (int32_t[]){7, 6}, 2));
    CHECK(encodes_to(t, "bcab", false, (int32_t[]){8, 7}, 2));
    /* "▁a" (0.5) loses to "ab" (1) */
    CHECK(encodes_to(t, " ab", false, (int32_t[]){3, 7}, 2));
    CHECK(encodes_to(t, " ac", false, (int32_t[]){9, 6}, 2));
    /* unknown characters: byte token if there is one, else unk per byte */
    CHECK(encodes_to(t, "AZ", false, (int32_t[]){12, 0}, 2));
    CHECK(encodes_to(t, "\xC3\xA9", false, (int32_t[]){0, 0}, 2));
    /* USER_DEFINED always matches; CONTROL only with parse_special */
    CHECK(encodes_to(t, "a<tag>b", false, (int32_t[]){4, 10, 5}, 3));
    CHECK(encodes_to(t, "a<|im_end|>", true, (int32_t[]){4, 11}, 2));
    CHECK(tokenizer_is_eog(t, 11) && tokenizer_is_eog(t, 2) && !tokenizer_is_eog(t, 10));
    CHECK(!tokenizer_add_space_prefix(t));
    tokenizer_free(t);
    t = NULL;
    /* with the space prefix, after a special token too */
    CHECKF(build_tok(small_vocab, SMALL_N, NULL, &t, &err) == 0, "%s", err.msg);
    if (!t) return;
    CHECK(encodes_to(t, "ac", false, (int32_t[]){9, 6}, 2));
    CHECK(encodes_to(t, "<s>ac", true, (int32_t[]){1, 9, 6}, 3));
    tokenizer_free(t);
}

/* ------------------------------------------------------ bad tokenizers */

/* a llama.cpp T5 file: Unigram with SentencePiece's precompiled normalizer */
static void set_t5(gguf_writer *w) {
    gguf_set_str(w, "tokenizer.ggml.model", "t5");
    gguf_set_str(w, "tokenizer.ggml.precompiled_charsmap", "x");
}
static void set_bogus_model(gguf_writer *w) { gguf_set_str(w, "tokenizer.ggml.model", "klingon"); }
static void drop_model(gguf_writer *w) { gguf_writer_remove_key(w, "tokenizer.ggml.model"); }
static void drop_tokens(gguf_writer *w) { gguf_writer_remove_key(w, "tokenizer.ggml.tokens"); }
static void short_scores(gguf_writer *w) {
    float s[3] = {0};
    gguf_set_arr_f32(w, "tokenizer.ggml.scores", s, 3);
}
static void short_types(gguf_writer *w) {
    int32_t ty[2] = {1, 1};
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", ty, 2);
}
static void bad_type(gguf_writer *w) {
    int32_t ty[SMALL_N];
    for (size_t i = 0; i < SMALL_N; i++) ty[i] = 1;
    ty[5] = 9;
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", ty, SMALL_N);
}
static void nan_score(gguf_writer *w) {
    float s[SMALL_N] = {0};
    s[4] = __builtin_nanf("");
    gguf_set_arr_f32(w, "tokenizer.ggml.scores", s, SMALL_N);
}
static void tokens_not_array(gguf_writer *w) { gguf_set_str(w, "tokenizer.ggml.tokens", "abc"); }
static void bos_as_string(gguf_writer *w) { gguf_set_str(w, "tokenizer.ggml.add_bos_token", "yes"); }
static void bad_utf8(gguf_writer *w) {
    gguf_str s[SMALL_N];
    for (size_t i = 0; i < SMALL_N; i++) s[i] = (gguf_str){small_vocab[i].text, strlen(small_vocab[i].text)};
    s[6] = (gguf_str){"\xFF\xFE", 2};
    gguf_set_arr_str_len(w, "tokenizer.ggml.tokens", s, SMALL_N);
}
static void nul_in_token(gguf_writer *w) {
    gguf_str s[SMALL_N];
    for (size_t i = 0; i < SMALL_N; i++) s[i] = (gguf_str){small_vocab[i].text, strlen(small_vocab[i].text)};
    s[6] = (gguf_str){"a\0b", 3};
    gguf_set_arr_str_len(w, "tokenizer.ggml.tokens", s, SMALL_N);
}
static void empty_vocab(gguf_writer *w) {
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", NULL, 0);
    gguf_set_arr_f32(w, "tokenizer.ggml.scores", NULL, 0);
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", NULL, 0);
}
static void bad_byte_token(gguf_writer *w) {
    int32_t ty[SMALL_N];
    for (size_t i = 0; i < SMALL_N; i++) ty[i] = small_vocab[i].type;
    ty[4] = TOKEN_TYPE_BYTE; /* "a" */
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", ty, SMALL_N);
}
static void ids_out_of_range(gguf_writer *w) {
    gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 4294967295u);
    gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 11);
    gguf_set_u32(w, "tokenizer.ggml.padding_token_id", 4294967295u);
    gguf_set_i32(w, "tokenizer.ggml.unknown_token_id", -1);
    gguf_set_bool(w, "tokenizer.ggml.add_eos_token", true);
}

static void expect_error(void (*tweak)(gguf_writer *), const char *needle) {
    tokenizer *t = NULL;
    cf_err err = {{0}};
    int rc = build_tok(small_vocab, SMALL_N, tweak, &t, &err);
    CHECKF(rc != 0 && t == NULL && strstr(err.msg, needle), "want error with '%s', got rc %d '%s'", needle, rc,
           err.msg);
    tokenizer_free(t);
}

static void test_bad_tokenizers(void) {
    expect_error(set_t5, "precompiled charsmap walk (llama.cpp's T5 GGUF) is not supported");
    expect_error(set_bogus_model, "unknown tokenizer model 'klingon'");
    expect_error(drop_model, "tokenizer.ggml.model");
    expect_error(drop_tokens, "tokenizer.ggml.tokens");
    expect_error(short_scores, "tokenizer.ggml.scores has 3 entries");
    expect_error(short_types, "tokenizer.ggml.token_type has 2 entries");
    expect_error(bad_type, "token_type[5] = 9");
    expect_error(nan_score, "scores[4]");
    expect_error(tokens_not_array, "tokenizer.ggml.tokens");
    expect_error(bos_as_string, "add_bos_token");
    expect_error(bad_utf8, "tokens[6] is not valid UTF-8");
    expect_error(nul_in_token, "tokens[6] contains a NUL");
    expect_error(empty_vocab, "0 entries");
    expect_error(bad_byte_token, "type BYTE");
    tokenizer *t = NULL;
    cf_err err = {{0}};
    CHECKF(build_tok(small_vocab, SMALL_N, ids_out_of_range, &t, &err) == 0, "%s", err.msg);
    if (t) {
        CHECK(tokenizer_bos(t) == 1 && tokenizer_eos(t) == 11 && tokenizer_add_eos(t));
        CHECK(tokenizer_is_eog(t, 11));
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK(encode(t, "a", 1, true, false, &ids, &n) && n == 3 && ids[0] == 1 && ids[2] == 11);
        free(ids);
        tokenizer_free(t);
    }
}

int main(void) {
    test_vocab_vectors("ggml-vocab-llama-spm.gguf");
    test_vocab_vectors("ggml-vocab-phi-3.gguf");
    test_vocab_vectors("derived-vocab-tiny-gemma2.gguf");
    test_strip_attrs();
    test_fixtures("models/stories260K.gguf", "stories260K", true);
    test_fixtures("models/tiny/tiny-llama.gguf", "tiny-llama", true);
    test_fixtures("models/tiny/tiny-gemma2.gguf", "tiny-gemma2", false);
    test_parse_special();
    test_detok();
    test_performance();
    test_small_vocab();
    test_bad_tokenizers();
    return test_finish();
}
