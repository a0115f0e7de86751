/* parser.c - incremental model-output parsers (protocols.md §5): split raw
 * generated text into reasoning, content and tool-call events while it streams.
 *
 * Design: one state machine over a pending-input buffer. Each feed appends the
 * delta, then handlers for the current mode consume what they can decide and
 * leave the rest pending: an incomplete UTF-8 sequence, a tail that may be the
 * start of a marker (`<thi`, `<｜tool▁ca`, `[TOOL`), whitespace that may precede
 * a tool-call marker, a JSON key or name string not yet closed. Because every
 * decision depends only on text already seen, feeding the output whole or one
 * byte at a time yields the same events (modulo how deltas are split).
 *
 * Tool-call arguments are forwarded verbatim: for JSON-wrapped formats (Hermes,
 * Llama 3, old Mistral) the raw text of the "arguments"/"parameters" value is
 * streamed by a small JSON scanner that tracks depth and strings, so the
 * fragments concatenate to exactly the model's JSON (no re-serialisation, no
 * partial-JSON healing); for marker-delimited formats (DeepSeek, Mistral v11)
 * the text up to the closing marker/fence. Text after the tool calls is dropped,
 * whitespace right before a call is dropped, a call with no arguments gets "{}",
 * and if no call could be parsed at all the raw text is returned as content.
 * Reasoning: `<think>`…`</think>` (Mistral: [THINK]…[/THINK]); a leading start tag
 * opens reasoning, RECIPE_PARSER_IN_REASONING starts inside it (prompt ended with
 * `<think>`), text before the end tag is reasoning, everything after is content.
 * Out of memory: the buffers remember a failed append (recipe_buf.failed, sticky), so the many
 * appends of the handlers are not checked one by one; run() checks the flags once per feed and
 * the parser stays failed (recipe_parser_failed) - its callers end the output with an error.
 * Callers: src/serve (per streamed request, after incremental detokenization),
 * python/ bindings, tests. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "recipe/recipe_internal.h"

typedef enum {
    M_START,
    M_REASON,
    M_CONTENT,
    M_PLAIN,
    M_AFTER,
    DS_EXPECT,
    DS_NAME,
    DS_V3_NAME,
    DS_V3_FENCE,
    DS_ARGS_FENCED,
    DS_ARGS_RAW,
    DS_CALL_END,
    W_OPEN,
    W_KEY,
    W_COLON,
    W_VALUE,
    W_SCAN,
    HE_CLOSE,
    LL_NEXT,
    MI_START,
    MI_NEXT,
    MI_NAME,
    MI_CALLID,
    MI_ARGS,
} pmode;

typedef struct ev_rec {
    recipe_event ev;
    size_t text_off, id_off, name_off;
} ev_rec;

/* DeepSeek markers (U+FF5C fullwidth bar, U+2581 lower one-eighth block) */
#define FB "\xEF\xBD\x9C"
#define SP "\xE2\x96\x81"
#define DS_CALLS_BEGIN "<" FB "tool" SP "calls" SP "begin" FB ">"
#define DS_CALLS_END "<" FB "tool" SP "calls" SP "end" FB ">"
#define DS_CALL_BEGIN "<" FB "tool" SP "call" SP "begin" FB ">"
#define DS_CALL_END_M "<" FB "tool" SP "call" SP "end" FB ">"
#define DS_SEP "<" FB "tool" SP "sep" FB ">"

static const char *const k_ds_start[] = {DS_CALLS_BEGIN,
                                         "<" FB "tool_calls_begin" FB ">",
                                         "<" FB "tool calls begin" FB ">",
                                         "<" FB "tool\\_calls\\_begin" FB ">",
                                         "<" FB "tool" SP "calls" FB ">",
                                         NULL};
static const char *const k_hermes_start[] = {"<tool_call>", NULL};
static const char *const k_llama_start[] = {"<|python_tag|>", NULL};
static const char *const k_mistral_start[] = {"[TOOL_CALLS]", NULL};
static const char *const k_none[] = {NULL};

struct recipe_parser {
    recipe_parser_kind kind;
    unsigned flags;
    const char *think_start, *think_end; /* NULL: no reasoning markers */
    const char *const *tool_start;
    pmode mode;
    bool think_allowed; /* a leading start tag may still open reasoning */
    bool reason_started;
    bool final;
    bool failed; /* out of memory somewhere (sticky): events may have lost text */
    recipe_buf in;
    size_t pos, lim;
    /* events */
    ev_rec *recs;
    size_t n_recs, cap_recs;
    recipe_event *out;
    size_t cap_out;
    recipe_buf evbuf;
    /* tool calls */
    int n_tools;
    bool call_open, call_had_args, llama_probe;
    recipe_buf raw; /* consumed tool-section text before the first call began */
    recipe_buf name; /* DS/Mistral name, Mistral call id */
    recipe_buf callid;
    recipe_buf pend_args; /* JSON args seen before the name */
    uint64_t seed;
    /* JSON wrapper scanner */
    char key[16];
    bool key_is_name, key_is_args;
    int wrap_depth; /* for Mistral-v11/args value scanning */
    int v_depth;
    bool v_started, v_str, v_esc, v_scalar, v_is_string;
    size_t v_start; /* offset in `in` where a string-typed value began */
    pmode after_value;
};

/* ---------------------------------------------------------------- helpers */

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* 1: s starts with m; -1: s is a proper prefix of m; 0: neither */
static int starts(const char *s, size_t n, const char *m) {
    size_t ml = strlen(m);
    if (n >= ml) return memcmp(s, m, ml) == 0;
    return memcmp(s, m, n) == 0 ? -1 : 0;
}

static size_t find(const char *s, size_t n, const char *m, size_t *mlen) {
    size_t ml = strlen(m);
    if (mlen) *mlen = ml;
    const char *f = ml <= n ? memmem(s, n, m, ml) : NULL;
    return f ? (size_t)(f - s) : n;
}

/* earliest occurrence of any marker; returns n if none */
static size_t find_any(const char *s, size_t n, const char *const *ms, size_t *mlen) {
    size_t best = n, bl = 0;
    for (; *ms; ms++) {
        size_t l, i = find(s, n, *ms, &l);
        if (i < best) best = i, bl = l;
    }
    if (mlen) *mlen = bl;
    return best;
}

/* longest suffix of s that is a proper prefix of some marker */
static size_t hold_len(const char *s, size_t n, const char *const *ms) {
    size_t best = 0;
    for (; *ms; ms++) {
        size_t ml = strlen(*ms);
        for (size_t k = ml - 1 < n ? ml - 1 : n; k > best; k--)
            if (!memcmp(s + n - k, *ms, k)) {
                best = k;
                break;
            }
    }
    return best;
}

static size_t skip_ws(const char *s, size_t n) {
    size_t i = 0;
    while (i < n && is_ws(s[i])) i++;
    return i;
}

/* Bytes of s that form complete UTF-8 sequences (an incomplete tail is held back). */
static size_t utf8_complete(const char *s, size_t n) {
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--, back++;
    if (i == 0) return n;
    unsigned char c = (unsigned char)s[i - 1];
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (c < 0x80) return n;
    return back + 1 >= need ? n : i - 1;
}

static void consume(recipe_parser *p, size_t k) {
    if (p->mode != M_START && p->mode != M_REASON && p->mode != M_CONTENT && p->mode != M_PLAIN && p->n_tools == 0)
        rb_put(&p->raw, p->in.data + p->pos, k);
    p->pos += k;
}

/* ---------------------------------------------------------------- events */

static ev_rec *new_rec(recipe_parser *p) {
    if (p->n_recs == p->cap_recs) {
        size_t cap = p->cap_recs ? p->cap_recs * 2 : 16;
        ev_rec *n = realloc(p->recs, cap * sizeof *n);
        if (!n) return p->failed = true, NULL;
        p->recs = n;
        p->cap_recs = cap;
    }
    ev_rec *r = &p->recs[p->n_recs++];
    memset(r, 0, sizeof *r);
    return r;
}

static void emit_text(recipe_parser *p, recipe_event_type t, const char *s, size_t n) {
    if (!n) return;
    if (t == RECIPE_EV_TOOL_ARGS) p->call_had_args = true;
    ev_rec *last = p->n_recs ? &p->recs[p->n_recs - 1] : NULL;
    int idx = t == RECIPE_EV_TOOL_ARGS ? p->n_tools - 1 : 0;
    /* event text is always valid UTF-8: stray invalid bytes become U+FFFD */
    size_t before = p->evbuf.len;
    if (last && last->ev.type == t && last->ev.index == idx && last->text_off + last->ev.len == p->evbuf.len) {
        if (!rb_put_utf8(&p->evbuf, s, n)) last->ev.len += p->evbuf.len - before;
        return;
    }
    ev_rec *r = new_rec(p);
    if (!r) return;
    r->ev.type = t;
    r->ev.index = idx;
    r->text_off = p->evbuf.len;
    if (rb_put_utf8(&p->evbuf, s, n)) {
        p->n_recs--;
        return;
    }
    r->ev.len = p->evbuf.len - before;
}

static void begin_call(recipe_parser *p, const char *name, size_t n) {
    ev_rec *r = new_rec(p);
    if (!r) return;
    r->ev.type = RECIPE_EV_TOOL_BEGIN;
    r->ev.index = p->n_tools++;
    char id[64];
    if (p->callid.len) snprintf(id, sizeof id, "%.*s", (int)p->callid.len, p->callid.data);
    else mint_id(id, sizeof id, "call_", p->seed + (uint64_t)r->ev.index);
    p->callid.len = 0;
    r->id_off = p->evbuf.len;
    rb_put(&p->evbuf, id, strlen(id) + 1);
    r->name_off = p->evbuf.len;
    rb_put(&p->evbuf, name, n);
    rb_put(&p->evbuf, "", 1);
    p->call_open = true;
    p->call_had_args = false;
    p->raw.len = 0;
    p->llama_probe = false; /* a named call: other keys are skipped, never turned into content */
}

static void end_call(recipe_parser *p) {
    if (!p->call_open) return;
    if (!p->call_had_args) emit_text(p, RECIPE_EV_TOOL_ARGS, "{}", 2);
    ev_rec *r = new_rec(p);
    if (r) {
        r->ev.type = RECIPE_EV_TOOL_END;
        r->ev.index = p->n_tools - 1;
    }
    p->call_open = false;
}

/* emit [0,k) of the pending text as `t`, then consume it */
static void emit_consume(recipe_parser *p, recipe_event_type t, size_t k) {
    emit_text(p, t, p->in.data + p->pos, k);
    consume(p, k);
}

static void set_mode(recipe_parser *p, pmode m) { p->mode = m; }

static void start_tools(recipe_parser *p) {
    switch (p->kind) {
    case RECIPE_PARSER_DEEPSEEK_R1:
    case RECIPE_PARSER_DEEPSEEK_V3:
    case RECIPE_PARSER_DEEPSEEK_V31: set_mode(p, DS_EXPECT); break;
    case RECIPE_PARSER_HERMES:
        p->after_value = HE_CLOSE;
        set_mode(p, W_OPEN);
        break;
    case RECIPE_PARSER_LLAMA3:
        p->after_value = LL_NEXT;
        set_mode(p, W_OPEN);
        break;
    case RECIPE_PARSER_MISTRAL: set_mode(p, MI_START); break;
    default: set_mode(p, M_AFTER);
    }
}

/* ---------------------------------------------------------------- JSON value scanner */

/* Scans a JSON value incrementally; returns bytes consumed, *done when it ended. */
static size_t scan_value(recipe_parser *p, const char *s, size_t n, bool *done) {
    *done = false;
    size_t i = 0;
    for (; i < n; i++) {
        char c = s[i];
        if (!p->v_started) {
            p->v_started = true;
            if (c == '{' || c == '[') p->v_depth = 1;
            else if (c == '"') p->v_str = true, p->v_depth = 0;
            else p->v_scalar = true;
            continue;
        }
        if (p->v_str) {
            if (p->v_esc) p->v_esc = false;
            else if (c == '\\') p->v_esc = true;
            else if (c == '"') {
                p->v_str = false;
                if (p->v_depth == 0) {
                    *done = true;
                    return i + 1;
                }
            }
            continue;
        }
        if (p->v_scalar) {
            if (c == ',' || c == '}' || c == ']' || is_ws(c)) {
                *done = true;
                return i;
            }
            continue;
        }
        if (c == '"') p->v_str = true;
        else if (c == '{' || c == '[') p->v_depth++;
        else if (c == '}' || c == ']') {
            if (--p->v_depth == 0) {
                *done = true;
                return i + 1;
            }
        }
    }
    if (p->final) *done = true;
    return i;
}

static void value_reset(recipe_parser *p) {
    p->v_started = p->v_str = p->v_esc = p->v_scalar = p->v_is_string = false;
    p->v_depth = 0;
}

/* Emits argument text (or buffers it until the name is known). */
static void args_out(recipe_parser *p, const char *s, size_t n) {
    if (p->call_open) emit_text(p, RECIPE_EV_TOOL_ARGS, s, n);
    else rb_put(&p->pend_args, s, n);
}

static void args_from_string(recipe_parser *p, const char *s, size_t n) {
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY, NULL);
    if (json_is_string(v)) args_out(p, json_string_value(v), json_string_length(v));
    json_decref(v);
}

/* ---------------------------------------------------------------- mode handlers */

/* Each returns true if it consumed input or changed mode. */
static bool h_start(recipe_parser *p, const char *s, size_t n) {
    size_t w = skip_ws(s, n);
    if (p->think_start && p->think_allowed) {
        int st = starts(s + w, n - w, p->think_start);
        if (st == 1) {
            p->pos += w + strlen(p->think_start);
            p->think_allowed = false;
            set_mode(p, M_REASON);
            return true;
        }
        if ((st == -1 || w == n) && !p->final) return false;
    }
    if (p->kind == RECIPE_PARSER_LLAMA3 && p->tool_start != k_none) {
        if (w < n && s[w] == '{') {
            p->llama_probe = true;
            set_mode(p, W_OPEN);
            p->after_value = LL_NEXT;
            consume(p, w);
            return true;
        }
        if (w == n && !p->final) return false;
    }
    p->think_allowed = false;
    set_mode(p, M_CONTENT);
    return true;
}

static bool h_reason(recipe_parser *p, const char *s, size_t n) {
    if (!p->reason_started) { /* a start tag repeated by the model after a forced-open prompt */
        size_t w = skip_ws(s, n);
        int st = starts(s + w, n - w, p->think_start);
        if (st == 1) {
            p->pos += w + strlen(p->think_start);
            p->reason_started = true;
            return true;
        }
        if ((st == -1 || w == n) && !p->final) return false;
        p->reason_started = true;
    }
    size_t ml, i = find(s, n, p->think_end, &ml);
    if (i < n) {
        emit_consume(p, RECIPE_EV_REASONING, i);
        p->pos += ml;
        p->think_allowed = false;
        set_mode(p, M_START);
        return true;
    }
    const char *ends[] = {p->think_end, NULL};
    size_t k = p->final ? n : n - hold_len(s, n, ends);
    emit_consume(p, RECIPE_EV_REASONING, k);
    return k > 0;
}

static bool h_content(recipe_parser *p, const char *s, size_t n) {
    size_t ml, i = find_any(s, n, p->tool_start, &ml);
    if (i < n) {
        size_t e = i;
        while (e > 0 && is_ws(s[e - 1])) e--;
        emit_consume(p, RECIPE_EV_TEXT, e);
        p->pos += i - e; /* whitespace right before a call is dropped */
        start_tools(p);
        consume(p, ml); /* the marker is kept in `raw` in case no call parses */
        return true;
    }
    size_t k = n;
    if (!p->final) {
        k = n - hold_len(s, n, p->tool_start);
        if (p->tool_start[0])
            while (k > 0 && is_ws(s[k - 1])) k--;
    }
    emit_consume(p, RECIPE_EV_TEXT, k);
    return k > 0;
}

static bool h_after(recipe_parser *p, const char *s, size_t n) {
    size_t ml, i = find_any(s, n, p->tool_start, &ml);
    if (i < n) {
        consume(p, i + ml);
        start_tools(p);
        return true;
    }
    size_t k = p->final ? n : n - hold_len(s, n, p->tool_start);
    consume(p, k);
    return k > 0;
}

/* Text up to `end_markers`, holding back a possible marker start (and trailing
 * whitespace when trim); emitted as arguments. Returns the marker index found or -1. */
static int args_until(recipe_parser *p, const char *s, size_t n, const char *const *ends, bool trim, size_t *mlen,
                      bool *progress) {
    size_t ml, i = find_any(s, n, ends, &ml);
    if (i < n) {
        size_t e = i;
        if (trim)
            while (e > 0 && is_ws(s[e - 1])) e--;
        args_out(p, s, e);
        consume(p, i);
        *mlen = ml;
        *progress = true;
        for (int k = 0; ends[k]; k++)
            if (strlen(ends[k]) == ml && !memcmp(s + i, ends[k], ml)) return k;
        return 0;
    }
    size_t k = n;
    if (!p->final) {
        k = n - hold_len(s, n, ends);
        if (trim)
            while (k > 0 && is_ws(s[k - 1])) k--;
    }
    args_out(p, s, k);
    consume(p, k);
    *progress = k > 0;
    return -1;
}

static bool h_deepseek(recipe_parser *p, const char *s, size_t n) {
    static const char *const call_end[] = {DS_CALL_END_M, NULL};
    /* the closing fence: on its own line, or glued to the call-end marker */
    static const char *const fence[] = {"\n```", "```" DS_CALL_END_M, NULL};
    static const char *const sep[] = {DS_SEP, NULL};
    static const char *const nl[] = {"\n", NULL};
    bool prog = false;
    size_t ml;
    switch (p->mode) {
    case DS_EXPECT: {
        size_t w = skip_ws(s, n);
        int a = starts(s + w, n - w, DS_CALL_BEGIN), b = starts(s + w, n - w, DS_CALLS_END);
        if (a == 1) {
            consume(p, w + strlen(DS_CALL_BEGIN));
            set_mode(p, DS_NAME);
            p->name.len = 0;
            return true;
        }
        if (b == 1) {
            consume(p, w + strlen(DS_CALLS_END));
            set_mode(p, M_AFTER);
            return true;
        }
        if ((a == -1 || b == -1 || w == n) && !p->final) return false;
        if (w == n) return false;
        consume(p, w); /* a missing per-call begin marker is tolerated (llama.cpp) */
        set_mode(p, DS_NAME);
        p->name.len = 0;
        return true;
    }
    case DS_NAME: {
        size_t i = find_any(s, n, sep, &ml);
        if (i == n) {
            if (p->final) return false;
            size_t k = n - hold_len(s, n, sep);
            if (find(s, k, "<", NULL) < k) { /* SGLang: no '<' in a name: not a call */
                set_mode(p, M_AFTER);
                return true;
            }
            rb_put(&p->name, s, k);
            consume(p, k);
            return k > 0;
        }
        if (find(s, i, "<", NULL) < i) { /* the same rule when the separator is already here */
            set_mode(p, M_AFTER);
            return true;
        }
        rb_put(&p->name, s, i);
        consume(p, i + ml);
        if (p->kind == RECIPE_PARSER_DEEPSEEK_V31) {
            size_t a = 0, b = p->name.len;
            while (a < b && is_ws(p->name.data[a])) a++;
            while (b > a && is_ws(p->name.data[b - 1])) b--;
            begin_call(p, p->name.data + a, b - a);
            set_mode(p, DS_ARGS_RAW);
        } else {
            p->name.len = 0; /* the type word ("function") */
            set_mode(p, DS_V3_NAME);
        }
        return true;
    }
    case DS_V3_NAME: {
        size_t i = find_any(s, n, nl, &ml);
        if (i == n && !p->final) {
            /* names never contain a fence or marker; keep waiting for the newline */
            rb_put(&p->name, s, n);
            consume(p, n);
            return n > 0;
        }
        rb_put(&p->name, s, i);
        consume(p, i < n ? i + 1 : i);
        size_t a = 0, b = p->name.len;
        while (a < b && is_ws(p->name.data[a])) a++;
        while (b > a && is_ws(p->name.data[b - 1])) b--;
        begin_call(p, p->name.data + a, b - a);
        set_mode(p, DS_V3_FENCE);
        return true;
    }
    case DS_V3_FENCE: {
        size_t w = skip_ws(s, n);
        int f = starts(s + w, n - w, "```json");
        int g = starts(s + w, n - w, "```");
        if (f == 1 || (g == 1 && f == 0)) {
            size_t k = w + (f == 1 ? 7 : 3);
            while (k < n && (s[k] == ' ' || s[k] == '\t')) k++;
            if (k < n && s[k] == '\r') k++;
            if (k == n && !p->final) return false;
            if (k < n && s[k] == '\n') k++;
            consume(p, k);
            set_mode(p, DS_ARGS_FENCED);
            return true;
        }
        if ((f == -1 || w == n) && !p->final) return false;
        consume(p, w);
        set_mode(p, DS_ARGS_RAW); /* no fence: raw JSON up to the call-end marker */
        return true;
    }
    case DS_ARGS_FENCED: {
        int k = args_until(p, s, n, fence, true, &ml, &prog);
        if (k >= 0) {
            consume(p, k == 0 ? ml : 3);
            set_mode(p, DS_CALL_END);
            return true;
        }
        return prog;
    }
    case DS_ARGS_RAW: {
        int k = args_until(p, s, n, call_end, true, &ml, &prog);
        if (k >= 0) {
            consume(p, ml);
            end_call(p);
            set_mode(p, DS_EXPECT);
            return true;
        }
        return prog;
    }
    case DS_CALL_END: {
        size_t w = skip_ws(s, n);
        int a = starts(s + w, n - w, DS_CALL_END_M);
        if ((a == -1 || w == n) && !p->final) return false;
        consume(p, a == 1 ? w + strlen(DS_CALL_END_M) : w);
        end_call(p);
        set_mode(p, DS_EXPECT);
        return true;
    }
    default: return false;
    }
}

static void wrapper_done(recipe_parser *p) {
    end_call(p);
    p->pend_args.len = 0;
    p->llama_probe = false;
    set_mode(p, p->after_value);
}

/* Llama 3: the output started with '{' but it is not a tool call: it is content. */
static void llama_abort(recipe_parser *p) {
    emit_text(p, RECIPE_EV_TEXT, p->raw.data, p->raw.len);
    p->raw.len = 0;
    p->llama_probe = false;
    p->pend_args.len = 0;
    set_mode(p, M_PLAIN);
}

static bool h_wrapper(recipe_parser *p, const char *s, size_t n) {
    size_t w = skip_ws(s, n);
    switch (p->mode) {
    case W_OPEN:
        if (w == n) {
            if (p->final) set_mode(p, M_AFTER);
            return p->final;
        }
        if (s[w] != '{') {
            if (p->llama_probe) llama_abort(p);
            else set_mode(p, M_AFTER);
            return true;
        }
        consume(p, w + 1);
        p->pend_args.len = 0;
        set_mode(p, W_KEY);
        return true;
    case W_KEY: {
        if (w == n) {
            consume(p, w);
            return w > 0;
        }
        if (s[w] == ',') {
            consume(p, w + 1);
            return true;
        }
        if (s[w] == '}') {
            consume(p, w + 1);
            if (p->pend_args.len && !p->call_open) { /* arguments but no name: not a call */
                if (p->llama_probe) {
                    llama_abort(p);
                    return true;
                }
            }
            wrapper_done(p);
            return true;
        }
        if (s[w] != '"') {
            if (p->llama_probe) llama_abort(p);
            else wrapper_done(p);
            return true;
        }
        size_t i = w + 1;
        bool esc = false;
        for (; i < n; i++) {
            if (esc) esc = false;
            else if (s[i] == '\\') esc = true;
            else if (s[i] == '"') break;
        }
        if (i == n) {
            if (p->final && p->llama_probe) llama_abort(p);
            return false;
        }
        size_t kl = i - w - 1;
        snprintf(p->key, sizeof p->key, "%.*s", (int)(kl < sizeof p->key ? kl : sizeof p->key - 1), s + w + 1);
        if (kl >= sizeof p->key) p->key[0] = '?';
        p->key_is_name = !strcmp(p->key, "name");
        p->key_is_args = !strcmp(p->key, "arguments") || !strcmp(p->key, "parameters");
        if (p->llama_probe && !p->key_is_name && !p->key_is_args && strcmp(p->key, "type") && strcmp(p->key, "id")) {
            consume(p, i + 1);
            llama_abort(p);
            return true;
        }
        consume(p, i + 1);
        set_mode(p, W_COLON);
        return true;
    }
    case W_COLON:
        if (w == n) {
            consume(p, w);
            return w > 0;
        }
        consume(p, w + (s[w] == ':'));
        set_mode(p, W_VALUE);
        value_reset(p);
        return true;
    case W_VALUE:
        if (w == n) {
            consume(p, w);
            return w > 0;
        }
        consume(p, w);
        value_reset(p);
        p->v_start = p->pos;
        p->v_is_string = s[w] == '"';
        set_mode(p, W_SCAN);
        return true;
    case W_SCAN: {
        bool done;
        size_t k = scan_value(p, s, n, &done);
        bool stream_args = p->key_is_args && !p->v_is_string;
        if (stream_args) args_out(p, s, k);
        consume(p, k);
        if (!done) return k > 0;
        const char *v = p->in.data + p->v_start;
        size_t vl = p->pos - p->v_start;
        if (p->key_is_name) {
            json_t *j = json_loadb(v, vl, JSON_DECODE_ANY, NULL);
            if (json_is_string(j) && !p->call_open) {
                begin_call(p, json_string_value(j), json_string_length(j));
                if (p->pend_args.len) {
                    emit_text(p, RECIPE_EV_TOOL_ARGS, p->pend_args.data, p->pend_args.len);
                    p->pend_args.len = 0;
                }
            }
            json_decref(j);
        } else if (p->key_is_args && p->v_is_string) args_from_string(p, v, vl);
        set_mode(p, W_KEY);
        return true;
    }
    case HE_CLOSE: {
        int a = starts(s + w, n - w, "</tool_call>");
        if ((a == -1 || w == n) && !p->final) return false;
        consume(p, a == 1 ? w + 12 : w);
        set_mode(p, M_AFTER);
        return true;
    }
    case LL_NEXT:
        if (w == n && !p->final) return false;
        if (w < n && s[w] == ';') {
            consume(p, w + 1);
            set_mode(p, W_OPEN);
            return true;
        }
        set_mode(p, M_AFTER);
        return true;
    case MI_NEXT:
        if (w == n && !p->final) return false;
        if (w < n && s[w] == ',') {
            consume(p, w + 1);
            set_mode(p, W_OPEN);
            return true;
        }
        consume(p, w < n && s[w] == ']' ? w + 1 : w);
        set_mode(p, M_AFTER);
        return true;
    default: return false;
    }
}

static bool h_mistral(recipe_parser *p, const char *s, size_t n) {
    static const char *const name_end[] = {"[ARGS]", "[CALL_ID]", "{", NULL};
    static const char *const args_m[] = {"[ARGS]", NULL};
    size_t w = skip_ws(s, n);
    switch (p->mode) {
    case MI_START:
        if (w == n && !p->final) return false;
        if (w < n && s[w] == '[') { /* old format: a JSON array of {"name","arguments"} */
            consume(p, w + 1);
            p->after_value = MI_NEXT;
            set_mode(p, W_OPEN);
            return true;
        }
        consume(p, w);
        p->name.len = 0;
        p->callid.len = 0;
        set_mode(p, MI_NAME);
        return true;
    case MI_NAME: {
        size_t ml, i = find_any(s, n, name_end, &ml);
        if (i == n) {
            size_t k = p->final ? n : n - hold_len(s, n, name_end);
            rb_put(&p->name, s, k);
            consume(p, k);
            if (p->final) set_mode(p, M_AFTER);
            return k > 0 || p->final;
        }
        rb_put(&p->name, s, i);
        bool callid = s[i] == '[' && ml == 9;
        consume(p, s[i] == '{' ? i : i + ml);
        size_t a = 0, b = p->name.len;
        while (a < b && is_ws(p->name.data[a])) a++;
        while (b > a && is_ws(p->name.data[b - 1])) b--;
        memmove(p->name.data, p->name.data + a, b - a);
        p->name.len = b - a;
        if (callid) {
            set_mode(p, MI_CALLID);
            return true;
        }
        begin_call(p, p->name.data, p->name.len);
        value_reset(p);
        set_mode(p, MI_ARGS);
        return true;
    }
    case MI_CALLID: {
        size_t ml, i = find_any(s, n, args_m, &ml);
        if (i == n) {
            size_t k = p->final ? n : n - hold_len(s, n, args_m);
            rb_put(&p->callid, s, k);
            consume(p, k);
            if (p->final) set_mode(p, M_AFTER);
            return k > 0 || p->final;
        }
        rb_put(&p->callid, s, i);
        consume(p, i + ml);
        while (p->callid.len && is_ws(p->callid.data[p->callid.len - 1])) p->callid.len--;
        begin_call(p, p->name.data, p->name.len);
        value_reset(p);
        set_mode(p, MI_ARGS);
        return true;
    }
    case MI_ARGS: {
        if (!p->v_started) {
            if (w == n) {
                if (p->final) {
                    end_call(p);
                    set_mode(p, M_AFTER);
                    return true;
                }
                consume(p, w);
                return w > 0;
            }
            consume(p, w);
            s += w, n -= w;
        }
        bool done;
        size_t k = scan_value(p, s, n, &done);
        args_out(p, s, k);
        consume(p, k);
        if (done) {
            end_call(p);
            set_mode(p, M_AFTER);
            return true;
        }
        return k > 0;
    }
    default: return false;
    }
}

static bool step(recipe_parser *p) {
    const char *s = p->in.data + p->pos;
    size_t n = p->lim - p->pos;
    switch (p->mode) {
    case M_START: return h_start(p, s, n);
    case M_REASON: return h_reason(p, s, n);
    case M_CONTENT: return h_content(p, s, n);
    case M_PLAIN: emit_consume(p, RECIPE_EV_TEXT, n); return n > 0;
    case M_AFTER: return h_after(p, s, n);
    case DS_EXPECT:
    case DS_NAME:
    case DS_V3_NAME:
    case DS_V3_FENCE:
    case DS_ARGS_FENCED:
    case DS_ARGS_RAW:
    case DS_CALL_END: return h_deepseek(p, s, n);
    case W_OPEN:
    case W_KEY:
    case W_COLON:
    case W_VALUE:
    case W_SCAN:
    case HE_CLOSE:
    case LL_NEXT:
    case MI_NEXT: return h_wrapper(p, s, n);
    case MI_START:
    case MI_NAME:
    case MI_CALLID:
    case MI_ARGS: return h_mistral(p, s, n);
    }
    return false;
}

/* ---------------------------------------------------------------- public API */

recipe_parser *recipe_parser_new(recipe_parser_kind kind, unsigned flags) {
    if ((unsigned)kind >= RECIPE_PARSER_COUNT) return NULL;
    recipe_parser *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->kind = kind;
    p->flags = flags;
    if (rb_reserve(&p->in, 256) || rb_reserve(&p->evbuf, 256)) { /* never NULL: pointer arithmetic on it */
        recipe_parser_free(p);
        return NULL;
    }
    (void)recipe_parser_think_markers(kind, &p->think_start, &p->think_end);
    switch (kind) {
    case RECIPE_PARSER_DEEPSEEK_R1:
    case RECIPE_PARSER_DEEPSEEK_V3:
    case RECIPE_PARSER_DEEPSEEK_V31: p->tool_start = k_ds_start; break;
    case RECIPE_PARSER_HERMES: p->tool_start = k_hermes_start; break;
    case RECIPE_PARSER_LLAMA3: p->tool_start = k_llama_start; break;
    case RECIPE_PARSER_MISTRAL: p->tool_start = k_mistral_start; break;
    default: p->tool_start = k_none;
    }
    if (flags & RECIPE_PARSER_NO_TOOLS) p->tool_start = k_none;
    p->think_allowed = p->think_start != NULL;
    p->mode = (flags & RECIPE_PARSER_IN_REASONING) && p->think_start ? M_REASON : M_START;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    p->seed = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uintptr_t)p);
    return p;
}

void recipe_parser_set_id_seed(recipe_parser *p, uint64_t seed) { p->seed = seed; }

bool recipe_parser_failed(const recipe_parser *p) { return p->failed; }

int recipe_parser_tool_calls(const recipe_parser *p) { return p->n_tools; }

void recipe_parser_free(recipe_parser *p) {
    if (!p) return;
    recipe_buf_free(&p->in);
    recipe_buf_free(&p->evbuf);
    recipe_buf_free(&p->raw);
    recipe_buf_free(&p->name);
    recipe_buf_free(&p->callid);
    recipe_buf_free(&p->pend_args);
    free(p->recs);
    free(p->out);
    free(p);
}

static void run(recipe_parser *p, const recipe_event **events, size_t *n_events) {
    p->n_recs = 0;
    p->evbuf.len = 0;
    p->lim = p->final ? p->in.len : p->pos + utf8_complete(p->in.data + p->pos, p->in.len - p->pos);
    for (int guard = 0; guard < 1 << 30; guard++)
        if (!step(p)) break;
    if (p->final) {
        /* an unfinished call is closed; if no call was parsed, the tool text is content */
        if (p->call_open) end_call(p);
        if (p->n_tools == 0 && p->raw.len) {
            emit_text(p, RECIPE_EV_TEXT, p->raw.data, p->raw.len);
            p->raw.len = 0;
        }
    }
    /* the buffers' out-of-memory flags are sticky: one check here covers every append above */
    if (p->in.failed || p->evbuf.failed || p->raw.failed || p->name.failed || p->callid.failed || p->pend_args.failed)
        p->failed = true;
    /* compact the pending input, but keep a string-typed JSON value that is still open */
    size_t keep_from = p->pos;
    if (p->mode == W_SCAN && p->v_start < keep_from) keep_from = p->v_start;
    if (keep_from > 0) {
        memmove(p->in.data, p->in.data + keep_from, p->in.len - keep_from);
        p->in.len -= keep_from;
        p->pos -= keep_from;
        if (p->mode == W_SCAN) p->v_start -= keep_from;
    }
    if (p->cap_out < p->n_recs) {
        recipe_event *o = realloc(p->out, p->n_recs * sizeof *o);
        if (!o) {
            p->failed = true;
            *events = NULL;
            *n_events = 0;
            return;
        }
        p->out = o;
        p->cap_out = p->n_recs;
    }
    for (size_t i = 0; i < p->n_recs; i++) {
        recipe_event *e = &p->out[i];
        *e = p->recs[i].ev;
        if (e->type == RECIPE_EV_TOOL_BEGIN) {
            e->id = p->evbuf.data + p->recs[i].id_off;
            e->name = p->evbuf.data + p->recs[i].name_off;
        } else if (e->type != RECIPE_EV_TOOL_END) e->text = p->evbuf.data + p->recs[i].text_off;
    }
    *events = p->out;
    *n_events = p->n_recs;
}

void recipe_parser_feed(recipe_parser *p, const char *text, size_t len, const recipe_event **events, size_t *n_events) {
    if (len && !p->final) rb_put(&p->in, text, len);
    run(p, events, n_events);
}

void recipe_parser_finish(recipe_parser *p, const recipe_event **events, size_t *n_events) {
    p->final = true;
    run(p, events, n_events);
}
