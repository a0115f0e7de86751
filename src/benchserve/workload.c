/* workload.c - see workload.h. Every random choice is drawn from a stream
 * seeded by (run seed, session, turn, purpose), so sessions can be generated
 * lazily in any order with the same result; trace content depends on the
 * hash ids only. Session text is created at begin_turn and can be released
 * after the last turn, so a 12k-request trace never holds all prompts. */
#include "benchserve/workload.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "benchserve/conversations.h"
#include "benchserve/textgen.h"

static const char *const kind_names[] = {"synthetic", "code", "chat", "agent", "trace", "conversations"};

int bs_workload_parse_kind(const char *name, bs_wl_kind *out) {
    for (int i = 0; i < 6; i++)
        if (!strcmp(name, kind_names[i])) return *out = (bs_wl_kind)i, 0;
    return -1;
}

const char *bs_workload_kind_name(bs_wl_kind k) { return kind_names[k]; }

enum { P_LEN = 1, P_TEXT, P_ARRIVAL, P_THINK, P_SYSTEM, P_CODE, P_ASK, P_POOL, P_PREFIX };

static uint64_t stream(const bs_wl_opts *o, uint64_t session, uint64_t turn, uint64_t purpose) {
    return bs_rng_mix(bs_rng_mix(bs_rng_mix(o->seed, purpose), session), turn);
}

static long draw_len(const bs_wl_opts *o, long L, uint64_t *rng) {
    if (!o->uniform || L < 2) return L;
    return L / 2 + (long)(bs_rng_next(rng) % (uint64_t)(L + 1));
}

static long cap_out(const bs_wl_opts *o, long n) {
    if (o->max_output > 0 && n > o->max_output) n = o->max_output;
    return n < 1 ? 1 : n;
}

static int alloc_sessions(bs_workload *w, size_t n, long turns, cf_err *err) {
    w->s = calloc(n, sizeof *w->s);
    if (!w->s) return cf_fail(err, "out of memory");
    w->n = n;
    for (size_t i = 0; i < n; i++) {
        bs_session *s = &w->s[i];
        s->n_turns = turns;
        s->trace_line = -1;
        s->max_tokens = calloc((size_t)turns, sizeof *s->max_tokens);
        s->think = calloc((size_t)turns, sizeof *s->think);
        if (!s->max_tokens || !s->think) return cf_fail(err, "out of memory");
    }
    return 0;
}

static void poisson_arrivals(bs_workload *w) {
    if (w->o.rate <= 0) return;
    uint64_t rng = stream(&w->o, 0, 0, P_ARRIVAL);
    double t = 0;
    for (size_t i = 0; i < w->n; i++) {
        w->s[i].arrival = t;
        t += -log(1.0 - bs_rng_unit(&rng)) / w->o.rate;
    }
}

static int build_trace(bs_workload *w, cf_err *err) {
    const bs_wl_opts *o = &w->o;
    if (!o->trace_path) return cf_fail(err, "the trace workload needs a trace file");
    if (o->block < 1 || o->block > BS_TRACE_BLOCK) return cf_fail(err, "block size must be in [1, %d]", BS_TRACE_BLOCK);
    if (o->time_scale <= 0) return cf_fail(err, "time scale must be > 0");
    if (bs_trace_load(o->trace_path, (size_t)(o->max_requests > 0 ? o->max_requests : 0), &w->trace, err)) return -1;
    if (alloc_sessions(w, w->trace.n, 1, err)) return -1;
    double t0 = w->trace.reqs[0].t_ms;
    for (size_t i = 0; i < w->n; i++) {
        const bs_trace_req *r = &w->trace.reqs[i];
        w->s[i].arrival = (r->t_ms - t0) / 1000.0 / o->time_scale;
        w->s[i].trace_line = (long)i;
        w->s[i].max_tokens[0] = cap_out(o, r->output_len);
    }
    return 0;
}

static double clamp(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

static int build_conversations(bs_workload *w, cf_err *err) {
    const bs_wl_opts *o = &w->o;
    if (!o->trace_path) return cf_fail(err, "the conversations workload needs a trace file");
    if (o->block < 1 || o->block > BS_TRACE_BLOCK) return cf_fail(err, "block size must be in [1, %d]", BS_TRACE_BLOCK);
    if (o->time_scale <= 0) return cf_fail(err, "time scale must be > 0");
    if (!(o->think_min >= 0 && o->think_max >= o->think_min)) return cf_fail(err, "need 0 <= think min <= think max");
    if (o->rate > 0) return cf_fail(err, "a rate does not apply to the conversations workload");
    if (bs_trace_load(o->trace_path, (size_t)(o->max_requests > 0 ? o->max_requests : 0), &w->trace, err)) return -1;
    bs_conv_opts co = {.min_turns = o->min_turns,
                       .max_turns = o->turns,
                       .block = o->block,
                       .max_output = o->max_output,
                       .max_context = o->max_context,
                       .limit = o->conversations};
    bs_convs c;
    if (bs_conv_group(&w->trace, &co, &c, err)) return -1;
    int rc = c.n ? 0
                 : cf_fail(err, "no conversation of >= %ld turns in the %zu trace lines%s", o->min_turns, w->trace.n,
                           o->max_context > 0 ? " fits the context limit" : "");
    size_t longest = 0;
    for (size_t i = 0; i < c.n; i++)
        if (c.first[i + 1] - c.first[i] > longest) longest = c.first[i + 1] - c.first[i];
    if (!rc) rc = alloc_sessions(w, c.n, (long)longest, err);
    for (size_t i = 0; !rc && i < c.n; i++) {
        bs_session *s = &w->s[i];
        s->n_turns = (long)(c.first[i + 1] - c.first[i]);
        s->lines = malloc((size_t)s->n_turns * sizeof *s->lines);
        if (!s->lines) {
            rc = cf_fail(err, "out of memory");
            break;
        }
        memcpy(s->lines, c.lines + c.first[i], (size_t)s->n_turns * sizeof *s->lines);
        s->trace_line = (long)s->lines[0];
        for (long k = 0; k < s->n_turns; k++) {
            const bs_trace_req *r = &w->trace.reqs[s->lines[k]];
            s->max_tokens[k] = cap_out(o, r->output_len);
            if (k)
                s->think[k] = clamp((r->t_ms - w->trace.reqs[s->lines[k - 1]].t_ms) / 1000.0 / o->time_scale,
                                    o->think_min, o->think_max);
        }
    }
    bs_convs_free(&c);
    return rc;
}

int bs_workload_build(const bs_wl_opts *o, bs_workload *w, cf_err *err) {
    *w = (bs_workload){.o = *o};
    int rc;
    if (o->token_ids && (o->tok_lo < 0 || o->tok_hi <= o->tok_lo)) return cf_fail(err, "empty token id range");
    if (o->kind != BS_WL_SYNTHETIC && (o->prefix_share != 0 || o->prefix_pool != 0))
        return cf_fail(err, "a prefix share / pool applies to the synthetic workload only");
    switch (o->kind) {
    case BS_WL_TRACE: rc = build_trace(w, err); break;
    case BS_WL_CONVERSATIONS: rc = build_conversations(w, err); break;
    case BS_WL_SYNTHETIC:
    case BS_WL_CODE:
        if (o->requests < 1 || o->input_len < 1 || o->output_len < 1)
            return cf_fail(err, "requests, input and output lengths must be >= 1");
        if (!(o->prefix_share >= 0 && o->prefix_share <= 1) || o->prefix_pool < 0)
            return cf_fail(err, "prefix share must be in [0, 1] and the prefix pool >= 0");
        if ((o->prefix_share > 0) != (o->prefix_pool > 0))
            return cf_fail(err, "a shared prefix needs both a share > 0 and a pool >= 1");
        rc = alloc_sessions(w, (size_t)o->requests, 1, err);
        for (size_t i = 0; !rc && i < w->n; i++) {
            uint64_t rng = stream(o, i, 0, P_LEN);
            draw_len(o, o->input_len, &rng); /* the input length is redrawn identically at begin_turn */
            w->s[i].max_tokens[0] = cap_out(o, draw_len(o, o->output_len, &rng));
        }
        break;
    default: /* chat, agent */
        if (o->sessions < 1 || o->turns < 1 || o->output_len < 1)
            return cf_fail(err, "sessions, turns and output length must be >= 1");
        rc = alloc_sessions(w, (size_t)o->sessions, o->turns, err);
        for (size_t i = 0; !rc && i < w->n; i++) {
            uint64_t rng = stream(o, i, 0, P_THINK);
            for (long k = 0; k < o->turns; k++) {
                w->s[i].max_tokens[k] = cap_out(o, draw_len(o, o->output_len, &rng));
                w->s[i].think[k] = k && o->kind == BS_WL_AGENT ? o->think_s * (0.5 + bs_rng_unit(&rng)) : 0;
            }
        }
        if (!rc && o->system_len > 0) {
            uint64_t rng = stream(o, 0, 0, P_SYSTEM);
            rc = bs_buf_puts(&w->shared, o->kind == BS_WL_AGENT ? "You are an agent. Tools: " : "You are helpful. ") ||
                         textgen_words(&w->shared, &rng, o->system_len)
                     ? cf_fail(err, "out of memory")
                     : 0;
        }
        break;
    }
    if (!rc) poisson_arrivals(w);
    if (rc) bs_workload_free(w);
    return rc;
}

static bs_buf *push_msg(bs_session *s) {
    if (s->n_msgs == s->cap_msgs) {
        size_t cap = s->cap_msgs ? s->cap_msgs * 2 : 4;
        bs_buf *m = realloc(s->msgs, cap * sizeof *m);
        if (!m) return NULL;
        s->msgs = m;
        s->cap_msgs = cap;
    }
    s->msgs[s->n_msgs] = (bs_buf){0};
    return &s->msgs[s->n_msgs++];
}

static int trace_turn(bs_workload *w, bs_session *s) {
    const bs_trace_req *r = &w->trace.reqs[s->trace_line];
    long block = w->o.block, n_in = bs_trace_scaled_input(r, block);
    if (w->o.token_ids) {
        s->ids = malloc((size_t)n_in * sizeof *s->ids);
        if (!s->ids) return -1;
        s->n_ids = (size_t)n_in;
    }
    bs_buf *m = w->o.token_ids ? NULL : push_msg(s);
    if (!w->o.token_ids && !m) return -1;
    for (size_t b = 0; b < r->n_hash; b++) {
        long len = b + 1 < r->n_hash ? block : n_in - (long)b * block;
        if (s->ids) textgen_block_ids(s->ids + (long)b * block, r->hash[b], len, w->o.tok_lo, w->o.tok_hi);
        else if (textgen_block_text(m, r->hash[b], len)) return -1;
    }
    return 0;
}

/* A synthetic prompt: its first n_pre tokens (words) from shared prefix stream `pre` (the pool
 * entry this request drew), the rest from its own stream. */
static int synthetic_turn(bs_workload *w, size_t i, bs_session *s) {
    uint64_t rng = stream(&w->o, i, 0, P_LEN);
    long n_in = draw_len(&w->o, w->o.input_len, &rng);
    uint64_t text = stream(&w->o, i, 0, P_TEXT), pre = 0;
    long n_pre = w->o.prefix_pool > 0 ? (long)(w->o.prefix_share * (double)n_in) : 0;
    if (n_pre > 0) {
        uint64_t pick = stream(&w->o, i, 0, P_POOL);
        pre = stream(&w->o, bs_rng_next(&pick) % (uint64_t)w->o.prefix_pool, 0, P_PREFIX);
    }
    if (w->o.token_ids) {
        s->ids = malloc((size_t)n_in * sizeof *s->ids);
        if (!s->ids) return -1;
        s->n_ids = (size_t)n_in;
        uint64_t span = (uint64_t)(w->o.tok_hi - w->o.tok_lo);
        for (long k = 0; k < n_in; k++)
            s->ids[k] = w->o.tok_lo + (int32_t)(bs_rng_next(k < n_pre ? &pre : &text) % span);
        return 0;
    }
    bs_buf *m = push_msg(s);
    return m && !textgen_words(m, &pre, n_pre) ? textgen_words(m, &text, n_in - n_pre) : -1;
}

/* One of four shared "files" (the prefix a code assistant re-reads), then a
 * short request specific to this session. */
static int code_turn(bs_workload *w, size_t i, bs_session *s) {
    uint64_t pick = stream(&w->o, i, 0, P_ASK);
    uint64_t file = stream(&w->o, bs_rng_next(&pick) % 4, 0, P_CODE);
    uint64_t len = stream(&w->o, i, 0, P_LEN);
    long n_in = draw_len(&w->o, w->o.input_len, &len);
    long ask = n_in / 8 + 1;
    bs_buf *m = push_msg(s);
    if (!m) return -1;
    return textgen_code(m, &file, n_in - ask) || bs_buf_puts(m, "\n# Task: write ") || textgen_words(m, &pick, ask);
}

static int session_turn(bs_workload *w, size_t i, bs_session *s) {
    long k = s->turn;
    if (k == 0 && w->shared.len && bs_buf_append(&s->system, w->shared.p, w->shared.len)) return -1;
    bs_buf *m = push_msg(s);
    if (!m) return -1;
    uint64_t rng = stream(&w->o, i, (uint64_t)k, P_TEXT);
    if (w->o.kind == BS_WL_AGENT && k > 0)
        return bs_buf_puts(m, "Tool result:\n") || textgen_words(m, &rng, w->o.tool_len);
    return textgen_words(m, &rng, w->o.user_len > 0 ? w->o.user_len : 1);
}

int bs_workload_begin_turn(bs_workload *w, size_t i, cf_err *err) {
    bs_session *s = &w->s[i];
    if (s->turn >= s->n_turns) return cf_fail(err, "session %zu has no turn left", i);
    int rc;
    switch (w->o.kind) {
    case BS_WL_TRACE: rc = trace_turn(w, s); break;
    case BS_WL_CONVERSATIONS: /* each turn is its own line's content */
        bs_workload_release(w, i);
        s->trace_line = (long)s->lines[s->turn];
        rc = trace_turn(w, s);
        break;
    case BS_WL_SYNTHETIC: rc = synthetic_turn(w, i, s); break;
    case BS_WL_CODE: rc = code_turn(w, i, s); break;
    default: rc = session_turn(w, i, s); break;
    }
    if (rc) return cf_fail(err, "out of memory building session %zu", i);
    s->turn++;
    return 0;
}

int bs_workload_add_answer(bs_workload *w, size_t i, const char *text, cf_err *err) {
    if (w->o.kind == BS_WL_CONVERSATIONS) return 0; /* the trace's next line is the whole next input */
    bs_buf *m = push_msg(&w->s[i]);
    if (!m || bs_buf_puts(m, text)) return cf_fail(err, "out of memory");
    return 0;
}

void bs_workload_release(bs_workload *w, size_t i) {
    bs_session *s = &w->s[i];
    for (size_t k = 0; k < s->n_msgs; k++) bs_buf_free(&s->msgs[k]);
    free(s->msgs);
    s->msgs = NULL;
    s->n_msgs = s->cap_msgs = 0;
    bs_buf_free(&s->system);
    free(s->ids);
    s->ids = NULL;
    s->n_ids = 0;
}

bs_prompt bs_workload_prompt(const bs_workload *w, size_t i, const char ***scratch, size_t *cap) {
    const bs_session *s = &w->s[i];
    bs_prompt p = {.system = s->system.len ? s->system.p : NULL, .ids = s->ids, .n_ids = s->n_ids};
    if (s->n_msgs > *cap) {
        const char **a = realloc(*scratch, s->n_msgs * sizeof *a);
        if (!a) return (bs_prompt){0};
        *scratch = a;
        *cap = s->n_msgs;
    }
    for (size_t k = 0; k < s->n_msgs; k++) (*scratch)[k] = bs_buf_str(&s->msgs[k]);
    p.msgs = *scratch;
    p.n_msgs = s->n_msgs;
    return p;
}

void bs_workload_free(bs_workload *w) {
    for (size_t i = 0; i < w->n; i++) {
        bs_workload_release(w, i);
        free(w->s[i].max_tokens);
        free(w->s[i].think);
        free(w->s[i].lines);
    }
    free(w->s);
    bs_trace_free(&w->trace);
    bs_buf_free(&w->shared);
    *w = (bs_workload){0};
}
