/* unicode_tables.h - the Unicode data WordPiece pre-tokenization needs, as
 * sorted disjoint ranges generated from Python's unicodedata by
 * scripts/gen-unicode-tables.py (src/text/unicode_tables.c), plus lookups.
 *  - uni_nfd_first: code point -> first code point of its NFD decomposition
 *    (accents stripped, as llama.cpp's unicode_cpts_normalize_nfd does);
 *  - uni_lower_delta: code point -> lowercase (first code point of
 *    str.lower()) as a signed delta;
 *  - uni_flags: UNI_CONTROL (Cc Cf Cs Co), UNI_PUNCT (P*), UNI_SYMBOL (S*).
 * Pure data and pure functions; thread-safe. */
#ifndef CINFER_TEXT_UNICODE_TABLES_H
#define CINFER_TEXT_UNICODE_TABLES_H

#include <stddef.h>
#include <stdint.h>

typedef struct uni_range {
    uint32_t first, last;
    int32_t value;
} uni_range;

enum { UNI_CONTROL = 1, UNI_PUNCT = 2, UNI_SYMBOL = 4 };

extern const uni_range uni_nfd_first[], uni_lower_delta[], uni_flags[];
extern const size_t uni_nfd_first_n, uni_lower_delta_n, uni_flags_n;

/* The range holding cp, or NULL. */
static inline const uni_range *uni_find(const uni_range *r, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < r[mid].first) hi = mid;
        else if (cp > r[mid].last) lo = mid + 1;
        else return &r[mid];
    }
    return NULL;
}

static inline uint32_t uni_nfd_base(uint32_t cp) {
    const uni_range *r = uni_find(uni_nfd_first, uni_nfd_first_n, cp);
    return r ? (uint32_t)r->value : cp;
}

static inline uint32_t uni_tolower(uint32_t cp) {
    const uni_range *r = uni_find(uni_lower_delta, uni_lower_delta_n, cp);
    return r ? (uint32_t)((int64_t)cp + r->value) : cp;
}

static inline int uni_cat_flags(uint32_t cp) {
    const uni_range *r = uni_find(uni_flags, uni_flags_n, cp);
    return r ? r->value : 0;
}

#endif
