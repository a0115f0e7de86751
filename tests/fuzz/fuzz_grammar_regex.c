/* fuzz_grammar_regex.c - libFuzzer harness for the regex compiler and the matcher
 * (src/grammar/regex.c): input = regex, NUL, walk seed (see grammar_fuzz.h). Oracle: PCRE2
 * (UTF, UCP, anchored at both ends, $ at the very end only) must match every complete walk, for
 * the regexes PCRE2 compiles and that use none of \D \W \S \s (ASCII vs Unicode meaning of the
 * negated ones differs between ECMAScript and PCRE2 with UCP; ECMAScript's \s has U+FEFF, which
 * Unicode's White_Space, PCRE2's \s with UCP, lacks) nor the classes [] and [^] (empty / any
 * character in ECMAScript; PCRE2 reads a ] right after [ or [^ as a literal). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "grammar_fuzz.h"

static int validate(const char *spec, size_t spec_len, const uint8_t *out, size_t len, void *ctx) {
    (void)ctx;
    for (size_t i = 0; i + 1 < spec_len; i++) {
        if (spec[i] == '\\' && strchr("DWSs", spec[i + 1])) return 1;
        if (spec[i] == '[' && (spec[i + 1] == ']' || (spec[i + 1] == '^' && i + 2 < spec_len && spec[i + 2] == ']')))
            return 1; /* [] / [^]: ECMAScript's empty / any class, which PCRE2 reads differently */
        if (spec[i] == '\\') i++;
    }
    int errcode;
    PCRE2_SIZE erroff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)spec, spec_len,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_DOLLAR_ENDONLY,
                                   &errcode, &erroff, NULL);
    if (!re) return 1; /* not a regex PCRE2 reads the same way: no oracle */
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, out, len, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc >= 0 || rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gf_run(CINFER_GRAMMAR_REGEX, data, size, validate, NULL);
    return 0;
}
