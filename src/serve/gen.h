/* gen.h - the API-independent generation core of the server: one client
 * request (any API) -> prompt tokens -> n engine requests -> per-choice
 * output deltas -> finish reasons and aggregated usage.
 *
 * The protocol layer (api_request.c: every API's body parsed once by recipe)
 * fills a gen_params;
 * the server calls gen_job_start() to build the prompt (chat template, then
 * tokenize; user text is never parsed for special tokens) and submit the n
 * engine requests, feeds engine readiness to gen_job_read(), and hands the
 * deltas to the protocol layer's formatter (recipe through api_output.c).
 * Nothing here knows HTTP or JSON wire formats (the chat template reads recipe's canonical
 * request).
 *
 * Ownership: gen_params owns every pointer in it (gen_params_free). A gen_job
 * owns its params (moved in), the prompt ids, the choices and, until each is
 * finished or released, their engine requests (gen_job_free releases what is
 * still running). All calls for one job come from one thread at a time: gen_job_prepare on a
 * prompt worker (prep.c), everything after it on the HTTP loop. */
#ifndef CINFER_SERVE_GEN_H
#define CINFER_SERVE_GEN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cinfer/engine.h"
#include "serve/gen_defaults.h"
#include "serve/serve_error.h"
#include "serve/structured.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

typedef enum { GEN_CHAT = 0, GEN_COMPLETION } gen_kind;

typedef struct gen_params {
    gen_kind kind;
    /* chat: the canonical request the template reads directly (chat_template_render_req; borrowed: it
     * outlives the job - the server's api_job owns it; a Responses continuation's earlier turns are
     * merged into it) */
    const recipe_request *req;
    char *prompt; /* completion: prompt text (owned) or NULL */
    size_t prompt_len;
    int32_t *prompt_ids; /* completion: prompt as token ids (owned) or NULL */
    int32_t n_prompt_ids;
    char *model; /* requested model name (owned), NULL when absent */
    int32_t max_tokens; /* 0: as many as the context allows */
    int32_t n; /* choices, >= 1 */
    cinfer_sampling sampling; /* .bias points into `bias` */
    cinfer_logit_bias *bias; /* owned */
    bool has_seed;
    char **stop; /* owned, non-empty strings */
    int32_t n_stop;
    bool logprobs; /* per-token logprobs in the response */
    int32_t top_logprobs; /* alternatives per token, 0..20 */
    bool stream, include_usage;
    bool ignore_eos;
    bool swa_exact; /* cinfer.swa_replay false: no bounded replay (window models) */
    int32_t min_tokens; /* vLLM: EOS / stop ids not sampled before this many tokens (0: off) */
    bool include_stop_str; /* vLLM include_stop_str_in_output */
    bool keep_special; /* vLLM skip_special_tokens = false */
    int32_t *stop_ids; /* vLLM stop_token_ids (owned) */
    int32_t n_stop_ids;
    int32_t priority; /* vLLM extension: lower = scheduled first (default 0) */
    int32_t traffic_class; /* cinfer_traffic_class, or TRAFFIC_UNSET (serve/traffic.h) until resolved */
    cinfer_speculative speculative; /* cinfer.speculative (serve/spec_opts.h); zero: the server's default */
    char *cache_salt; /* owned or NULL */
    char *user; /* owned or NULL (logged only) */
    /* chat: text appended after the rendered prompt (a forced tool-call opener, docs/serve.md), owned
     * or NULL. Tokenized with special-token parsing except bytes [suffix_plain_from, suffix_plain_to)
     * (a tool name: user text, never control tokens). When the rendered prompt ends with "<think>"
     * (an open reasoning block), suffix_think (owned or NULL) is put before it. */
    char *prompt_suffix, *suffix_think;
    size_t suffix_plain_from, suffix_plain_to;
    bool keep_ids; /* accumulate the emitted ids (choices[].tokens) even without logprobs */
    /* chat: reasoning budget (docs/serve.md "Reasoning budget"), set by the protocol layer
     * (api_think.c): with think_budget >= 0 and an end marker, each engine request gets the
     * budget and the markers, and starts inside the block when the rendered prompt (before
     * prompt_suffix) ends with think_start_text and no suffix_think closed it. */
    /* structured output (docs/serve.md "Structured outputs"), set by the protocol layer
     * (structured.c): compiled on the prompt worker by gen_job_prepare through gm->grammars (the
     * cache; limits gm->grammar_limits; a failure is a 400 naming grammar.param), one matcher per
     * choice at submit. kind 0: unconstrained. */
    structured_spec grammar;
    int32_t think_budget; /* < 0: none (gen_params_init) */
    /* cinfer.resume (serve/resume.h): a stream continued from another worker. resume_ids (owned) are
     * output already generated (and sent to the client: resume_text_bytes bytes of its text) */
    bool has_resume;
    int32_t *resume_ids;
    int32_t n_resume_ids;
    int64_t resume_text_bytes;
    char resume_id[64]; /* the response id to keep ("" : the server's own) */
    int64_t resume_created; /* 0: now */
    int32_t think_start[CINFER_MAX_THINK_MARKER], think_end[CINFER_MAX_THINK_MARKER];
    int32_t n_think_start, n_think_end;
    char think_start_text[32];
} gen_params;

void gen_params_init(gen_params *p);
void gen_params_free(gen_params *p);

/* What the core needs from the loaded model (borrowed; outlives every job). */
typedef struct gen_model {
    cinfer_engine *engine;
    const tokenizer *tok;
    const chat_template *tmpl;
    int32_t ctx; /* positions per request (prompt + completion) */
    char *bos_text, *eos_text; /* template variables bos_token / eos_token (gen_model_init, owned) */
    char **special; /* texts of CONTROL/UNKNOWN tokens (gen_model_init) */
    int32_t n_special;
    cinfer_grammar_cache *grammars; /* compiled grammars by spec hash (gen_model_init, owned; thread-safe) */
    const cinfer_grammar_vocab *gvocab; /* the engine's (cinfer_engine_grammar_vocab) */
    cinfer_grammar_limits grammar_limits; /* compile time / size limits (zeros: the library's defaults) */
    gen_defaults defaults; /* the model's sampling defaults (zero: none; set before serve_run) */
} gen_model;

/* Fills the derived fields (bos/eos texts, special token texts) of a
 * gen_model whose engine, tok, tmpl and ctx are set. */
int gen_model_init(gen_model *gm, cf_err *err);
void gen_model_free(gen_model *gm);

typedef struct gen_choice {
    uint64_t id; /* engine request id; 0 once finished or released */
    int32_t index;
    cinfer_output out; /* the latest read (buffers reused) */
    cinfer_finish finish; /* NONE while running */
    int32_t stop_string; /* finish STOP by a stop string: its index in p.stop; else -1 */
    int32_t n_tokens; /* completion tokens emitted so far */
    size_t text_before; /* bytes of text emitted before the latest read (stream offsets) */
    size_t text_total; /* bytes of text emitted so far */
    /* accumulated output for non-streaming responses */
    char *text;
    size_t text_len, text_cap;
    int32_t *tokens; /* emitted ids (only when logprobs or p.keep_ids) */
    float *logprobs;
    int32_t *top_ids; /* [n_acc][p.top_logprobs] alternatives (only when top_logprobs) */
    float *top_lps;
    int32_t n_acc, acc_cap;
    char error[160];
} gen_choice;

typedef struct gen_job {
    gen_params p;
    int32_t *prompt; /* prompt token ids (owned) */
    int32_t n_prompt;
    int32_t n_suffix; /* trailing prompt tokens that came from p.prompt_suffix / suffix_think */
    bool suffix_think; /* p.suffix_think was put before the suffix */
    int32_t max_tokens; /* effective */
    gen_choice *choices; /* p.n of them */
    int32_t n_done;
    cinfer_usage usage; /* prompt counted once, completion summed; final when n_done == p.n */
    int32_t new_tokens; /* tokens in the latest gen_job_read (for latency metrics) */
    cinfer_grammar *grammar; /* compiled p.grammar (a reference), NULL: unconstrained */
    /* prefill/decode handoff (serve/handoff.h), given to choice 0's engine request at submit:
     * kv_export a reference (dropped by gen_job_free), kv_import owned until the engine takes it */
    cinfer_kv_export *kv_export;
    void *kv_import;
    int32_t n_kv_import;
    const void *kv_import_window; /* window models: the snapshot after the records, inside kv_import */
    size_t kv_import_window_bytes;
    void (*kv_import_release)(void *owner, void *kv_import); /* how kv_import is given back (NULL: free) */
    void *kv_import_owner;
    bool grammar_cached; /* the compile was a cache hit (logs) */
    /* cinfer.resume (resume.c): the first n_resumed resume ids are prompt tail and counted output
     * (n_suffix includes them); resume_text (owned) is their text, fed to the output parsers with
     * the output discarded; then the first resume_skip bytes the engine produces (already sent by
     * the first worker) are discarded the same way. resume_client_bytes: bytes the client has. */
    int32_t n_resumed;
    char *resume_text;
    size_t resume_text_len, resume_skip;
    int64_t resume_client_bytes;
} gen_job;

/* Renders / tokenizes the prompt described by *p, checks it against the
 * context, and submits p->n engine requests. *p is moved into the job (and
 * reset) whether or not this succeeds. On failure the job holds no engine
 * request and must still be freed with gen_job_free. */
int gen_job_start(gen_job *j, const gen_model *gm, gen_params *p, serve_error *err);
/* gen_job_start in two halves. prepare: renders and tokenizes the prompt and checks it against
 * the context (moves *p in, as gen_job_start); it reads gm only (the template, the tokenizer: both
 * immutable), so it may run on a worker thread while the HTTP loop goes on (server.c, prep.c).
 * submit: the n engine requests (the loop thread). Either failing leaves a job for gen_job_free. */
int gen_job_prepare(gen_job *j, const gen_model *gm, gen_params *p, serve_error *err);
int gen_job_submit(gen_job *j, const gen_model *gm, serve_error *err);

/* Reads choice c's pending output (non-blocking) into choices[c].out,
 * accumulating it when `accumulate`. Returns 1 when something was read, 0
 * when nothing was pending, -1 when the choice is not running. When the read
 * finishes the choice, its finish/usage are folded into the job. */
int gen_job_read(gen_job *j, const gen_model *gm, int32_t c, bool accumulate);

/* Index of the choice whose engine request is `id`, or -1. */
int32_t gen_job_find(const gen_job *j, uint64_t id);
/* Asks the engine to stop every running choice (they finish CANCELLED). */
void gen_job_cancel(gen_job *j, const gen_model *gm);
/* Releases running engine requests (without a final read) and frees all. */
void gen_job_free(gen_job *j, const gen_model *gm);
bool gen_job_done(const gen_job *j);

/* Renders a canonical request with the template (chat_template_render_req, no JSON messages) and tokenizes the result;
 * used by gen_job_start, POST /tokenize and count_tokens. *ids is malloc'd. */
int gen_req_prompt(const gen_model *gm, const recipe_request *req, bool add_generation_prompt, int32_t **ids,
                   int32_t *n_ids, serve_error *err);
/* Tokenizes text (user text: special tokens not parsed), BOS per the model when add_special. */
int gen_text_prompt(const gen_model *gm, const char *text, size_t len, bool add_special, int32_t **ids, int32_t *n_ids,
                    serve_error *err);

/* Whether the text of the last (up to 3) ids ends with `s` once trailing whitespace is dropped. */
bool gen_ids_end_with(const tokenizer *tok, const int32_t *ids, int32_t n, const char *s);

const char *gen_finish_name(cinfer_finish f); /* "stop", "length", "abort", "error", NULL for NONE */

#endif
