/* fuzz_recipe_parser.c - libFuzzer harness for the incremental output parsers
 * and the SSE stream encoders. The first byte picks the parser kind and flags,
 * the second a chunk size; the rest is model output fed in chunks, whose events
 * go through a stream encoder of each API. Invariants checked: tool events are
 * well nested (begin, args of the open call, end) with no text inside a call, every event text is valid for
 * the encoder, the encoders accept the sequence, and the same input fed whole
 * yields the same number of tool calls. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/recipe.h"

static int run(const uint8_t *data, size_t size, recipe_parser_kind kind, unsigned flags, size_t chunk, bool encode) {
    recipe_parser *p = recipe_parser_new(kind, flags);
    if (!p) abort();
    recipe_parser_set_id_seed(p, 1);
    recipe_stream_encoder *enc[3] = {0};
    recipe_stream_info info = {.id = "r", .model = "m", .include_usage = true};
    for (int a = 0; encode && a < 3; a++) enc[a] = recipe_stream_encoder_new((recipe_api)a, &info);
    recipe_buf out = {0};
    int open = -1, calls = 0;
    for (size_t off = 0;; off += chunk) {
        const recipe_event *ev;
        size_t n;
        bool last = off >= size;
        if (last) recipe_parser_finish(p, &ev, &n);
        else recipe_parser_feed(p, (const char *)data + off, size - off < chunk ? size - off : chunk, &ev, &n);
        for (size_t i = 0; i < n; i++) {
            if (ev[i].type == RECIPE_EV_TOOL_BEGIN) {
                if (open != -1 || ev[i].index != calls) abort();
                open = calls++;
            } else if (ev[i].type == RECIPE_EV_TOOL_ARGS) {
                if (open != ev[i].index) abort();
            } else if (ev[i].type == RECIPE_EV_TOOL_END) {
                if (open != ev[i].index) abort();
                open = -1;
            } else if (ev[i].len == 0 || open != -1) /* no empty text, no text inside a call */
                abort();
            for (int a = 0; a < 3; a++)
                if (enc[a] && recipe_stream_encoder_event(enc[a], &ev[i], &out, NULL)) abort();
            out.len = 0;
        }
        if (last) break;
    }
    if (open != -1) abort();
    recipe_event fin = {.type = RECIPE_EV_FINISH, .finish = RECIPE_FINISH_EOS};
    for (int a = 0; a < 3; a++) {
        if (enc[a] && recipe_stream_encoder_event(enc[a], &fin, &out, NULL)) abort();
        recipe_stream_encoder_free(enc[a]);
    }
    recipe_buf_free(&out);
    if (recipe_parser_tool_calls(p) != calls) abort();
    recipe_parser_free(p);
    return calls;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    recipe_parser_kind kind = (recipe_parser_kind)(data[0] % RECIPE_PARSER_COUNT);
    unsigned flags = (data[0] / RECIPE_PARSER_COUNT) & 3;
    size_t chunk = 1 + data[1] % 16;
    int a = run(data + 2, size - 2, kind, flags, chunk, true);
    int b = run(data + 2, size - 2, kind, flags, size, false);
    if (a != b) abort();
    return 0;
}
