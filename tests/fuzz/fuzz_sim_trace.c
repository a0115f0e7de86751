/* fuzz_sim_trace.c - libFuzzer harness for the Mooncake trace reader the
 * simulator and bench serve share (bs_trace_read, from memory via
 * fmemopen), followed by the infinite-cache statistics over what it
 * accepted and its grouping into conversations (bench serve's conversations
 * workload). Checks: never crashes or reads out of bounds; an error is one
 * line naming the input; an accepted trace has requests whose input is
 * covered by its blocks and whose timestamps never go back; every line is in
 * exactly one conversation, in ascending order, and a later line of a
 * conversation shares at least 2 leading hash ids with an earlier one. Seeds:
 * tests/fuzz/corpus/sim_trace/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchserve/conversations.h"
#include "benchserve/trace.h"

static int shares_two(const bs_trace_req *a, const bs_trace_req *b) {
    return a->n_hash >= 2 && b->n_hash >= 2 && a->hash[0] == b->hash[0] && a->hash[1] == b->hash[1];
}

static void check_conversations(const bs_trace *t) {
    bs_conv_opts o = {.min_turns = 1, .block = 16};
    bs_convs c;
    cf_err err = {0};
    if (bs_conv_group(t, &o, &c, &err)) return; /* out of memory only */
    if (c.first[c.n] != t->n || c.qualified != c.n) abort();
    unsigned char *seen = calloc(t->n ? t->n : 1, 1);
    if (!seen) abort();
    for (size_t i = 0; i < c.n; i++)
        for (size_t k = c.first[i]; k < c.first[i + 1]; k++) {
            size_t l = c.lines[k];
            if (l >= t->n || seen[l] || (k > c.first[i] && l <= c.lines[k - 1])) abort();
            if (k > c.first[i] && !shares_two(&t->reqs[l], &t->reqs[c.lines[c.first[i]]])) abort();
            seen[l] = 1;
        }
    free(seen);
    bs_convs_free(&c);
}

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
    check_conversations(&t);
    bs_trace_free(&t);
    return 0;
}
