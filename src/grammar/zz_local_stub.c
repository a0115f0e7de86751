/* LOCAL ONLY, never committed: stands in for the grammar front ends not merged yet. */
#include "grammar/grammar_impl.h"
int32_t gr_gbnf_compile(gr_cfg *g, const char *text, size_t len, uint32_t depth, cinfer_grammar_error *err) {
    (void)g, (void)text, (void)len, (void)depth;
    return gr_fail(err, "", -1, "gbnf: not merged yet"), -1;
}
int32_t gr_json_schema_compile(gr_cfg *g, const char *text, size_t len, uint32_t flags, uint32_t depth,
                               cinfer_grammar_error *err) {
    (void)g, (void)text, (void)len, (void)depth, (void)flags;
    return gr_fail(err, "", -1, "json schema: not merged yet"), -1;
}
int32_t gr_choice_compile(gr_cfg *g, const char *text, size_t len, cinfer_grammar_error *err) {
    (void)g, (void)text, (void)len;
    return gr_fail(err, "", -1, "choice: not merged yet"), -1;
}
