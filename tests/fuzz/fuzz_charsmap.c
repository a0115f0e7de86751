/* fuzz_charsmap.c - libFuzzer harness for SentencePiece's precompiled
 * normalizer (text/charsmap.c, text/grapheme.c): the input is
 *   [u16 little-endian text length][text][charsmap blob]
 * with the flag byte of the text length's high bit choosing Strip(right) and
 * space collapsing. A blob must load or fail with one line; a loaded one must
 * normalize any text (invalid UTF-8 included) without reading outside it.
 * Seed corpus: tests/fuzz/corpus/charsmap/ (the charsmap of
 * tests/data/hf/tok/unigram_rules with accented, Hangul, emoji and invalid text):
 *   cmake --build build-fuzz --target fuzz_charsmap
 *   ./build-fuzz/fuzz_charsmap -max_total_time=60 tests/fuzz/corpus-work/charsmap tests/fuzz/corpus/charsmap */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/charsmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t tlen = (size_t)data[0] | (size_t)(data[1] & 0x7F) << 8;
    bool extras = data[1] & 0x80;
    if (tlen > size - 2) tlen = size - 2;
    const char *text = (const char *)data + 2;
    cf_err err;
    err.msg[0] = 0;
    charsmap *m;
    if (charsmap_load(data + 2 + tlen, size - 2 - tlen, extras ? "\xE2\x96\x81" : NULL, extras, &m, &err) != 0) {
        if (!err.msg[0] || strchr(err.msg, '\n')) abort();
        return 0;
    }
    char *buf = NULL;
    size_t cap = 0, n = 0;
    if (charsmap_normalize(m, text, tlen, &buf, &cap, &n) == 0 && n > cap) abort();
    free(buf);
    charsmap_free(m);
    return 0;
}
