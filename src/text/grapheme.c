/* grapheme.c - extended grapheme cluster boundaries (see grapheme.h): one
 * pass over code points carrying the state the pair rules need (the class
 * before the candidate boundary, the parity of the regional-indicator run, and
 * whether an Extended_Pictographic Extend* ZWJ sequence just ended). */
#include "text/grapheme.h"

#include "text/utf8.h"

/* Decodes the well-formed code point at s[i] into *cp, returning its length,
 * or 0 when s[i] does not start one. */
static size_t decode(const unsigned char *s, size_t len, size_t i, uint32_t *cp) {
    size_t n = utf8_seq_len(s[i]);
    if (n == 0 || i + n > len) return 0;
    for (size_t k = 1; k < n; k++)
        if (!utf8_cont_ok(s[i], k, s[i + k])) return 0;
    uint32_t c = n == 1 ? s[i] : (uint32_t)(s[i] & (0x7F >> n));
    for (size_t k = 1; k < n; k++) c = (c << 6) | (s[i + k] & 0x3F);
    *cp = c;
    return n;
}

static int gcb_of(uint32_t cp) {
    if (cp >= 0xAC00 && cp <= 0xD7A3) return (cp - 0xAC00) % 28 == 0 ? GCB_LV : GCB_LVT;
    const uni_range *r = uni_find(uni_gcb, uni_gcb_n, cp);
    return r ? r->value : GCB_OTHER;
}

static bool is_ctl(int c) { return c == GCB_CR || c == GCB_LF || c == GCB_CONTROL; }

/* Whether there is no boundary between classes prev and cur (GB3-GB9b, GB11-GB13). */
static bool joins(int prev, int cur, bool pict_zwj, bool ri_odd, bool cur_pict) {
    if (prev == GCB_CR && cur == GCB_LF) return true; /* GB3 */
    if (is_ctl(prev) || is_ctl(cur)) return false; /* GB4, GB5 */
    if (prev == GCB_L && (cur == GCB_L || cur == GCB_V || cur == GCB_LV || cur == GCB_LVT)) return true; /* GB6 */
    if ((prev == GCB_LV || prev == GCB_V) && (cur == GCB_V || cur == GCB_T)) return true; /* GB7 */
    if ((prev == GCB_LVT || prev == GCB_T) && cur == GCB_T) return true; /* GB8 */
    if (cur == GCB_EXTEND || cur == GCB_ZWJ || cur == GCB_SPACING_MARK) return true; /* GB9, GB9a */
    if (prev == GCB_PREPEND) return true; /* GB9b */
    if (pict_zwj && cur_pict) return true; /* GB11 */
    return prev == GCB_RI && cur == GCB_RI && ri_odd; /* GB12, GB13 */
}

size_t grapheme_end(const unsigned char *s, size_t len, size_t start) {
    uint32_t cp;
    size_t n = decode(s, len, start, &cp);
    if (n == 0) return start + 1;
    int v = gcb_of(cp), prev = v & 15;
    bool ri_odd = prev == GCB_RI;
    int pict = v & GCB_PICT ? 1 : 0; /* 1: in Pict Extend*, 2: after Pict Extend* ZWJ */
    size_t pos = start + n;
    while (pos < len) {
        if ((n = decode(s, len, pos, &cp)) == 0) break;
        v = gcb_of(cp);
        int cur = v & 15;
        bool cur_pict = (v & GCB_PICT) != 0;
        if (!joins(prev, cur, pict == 2, ri_odd, cur_pict)) break;
        ri_odd = cur == GCB_RI && !ri_odd;
        if (cur_pict) pict = 1;
        else if (pict == 1 && cur == GCB_EXTEND) pict = 1;
        else pict = pict == 1 && cur == GCB_ZWJ ? 2 : 0;
        prev = cur;
        pos += n;
    }
    return pos;
}
