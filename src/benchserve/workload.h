/* workload.h - the request streams of `cinfer bench serve`, deterministic
 * from the seed.
 *
 * A workload is a set of sessions. A session has an arrival time (its first
 * request's planned send time, seconds from the start), a number of turns,
 * and a conversation that grows: before each turn the workload appends the
 * new user content (bs_workload_begin_turn), after it the runner appends the
 * server's answer (bs_workload_add_answer); turn k > 0 is planned think[k]
 * seconds after turn k-1 completed. Kinds:
 *   synthetic  one turn of random words (or token ids), fixed or uniform lengths
 *   code       one turn: one of a few shared code files + a short ask
 *   chat       multi-turn conversations sharing a long system prompt
 *   agent      sessions whose every turn appends the previous answer plus a
 *              tool result, with think-time gaps (most input repeats)
 *   trace      Mooncake trace replay: one turn per line, arrival from the
 *              scaled timestamp, content built block by block from hash ids
 *   conversations  the same trace's lines grouped into conversations
 *              (conversations.h), one session each, all arriving at 0 (the
 *              runner's sessions_at_once makes the loop closed); turn k is
 *              line k's content alone (the trace defines each turn's whole
 *              input, so answers are not appended) and waits the trace's gap
 *              / time scale, clamped to [think_min, think_max]
 * Lengths are in tokens for token-id prompts and in words (~tokens) for text.
 * The workload owns every session and its text. Callers: runner.c, the
 * dry-run dump in cmd_bench_serve.c, tests. */
#ifndef CINFER_BENCHSERVE_WORKLOAD_H
#define CINFER_BENCHSERVE_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "benchserve/api.h"
#include "benchserve/bs_buf.h"
#include "benchserve/trace.h"

typedef enum { BS_WL_SYNTHETIC, BS_WL_CODE, BS_WL_CHAT, BS_WL_AGENT, BS_WL_TRACE, BS_WL_CONVERSATIONS } bs_wl_kind;

typedef struct bs_wl_opts {
    bs_wl_kind kind;
    uint64_t seed;
    long requests; /* synthetic/code: how many (other kinds: 0) */
    long input_len, output_len; /* synthetic/code: per request; chat/agent: output per turn */
    int uniform; /* lengths uniform in [L/2, 3L/2] instead of fixed */
    /* synthetic: the first prefix_share of each prompt (its tokens or words) is one of prefix_pool
     * shared prefixes (system prompts, documents), picked per request by the seed; 0: none */
    double prefix_share;
    long prefix_pool;
    long sessions, turns; /* chat/agent */
    long system_len, user_len, tool_len;
    double think_s; /* agent: mean think time between turns */
    double rate; /* session arrivals per second (Poisson); 0 = all at 0 */
    const char *trace_path; /* trace, conversations */
    long block; /* trace: tokens per hash-id block (512 = original) */
    double time_scale; /* trace: arrivals (conversations: think times) sped up by this factor */
    long max_requests; /* trace: only the first N lines (0 = all) */
    long min_turns; /* conversations: fewer lines are left out; `turns` keeps the first N (0 = all) */
    long conversations; /* conversations: the first N that qualify (0 = all) */
    long max_context; /* conversations: leave out those with a turn's input + output over it (0 = no limit) */
    double think_min, think_max; /* conversations: think-time clamp, seconds */
    long max_output; /* caps every request's max_tokens (0 = no cap) */
    int token_ids; /* synthetic/trace: send token ids (completions API) */
    int32_t tok_lo, tok_hi; /* token ids in [lo, hi) */
} bs_wl_opts;

typedef struct bs_session {
    double arrival;
    long n_turns;
    long turn; /* turns begun so far */
    long *max_tokens; /* per turn */
    double *think; /* per turn (think[0] unused) */
    bs_buf system; /* empty = none */
    bs_buf *msgs; /* user/assistant alternating */
    size_t n_msgs, cap_msgs;
    int32_t *ids; /* token-id prompt, or NULL */
    size_t n_ids;
    long trace_line; /* trace: the 0-based line (conversations: of the turn begun last); else -1 */
    size_t *lines; /* conversations: each turn's line; else NULL */
} bs_session;

typedef struct bs_workload {
    bs_wl_opts o;
    bs_session *s;
    size_t n;
    bs_trace trace; /* trace kind only */
    bs_buf shared; /* chat/agent: the shared system prompt */
} bs_workload;

int bs_workload_parse_kind(const char *name, bs_wl_kind *out);
const char *bs_workload_kind_name(bs_wl_kind k);

/* Builds every session (trace: reads the file). */
int bs_workload_build(const bs_wl_opts *o, bs_workload *w, cf_err *err);
void bs_workload_free(bs_workload *w);

/* Appends session i's user content for its next turn and advances s->turn. */
int bs_workload_begin_turn(bs_workload *w, size_t i, cf_err *err);
/* Appends the answer to the turn just completed (conversations: not part of
 * the next prompt, nothing to do). */
int bs_workload_add_answer(bs_workload *w, size_t i, const char *text, cf_err *err);
/* Frees session i's conversation (after its last turn). */
void bs_workload_release(bs_workload *w, size_t i);
/* The current conversation of session i as a prompt (valid until the next
 * begin_turn/add_answer; `scratch` holds the message pointer array). */
bs_prompt bs_workload_prompt(const bs_workload *w, size_t i, const char ***scratch, size_t *scratch_cap);

#endif
