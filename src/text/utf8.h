/* utf8.h - the small UTF-8 helpers the tokenizers need.
 *
 * Two different notions of "character" live here on purpose:
 *  - utf8_lead_len() is llama.cpp's unicode_len_utf8(): the length a lead
 *    byte announces, judged from its top four bits only (continuation bytes
 *    count as 1). SentencePiece segmentation must use exactly this to match
 *    llama.cpp on invalid input.
 *  - utf8_valid() / the decoder state used by the streaming detokenizer
 *    follow the Unicode definition (no overlongs, no surrogates, <= U+10FFFF).
 * All functions are pure; no allocation. */
#ifndef CINFER_TEXT_UTF8_H
#define CINFER_TEXT_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 1 for 0x00-0xBF, 2 for 0xC0-0xDF, 3 for 0xE0-0xEF, 4 for 0xF0-0xFF. */
static inline size_t utf8_lead_len(unsigned char c) {
    static const unsigned char lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

/* Length of the well-formed sequence a lead byte starts (2..4), 1 for ASCII,
 * 0 if the byte can never start a well-formed sequence (80-C1, F5-FF). */
size_t utf8_seq_len(unsigned char lead);

/* Whether byte `c` may follow the `idx`-th byte (idx >= 1) of a sequence
 * starting with `lead` (handles the E0/ED/F0/F4 second-byte ranges). */
bool utf8_cont_ok(unsigned char lead, size_t idx, unsigned char c);

/* Whether s[0..len) is entirely well-formed UTF-8. */
bool utf8_valid(const char *s, size_t len);

/* The replacement character U+FFFD. */
#define UTF8_REPLACEMENT "\xEF\xBF\xBD"

#endif
