/* fuzz_hf_tokenizer.c - libFuzzer harness for the tokenizer.json reader
 * (format/hf_vocab.c): every input is read as a tokenizer.json; failures must
 * be one line starting "tokenizer.json: "; a success must yield key/values
 * that the GGUF reader and the tokenizer loader accept or refuse cleanly.
 * Seed corpus: tests/fuzz/corpus/hf_tokenizer/:
 *   cmake --build build-fuzz --target fuzz_hf_tokenizer
 *   ./build-fuzz/fuzz_hf_tokenizer -max_total_time=60 tests/fuzz/corpus-work/hf_tokenizer \
 *       tests/fuzz/corpus/hf_tokenizer */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "format/hf_internal.h"
#include "text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_writer *w = gguf_writer_create();
    if (!w) return 0;
    cf_err err;
    err.msg[0] = 0;
    if (hf_tokenizer_json_read((const char *)data, size, 512, w, &err) != 0) {
        if (strncmp(err.msg, "tokenizer.json: ", 16) != 0 || strchr(err.msg, '\n')) abort();
        gguf_writer_free(w);
        return 0;
    }
    void *meta;
    size_t n;
    gguf_file *f;
    if (gguf_writer_meta_image(w, &meta, &n, &err) == 0 &&
        gguf_open_parts(meta, n, "fuzz", NULL, 0, NULL, NULL, &f, &err) == 0) {
        tokenizer *tok;
        if (tokenizer_load_gguf(f, &tok, &err) == 0) {
            int32_t *ids = NULL;
            size_t n_ids = 0;
            /* plain words, combining marks, fullwidth, Hangul jamo, emoji ZWJ / flags, CRLF, invalid bytes */
            static const char text[] =
                "Hello world 123 e\xCC\x81 \xEF\xBC\xA1\xCC\x81 \xE1\x84\x80\xE1\x85\xA1 "
                "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB \xF0\x9F\x87\xAF\xF0\x9F\x87\xB5\r\n\xFF ";
            if (tokenizer_encode(tok, text, sizeof text - 1, true, false, &ids, &n_ids, &err) == 0) free(ids);
            tokenizer_free(tok);
        }
        gguf_close(f);
    }
    gguf_writer_free(w);
    return 0;
}
