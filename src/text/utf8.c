/* utf8.c - see utf8.h. Validation follows the Unicode Standard, table 3-7
 * (well-formed UTF-8 byte sequences). */
#include "text/utf8.h"

size_t utf8_seq_len(unsigned char lead) {
    if (lead < 0x80) return 1;
    if (lead < 0xC2) return 0;
    if (lead < 0xE0) return 2;
    if (lead < 0xF0) return 3;
    if (lead < 0xF5) return 4;
    return 0;
}

bool utf8_cont_ok(unsigned char lead, size_t idx, unsigned char c) {
    if (idx == 1) {
        switch (lead) {
        case 0xE0: return c >= 0xA0 && c <= 0xBF;
        case 0xED: return c >= 0x80 && c <= 0x9F;
        case 0xF0: return c >= 0x90 && c <= 0xBF;
        case 0xF4: return c >= 0x80 && c <= 0x8F;
        default: break;
        }
    }
    return c >= 0x80 && c <= 0xBF;
}

bool utf8_valid(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_seq_len(p[i]);
        if (n == 0 || n > len - i) return false;
        for (size_t k = 1; k < n; k++)
            if (!utf8_cont_ok(p[i], k, p[i + k])) return false;
        i += n;
    }
    return true;
}
