/* charsmap.h - SentencePiece's precompiled normalizer ("precompiled_charsmap",
 * the Precompiled normalizer of tokenizer.json), applied the way the
 * `tokenizers` package applies it.
 *
 * Blob layout (little-endian): u32 trie_size (bytes), then trie_size / 4 u32
 * units of a darts-clone double-array trie keyed by UTF-8 byte strings, then
 * the replacement strings, each NUL-terminated; a key's value is the offset of
 * its replacement. Loading validates the sizes and that the replacement area
 * is UTF-8; lookups bound-check every unit index, so a hostile blob yields
 * "no replacement", never a read outside it.
 *
 * Normalizing (tokenizers' Precompiled::normalize): per extended grapheme
 * cluster (text/grapheme.h): if it is under 6 bytes and some prefix of it is a
 * key, the whole cluster becomes the replacement of the SHORTEST such prefix
 * (tokenizers' rule, which can drop the rest of the cluster); otherwise each
 * code point is replaced when it is a key, else kept. Invalid UTF-8 bytes are
 * kept as they are. Then, as tokenizer.json Sequences put after Precompiled:
 * optionally trailing whitespace removed (Strip right) and runs of two or more
 * spaces replaced by `collapse` (Replace(Regex(" {2,}"), ...)).
 * Immutable after load; thread-safe. */
#ifndef CINFER_TEXT_CHARSMAP_H
#define CINFER_TEXT_CHARSMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct charsmap charsmap;

/* Copies the blob. collapse: replacement of space runs, NULL for none;
 * strip_right: trailing whitespace removed first. */
int charsmap_load(const uint8_t *blob, size_t n, const char *collapse, bool strip_right, charsmap **out, cf_err *err);
void charsmap_free(charsmap *m);

/* Normalizes text[0..len) into *buf (grown with realloc as needed; *cap its
 * size), setting *out_len. Returns 0, or -1 when out of memory. */
int charsmap_normalize(const charsmap *m, const char *text, size_t len, char **buf, size_t *cap, size_t *out_len);

#endif
