/* cinfer/engine.h - the serving engine: many requests through one model,
 * batched step by step on a dedicated engine thread.
 *
 * Model: cinfer_engine_submit() queues a request and returns its id; the
 * engine thread plans each step (src/engine/sched.h), runs ONE forward pass
 * over decode tokens and prefill chunks of every scheduled request, samples,
 * and appends each request's new token ids / text / finish reason to that
 * request's output queue. Readers drain a queue with cinfer_engine_read()
 * (blocking with a timeout, or not) from any thread; a server can instead
 * select() on cinfer_engine_fd() (an eventfd, readable when any request has
 * new output) and ask cinfer_engine_ready() which ones.
 *
 * Ownership: the engine borrows the model (cinfer/model.h) and the compute
 * thread pool (cinfer/threads.h) (both
 * must outlive it) and owns everything else: the KV block pool (sized by
 * kv_memory_bytes), the prefix cache, the request table, the thread, and
 * with kv_store_dir the persistent KV store's threads (docs/store.md).
 * A request lives until its final output (finished = true) has been read, or
 * until cinfer_engine_release() if the reader walks away; its id is invalid
 * afterwards. Every function is thread-safe; none waits for a forward pass
 * except cinfer_engine_read() with a timeout and cinfer_engine_destroy().
 *
 * Output conventions: a token that ends generation by EOS/EOG or by a stop
 * token id is counted in usage.completion_tokens but not emitted (neither its
 * id nor its text). A stop string is not part of the text (unless include_stop_str): text that could
 * still become a stop string is held back until it cannot; the token ids that
 * formed it are emitted. Which stop string ended a request is reported in
 * cinfer_output.stop_string. Tokens forced by a reasoning budget are emitted
 * like sampled ones. */
#ifndef CINFER_ENGINE_H
#define CINFER_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cinfer/grammar.h"
#include "cinfer/model.h"
#include "cinfer/threads.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cinfer_engine cinfer_engine;

/* Traffic classes (cinfer_request.traffic_class): they set how long the
 * persistent KV store keeps a request's blocks (docs/store.md). */
typedef enum cinfer_traffic_class {
    CINFER_TRAFFIC_DEFAULT = 0,
    CINFER_TRAFFIC_CHAT = 1,
    CINFER_TRAFFIC_AGENT = 2,
} cinfer_traffic_class;
#define CINFER_TRAFFIC_N 3

/* Speculative decoding (docs/engine.md "Speculative decoding"): a drafter
 * proposes up to k tokens per sequence, one forward pass verifies them all
 * (ragged batch, logits at every drafted position) and the longest accepted
 * prefix plus one token of the target is kept. Lossless: greedy output is
 * token for token the same as without speculation; sampled output has the
 * same distribution (not the same draws for a given seed). */
typedef enum cinfer_spec_drafter {
    CINFER_SPEC_DEFAULT = 0, /* in a request: the engine's default; in the options: off */
    CINFER_SPEC_OFF,
    CINFER_SPEC_NGRAM, /* prompt lookup: continue the latest match of the last n tokens (no weights) */
    CINFER_SPEC_DRAFT, /* a smaller model with the same vocabulary (cinfer_engine_options.draft_model) */
    CINFER_SPEC_MTP, /* the model's own MTP block (DeepSeek V3 next-n layers, V4 MTP): chained on its hidden state */
    CINFER_SPEC_DSPARK, /* DSpark-style block drafter (deepseek4 with dspark.* tensors): a whole block in one pass,
                         * conditioned on target layers' hidden states, with a confidence head */
} cinfer_spec_drafter;
#define CINFER_SPEC_N 6
#define CINFER_SPEC_MAX_K 16

typedef struct cinfer_speculative {
    int32_t drafter; /* cinfer_spec_drafter */
    int32_t k; /* most draft tokens per step, 1..CINFER_SPEC_MAX_K; 0: the default (options: 8) */
} cinfer_speculative;

/* Name of a drafter ("default", "off", "ngram", "draft", "mtp", "dspark"), or NULL; and back (-1: unknown). */
const char *cinfer_spec_drafter_name(int32_t drafter);
int32_t cinfer_spec_drafter_parse(const char *name);

/* Element type of the KV cache (`--kv-dtype`; docs/engine.md "KV cache element type"). */
typedef enum cinfer_kv_dtype {
    CINFER_KV_DEFAULT = 0, /* CINFER_KV_DTYPE_DEFAULT */
    CINFER_KV_F32,
    CINFER_KV_BF16,
    CINFER_KV_F16,
    CINFER_KV_Q8_0, /* GGUF Q8_0 blocks along the head dimension (head_dim a multiple of 32) */
} cinfer_kv_dtype;
#define CINFER_KV_DTYPE_DEFAULT CINFER_KV_F32
/* "default", "f32", "bf16", "f16", "q8_0", or NULL; and back ("f32".."q8_0"; -1: unknown). */
const char *cinfer_kv_dtype_name(int32_t t);
int32_t cinfer_kv_dtype_parse(const char *name);

/* Arithmetic of attention's dot products (cinfer_engine_options.attn_precision):
 * F32: f32 FMA. BF16: Q, K, V and the softmax weights rounded to bf16 and
 * multiplied with f32 sums (AMX tiles where usable, else AVX-512 BF16; f32
 * on CPUs with neither), softmax and merge in f32. Either is batch invariant;
 * they differ from each other by about 4e-3 of |V| (docs/kernels.md). */
typedef enum cinfer_attn_precision { CINFER_ATTN_F32 = 0, CINFER_ATTN_BF16 = 1 } cinfer_attn_precision;

typedef struct cinfer_engine_options {
    int32_t block_tokens; /* tokens per KV block (0: 16) */
    int64_t kv_memory_bytes; /* KV pool budget (0: 256 MiB) */
    int32_t kv_dtype; /* cinfer_kv_dtype of K/V in blocks, rings, the store and handoffs (0: the default).
                       * An architecture that cannot store it (MLA, DeepSeek V4: f32 only) fails create */
    int32_t max_batch_tokens; /* tokens per forward pass (0: 2048) */
    int32_t max_seqs; /* requests running at once (0: 64) */
    int32_t max_ctx; /* positions per request, prompt + generated (0: the model's training context) */
    bool sync_scheduling; /* true: plan, compute and process outputs one after another (no overlap) */
    /* Persistent KV block store (docs/store.md); all optional. */
    const char *kv_store_dir; /* NULL: no store. Made if missing; unusable: logged, serving goes on without */
    int64_t kv_store_quota_bytes; /* GC evicts least recently used objects beyond this (0: no quota) */
    bool kv_store_sync; /* fsync each object before publishing it */
    int64_t kv_store_retention_s[CINFER_TRAFFIC_N]; /* per class; 0: default 1 d, chat 7 d, agent 3 d */
    int64_t kv_store_swa_retention_s; /* > 0: window-state snapshots also go to the store (<dir>/swa) and live
                                       * this long; 0: not stored (models with window layers only) */
    int32_t kv_store_load_timeout_ms; /* give up waiting for a load (slow disk) and compute (0: 2000) */
    int32_t kv_store_gc_interval_s; /* background GC period (0: 300; < 0: no background GC) */
    const char *kv_store_key_file; /* HMAC-SHA256 key: objects are authenticated (docs/store.md); NULL: none.
                                       * Unusable key file (not regular, readable by others, < 32 bytes):
                                       * cinfer_engine_create fails */
    int32_t kv_store_close_timeout_ms; /* destroy waits this long for store I/O stuck in a syscall (0: 5000) */
    cinfer_speculative speculative; /* default for requests that do not choose (drafter 0: off) */
    int32_t spec_max_batch; /* no drafts in a step with more decoding requests than this (0: 3) */
    int32_t spec_step_drafts; /* drafted tokens per step, all requests together (0: 64) */
    int32_t spec_confidence; /* MTP and DSpark drafts: 0 (default) verify only the drafts whose confidence pays
                              * for their share of the step's measured cost (docs/engine.md "Confidence
                              * scheduling"; DSpark also cuts its block where the prefix survival falls below
                              * a threshold that rises with the decoding batch); < 0: verify every draft */
    const cinfer_model *draft_model; /* CINFER_SPEC_DRAFT's model (borrowed, outlives the engine), or NULL.
                                      * Checked at create: the same vocabulary (every token's bytes) as the
                                      * target, and a KV block no larger than the target's (its KV lives in
                                      * the same pool) */
    /* Window-state tier (models with sliding-window layers, docs/engine.md "Window state"): host memory
     * for snapshots of the window rings at block boundaries, separate from kv_memory_bytes. */
    int64_t swa_state_memory_bytes; /* 0: 256 MiB; < 0: no tier (prefix hits on window models start at 0) */
    double swa_state_ttl_s; /* seconds an unused snapshot lives (0: 300) */
    /* Bounded replay: a prefix hit without a snapshot recomputes only its last swa_replay_tokens tokens,
     * window layers clamped to the replay start (approximate); 0: the layout's default (128 where window
     * groups sit beside a compressed stream, else the largest window); < 0: off
     * (exact: from the last snapshot, else from the start) */
    int32_t swa_replay_tokens;
    /* Routed experts of MoE layers run through this executor (borrowed, outlives the engine), not in-process:
     * expert parallelism (docs/ep.md). NULL: in-process. cinfer_engine_create fails for a model without a
     * MoE executor hook (only deepseek2 has one). */
    const cinfer_moe_executor *moe_executor;
    /* true: bounded replay on or off by the model's layer groups (on where window groups sit beside a
     * compressed stream, i.e. DeepSeek V4; off for window + full attention, e.g. gemma2), with
     * swa_replay_tokens > 0 as W when on (0 or < 0: 128 for such layouts) */
    bool swa_replay_auto;
    int32_t attn_precision; /* cinfer_attn_precision (0: F32) */
} cinfer_engine_options;

typedef struct cinfer_logit_bias {
    int32_t token;
    float bias;
} cinfer_logit_bias;

typedef struct cinfer_sampling {
    float temperature; /* <= 0: greedy */
    int32_t top_k; /* <= 0: off */
    float top_p; /* >= 1: off */
    float min_p; /* <= 0: off */
    float repetition_penalty, presence_penalty, frequency_penalty; /* 1, 0, 0: off */
    const cinfer_logit_bias *bias; /* copied at submit */
    int32_t n_bias;
    uint64_t seed;
} cinfer_sampling;

/* KV records of one request's prompt blocks (prefill/decode handoff, docs/pd.md): a record is one
 * block as a persistent-store object (store_format.h layout, no MAC), so the store and the wire share
 * one format. Reference-counted: the engine writes records from its thread, the owner reads records
 * [0, cinfer_kv_export_ready()) from any thread (they never change once ready). */
typedef struct cinfer_kv_export cinfer_kv_export;

typedef struct cinfer_request {
    const int32_t *prompt; /* token ids, copied at submit */
    int32_t n_prompt; /* >= 1 */
    cinfer_sampling sampling;
    int32_t max_tokens; /* > 0; clipped to max_ctx - n_prompt (finish: length) */
    const int32_t *stop_tokens; /* extra stop token ids (copied) */
    int32_t n_stop_tokens;
    const char *const *stop_strings; /* NUL-terminated, non-empty (copied) */
    int32_t n_stop_strings;
    const void *cache_salt; /* prefix-cache isolation: different salts never share blocks */
    size_t cache_salt_len;
    int32_t traffic_class; /* cinfer_traffic_class: retention of its blocks in the store (unknown: default) */
    int32_t priority; /* lower value = more urgent */
    bool ignore_eos;
    bool swa_exact; /* window models: never resume a prefix hit by bounded replay (exact: from the last
                     * window-state snapshot or the start); false: the engine's swa_replay_tokens */
    int32_t min_tokens; /* EOS/EOG and stop_tokens cannot be sampled before this many generated tokens
                                 * (their logits are masked; stop strings still apply); <= 0: off */
    bool include_stop_str; /* a matched stop string is emitted as the end of the text (vLLM
                                 * include_stop_str_in_output) */
    bool keep_special; /* the text renders control tokens (vLLM skip_special_tokens = false) */
    bool want_logprobs; /* log-probability of each chosen token under the raw logits */
    int32_t top_logprobs; /* with want_logprobs: also the N most likely tokens at each position
                           * (0..CINFER_MAX_TOP_LOGPROBS; larger values are clipped) */
    /* Reasoning budget (docs/engine.md "Reasoning budget"), enforced when think_budget >= 0 and
     * n_think_end > 0: once think_budget generated tokens lie inside reasoning blocks (all blocks
     * together), the engine forces the think_end ids token by token instead of sampling. The
     * forced tokens are ordinary output (ids, text, logprobs under the raw logits, counted,
     * subject to max_tokens and stops). A block opens when the request starts inside one
     * (think_open: the prompt ended with the start marker) or when the generated ids end with
     * think_start; it closes when they end with think_end. */
    int32_t think_budget; /* < 0: not enforced (cinfer_request_default: -1); 0: close at once */
    const int32_t *think_start; /* start marker ids (copied), n_think_start 0..CINFER_MAX_THINK_MARKER */
    int32_t n_think_start;
    const int32_t *think_end; /* end marker ids (copied), n_think_end 0..CINFER_MAX_THINK_MARKER */
    int32_t n_think_end;
    bool think_open; /* generation starts inside a reasoning block */
    /* Structured output (docs/engine.md "Constrained decoding"): a matcher made with this engine's
     * vocabulary (cinfer_engine_grammar_vocab) at the state where generation starts. Each sampled
     * token is drawn from the tokens it allows (the mask is applied after logit bias and penalties;
     * temperature, top-k/p and min-p then see only allowed tokens), EOS/EOG only where the grammar
     * can end, and is accepted into it; when one token is allowed it is taken without sampling.
     * Ownership moves to the engine on a successful submit (freed with the request); after a failed
     * submit the caller still owns it. NULL: unconstrained. Not combinable with ignore_eos or a
     * reasoning budget (submit fails). */
    cinfer_grammar_matcher *grammar;
    /* With a trigger (bytes, copied; e.g. "<tool_call>"), the grammar is lazy: the output is free
     * until the generated bytes contain the trigger, constrained from the byte after it until the
     * grammar can end, then free again until the next trigger (the matcher rolled back to its start
     * each time). While free, a token that would complete the trigger with bytes the grammar cannot
     * start with is masked. NULL / 0: the whole output is constrained. */
    const char *grammar_trigger;
    size_t grammar_trigger_len;
    cinfer_speculative speculative; /* drafter 0 (CINFER_SPEC_DEFAULT): the engine's default */
    /* Prefill/decode handoff (docs/pd.md). kv_export: the engine appends a record for each full prompt
     * block once its KV is final (a reference is taken at submit, dropped when the request is freed).
     * kv_import: records of this prompt's leading blocks (another worker's export), verified and
     * installed into the prefix cache before the request is admitted, as a store load installs them;
     * a record that does not verify ends the import (the rest is computed). Ownership of kv_import
     * moves to the engine on a successful submit; the engine gives it back as soon as the records are
     * copied into KV blocks (or the request ends without importing): kv_import_release(
     * kv_import_owner, kv_import), called once from the engine thread (NULL: free(); a receive-buffer
     * pool recycles its buffers this way, docs/pd.md). NULL kv_import: none. */
    cinfer_kv_export *kv_export;
    void *kv_import;
    int32_t n_kv_import; /* records in kv_import (each cinfer_engine_kv_record_bytes() bytes) */
    /* Window models: the window-state snapshot at the end of those records (cinfer_engine_kv_window_bytes()
     * bytes, the export's cinfer_kv_export_window), inside kv_import's buffer (given back with it). Window
     * models install the records only with a snapshot that verifies; without one they compute. */
    const void *kv_import_window;
    size_t kv_import_window_bytes;
    void (*kv_import_release)(void *owner, void *kv_import);
    void *kv_import_owner;
} cinfer_request;

#define CINFER_MAX_TOP_LOGPROBS 20
#define CINFER_MAX_THINK_MARKER 16

/* Defaults: greedy sampling, max_tokens 16, think_budget -1, everything else off. */
cinfer_request cinfer_request_default(void);

typedef enum cinfer_finish {
    CINFER_FINISH_NONE = 0, /* still running */
    CINFER_FINISH_STOP, /* EOS/EOG, stop token, stop string */
    CINFER_FINISH_LENGTH, /* max_tokens or context limit */
    CINFER_FINISH_CANCELLED,
    CINFER_FINISH_ERROR,
} cinfer_finish;

typedef struct cinfer_usage {
    int32_t prompt_tokens;
    int32_t cached_tokens; /* prompt tokens found in the prefix cache (memory, then the store) at first admission */
    int32_t replayed_tokens; /* window models, bounded replay: cached prompt tokens recomputed to rebuild the
                              * window state (not in cached_tokens; prompt = cached + replayed + computed) */
    int32_t completion_tokens;
    int32_t accepted_draft_tokens; /* completion tokens that were drafted and accepted (speculative decoding) */
} cinfer_usage;

/* What one read returns: everything produced since the previous read. The
 * buffers belong to this struct and are reused by later reads (grown with
 * realloc); free them with cinfer_output_release(). Zero-initialise first. */
typedef struct cinfer_output {
    int32_t *tokens;
    float *logprobs; /* parallel to tokens when want_logprobs, else NULL */
    int32_t n_tokens;
    char *text; /* new UTF-8 text, NUL-terminated */
    size_t text_len;
    cinfer_finish finish; /* NONE until the request is done */
    int32_t stop_string; /* finish STOP by a stop string: its index in cinfer_request.stop_strings (the
                           * earliest occurrence; at equal offsets the lowest index); else -1 (EOS/EOG, a stop
                           * token id, any other finish, and while running) */
    cinfer_usage usage; /* filled when finished */
    char error[160]; /* message when finish == ERROR */
    int32_t n_top; /* alternatives per token (the request's top_logprobs), 0 if none */
    int32_t *top_ids; /* [n_tokens][n_top]: the most likely tokens, best first */
    float *top_logprobs; /* [n_tokens][n_top]: their log-probabilities under the raw logits */
    /* capacities (internal) */
    int32_t tok_cap;
    size_t text_cap;
    int32_t top_cap; /* entries (tokens x n_top) */
} cinfer_output;

void cinfer_output_release(cinfer_output *o);

/* Persistent store counters (all zero without a store). Load latency:
 * load_latency[i] counts loads (one per request that found blocks in the
 * store, submit to completion) that took <= 0.25 ms * 2^i, i < 11;
 * load_latency[11] the slower ones (not cumulative). */
#define CINFER_STORE_LATENCY_BUCKETS 12
typedef struct cinfer_store_stats {
    bool enabled; /* a store directory is configured and usable for reading */
    bool writable; /* writes are currently accepted (false while degraded) */
    uint64_t lookups; /* admissions that asked the store for more blocks */
    uint64_t hit_blocks, hit_tokens; /* blocks loaded and verified */
    uint64_t miss_blocks; /* chains ended by a missing object (one per lookup that stopped short) */
    uint64_t expired; /* objects found but past their expiry */
    uint64_t quarantined; /* objects that failed verification (moved to quarantine/) */
    uint64_t read_errors, write_errors;
    uint64_t bytes_read, bytes_written;
    uint64_t objects_written, writes_skipped; /* skipped: already published */
    uint64_t writes_dropped; /* write-back queue full (store too slow) or store not writable */
    int64_t writes_in_flight; /* writes queued or being written (a gauge) */
    uint64_t load_timeouts; /* requests that stopped waiting for a slow load */
    uint64_t degraded; /* transitions into a degraded state (each logged once) */
    uint64_t gc_runs, gc_deleted_expired, gc_deleted_lru;
    uint64_t loads; /* completed chain loads */
    double load_seconds; /* their total latency */
    uint64_t load_latency[CINFER_STORE_LATENCY_BUCKETS];
} cinfer_store_stats;

typedef struct cinfer_engine_stats {
    uint64_t steps, forward_tokens;
    uint64_t prompt_tokens_computed; /* prompt positions run through the model (cache hits excluded) */
    uint64_t recomputed_tokens; /* generated positions recomputed after preemption */
    uint64_t decode_tokens; /* one per decode item */
    uint64_t cached_tokens; /* prompt tokens served by the prefix cache */
    uint64_t preemptions, submitted, finished;
    int32_t running, waiting; /* after the last step */
    int32_t kv_blocks_total, kv_blocks_free, kv_blocks_used, kv_blocks_cached, kv_blocks_used_peak;
    int64_t kv_bytes, kv_budget;
    int32_t kv_dtype; /* cinfer_kv_dtype of the cache (never CINFER_KV_DEFAULT) */
    /* window rings (models with sliding-window layers, docs/engine.md): one per running
     * request, kv_ring_bytes each (kv_ring_tokens rows of every window layer); 0 otherwise */
    int32_t kv_rings_total, kv_rings_used, kv_ring_tokens;
    int64_t kv_ring_bytes;
    /* engine-thread seconds per phase (see docs/engine.md, asynchronous scheduling):
     * plan = drain + plan (overlaps the forward in flight), wait = blocked on the
     * forward pass, commit = sampling and stop ids + batch assembly (critical path),
     * output = detokenization, stop strings, publishing (overlaps the next forward);
     * forward = seconds the forward passes ran (executor thread). */
    double t_plan, t_wait, t_commit, t_output, t_forward;
    uint64_t cached_tokens_memory, cached_tokens_store; /* cached_tokens by tier */
    uint64_t think_forced_tokens; /* end-marker tokens forced by reasoning budgets */
    uint64_t handoff_exported_blocks; /* KV records written for exports (prefill role) */
    uint64_t handoff_imported_blocks; /* handed-off blocks installed in the prefix cache (decode role) */
    uint64_t handoff_rejected_blocks; /* handed-off records that failed verification */
    /* window-state snapshots in handoffs (window models): bytes exported / imported, and imports refused
     * (missing, invalid, no window-state slot: the records are then not installed either) */
    uint64_t handoff_window_exported_bytes, handoff_window_imported_bytes, handoff_window_rejected;
    uint64_t grammar_tokens; /* tokens sampled under a grammar mask (constrained requests) */
    uint64_t grammar_forced_tokens; /* of those, taken without sampling (the grammar allowed one token) */
    uint64_t grammar_masks_overlapped; /* masks computed while the forward pass ran (async scheduling) */
    double t_grammar; /* engine-thread seconds computing grammar masks (overlapped ones included) */
    /* speculative decoding, per drafter (index cinfer_spec_drafter): verify items, drafted tokens, accepted
     * ones; spec_accept_len[a]: verify items that accepted a drafts (a <= CINFER_SPEC_MAX_K) */
    uint64_t spec_verifies[CINFER_SPEC_N], spec_drafted[CINFER_SPEC_N], spec_accepted[CINFER_SPEC_N];
    uint64_t spec_accept_len[CINFER_SPEC_MAX_K + 1];
    uint64_t spec_conf_dropped; /* MTP / DSpark drafts made but not verified: their confidence did not pay
                                 * (spec_confidence) */
    uint64_t spec_block_cut; /* DSpark block rows computed but not drafted: their prefix survival fell below the
                              * load threshold (spec_confidence; docs/engine.md "DSpark drafter") */
    /* window-state tier (0 without window layers or with the tier off): snapshots taken; admissions
     * that resumed from a snapshot (hits) / whose prefix-cache hit found no snapshot (misses: recomputed
     * from the start); entries evicted for room / expired by TTL; entries and bytes held; budget */
    uint64_t swa_replays, swa_replayed_tokens; /* admissions resumed by bounded replay, tokens replayed */
    uint64_t swa_snapshots, swa_state_hits, swa_state_misses, swa_state_evictions, swa_state_expirations;
    int32_t swa_state_entries;
    int64_t swa_state_bytes, swa_state_budget;
    /* window-state snapshots in the store: queued writes; admissions whose snapshot came from the store
     * (hits), was not there (misses), or was refused as invalid (bad bytes: replayed instead) */
    uint64_t swa_store_writes, swa_store_hits, swa_store_misses, swa_store_invalid;
    cinfer_store_stats store;
} cinfer_engine_stats;

/* err (may be NULL) receives a one-line message on failure. */
int cinfer_engine_create(const cinfer_model *m, cinfer_thread_pool *pool, const cinfer_engine_options *opt,
                         cinfer_engine **out, char *err, size_t err_len);
/* Stops the thread; unread requests are dropped. */
void cinfer_engine_destroy(cinfer_engine *e);

/* Queues a request; returns its id (> 0), or 0 with err set when it can never
 * run (empty prompt, prompt + 1 > max_ctx, more KV than the pool holds, ...). */
uint64_t cinfer_engine_submit(cinfer_engine *e, const cinfer_request *r, char *err, size_t err_len);
/* Asks the engine to stop the request; its blocks are freed before the next
 * forward pass and it finishes with CINFER_FINISH_CANCELLED (if it had not
 * finished already). Returns -1 for an unknown id. */
int cinfer_engine_cancel(cinfer_engine *e, uint64_t id);
/* Cancels (if running) and forgets the request without a final read. */
int cinfer_engine_release(cinfer_engine *e, uint64_t id);

/* Moves the request's pending output into *out (replacing its contents).
 * timeout_ms: 0 = do not wait, < 0 = wait until there is output.
 * Returns 1 if anything (tokens, text or the finish) was read, 0 on timeout,
 * -1 for an unknown id. After a read that returns finish != NONE the id is gone. */
int cinfer_engine_read(cinfer_engine *e, uint64_t id, cinfer_output *out, int timeout_ms);

/* An eventfd, readable when some request has new output since the last
 * cinfer_engine_ready() call. */
int cinfer_engine_fd(const cinfer_engine *e);
/* Clears the fd and writes up to cap ids of requests with unread output. */
int cinfer_engine_ready(cinfer_engine *e, uint64_t *ids, int cap);

cinfer_engine_stats cinfer_engine_get_stats(cinfer_engine *e);

/* Bytes of one KV record (header + block payload) and the number of full prompt blocks a prompt of
 * n_prompt tokens hands off (those before its last token: the receiver computes the last token). */
size_t cinfer_engine_kv_record_bytes(const cinfer_engine *e);
int32_t cinfer_engine_block_tokens(const cinfer_engine *e);
/* The 32-byte store fingerprint every record carries (model weights + KV layout + block size + dtype). */
void cinfer_engine_kv_fingerprint(const cinfer_engine *e, uint8_t out[32]);
int32_t cinfer_engine_kv_handoff_blocks(const cinfer_engine *e, int32_t n_prompt);
/* Bytes of the window-state snapshot that travels with a window model's records (engine/swa_format.h:
 * the window rings, deepseek4's compressor state included); 0 when the model has no window layers or
 * the engine keeps no window state (--swa-state-memory 0). */
size_t cinfer_engine_kv_window_bytes(const cinfer_engine *e);
/* An export for up to n_blocks records (one reference, the caller's), or NULL (out of memory). */
cinfer_kv_export *cinfer_kv_export_new(const cinfer_engine *e, int32_t n_blocks);
void cinfer_kv_export_ref(cinfer_kv_export *x);
void cinfer_kv_export_unref(cinfer_kv_export *x);
/* Records ready so far (acquire: their bytes are visible), and record i < ready. */
int32_t cinfer_kv_export_ready(const cinfer_kv_export *x);
const uint8_t *cinfer_kv_export_record(const cinfer_kv_export *x, int32_t i);
/* The export's window-state snapshot (window models; at the boundary after its last record, taken once
 * every record is ready): 1 with *data (cinfer_engine_kv_window_bytes() bytes, never changes again),
 * 0 not yet, -1 none will come (no window state, or it could not be taken: the receiver computes). */
int cinfer_kv_export_window(const cinfer_kv_export *x, const uint8_t **data);

/* The engine's vocabulary as the grammar library sees it (token bytes, control tokens, EOS/EOG ids),
 * built at create; for cinfer_grammar_matcher_new. Owned by the engine, immutable, thread-safe;
 * valid until cinfer_engine_destroy (every matcher made with it must be gone by then). */
const cinfer_grammar_vocab *cinfer_engine_grammar_vocab(const cinfer_engine *e);

/* MoE expert load: tokens the engine routed to each expert of `layer` over
 * its last 64 forward passes (a sliding window). Writes min(cap, n_expert)
 * counts into counts[]; returns the layer's expert count (0 for a dense layer
 * or a model without experts, -1 for a layer outside the model). Lock-free:
 * the counts of one call may mix two neighbouring steps. */
int cinfer_engine_expert_load(cinfer_engine *e, int32_t layer, uint64_t *counts, int32_t cap);

#ifdef __cplusplus
}
#endif

#endif
