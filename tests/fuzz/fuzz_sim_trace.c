/* fuzz_sim_trace.c - libFuzzer harness for the Mooncake trace reader the
 * simulator and bench serve share (bs_trace_read, from memory via
 * fmemopen), followed by the infinite-cache statistics over what it
 * accepted. Checks: never crashes or reads out of bounds; an error is one
 * line naming the input; an accepted trace has requests whose input is
 * covered by its blocks and whose timestamps never go back. Seeds:
 * tests/fuzz/corpus/sim_trace/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchserve/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0 || size > 1 << 16) return 0;
    FILE *f = fmemopen((void *)(uintptr_t)data, size, "r");
    if (!f) return 0;
    bs_trace t;
    cf_err err = {0};
    int rc = bs_trace_read(f, "fuzz.jsonl", 0, &t, &err);
    fclose(f);
    if (rc) {
        if (strncmp(err.msg, "fuzz.jsonl", 10) || strchr(err.msg, '\n')) abort();
        return 0;
    }
    for (size_t i = 0; i < t.n; i++) {
        const bs_trace_req *r = &t.reqs[i];
        if (r->input_len < 1 || r->input_len > (long)r->n_hash * BS_TRACE_BLOCK) abort();
        if (i && r->t_ms < t.reqs[i - 1].t_ms) abort();
        long s = bs_trace_scaled_input(r, 16);
        if (s < 1 || s > (long)r->n_hash * 16) abort();
    }
    bs_trace_stats st;
    if (bs_trace_stats_compute(&t, 64, &st, &err) == 0 && st.hit_tokens > st.input_tokens) abort();
    bs_trace_free(&t);
    return 0;
}
