/* fuzz_grammar_gbnf.c - libFuzzer harness for the GBNF parser and the matcher
 * (src/grammar/gbnf.c): input = grammar text, NUL, walk seed (see grammar_fuzz.h). No external
 * oracle: the invariants of grammar_fuzz.h (masks agree with accept, EOS iff complete, no dead
 * ends, rollback, complete walks re-accepted from scratch) are checked. */
#include "grammar_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gf_run(CINFER_GRAMMAR_GBNF, data, size, NULL, NULL);
    return 0;
}
