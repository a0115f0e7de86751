/* test_grapheme.c - extended grapheme cluster boundaries (text/grapheme.c)
 * against UAX #29: each case lists its clusters' byte lengths, as Perl's \X
 * (Unicode 14) splits them, plus cinfer's rule for invalid UTF-8 (each bad
 * byte a cluster of its own). */
#include <stdbool.h>
#include <string.h>

#include "testutil.h"
#include "text/grapheme.h"

typedef struct gcase {
    const char *name, *text;
    size_t lens[6]; /* 0-terminated */
} gcase;

static const gcase CASES[] = {
    {"CR LF (GB3)", "\r\n", {2}},
    {"combining mark (GB9)",
     "a\xCC\x81"
     "b",
     {3, 1}},
    {"Hangul L V T (GB6, GB7)", "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", {9}},
    {"Hangul LV T, LVT T T (GB7, GB8)", "\xEA\xB0\x80\xE1\x86\xA8\xEA\xB0\x81\xE1\x86\xA8\xE1\x86\xA8", {6, 9}},
    {"regional indicator pairs (GB12, GB13)",
     "\xF0\x9F\x87\xAF\xF0\x9F\x87\xB5\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7\xF0\x9F\x87\xA9",
     {8, 8, 4}},
    {"emoji ZWJ sequence (GB11)", "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB", {11}},
    {"ZWJ after a letter (GB9, not GB11)", "x\xE2\x80\x8Dy", {4, 1}},
    {"prepend (GB9b)",
     "\xD8\x80"
     "1",
     {3}},
    {"spacing mark (GB9a)", "\xE0\xA4\x95\xE0\xA4\xBE", {6}},
    {"control breaks before an extend (GB4)", "a\x07\xCC\x81", {1, 1, 2}},
    {"emoji modifier (Extend)", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", {8}},
    {"ZWJ chain broken by a letter", "\xF0\x9F\x91\xA9\xE2\x80\x8Dx\xE2\x80\x8D\xF0\x9F\x92\xBB", {7, 4, 4}},
    {"invalid bytes stand alone", "\xFF\xCC\x81\xC3", {1, 2, 1}},
};

int main(void) {
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        const gcase *g = &CASES[c];
        const unsigned char *s = (const unsigned char *)g->text;
        size_t len = strlen(g->text), at = 0, k = 0;
        bool same = true;
        while (at < len && k < 6) {
            size_t end = grapheme_end(s, len, at);
            same = same && end > at && g->lens[k] == end - at;
            at = end, k++;
        }
        CHECKF(same && at == len && (k == 6 || g->lens[k] == 0), "%s: clusters differ from UAX #29", g->name);
    }
    return test_finish();
}
