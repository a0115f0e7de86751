/* conversations.h - a Mooncake-format trace's lines grouped into
 * conversations, for the closed-loop replay (`bench serve --workload
 * conversations`).
 *
 * A line continues the earlier line whose first k hash ids it shares, for the
 * longest k with 2 <= k < its own length (hash id 0, the trace's common first
 * block, alone does not link; sharing every id is not a continuation). A
 * conversation is a first line and every line linked to it, directly or
 * through others, in line order. A turn's content is still built from its own
 * hash ids: a Mooncake turn may branch from an earlier prefix instead of
 * extending the previous turn. Same grouping as bench/closed_loop.py had.
 *
 * bs_convs owns its arrays. Callers: workload.c, tests. */
#ifndef CINFER_BENCHSERVE_CONVERSATIONS_H
#define CINFER_BENCHSERVE_CONVERSATIONS_H

#include <stddef.h>

#include "base/error.h"
#include "benchserve/trace.h"

typedef struct bs_conv_opts {
    long min_turns; /* conversations with fewer lines are left out (>= 1) */
    long max_turns; /* each conversation cut to its first max_turns lines (0 = all) */
    long block; /* tokens per hash id (as bs_trace_scaled_input) */
    long max_output; /* caps each turn's output length (0 = no cap) */
    long max_context; /* leave out conversations with a kept turn whose scaled input + capped output exceeds
                         this (0 = no limit) */
    long limit; /* keep the first `limit` conversations that qualify (0 = all) */
} bs_conv_opts;

typedef struct bs_convs {
    size_t n; /* conversations, ordered by their first line */
    size_t *first; /* n + 1 offsets into lines: conversation i is lines[first[i] .. first[i + 1]) */
    size_t *lines; /* 0-based trace line indices, ascending within a conversation */
    size_t qualified; /* conversations with >= min_turns lines (before the context filter and limit) */
} bs_convs;

int bs_conv_group(const bs_trace *t, const bs_conv_opts *o, bs_convs *out, cf_err *err);
void bs_convs_free(bs_convs *c);

#endif
