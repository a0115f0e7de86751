/* engine_internal.h - the engine's private structures, shared by
 * engine.c (public API, request table, queues, the thread),
 * engine_step.c (one step: plan, preempt, match, allocate, batch, forward,
 * sample, register full blocks), engine_output.c (stop rules, streaming
 * detokenization, stop strings, publishing outputs) and engine_think.c
 * (reasoning budgets).
 *
 * Threads and locks: `mu` guards the submit queue, the request hash table,
 * the ready list and every field marked (mu) below. The engine thread owns
 * the fields marked (eng): it touches them without a lock, and nobody else
 * touches them. mu is never held across a forward pass: the engine thread
 * takes it to drain submissions/cancels at the start of a step and to publish
 * outputs at the end.
 *
 * Asynchronous scheduling (engine.c, engine_step.c): forward passes run on a
 * dedicated executor thread (the compute pool's caller), so the engine thread
 * plans step N+1 while step N computes. At most one step is in flight. The
 * plan for N+1 sees every request in flight at its projected state (its chunk
 * computed, one more token generated if it samples); tokens it cannot know
 * yet (the token sampled at N) are filled in after N completes, and items of
 * requests that N finished, or that were cancelled/preempted meanwhile (their
 * `epoch` changed), are dropped then. A request in flight is never freed or
 * compacted away: it leaves the active array only after its last in-flight
 * step was committed.
 *
 * Request lifetime: created by submit (reader side), inserted in the table
 * and the submit queue; the engine moves it to its active array, and when it
 * finishes publishes the final output and sets engine_done. It is freed by
 * whoever sets the second of {engine_done, reader_done} (reader_done: the
 * final output was read, or cinfer_engine_release). */
#ifndef CINFER_ENGINE_ENGINE_INTERNAL_H
#define CINFER_ENGINE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "cinfer/engine.h"
#include "engine/engine_store.h"
#include "engine/kv_pool.h"
#include "engine/prefix_cache.h"
#include "engine/sampler.h"
#include "engine/sched.h"
#include "engine/spec_drafter.h"
#include "engine/spec_sched.h"
#include "engine/swa_format.h"
#include "engine/swa_state.h"
#include "model/model.h"
#include "text/tokenizer.h"

#define ENG_HASH_BUCKETS 4096
/* Tokens one step can commit for a request: a verify item's accepted drafts plus one. */
#define ENG_STEP_TOKENS (CINFER_SPEC_MAX_K + 1)

/* Bytes of text produced for one request, not yet published (base/strbuf.h). */
typedef strbuf eng_buf;

struct eng_req;

/* One planned / in-flight item: which request, which positions. */
typedef struct eng_item {
    struct eng_req *r;
    uint32_t epoch; /* r->epoch when planned: a mismatch means drop */
    sched_kind kind;
    int32_t start, n_tokens;
    bool sample; /* chunk ends at the sequence end: sample from its row */
    int32_t n_draft; /* verify item (speculative decoding): drafts at seq[start+1..start+n_draft], one
                      * logits row per token; 0: an ordinary item */
    int32_t hid_row; /* MTP requests: its first row in the step's hidden-state export; -1 none (engine_mtp.c) */
} eng_item;

/* Everything one step needs, owned by the engine, sized at create. */
typedef struct eng_stepbuf {
    eng_item *items; /* capacity max_seqs */
    int32_t n_items;
    int32_t *tokens, *pos, *seq, *rows; /* capacity max_batch_tokens */
    fwd_seq *seqs; /* capacity max_seqs */
    float *logits; /* (max_seqs + spec_step_drafts) * n_vocab */
    fwd_batch batch;
    int rc; /* model_forward's result */
    cf_err err;
    double t_forward; /* seconds model_forward ran */
    float *hidden; /* with an MTP drafter: the target's hidden states of MTP requests' rows; else NULL */
    int32_t *hid_rows; /* their batch rows (capacity max_batch_tokens) */
} eng_stepbuf;

typedef struct eng_req {
    uint64_t id;
    struct eng_req *hnext; /* (mu) hash chain */
    struct eng_req *qnext; /* (mu) submit queue */

    /* immutable after submit */
    int32_t prompt_len, max_tokens; /* max_tokens already clipped to the context */
    int32_t priority, traffic_class;
    bool ignore_eos, want_logprobs, include_stop_str;
    int32_t min_tokens; /* EOG and stop ids masked while n_generated < min_tokens */
    int32_t top_k; /* top logprobs per token (0: none) */
    int32_t *stop_ids;
    int32_t n_stop_ids;
    char **stop_strs;
    size_t *stop_lens;
    int32_t n_stop_strs;
    uint8_t *salt;
    size_t salt_len;
    int32_t think_budget; /* < 0: no reasoning budget (engine_think.c) */
    int32_t think_start[CINFER_MAX_THINK_MARKER], think_end[CINFER_MAX_THINK_MARKER];
    int32_t n_think_start, n_think_end;

    /* (eng) sequence and KV */
    int32_t *seq; /* prompt then generated tokens; capacity prompt_len + max_tokens */
    int32_t n_generated;
    sched_state state;
    int32_t n_computed;
    int32_t *blocks; /* block ids; capacity max_blocks */
    float **bptr; /* the same blocks as pointers, for fwd_seq */
    int32_t n_blocks, max_blocks;
    int32_t ring; /* window ring id while running (kv_pool.h), -1 none */
    int32_t swa_slot; /* window-state entry pinned for a restore planned at admission (engine_swa.c), -1 none */
    int32_t swa_restore_at; /* position the restore resumes at */
    int32_t swa_snap_block; /* n_registered at the last snapshot taken (or restored), -1 none */
    bool swa_exact; /* immutable: no bounded replay for this request */
    int32_t swa_plan_end; /* (eng) describe planned a bounded replay of [n_cached_peek, swa_plan_end) */
    bool swa_plan_approx; /* (eng) describe planned a resume from an approximate-lineage snapshot at n_cached_peek */
    int32_t replay_from, keep_below; /* running after a bounded replay (fwd_seq); 0: none */
    bool approx; /* running after a bounded replay (or resumed from its snapshots): its later blocks are
                  * approximate, registered and snapshotted only under the approximate lineage
                  * (eng_swa_approx_salt), never written to the store */
    int32_t n_registered; /* leading blocks already in the prefix cache */
    uint8_t last_key[PREFIX_KEY_BYTES]; /* key of block n_registered - 1 */
    int32_t n_cached_peek;
    int32_t n_prefix_peek; /* window models: cached full-block tokens before the window-state check */
    uint64_t peek_version; /* cache version n_cached_peek was computed at (0: never) */
    bool admitted_once;
    /* (eng) reasoning budget state (engine_think.c): advanced once per generated token at commit,
     * so it survives preemption (recomputation regenerates KV, never tokens) */
    bool think_in; /* inside a reasoning block */
    int32_t think_from; /* n_generated when the current block (inside or outside) began */
    int32_t think_spent; /* tokens inside reasoning blocks already closed (end markers excluded) */
    uint32_t epoch; /* bumped whenever its blocks are released: invalidates planned / in-flight items */
    bool in_flight; /* part of the step being computed */
    int32_t proj_computed; /* in flight: n_computed once that step commits */
    int32_t proj_generated; /* in flight: n_generated once that step commits */
    /* (eng) committed by the step, processed off the critical path (eng_process_outputs) */
    int32_t pend_n; /* tokens committed this step, to output (a verify item commits several) */
    int32_t pend_gen; /* n_generated before the first of them */
    int32_t pend_tok[ENG_STEP_TOKENS];
    float pend_lp[ENG_STEP_TOKENS];
    bool pend_drafted[ENG_STEP_TOKENS]; /* an accepted draft */
    int32_t pend_top_ids[ENG_STEP_TOKENS][CINFER_MAX_TOP_LOGPROBS]; /* top_k alternatives of each */
    float pend_top_lps[ENG_STEP_TOKENS][CINFER_MAX_TOP_LOGPROBS];
    cinfer_finish pend_finish; /* EOS / stop id / length found at commit */
    bool done; /* finished (or finishing): never scheduled again */
    struct store_chain *st_chain; /* (eng) store lookup/load in flight (engine_store.c) */
    struct store_chain *sw_chain; /* (eng) window-state snapshot lookup/load (engine_swa_store.c); while set,
                                   * st_chain is parked: looked up, not yet loading */
    int32_t sw_boundary; /* (eng) boundary block of that snapshot */
    /* prefill/decode handoff (engine_handoff.c) */
    cinfer_kv_export *kv_export; /* a reference, or NULL */
    int32_t n_exported; /* (eng) records written; exp_key: the key of record n_exported - 1 */
    uint8_t exp_key[PREFIX_KEY_BYTES];
    uint8_t *kv_import; /* owned until installed (then given back: eng_handoff_release), or NULL */
    int32_t n_kv_import;
    const uint8_t *kv_import_window; /* the snapshot after the records (inside kv_import), or NULL */
    size_t kv_import_window_bytes;
    void (*kv_import_release)(void *owner, void *kv_import); /* NULL: free() */
    void *kv_import_owner;
    double st_deadline; /* (eng) when to stop waiting for it */
    int32_t st_lookups; /* (eng) store lookups made for this request */
    int32_t st_admits; /* (eng) admissions seen by the store hook */
    bool st_usage; /* (eng) the lookup in flight belongs to the first admission (usage) */
    /* (eng) structured output (engine_grammar.c): the matcher (owned), its mask for the sampling
     * position n_generated == mask_at (-1: none computed), and the mask's allowed-token count */
    cinfer_grammar_matcher *gm;
    uint32_t *mask;
    int32_t mask_at, mask_allowed;
    /* lazy grammar (cinfer_request.grammar_trigger): the trigger (owned), whether the grammar is
     * active, how many trigger bytes the free output ends with (0..trig_len-1), the tokens that hold
     * the whole trigger (trig_toks, owned) and where it ends in each (trig_end) */
    char *trig;
    int32_t trig_len, trig_k;
    bool gm_active;
    int32_t *trig_toks, *trig_end, n_trig_toks;
    sampler *smp;
    /* (eng) speculative decoding (engine_spec.c); drafter.ops NULL: not speculating */
    spec_drafter drafter;
    spec_policy spol;
    float *spec_q; /* drafter probabilities [k_max][n_vocab] for drafters that have them; else NULL */
    bool spec_has_q; /* the drafts in flight came with q */
    /* (eng) CINFER_SPEC_DRAFT (engine_draft.c): the draft model's KV, in blocks of the same pool */
    int32_t *dblocks; /* capacity max_blocks */
    float **dbptr;
    int32_t n_dblocks;
    int32_t d_computed; /* positions with draft-model KV (all of them committed tokens) */
    sampler *dsmp; /* draws the drafts: the request's sampling parameters, no penalties */
    /* (eng) CINFER_SPEC_MTP (engine_mtp.c) uses dblocks / d_computed / dsmp for its MTP KV, plus the target's
     * hidden state of position d_computed - 1 */
    float *mtp_h;
    bool mtp_h_ok;
    float spec_conf[CINFER_SPEC_MAX_K]; /* (eng) the drafter's confidence in each draft in flight (MTP) */
    detok_stream dt;
    eng_buf held; /* text not yet emitted (could still start a stop string) */

    /* (eng) this step's output, published under mu at the end of the step */
    bool st_touched; /* in e->touched */
    int32_t st_n; /* staged tokens */
    int32_t st_tokens[ENG_STEP_TOKENS];
    float st_logprobs[ENG_STEP_TOKENS];
    int32_t st_top_ids[ENG_STEP_TOKENS][CINFER_MAX_TOP_LOGPROBS];
    float st_top_lps[ENG_STEP_TOKENS][CINFER_MAX_TOP_LOGPROBS];
    eng_buf st_text;
    cinfer_finish st_finish;
    int32_t st_stop_string; /* index of the stop string that ended it, -1 */
    char st_error[160];
    cinfer_usage usage;

    /* (mu) shared with readers */
    bool cancel;
    bool engine_done, reader_done, in_ready;
    int32_t *o_tokens;
    float *o_logprobs;
    int32_t *o_top_ids; /* [o_cap][top_k] when top_k */
    float *o_top_lps;
    int32_t o_n, o_cap;
    eng_buf o_text;
    cinfer_finish o_finish;
    int32_t o_stop_string;
    char o_error[160];
    cinfer_usage o_usage;
} eng_req;

struct cinfer_engine {
    const model *m;
    kv_dtype kv_dt; /* element type of the K/V rows in every block and ring (opt.kv_dtype resolved) */
    tokenizer *tok; /* owned: loaded from the model's GGUF (engine_tok.h) */
    thread_pool *tp;
    cinfer_engine_options opt;
    int32_t n_vocab;

    /* (eng) owned compute state */
    kv_pool *kv;
    bool window_rings; /* the model has window groups: rings (docs/engine.md) */
    swa_state *swa; /* window-state tier (engine_swa.c); NULL: none (no window groups, or off) */
    int32_t swa_slot_blocks; /* ring blocks per snapshot */
    int64_t swa_block_floats; /* floats per ring block */
    int32_t swa_replay_tokens; /* bounded replay length; 0: off */
    prefix_cache *pc;
    fwd_ctx *fc;
    sched_limits limits;
    struct eng_draft *draft; /* (eng) the draft model's forward state (engine_draft.c), or NULL */
    struct eng_mtp *mtp; /* (eng) the MTP drafter's scratch (engine_mtp.c); NULL: the model has no MTP block */
    spec_cost_fit spec_fit; /* (eng) step time against batch tokens (spec_sched.h), fed by every commit */
    /* two step buffers: one being computed, one being planned */
    eng_stepbuf sb[2];
    int32_t sb_next; /* index of the buffer the next plan uses */
    eng_stepbuf *inflight; /* the step being computed, or NULL */
    float *lp_row; /* n_vocab: raw logits for logprobs */
    cinfer_grammar_vocab *gvocab; /* owned: the vocabulary for grammar matchers (engine_grammar.c) */
    size_t mask_words; /* 32-bit words of one grammar mask */
    uint8_t *tok_bytes; /* owned: every token's bytes as the grammar sees them, token t at */
    uint32_t *tok_off; /* tok_bytes + tok_off[t], tok_off[t + 1] - tok_off[t] bytes (n_vocab + 1 entries) */
    /* executor: runs model_forward for the engine thread (async mode) */
    pthread_t exec_thread;
    bool exec_started;
    pthread_mutex_t exec_mu;
    pthread_cond_t exec_cv;
    eng_stepbuf *exec_job; /* (exec_mu) set by dispatch, cleared by the executor when done */
    bool exec_stop; /* (exec_mu) */
    /* active requests (waiting, running, preempted) and sched arrays, grown as needed */
    eng_req **active;
    int32_t n_active, cap_active;
    sched_req *s_reqs;
    sched_item *s_items;
    int32_t *s_pre, *s_scratch;
    eng_req **touched; /* requests with output this step */
    int32_t n_touched;
    cinfer_engine_stats st; /* (eng) working copy */

    /* shared */
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* engine waits for work */
    pthread_cond_t out_cv; /* readers wait for output */
    pthread_t thread;
    bool thread_started;
    bool stop; /* (mu) */
    eng_req *q_head, *q_tail; /* (mu) submitted, not yet seen by the engine */
    bool cancel_pending; /* (mu) some request has cancel set */
    eng_req *buckets[ENG_HASH_BUCKETS]; /* (mu) */
    uint64_t *ready_ids; /* (mu) ids with unread output (may name freed requests: harmless) */
    int32_t n_ready, cap_ready; /* (mu) */
    eng_req **cancelled; /* (eng) scratch, capacity cap_active */
    char *dtbuf; /* (eng) one detokenized piece */
    size_t dtbuf_cap;
    int32_t kv_total; /* immutable: blocks in the pool */
    uint64_t next_id; /* (mu) */
    cinfer_engine_stats pub_st; /* (mu) last published stats */
    struct eng_store *es; /* (eng) persistent store adapter (engine_store.c); NULL: none */
    struct eng_swa_store *sws; /* (eng) window-state snapshots in the store (engine_swa_store.c); NULL: none */
    bool store_wake; /* (mu) a store completion is waiting to be polled */
    uint8_t kv_fp[PREFIX_KEY_BYTES]; /* immutable: store fingerprint of the blocks (eng_kv_fingerprint) */
    size_t kv_payload_bytes, kv_record_bytes; /* immutable: one block's floats; one handoff record */
    eng_req *imp_head; /* (eng) drained requests whose import waits for the forward pass in flight */
    bool store_abandoned; /* eng_store_close gave up on a stuck store thread: the pool is kept */
    int efd;
};

/* engine.c */
void eng_req_free(eng_req *r);
/* engine_handoff.c (prefill/decode handoff, docs/pd.md). init: record sizes (after the pool).
 * import: verifies r's import records, installs them into the prefix cache and frees them; only
 * with no forward pass in flight (a freshly allocated block may still be written by that pass).
 * export: after eng_register, appends the request's newly registered prompt blocks to its export. */
void eng_handoff_init(cinfer_engine *e);
void eng_handoff_import(cinfer_engine *e, eng_req *r);
/* Gives r->kv_import back to its owner (cinfer_request.kv_import_release) and clears it. */
void eng_handoff_release(eng_req *r);
void eng_handoff_export(cinfer_engine *e, eng_req *r);

/* engine_step.c: the three phases of a step.
 * eng_plan: plans the next step into sb against the projected state of the
 *   in-flight step (preempts, admits with prefix matches, allocates blocks).
 *   Returns an eng_plan_result.
 * eng_commit: after a step's forward completed: advance, register full
 *   blocks, sample (stop ids / EOS / length are decided here).
 * eng_assemble: drops planned items that became invalid, fills the batch
 *   (token ids sampled by the commit included); returns the row count. */
typedef enum eng_plan_result {
    ENG_PLAN_OK = 0, /* items planned, or progress made without any (preemptions, requests failed) */
    ENG_PLAN_IDLE, /* nothing could be planned: no item, no preemption (stuck if nothing is in flight) */
    ENG_PLAN_WAIT_STORE, /* nothing planned, but requests wait for store loads: not stuck */
    ENG_PLAN_ERROR, /* the scheduler rejected its input (logged): handled like IDLE */
} eng_plan_result;
eng_plan_result eng_plan(cinfer_engine *e, eng_stepbuf *sb);
void eng_commit(cinfer_engine *e, eng_stepbuf *sb);
int32_t eng_assemble(cinfer_engine *e, eng_stepbuf *sb);
/* engine_check.c: the debug invariant checker (KV references vs block tables
 * and store holds, pool accounting, prefix cache, request states; the list is
 * in engine_check.c). 0, or -1 with why. eng_check_or_abort prints why and
 * aborts. ENG_CHECK(e, where) runs it after every engine step when built with
 * CINFER_CHECK_INVARIANTS (the sanitizer build), and is nothing otherwise. */
int eng_check_invariants(cinfer_engine *e, char *why, size_t cap);
void eng_check_or_abort(cinfer_engine *e, const char *where);
#ifdef CINFER_CHECK_INVARIANTS
/* under e->mu: tests inspect (and deliberately corrupt) the engine's state while holding it */
#define ENG_CHECK(e, where)               \
    do {                                  \
        pthread_mutex_lock(&(e)->mu);     \
        eng_check_or_abort((e), (where)); \
        pthread_mutex_unlock(&(e)->mu);   \
    } while (0)
#else
#define ENG_CHECK(e, where) ((void)0)
#endif

/* Unrefs every block of r and resets its KV state (preemption, finish). */
void eng_release_blocks(cinfer_engine *e, eng_req *r);

/* Copies the pool's block counts into e->st (and the peak of used blocks). */
void eng_note_kv(cinfer_engine *e);

/* engine_swa.c: the window-state tier (docs/engine.md "Window state").
 * eng_swa_init: after the pool; no tier without rings or when switched off.
 * eng_swa_snapshot: in commit, after registration: snapshot at r's last registered boundary.
 * eng_swa_resume_point: the largest block boundary <= limit whose chain key has a snapshot (0: none);
 *   with slot_out: pins the entry into *slot_out (LRU touched) and writes its key.
 * eng_swa_restore: in assemble: copies r's pinned snapshot into its ring and unpins it.
 * eng_swa_unpin: drops a planned restore (release, failure).
 * eng_swa_after_load: a store load adopted blocks: snapshot / bounded replay / exact fallback.
 * eng_swa_note: drops expired snapshots; tier stats into e->st. */
int eng_swa_init(cinfer_engine *e, const kv_spec *spec, cf_err *err);
void eng_swa_snapshot(cinfer_engine *e, eng_req *r);
int32_t eng_swa_resume_point(cinfer_engine *e, eng_req *r, int32_t limit, uint8_t key_out[PREFIX_KEY_BYTES],
                             int32_t *slot_out);
void eng_swa_restore(cinfer_engine *e, eng_req *r);
void eng_swa_unpin(cinfer_engine *e, eng_req *r);
/* Approximate lineage (docs/engine.md "Bounded replay"): blocks computed after a bounded replay are keyed with
 * the request's salt followed by this marker, so only replay-mode requests ever find them. r->salt has room
 * for it (engine.c). */
#define ENG_SWA_APPROX_MARK \
    "\xff"                  \
    "cinfer-swa-approximate-lineage"
prefix_salt eng_swa_approx_salt(const eng_req *r);
/* Replay-mode peek past an exact hit of `exact` tokens: tokens cached further along the approximate lineage. */
int32_t eng_swa_approx_peek(cinfer_engine *e, eng_req *r, int32_t exact, int32_t limit);
/* Replay mode: the end of the last window-state snapshot along the approximate lineage past an exact hit of `exact`
 * tokens, within `limit` tokens (0: none). With slot_out, pins the entry and copies its key. */
int32_t eng_swa_approx_resume_point(cinfer_engine *e, eng_req *r, int32_t exact, int32_t limit,
                                    uint8_t key_out[PREFIX_KEY_BYTES], int32_t *slot_out);
/* After a store load adopted blocks: resume exactly, replay, or fall back (engine_swa.c). */
void eng_swa_after_load(cinfer_engine *e, eng_req *r, bool first_admission);
void eng_swa_note(cinfer_engine *e);
/* Window state in handoffs (engine_handoff.c): the snapshot geometry (n_blocks 0: no window state);
 * eng_swa_capture: r's ring blocks before boundary block `end` into a sealed snapshot at buf (false when
 * r has no ring or the chunk just computed overwrote them); eng_swa_import: checks a received snapshot
 * (untrusted) at boundary block `end` and stores it in the tier under key: 0, or -1 with why. */
swa_snap_geom eng_swa_geom(const cinfer_engine *e);
bool eng_swa_capture(cinfer_engine *e, const eng_req *r, int32_t end, float *buf);
int eng_swa_import(cinfer_engine *e, const uint8_t key[PREFIX_KEY_BYTES], int32_t end, const void *data, size_t len,
                   cf_err *err);

/* engine_output.c */
/* Commit side (critical path): records r's newly sampled token (already
 * appended to r->seq) and decides EOS / stop id / length; a finishing request
 * is marked done and its blocks released at once. */
void eng_on_token(cinfer_engine *e, eng_req *r, int32_t token, float logprob, bool drafted);
/* Off the critical path (while the next step computes): detokenizes the
 * committed tokens, applies stop strings, stages text and finishes. */
void eng_process_outputs(cinfer_engine *e);
/* engine_step.c: samples r's next token from a logits row (or takes the token a reasoning budget
 * forces), appends it to r->seq and applies the stop rules (eng_on_token). draft >= 0: verify that
 * drafted token (sampler_verify, q its drafter probabilities or NULL); returns whether it was
 * accepted (the committed token is the draft). */
bool eng_sample(cinfer_engine *e, eng_req *r, float *row, int32_t draft, const float *q);
/* engine_spec.c: speculative decoding (docs/engine.md "Speculative decoding").
 * eng_spec_init: submit side, the request's drafter and policy (none when it does not speculate).
 * eng_spec_plan: after describing requests, how many drafts each decode asks for (sched n_draft).
 * eng_spec_prepare: at assembly, a decode item of a speculating request: rebases it on the committed
 *   state, drafts into r->seq's tail and makes room for them; false: drop the item this step.
 * eng_spec_commit: verifies a verify item's rows, commits the accepted drafts and one more token,
 *   rolls back KV past the first rejection. */
int eng_spec_init(cinfer_engine *e, eng_req *q, const cinfer_request *r, cf_err *err);
/* engine_draft.c: the draft-model drafter, batched over every verify item of a step.
 * eng_draft_open: at create, checks the draft model against the target (vocabulary, KV block size)
 *   and allocates its forward context and scratch. eng_draft_close frees them.
 * eng_draft_req_init: a request's draft KV table and draft sampler.
 * eng_draft_propose: after eng_spec_prepare left, for each such item, n_draft = the most drafts it
 *   may take: catches the draft model's KV up to the committed tokens and drafts one token per
 *   batched forward; sets each item's n_draft / n_tokens.
 * eng_draft_release: frees r's draft blocks (preemption, finish); eng_draft_rollback: after a
 *   verify, draft KV stays valid only up to the committed tokens.
 * eng_draft_room: makes r's draft blocks (r->dblocks, also the MTP drafter's KV) cover n_pos
 *   positions from what the pool has; false (nothing taken) when they cannot. */
int eng_draft_open(cinfer_engine *e, const model *dm, cf_err *err);
void eng_draft_close(cinfer_engine *e);
int eng_draft_req_init(cinfer_engine *e, eng_req *q, cf_err *err);
void eng_draft_propose(cinfer_engine *e, eng_stepbuf *sb);
void eng_draft_release(cinfer_engine *e, eng_req *r);
void eng_draft_rollback(eng_req *r);
bool eng_draft_room(cinfer_engine *e, eng_req *r, int32_t n_pos);
/* engine_mtp.c: the MTP drafter (the model's own MTP block), batched over a step's MTP requests.
 * eng_mtp_open: at create, after the forward context and the step buffers; leaves e->mtp NULL for a model
 *   without MTP blocks (or whose MTP KV does not fit a pool block). eng_mtp_close frees it.
 * eng_mtp_req_init: a request's MTP KV table, draft sampler and hidden-state stash.
 * eng_mtp_mark: at the end of assembly, asks the target pass for the hidden states of MTP requests' rows.
 * eng_mtp_catchup: at the end of commit, MTP KV up to each MTP request's n_computed.
 * eng_mtp_propose: at assembly (after eng_spec_prepare), chained drafts for the MTP verify items, DSpark
 *   blocks for the DSpark ones (eng_dspark_propose, engine_dspark.c), then the confidence scheduling of both.
 * eng_mtp_check: why a request may not use drafter kind (MTP or DSpark) on this engine; 0 when it may. */
int eng_mtp_open(cinfer_engine *e, cf_err *err);
void eng_mtp_close(cinfer_engine *e);
int eng_mtp_req_init(cinfer_engine *e, eng_req *q, cf_err *err);
void eng_mtp_mark(cinfer_engine *e, eng_stepbuf *sb);
void eng_mtp_catchup(cinfer_engine *e, eng_stepbuf *sb);
void eng_mtp_propose(cinfer_engine *e, eng_stepbuf *sb);
void eng_dspark_propose(cinfer_engine *e, eng_stepbuf *sb);
int eng_mtp_check(const cinfer_engine *e, int32_t kind, cf_err *err);
/* Whether r speculates (any drafter). */
static inline bool eng_spec_on(const eng_req *r) { return r->drafter.kind > CINFER_SPEC_OFF; }

/* The forward contexts' attention precision (options checked at create). */
static inline attn_prec eng_attn_prec(const cinfer_engine *e) {
    return e->opt.attn_precision == CINFER_ATTN_BF16 ? ATTN_PREC_BF16 : ATTN_PREC_F32;
}
void eng_spec_free(eng_req *q);
void eng_spec_plan(cinfer_engine *e, sched_req *s);
bool eng_spec_prepare(cinfer_engine *e, eng_item *it);
void eng_spec_commit(cinfer_engine *e, const eng_item *it, float *rows);
/* engine_think.c: reasoning budgets (docs/engine.md "Reasoning budget").
 * eng_think_check: submit-time validation of the think_* fields; eng_think_init copies them.
 * eng_think_forced: the token the budget forces at r's next sampling position, or -1 (sample).
 * eng_think_accept: after a token was appended to r->seq (n_generated counts it): enter / leave
 * a block. */
int eng_think_check(const cinfer_request *r, int32_t n_vocab, cf_err *err);
void eng_think_init(eng_req *q, const cinfer_request *r);
int32_t eng_think_forced(const eng_req *r);
void eng_think_accept(eng_req *r);
/* engine_grammar.c: structured output (docs/engine.md "Constrained decoding").
 * eng_grammar_vocab_build: the grammar vocabulary of the engine's tokenizer (at create).
 * eng_grammar_check: submit-time checks; eng_grammar_init takes the matcher and its mask buffer.
 * eng_grammar_prefetch: for every item of the step just dispatched that will sample, computes
 *   the request's mask now, while that step's forward pass runs (async scheduling).
 * eng_grammar_pick: at commit, for a constrained request: the token the grammar forces (one
 *   allowed), or -1 after masking the row (disallowed tokens -> -inf); eng_grammar_accept
 *   advances the matcher by the chosen token (-1: not allowed, an internal error). */
int eng_grammar_vocab_build(cinfer_engine *e, cf_err *err);
int eng_grammar_check(const cinfer_request *r, cf_err *err);
int eng_grammar_init(cinfer_engine *e, eng_req *q, const cinfer_request *r, cf_err *err);
void eng_grammar_prefetch(cinfer_engine *e, const eng_stepbuf *sb);
int32_t eng_grammar_pick(cinfer_engine *e, eng_req *r, float *row);
int eng_grammar_accept(cinfer_engine *e, eng_req *r, int32_t token);
/* engine_logprobs.c: the k most likely tokens of a raw logits row and their log-probabilities, best first. */
void eng_top_logprobs(const float *row, int32_t n_vocab, int32_t k, int32_t *ids, float *lps);
/* Stages a finish; flush: emit the text still held back (not for a stop
 * string match or an error). First finish wins. */
void eng_finish(cinfer_engine *e, eng_req *r, cinfer_finish why, bool flush, const char *error);
/* Marks r as having staged output this step. */
void eng_touch(cinfer_engine *e, eng_req *r);
/* Publishes every touched request's staged output under mu and wakes readers;
 * drops finished requests from the active array. */
void eng_publish(cinfer_engine *e);

#endif
