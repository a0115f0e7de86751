/* test_hf_tokenizers.c - tokenizer.json kinds beyond byte-level BPE against the
 * `tokenizers` package (fixtures from tests/oracles/hf_tokenizers.py):
 * llama-2 legacy (byte-fallback BPE, Prepend + Replace normalizer), Metaspace
 * BPE ("first" without split, "always" with split), BERT WordPiece (uncased,
 * cased, cased with accents stripped, uncased keeping accents), Unigram, and byte-level BPE with DeepSeek V3's pre-tokenizer (three Splits).
 * Each tokenizer.json goes through the reader into GGUF keys, then the
 * tokenizer loader; every fixture string must encode to the same ids, with and
 * without the post-processor's special tokens, and decode back (Metaspace and
 * Unigram kinds, where decoding is lossless up to the prefix space).
 * Also: malformed or unsupported variants fail with one line naming the field. */
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "format/hf_internal.h"
#include "testutil.h"
#include "text/tokenizer.h"

static const char *const KINDS[] = {"spm_legacy",
                                    "metaspace_first",
                                    "metaspace_split",
                                    "wordpiece",
                                    "wordpiece_cased",
                                    "wordpiece_cased_strip",
                                    "wordpiece_keep_accents",
                                    "unigram",
                                    "unigram_nfkc",
                                    "unigram_rules",
                                    "deepseek_v3"};

static tokenizer *load(const char *json, size_t n, int64_t vocab_size, cf_err *err) {
    gguf_writer *w = gguf_writer_create();
    void *meta = NULL;
    size_t mn = 0;
    gguf_file *f = NULL;
    tokenizer *tok = NULL;
    if (w && hf_tokenizer_json_read(json, n, vocab_size, w, err) == 0 &&
        gguf_writer_meta_image(w, &meta, &mn, err) == 0 &&
        gguf_open_parts(meta, mn, "test", NULL, 0, NULL, NULL, &f, err) == 0) {
        if (tokenizer_load_gguf(f, &tok, err) != 0) tok = NULL;
        gguf_close(f);
    }
    gguf_writer_free(w);
    return tok;
}

static bool same_ids(const int32_t *got, size_t n, json_t *want) {
    if (n != json_array_size(want)) return false;
    for (size_t i = 0; i < n; i++)
        if (got[i] != json_integer_value(json_array_get(want, i))) return false;
    return true;
}

static void dump(const char *what, const int32_t *ids, size_t n, json_t *want) {
    fprintf(stderr, "  %s got:", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n  want:");
    for (size_t i = 0; i < json_array_size(want); i++)
        fprintf(stderr, " %lld", (long long)json_integer_value(json_array_get(want, i)));
    fputc('\n', stderr);
}

static void check_kind(const char *kind) {
    char path[512];
    snprintf(path, sizeof path, "tests/data/hf/tok/%s/tokens.json", kind);
    json_t *ref = json_load_file(source_path(path), 0, NULL);
    snprintf(path, sizeof path, "tests/data/hf/tok/%s/tokenizer.json", kind);
    size_t n = 0;
    char *json = read_file(source_path(path), &n);
    if (!ref || !json) {
        tu_missing_fixture(path);
        json_decref(ref);
        free(json);
        return;
    }
    cf_err err = {{0}};
    tokenizer *tok = load(json, n, json_integer_value(json_object_get(ref, "vocab_size")), &err);
    CHECKF(tok != NULL, "%s: %s", kind, err.msg);
    size_t i, ok = 0, total = 0;
    json_t *c;
    json_array_foreach(json_object_get(ref, "cases"), i, c) {
        const char *text = json_string_value(json_object_get(c, "text"));
        for (int special = 0; tok && special < 2; special++) {
            json_t *want = json_object_get(c, special ? "ids_special" : "ids");
            int32_t *ids = NULL;
            size_t n_ids = 0;
            CHECK(tokenizer_encode(tok, text, strlen(text), special, true, &ids, &n_ids, &err) == 0);
            bool same = same_ids(ids, n_ids, want);
            CHECKF(same, "%s: '%s' (special %d) differs from tokenizers", kind, text, special);
            if (!same) dump(kind, ids, n_ids, want);
            ok += same;
            total++;
            free(ids);
        }
    }
    fprintf(stderr, "%s: %zu/%zu encodings identical to tokenizers\n", kind, ok, total);
    tokenizer_free(tok);
    free(json);
    json_decref(ref);
}

static void expect_bad(const char *json, const char *needle) {
    cf_err err = {{0}};
    tokenizer *tok = load(json, strlen(json), 8, &err);
    CHECKF(!tok && strstr(err.msg, needle) && !strchr(err.msg, '\n'), "want '%s', got '%s'", needle, err.msg);
    tokenizer_free(tok);
}

#define V3 "\"vocab\":{\"a\":0,\"b\":1,\"ab\":2}"

/* Qwen2's normalizer (NFC) is accepted on byte-level BPE; composed text encodes as without it. */
static void nfc_byte_level(void) {
    const char *json = "{\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":{\"type\":\"ByteLevel\"},"
                       "\"model\":{\"type\":\"BPE\"," V3 ",\"merges\":[\"a b\"]}}";
    cf_err err = {{0}};
    tokenizer *tok = load(json, strlen(json), 3, &err);
    CHECKF(tok != NULL, "%s", err.msg);
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(tok && tokenizer_encode(tok, "abba", 4, false, false, &ids, &n, &err) == 0 && n == 3 && ids[0] == 2 &&
          ids[1] == 1 && ids[2] == 0);
    free(ids);
    tokenizer_free(tok);
}

int main(void) {
    for (size_t k = 0; k < sizeof KINDS / sizeof KINDS[0]; k++) check_kind(KINDS[k]);
    expect_bad("{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true," V3 ",\"merges\":[\"a b\"]}}",
               "field pre_tokenizer: missing");
    expect_bad("{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"_\"},\"model\":{\"type\":\"BPE\"," V3
               ",\"merges\":[\"a b\"]}}",
               "field pre_tokenizer.replacement");
    expect_bad(
        "{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\",\"prepend_scheme\":\"odd\"},"
        "\"model\":{\"type\":\"BPE\"," V3 ",\"merges\":[\"a b\"]}}",
        "field pre_tokenizer.prepend_scheme");
    expect_bad("{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\"},"
               "\"model\":{\"type\":\"BPE\"," V3 ",\"merges\":[\"b a\"]}}",
               "field model.merges[0]: the merged token is not in model.vocab");
    expect_bad("{\"normalizer\":{\"type\":\"Precompiled\"},\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":"
               "\"\xE2\x96\x81\"},\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",-1.0]]}}",
               "field normalizer.precompiled_charsmap: missing");
    expect_bad("{\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"AAA*\"},\"pre_tokenizer\":{"
               "\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\"},\"model\":{\"type\":\"Unigram\",\"vocab\":[["
               "\"a\",-1.0]]}}",
               "field normalizer.precompiled_charsmap: not base64");
    expect_bad(
        "{\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"CAAAAAAAAAA=\"},\"pre_tokenizer\":{"
        "\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\"},\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",-1."
        "0]]}}",
        "field normalizer.precompiled_charsmap: trie size outside");
    expect_bad(
        "{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Precompiled\",\"precompiled_charsmap\":"
        "\"BAAAAAAAAAA=\"},{\"type\":\"NFKC\"}]},\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":"
        "\"\xE2\x96\x81\"},\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",-1.0]]}}",
        "field normalizer.normalizers[1]: after Precompiled only");
    expect_bad(
        "{\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"BAAAAAAAAAD/\"},\"pre_tokenizer\":{"
        "\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\"},\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",-1."
        "0]]}}",
        "precompiled charsmap: the replacement strings are not UTF-8");
    expect_bad("{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\"},\"model\":{\"type\":"
               "\"Unigram\",\"vocab\":[[\"a\",\"x\"]]}}",
               "field model.vocab[0]: not a [piece, score] pair");
    expect_bad("{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\"},\"model\":{\"type\":"
               "\"Unigram\",\"unk_id\":5,\"vocab\":[[\"a\",-1.0]]}}",
               "field model.unk_id");
    expect_bad("{\"normalizer\":{\"type\":\"BertNormalizer\",\"clean_text\":false},\"pre_tokenizer\":{\"type\":"
               "\"BertPreTokenizer\"},\"model\":{\"type\":\"WordPiece\",\"continuing_subword_prefix\":\"##\"," V3 "}}",
               "field normalizer: WordPiece needs BERT's BertNormalizer");
    expect_bad(
        "{\"normalizer\":{\"type\":\"BertNormalizer\",\"strip_accents\":\"yes\"},\"pre_tokenizer\":{"
        "\"type\":\"BertPreTokenizer\"},\"model\":{\"type\":\"WordPiece\",\"continuing_subword_prefix\":\"##\"," V3
        "}}",
        "field normalizer.strip_accents");
    expect_bad("{\"normalizer\":{\"type\":\"BertNormalizer\",\"lowercase\":true},\"pre_tokenizer\":{\"type\":"
               "\"BertPreTokenizer\"},\"model\":{\"type\":\"WordPiece\",\"continuing_subword_prefix\":\"##\","
               "\"unk_token\":\"[UNK]\"," V3 "}}",
               "field model.unk_token");
    expect_bad("{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\"},\"post_processor\":{"
               "\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}}]},"
               "\"model\":{\"type\":\"BPE\"," V3 ",\"merges\":[\"a b\"]}}",
               "field post_processor.single[0]");
    expect_bad("{\"model\":{\"type\":\"WordLevel\"}}", "field model.type: 'WordLevel' is not supported");
    expect_bad("{\"normalizer\":{\"type\":\"NFKC\"},\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":"
               "\"BPE\"," V3 ",\"merges\":[\"a b\"]}}",
               "field normalizer: byte-level BPE takes no normalizer but NFC");
    expect_bad("{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{"
               "\"Regex\":\"\\\\p{N}{1,3}\"},\"behavior\":\"Removed\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]},"
               "\"model\":{\"type\":\"BPE\"," V3 ",\"merges\":[\"a b\"]}}",
               "field pre_tokenizer.pretokenizers[0].behavior");
    expect_bad("{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{"
               "\"Regex\":\"\\\\p{N}{1,3}\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\",\"use_regex\":true}]},"
               "\"model\":{\"type\":\"BPE\"," V3 ",\"merges\":[\"a b\"]}}",
               "field pre_tokenizer.pretokenizers[1].use_regex");
    expect_bad("{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{"
               "\"Regex\":\"\\\\p{N}{1,3}\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]},"
               "\"model\":{\"type\":\"BPE\"," V3 ",\"merges\":[\"a b\"]}}",
               "field pre_tokenizer.pretokenizers: Split regexes cinfer's BPE does not know");
    expect_bad("{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\"},{\"type\":"
               "\"ByteLevel\",\"use_regex\":false}]},\"model\":{\"type\":\"BPE\"," V3 ",\"merges\":[\"a b\"]}}",
               "field pre_tokenizer.pretokenizers[0]: only Split(Regex)");
    nfc_byte_level();
    return test_finish();
}
