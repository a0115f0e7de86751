/* trace.h - Mooncake-format request traces and their cache statistics.
 *
 * A trace is JSONL: one object per line, {"timestamp": ms, "input_length": N,
 * "output_length": N, "hash_ids": [ids]}; each hash id names one 512-token
 * block and equal ids mean equal content (the ids are already prefix-chained
 * in Mooncake's traces, but the hit bound below chains them again so it holds
 * for any id assignment). bs_trace owns all its arrays. Callers:
 * workload.c (trace replay), cmd_bench_report.c (trace-stats), tests. */
#ifndef CINFER_BENCHSERVE_TRACE_H
#define CINFER_BENCHSERVE_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"

#define BS_TRACE_BLOCK 512 /* tokens per hash id in the original trace */

typedef struct bs_trace_req {
    double t_ms; /* arrival time, ms from the trace start */
    long input_len; /* tokens */
    long output_len; /* tokens */
    size_t n_hash;
    const uint64_t *hash; /* n_hash ids, into bs_trace.pool */
} bs_trace_req;

typedef struct bs_trace {
    bs_trace_req *reqs;
    size_t n;
    uint64_t *pool; /* every request's ids, back to back */
} bs_trace;

/* Reads at most max_requests lines (0 = all) of a trace file. Fails with a
 * message naming the line on malformed input (bad JSON, missing or negative
 * fields, input_length not covered by its blocks, timestamps going back). */
int bs_trace_load(const char *path, size_t max_requests, bs_trace *out, cf_err *err);
/* The same from an open stream (the fuzz harness reads from memory); `name`
 * prefixes errors. */
int bs_trace_read(FILE *f, const char *name, size_t max_requests, bs_trace *out, cf_err *err);
void bs_trace_free(bs_trace *t);

/* A request's input length when blocks hold `block` tokens instead of 512:
 * scaled proportionally (rounded up), then clamped so the last block is
 * partial but non-empty, exactly as in the original. */
long bs_trace_scaled_input(const bs_trace_req *r, long block);

typedef struct bs_trace_stats {
    size_t requests;
    long long input_tokens, output_tokens; /* at the given block size */
    long long blocks, unique_blocks; /* hash ids, distinct hash ids */
    long long hit_tokens; /* infinite-cache prefix hits */
    double duration_s; /* last timestamp - first */
    double hit_ratio; /* hit_tokens / input_tokens */
} bs_trace_stats;

/* The infinite-cache prefix-hit bound at `block` tokens per block: for each
 * request in order, block i hits iff blocks 0..i were all seen (as a chain)
 * in an earlier request; hit tokens = hits x block, capped by the input. */
int bs_trace_stats_compute(const bs_trace *t, long block, bs_trace_stats *out, cf_err *err);

#endif
