/* engine_think.c - reasoning budgets (cinfer_request.think_*; docs/engine.md
 * "Reasoning budget"), the engine's version of vLLM's thinking-token budget.
 *
 * State per request (eng_req, engine thread only): whether it is inside a
 * reasoning block, where the current block began (think_from, in generated
 * tokens) and how many tokens closed blocks held (think_spent). It changes
 * only in eng_think_accept, once per generated token at commit, so
 * asynchronous scheduling (the next step is planned before this token is
 * known; its input is read from r->seq at assembly), preemption (recompute
 * rebuilds KV, never tokens) and dropped in-flight results (never committed)
 * leave it right.
 *
 * The rule (eng_think_forced, called by eng_sample before sampling): inside a
 * block, let `inside` be the tokens generated since it opened and p the
 * longest tail of them that is a proper prefix of the end marker (the model
 * may have begun the marker itself). When think_spent + inside - p reaches
 * the budget, the next token is end[p]; each forced token extends the
 * partial match by one, so the end marker is completed token by token and
 * the block closes (eng_think_accept sees the full marker). For a one-token
 * end marker exactly `budget` tokens lie inside; with a longer marker the
 * model's abandoned partial markers count as reasoning, which can overshoot
 * by at most n_end - 1 tokens. A block that opens after the budget is spent
 * is closed at once. Invariant: 0 <= p < n_end, forcing never skips a
 * marker token. */
#include <string.h>

#include "engine/engine_internal.h"

int eng_think_check(const cinfer_request *r, int32_t n_vocab, cf_err *err) {
    if (r->n_think_start < 0 || r->n_think_start > CINFER_MAX_THINK_MARKER || r->n_think_end < 0 ||
        r->n_think_end > CINFER_MAX_THINK_MARKER)
        return cf_fail(err, "think markers hold 0..%d token ids", CINFER_MAX_THINK_MARKER);
    if ((r->n_think_start > 0 && !r->think_start) || (r->n_think_end > 0 && !r->think_end))
        return cf_fail(err, "inconsistent think marker arrays");
    for (int32_t i = 0; i < r->n_think_start; i++)
        if (r->think_start[i] < 0 || r->think_start[i] >= n_vocab)
            return cf_fail(err, "think_start token %d is %d (vocabulary of %d)", i, r->think_start[i], n_vocab);
    for (int32_t i = 0; i < r->n_think_end; i++)
        if (r->think_end[i] < 0 || r->think_end[i] >= n_vocab)
            return cf_fail(err, "think_end token %d is %d (vocabulary of %d)", i, r->think_end[i], n_vocab);
    return 0;
}

void eng_think_init(eng_req *q, const cinfer_request *r) {
    q->think_budget = r->think_budget >= 0 && r->n_think_end > 0 ? r->think_budget : -1;
    if (q->think_budget < 0) return;
    q->n_think_start = r->n_think_start;
    q->n_think_end = r->n_think_end;
    if (r->n_think_start) memcpy(q->think_start, r->think_start, (size_t)r->n_think_start * sizeof(int32_t));
    memcpy(q->think_end, r->think_end, (size_t)r->n_think_end * sizeof(int32_t));
    q->think_in = r->think_open;
    q->think_from = 0;
    q->think_spent = 0;
}

/* The generated tokens ending at the sequence's end, n_generated counted. */
static const int32_t *eng_tail(const eng_req *r) { return r->seq + r->prompt_len + r->n_generated; }

int32_t eng_think_forced(const eng_req *r) {
    if (r->think_budget < 0 || !r->think_in) return -1;
    int32_t inside = r->n_generated - r->think_from;
    const int32_t *tail = eng_tail(r);
    int32_t p = r->n_think_end - 1 < inside ? r->n_think_end - 1 : inside;
    while (p > 0 && memcmp(tail - p, r->think_end, (size_t)p * sizeof(int32_t))) p--;
    if ((int64_t)r->think_spent + inside - p < r->think_budget) return -1;
    return r->think_end[p];
}

void eng_think_accept(eng_req *r) {
    if (r->think_budget < 0) return;
    int32_t n = r->n_generated - r->think_from;
    const int32_t *tail = eng_tail(r);
    if (r->think_in) {
        if (n >= r->n_think_end &&
            !memcmp(tail - r->n_think_end, r->think_end, (size_t)r->n_think_end * sizeof(int32_t))) {
            r->think_spent += n - r->n_think_end;
            r->think_in = false;
            r->think_from = r->n_generated;
        }
    } else if (r->n_think_start > 0 && n >= r->n_think_start &&
               !memcmp(tail - r->n_think_start, r->think_start, (size_t)r->n_think_start * sizeof(int32_t))) {
        r->think_in = true;
        r->think_from = r->n_generated;
    }
}
