/* charset.h - sets of Unicode code points (sorted, merged, inclusive ranges) and their
 * translation to CFG rules over UTF-8 bytes. Used by the regex and GBNF front ends for
 * character classes, `.`, escapes like \d, and by the JSON front end for string characters.
 * Invariants of a gr_charset after gr_charset_normalize: ranges sorted by lo, disjoint and
 * non-adjacent, within 0..0x10FFFF. Surrogates (D800-DFFF) are never encoded. */
#ifndef CINFER_GRAMMAR_CHARSET_H
#define CINFER_GRAMMAR_CHARSET_H

#include <stdint.h>

#include "grammar/cfg.h"

#define GR_MAX_CODEPOINT 0x10FFFFu

typedef struct gr_range {
    uint32_t lo, hi;
} gr_range;

typedef struct gr_charset {
    gr_range *r;
    uint32_t n, cap;
} gr_charset;

int gr_charset_add(gr_charset *s, uint32_t lo, uint32_t hi); /* 0 or -1 (memory) */
int gr_charset_add_set(gr_charset *s, const gr_charset *o);
void gr_charset_normalize(gr_charset *s);
/* Replaces s by its complement within 0..0x10FFFF (normalizes first). */
int gr_charset_negate(gr_charset *s);
void gr_charset_free(gr_charset *s);
int gr_charset_has(const gr_charset *s, uint32_t c);

/* A nonterminal deriving the UTF-8 encoding of every code point in s (normalized). -1: limit. */
int32_t gr_charset_utf8(gr_cfg *g, const gr_charset *s);
/* Same, but each code point written as a character inside a JSON string literal: '"', '\\' and
 * control characters as JSON escapes (\" \\ \b \f \n \r \t, else \u00XX in either hex case). */
int32_t gr_charset_json(gr_cfg *g, const gr_charset *s);

/* Decodes one UTF-8 code point at *p (advancing it), or returns -1 on invalid UTF-8. */
int32_t gr_utf8_decode(const uint8_t **p, const uint8_t *end);
/* Encodes c into out (4 bytes); returns the length. */
int gr_utf8_encode(uint32_t c, uint8_t out[4]);

#endif
