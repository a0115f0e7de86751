/* engine.c - the public engine API (include/cinfer/engine.h): create and
 * destroy, the request table (hash by id), submit / cancel / release / read /
 * ready, and the engine thread's outer loop (wait for work, drain the submit
 * queue and cancels, run a step, publish). The step itself is in
 * engine_step.c, output processing in engine_output.c; the locking rules and
 * the request lifetime are in engine_internal.h.
 *
 * Callers: the server (serve/), `cinfer bench throughput`, tests. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "engine/engine_internal.h"
#include "engine/engine_tok.h"

/* ---- small helpers ---- */

static void eng_set_err(char *err, size_t len, const char *msg) {
    if (err && len) snprintf(err, len, "%s", msg);
}

void eng_req_free(eng_req *r) {
    if (!r) return;
    free(r->stop_ids);
    for (int32_t i = 0; i < r->n_stop_strs; i++) free(r->stop_strs[i]);
    free(r->stop_strs);
    free(r->stop_lens);
    free(r->salt);
    free(r->seq);
    free(r->blocks);
    free(r->bptr);
    sampler_free(r->smp);
    cinfer_grammar_matcher_free(r->gm);
    free(r->mask);
    free(r->trig);
    free(r->trig_toks);
    free(r->trig_end);
    eng_spec_free(r);
    free(r->held.p);
    free(r->st_text.p);
    free(r->o_tokens);
    free(r->o_logprobs);
    free(r->o_top_ids);
    free(r->o_top_lps);
    free(r->o_text.p);
    eng_handoff_release(r);
    cinfer_kv_export_unref(r->kv_export);
    free(r);
}

void cinfer_output_release(cinfer_output *o) {
    free(o->tokens);
    free(o->logprobs);
    free(o->top_ids);
    free(o->top_logprobs);
    free(o->text);
    memset(o, 0, sizeof *o);
}

cinfer_request cinfer_request_default(void) {
    cinfer_request r;
    memset(&r, 0, sizeof r);
    r.sampling.temperature = 0;
    r.sampling.top_p = 1;
    r.sampling.repetition_penalty = 1;
    r.max_tokens = 16;
    r.think_budget = -1;
    return r;
}

/* ---- request table (mu held) ---- */

static eng_req **eng_slot(cinfer_engine *e, uint64_t id) {
    eng_req **pp = &e->buckets[id % ENG_HASH_BUCKETS];
    while (*pp && (*pp)->id != id) pp = &(*pp)->hnext;
    return pp;
}

static eng_req *eng_find(cinfer_engine *e, uint64_t id) { return *eng_slot(e, id); }

static void eng_unlink(cinfer_engine *e, eng_req *r) {
    eng_req **pp = eng_slot(e, r->id);
    if (*pp == r) *pp = r->hnext;
    r->hnext = NULL;
}

/* ---- create / destroy ---- */

static int eng_alloc_stepbuf(cinfer_engine *e, eng_stepbuf *sb) {
    size_t bt = (size_t)e->opt.max_batch_tokens, ns = (size_t)e->opt.max_seqs;
    sb->items = malloc(ns * sizeof *sb->items);
    sb->tokens = malloc(bt * sizeof(int32_t));
    sb->pos = malloc(bt * sizeof(int32_t));
    sb->seq = malloc(bt * sizeof(int32_t));
    sb->rows = malloc(bt * sizeof(int32_t));
    sb->seqs = malloc(ns * sizeof(fwd_seq));
    sb->logits = malloc((ns + (size_t)e->opt.spec_step_drafts) * (size_t)e->n_vocab * sizeof(float));
    return sb->items && sb->tokens && sb->pos && sb->seq && sb->rows && sb->seqs && sb->logits ? 0 : -1;
}

static void eng_free_stepbuf(eng_stepbuf *sb) {
    free(sb->items);
    free(sb->tokens);
    free(sb->pos);
    free(sb->seq);
    free(sb->rows);
    free(sb->seqs);
    free(sb->logits);
}

static int eng_alloc_scratch(cinfer_engine *e, cf_err *err) {
    e->lp_row = malloc((size_t)e->n_vocab * sizeof(float));
    e->dtbuf_cap = 64 + tokenizer_max_token_len(e->tok);
    e->dtbuf = malloc(e->dtbuf_cap);
    if (eng_alloc_stepbuf(e, &e->sb[0]) || eng_alloc_stepbuf(e, &e->sb[1]) || !e->lp_row || !e->dtbuf)
        return cf_fail(err, "out of memory for the engine's step scratch");
    return 0;
}

/* ---- the executor: runs forward passes so the engine thread can plan ---- */

static void eng_run_forward(cinfer_engine *e, eng_stepbuf *sb) {
    double t0 = time_now();
    sb->err.msg[0] = 0;
    sb->rc = model_forward(e->fc, &sb->batch, sb->logits, &sb->err);
    sb->t_forward = time_now() - t0;
}

static void *eng_exec_main(void *arg) {
    cinfer_engine *e = arg;
    pthread_mutex_lock(&e->exec_mu);
    for (;;) {
        while (!e->exec_stop && !e->exec_job) pthread_cond_wait(&e->exec_cv, &e->exec_mu);
        if (!e->exec_job) break; /* stop requested and nothing to run */
        eng_stepbuf *sb = e->exec_job;
        pthread_mutex_unlock(&e->exec_mu);
        eng_run_forward(e, sb);
        pthread_mutex_lock(&e->exec_mu);
        e->exec_job = NULL;
        pthread_cond_broadcast(&e->exec_cv);
    }
    pthread_mutex_unlock(&e->exec_mu);
    return NULL;
}

/* Starts sb's forward pass: on the executor (async) or right here (sync). */
static void eng_dispatch(cinfer_engine *e, eng_stepbuf *sb) {
    e->inflight = sb;
    if (!e->exec_started) {
        eng_run_forward(e, sb);
        return;
    }
    pthread_mutex_lock(&e->exec_mu);
    e->exec_job = sb;
    pthread_cond_broadcast(&e->exec_cv);
    pthread_mutex_unlock(&e->exec_mu);
}

/* Waits for the step in flight to finish; returns it (NULL if none). */
static eng_stepbuf *eng_wait_inflight(cinfer_engine *e) {
    eng_stepbuf *sb = e->inflight;
    if (!sb) return NULL;
    if (e->exec_started) {
        pthread_mutex_lock(&e->exec_mu);
        while (e->exec_job) pthread_cond_wait(&e->exec_cv, &e->exec_mu);
        pthread_mutex_unlock(&e->exec_mu);
    }
    e->inflight = NULL;
    return sb;
}

/* Window models (kv_pool.h rings): tokens of one sequence per step, so that
 * its ring (window + chunk rows) holds every row the step reads and writes:
 * the largest window rounded up to a block, at most max_batch_tokens and
 * ENG_RING_MAX_CHUNK (a large window then costs window + 511 rows, not twice
 * the window). 0 without window groups. */
#define ENG_RING_MAX_CHUNK 512
static int32_t eng_ring_chunk(const kv_spec *spec, int32_t block_tokens, int32_t max_batch_tokens) {
    int32_t w = kv_spec_max_window(spec);
    if (w <= 0) return 0;
    int64_t c = ((int64_t)w + block_tokens - 1) / block_tokens * block_tokens;
    if (c > ENG_RING_MAX_CHUNK) c = ENG_RING_MAX_CHUNK > block_tokens ? ENG_RING_MAX_CHUNK : block_tokens;
    return c < max_batch_tokens ? (int32_t)c : max_batch_tokens;
}

/* Rings for a window model: one per running request (max_seqs), but no more
 * than leave room for the blocks of one max_ctx request; fewer rings lower
 * the running-request limit to match (so admission never lacks a ring). */
static int32_t eng_ring_count(cinfer_engine *e, const kv_spec *spec, int32_t chunk) {
    int32_t bt = e->opt.block_tokens;
    int64_t ring =
        kv_spec_ring_row_floats(spec) * kv_ring_tokens(kv_spec_max_window(spec), chunk, bt) * (int64_t)sizeof(float);
    int64_t block = kv_spec_block_floats(spec, bt) * (int64_t)sizeof(float) + 64 + 16; /* stride slack + metadata */
    int64_t reserve = ((int64_t)e->opt.max_ctx + bt - 1) / bt * block;
    int64_t fit = ring > 0 ? (e->opt.kv_memory_bytes - reserve) / (ring + 64) : e->opt.max_seqs;
    int32_t n = fit < e->opt.max_seqs ? (int32_t)(fit > 1 ? fit : 1) : e->opt.max_seqs;
    if (n < e->opt.max_seqs)
        LOG_INFO("engine: %d window rings of %lld bytes fit next to one %d-token request, so at most %d requests "
                 "run at once (max_seqs %d)",
                 n, (long long)ring, e->opt.max_ctx, n, e->opt.max_seqs);
    e->limits.max_seqs = n;
    return n;
}

static void *eng_main(void *arg);
static void *eng_exec_main(void *arg);

/* The public cinfer_kv_dtype as the tensor layer's kv_dtype (CINFER_KV_DEFAULT: CINFER_KV_DTYPE_DEFAULT). */
_Static_assert(CINFER_KV_BF16 - CINFER_KV_F32 == KV_DTYPE_BF16 && CINFER_KV_F16 - CINFER_KV_F32 == KV_DTYPE_F16 &&
                   CINFER_KV_Q8_0 - CINFER_KV_F32 == KV_DTYPE_Q8_0,
               "cinfer_kv_dtype and kv_dtype list the types in the same order");

static int eng_kv_dtype(int32_t o, kv_dtype *out, cf_err *err) {
    if (o == CINFER_KV_DEFAULT) o = CINFER_KV_DTYPE_DEFAULT;
    switch (o) {
    case CINFER_KV_F32: *out = KV_DTYPE_F32; return 0;
    case CINFER_KV_BF16: *out = KV_DTYPE_BF16; return 0;
    case CINFER_KV_F16: *out = KV_DTYPE_F16; return 0;
    case CINFER_KV_Q8_0: *out = KV_DTYPE_Q8_0; return 0;
    default: return cf_fail(err, "engine: kv_dtype %d (expected a cinfer_kv_dtype)", o);
    }
}

const char *cinfer_kv_dtype_name(int32_t t) {
    static const char *const names[] = {"default", "f32", "bf16", "f16", "q8_0"};
    return t >= 0 && t < (int32_t)(sizeof names / sizeof names[0]) ? names[t] : NULL;
}

int32_t cinfer_kv_dtype_parse(const char *name) {
    for (int32_t t = CINFER_KV_F32; name && t <= CINFER_KV_Q8_0; t++)
        if (!strcmp(name, cinfer_kv_dtype_name(t))) return t;
    return -1;
}

/* Blocks computed with BF16 attention hold other K/V than F32 ones (every
 * layer past the first reads attention output): under BF16 the model
 * fingerprint, and with it every prefix key, store object and handoff
 * record, becomes SHA-256("cinfer-attn-bf16" || fp). F32 keeps the model's
 * own fingerprint. */
static int eng_fingerprint_attn(const cinfer_engine *e, uint8_t fp[PREFIX_KEY_BYTES], cf_err *err) {
    if (eng_attn_prec(e) == ATTN_PREC_F32) return 0;
    static const char tag[] = "cinfer-attn-bf16";
    uint8_t in[sizeof tag + PREFIX_KEY_BYTES];
    memcpy(in, tag, sizeof tag);
    memcpy(in + sizeof tag, fp, PREFIX_KEY_BYTES);
    unsigned int len = 0;
    if (!EVP_Digest(in, sizeof in, fp, &len, EVP_sha256(), NULL) || len != PREFIX_KEY_BYTES)
        return cf_fail(err, "model fingerprint: SHA-256 failed");
    return 0;
}

/* Blocks of another KV element type hold other bytes: under a non-f32 type the model fingerprint (so every
 * prefix key, store object name and handoff record) becomes SHA-256("cinfer-kv-<type>" || fp), so a store
 * shared by servers of different types keeps each type's objects apart (a plain miss, never a quarantine of
 * the other's). f32 keeps the fingerprint of before the option existed. */
static int eng_fingerprint_kv(const cinfer_engine *e, uint8_t fp[PREFIX_KEY_BYTES], cf_err *err) {
    if (e->kv_dt == KV_DTYPE_F32) return 0;
    char tag[32];
    int n = snprintf(tag, sizeof tag, "cinfer-kv-%s", kv_dtype_name(e->kv_dt));
    uint8_t in[sizeof tag + PREFIX_KEY_BYTES];
    memcpy(in, tag, (size_t)n);
    memcpy(in + n, fp, PREFIX_KEY_BYTES);
    unsigned int len = 0;
    if (!EVP_Digest(in, (size_t)n + PREFIX_KEY_BYTES, fp, &len, EVP_sha256(), NULL) || len != PREFIX_KEY_BYTES)
        return cf_fail(err, "model fingerprint: SHA-256 failed");
    return 0;
}

static int eng_init(cinfer_engine *e, const model *m, thread_pool *tp, const cinfer_engine_options *o, cf_err *err) {
    const model_hparams *hp = model_get_hparams(m);
    e->m = m;
    e->tp = tp;
    e->n_vocab = hp->n_vocab;
    e->opt = o ? *o : (cinfer_engine_options){0};
    if (e->opt.block_tokens <= 0) e->opt.block_tokens = KV_POOL_DEFAULT_BLOCK_TOKENS;
    if (e->opt.kv_memory_bytes <= 0) e->opt.kv_memory_bytes = (int64_t)256 << 20;
    if (e->opt.max_batch_tokens <= 0) e->opt.max_batch_tokens = 2048;
    if (e->opt.max_seqs <= 0) e->opt.max_seqs = 64;
    if (e->opt.max_ctx <= 0) e->opt.max_ctx = hp->n_ctx_train > 0 ? hp->n_ctx_train : 2048;
    if (e->opt.spec_max_batch <= 0) e->opt.spec_max_batch = 3;
    if (e->opt.spec_step_drafts <= 0) e->opt.spec_step_drafts = 64;
    if (e->opt.spec_step_drafts > e->opt.max_batch_tokens) e->opt.spec_step_drafts = e->opt.max_batch_tokens;
    if (e->opt.speculative.drafter < 0 || e->opt.speculative.drafter >= CINFER_SPEC_N || e->opt.speculative.k < 0 ||
        e->opt.speculative.k > CINFER_SPEC_MAX_K)
        return cf_fail(err, "engine: speculative drafter %d, k %d (expected a cinfer_spec_drafter, k 0..%d)",
                       e->opt.speculative.drafter, e->opt.speculative.k, CINFER_SPEC_MAX_K);
    if (e->opt.attn_precision != CINFER_ATTN_F32 && e->opt.attn_precision != CINFER_ATTN_BF16)
        return cf_fail(err, "engine: attention precision %d (expected a cinfer_attn_precision)", e->opt.attn_precision);
    if (tokenizer_load_gguf(model_get_gguf(m), &e->tok, err)) return cf_prefix(err, "engine: the model's tokenizer");
    if (tokenizer_n_vocab(e->tok) != e->n_vocab)
        return cf_fail(err, "engine: the tokenizer has %d tokens, the model %d", tokenizer_n_vocab(e->tok), e->n_vocab);
    sched_shape shape = {.n_layer = hp->n_layer,
                         .n_embd = hp->n_embd,
                         .n_head = hp->n_head,
                         .n_head_kv = hp->n_head_kv,
                         .head_dim = hp->head_dim,
                         .n_ff = hp->n_ff,
                         .n_vocab = hp->n_vocab};
    e->limits = sched_default_limits(&shape);
    e->limits.max_batch_tokens = e->opt.max_batch_tokens;
    e->limits.max_seqs = e->opt.max_seqs;
    if (e->limits.min_prefill_chunk > e->opt.max_batch_tokens) e->limits.min_prefill_chunk = e->opt.max_batch_tokens;
    kv_spec spec;
    uint8_t fp[PREFIX_KEY_BYTES];
    if (eng_kv_dtype(e->opt.kv_dtype, &e->kv_dt, err) || model_kv_dtype_check(m, e->kv_dt, err) ||
        kv_spec_from_model_as(m, e->kv_dt, &spec, err))
        return -1;
    int32_t bt_mult = kv_spec_block_multiple(&spec);
    if (e->opt.block_tokens % bt_mult) { /* e.g. deepseek4: one compressed row per 128 tokens */
        int32_t bt = (e->opt.block_tokens + bt_mult - 1) / bt_mult * bt_mult;
        LOG_INFO("engine: KV blocks of %d tokens, not %d: the model stores one row per %d tokens", bt,
                 e->opt.block_tokens, bt_mult);
        e->opt.block_tokens = bt;
    }
    int32_t ring_chunk = eng_ring_chunk(&spec, e->opt.block_tokens, e->opt.max_batch_tokens);
    if (ring_chunk > 0) { /* window layers: one ring per running sequence, chunks capped to fit it */
        e->window_rings = true;
        e->limits.max_seq_chunk = ring_chunk;
        if (e->limits.min_prefill_chunk > ring_chunk) e->limits.min_prefill_chunk = ring_chunk;
    }
    int32_t n_rings = ring_chunk > 0 ? eng_ring_count(e, &spec, ring_chunk) : 0;
    if (kv_pool_create_rings(&spec, e->opt.block_tokens, e->opt.kv_memory_bytes, n_rings, ring_chunk, &e->kv, err) ||
        prefix_cache_model_fingerprint(m, fp, err) || eng_fingerprint_attn(e, fp, err) ||
        eng_fingerprint_kv(e, fp, err) || prefix_cache_create(e->kv, fp, &e->pc, err) || eng_swa_init(e, &spec, err))
        return -1;
    e->kv_total = kv_pool_n_blocks(e->kv);
    e->fc = fwd_ctx_create_kv(m, tp, e->opt.max_batch_tokens, e->opt.max_ctx, e->opt.block_tokens, e->kv_dt, err);
    if (!e->fc) return -1;
    fwd_ctx_set_attn_prec(e->fc, eng_attn_prec(e));
    if (e->opt.moe_executor && fwd_ctx_set_moe_executor(e->fc, e->opt.moe_executor, err)) return -1;
    if (e->opt.draft_model && eng_draft_open(e, e->opt.draft_model, err)) return -1;
    if (eng_alloc_scratch(e, err) || eng_grammar_vocab_build(e, err) || eng_mtp_open(e, err)) return -1;
    int32_t dk = e->opt.speculative.drafter;
    if ((dk == CINFER_SPEC_MTP || dk == CINFER_SPEC_DSPARK) && eng_mtp_check(e, dk, err))
        return cf_prefix(err, "engine: speculative drafter %s", cinfer_spec_drafter_name(dk));
    if (!e->opt.sync_scheduling) {
        pthread_mutex_init(&e->exec_mu, NULL);
        pthread_cond_init(&e->exec_cv, NULL);
        if (pthread_create(&e->exec_thread, NULL, eng_exec_main, e) != 0) {
            pthread_mutex_destroy(&e->exec_mu);
            pthread_cond_destroy(&e->exec_cv);
            return cf_fail(err, "engine: cannot start the executor thread");
        }
        e->exec_started = true;
    }
    e->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (e->efd < 0) return cf_fail(err, "engine: eventfd: %s", strerror(errno));
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->work_cv, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->out_cv, &ca);
    pthread_condattr_destroy(&ca);
    kv_pool_stats ks = kv_pool_get_stats(e->kv);
    e->st.kv_blocks_total = ks.total;
    e->st.kv_blocks_free = ks.free;
    e->st.kv_bytes = ks.bytes;
    e->st.kv_budget = ks.budget;
    e->st.kv_dtype = (int32_t)e->kv_dt + CINFER_KV_F32; /* the two enums list the types in the same order */
    eng_note_kv(e);
    e->pub_st = e->st;
    eng_handoff_init(e);
    if (eng_kv_fingerprint(e, e->kv_fp, err) || eng_store_open(e, err)) return -1;
    model_trim_memory(m); /* the fingerprints above sampled every tensor: drop those pages again */
    if (pthread_create(&e->thread, NULL, eng_main, e) != 0) return cf_fail(err, "engine: cannot start the thread");
    e->thread_started = true;
    return 0;
}

static void eng_free_all(cinfer_engine *e) {
    /* Requests not in the table (released) are in the active array or the queue. */
    for (int32_t i = 0; i < e->n_active; i++)
        if (e->active[i]->reader_done) eng_req_free(e->active[i]);
    for (eng_req *r = e->q_head, *n; r; r = n) {
        n = r->qnext;
        if (r->reader_done) eng_req_free(r);
    }
    for (eng_req *r = e->imp_head, *n; r; r = n) {
        n = r->qnext;
        if (r->reader_done) eng_req_free(r);
    }
    for (int b = 0; b < ENG_HASH_BUCKETS; b++)
        for (eng_req *r = e->buckets[b], *n; r; r = n) {
            n = r->hnext;
            eng_req_free(r);
        }
}

/* Pools of engines whose store was abandoned at destroy (a stuck I/O thread may still write into them):
 * never freed, and reachable so leak checkers do not report them. */
static kv_pool *g_kept_pools[8];
static int g_n_kept_pools;

void cinfer_engine_destroy(cinfer_engine *e) {
    if (!e) return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->mu);
        e->stop = true;
        pthread_cond_signal(&e->work_cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
        eng_store_close(e); /* before mu goes: the store's threads notify through it */
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->work_cv);
        pthread_cond_destroy(&e->out_cv);
    }
    if (e->exec_started) {
        pthread_mutex_lock(&e->exec_mu);
        e->exec_stop = true;
        pthread_cond_broadcast(&e->exec_cv);
        pthread_mutex_unlock(&e->exec_mu);
        pthread_join(e->exec_thread, NULL);
        pthread_mutex_destroy(&e->exec_mu);
        pthread_cond_destroy(&e->exec_cv);
    }
    eng_store_close(e); /* no-op when done above */
    eng_free_all(e);
    if (e->efd > 0) close(e->efd);
    prefix_cache_free(e->pc);
    if (!e->store_abandoned) swa_state_free(e->swa); /* else a stuck snapshot write may still read a slot */
    if (e->store_abandoned) { /* a stuck store thread may still read into a pool block: keep the pool */
        if (g_n_kept_pools < 8) g_kept_pools[g_n_kept_pools++] = e->kv;
    } else {
        kv_pool_free(e->kv);
    }
    fwd_ctx_free(e->fc);
    eng_draft_close(e);
    eng_mtp_close(e);
    tokenizer_free(e->tok);
    cinfer_grammar_vocab_free(e->gvocab);
    free(e->tok_bytes);
    free(e->tok_off);
    eng_free_stepbuf(&e->sb[0]);
    eng_free_stepbuf(&e->sb[1]);
    free(e->lp_row);
    free(e->dtbuf);
    free(e->active);
    free(e->s_reqs);
    free(e->s_items);
    free(e->s_pre);
    free(e->s_scratch);
    free(e->touched);
    free(e->cancelled);
    free(e->ready_ids);
    free(e);
}

const tokenizer *cinfer_engine_tokenizer(const cinfer_engine *e) { return e->tok; }

int cinfer_engine_create(const cinfer_model *m, cinfer_thread_pool *pool, const cinfer_engine_options *opt,
                         cinfer_engine **out, char *err, size_t err_len) {
    *out = NULL;
    cf_err ce = {0};
    cinfer_engine *e = calloc(1, sizeof *e);
    if (!e) {
        eng_set_err(err, err_len, "out of memory");
        return -1;
    }
    e->efd = -1;
    if (eng_init(e, m, pool, opt, &ce)) {
        eng_set_err(err, err_len, ce.msg);
        cinfer_engine_destroy(e);
        return -1;
    }
    *out = e;
    return 0;
}

/* ---- submit ---- */

static int eng_req_copy(cinfer_engine *e, eng_req *q, const cinfer_request *r, cf_err *err) {
    int32_t bt = e->opt.block_tokens;
    q->prompt_len = r->n_prompt;
    int32_t room = e->opt.max_ctx - r->n_prompt + 1; /* the last token needs no position */
    q->max_tokens = r->max_tokens < room ? r->max_tokens : room;
    q->st_stop_string = q->o_stop_string = -1;
    q->ring = -1;
    q->swa_slot = -1;
    q->swa_snap_block = -1;
    q->priority = r->priority;
    q->traffic_class = r->traffic_class;
    q->ignore_eos = r->ignore_eos;
    q->swa_exact = r->swa_exact;
    q->min_tokens = r->min_tokens;
    q->include_stop_str = r->include_stop_str;
    q->want_logprobs = r->want_logprobs;
    q->top_k = !r->want_logprobs || r->top_logprobs <= 0   ? 0
               : r->top_logprobs > CINFER_MAX_TOP_LOGPROBS ? CINFER_MAX_TOP_LOGPROBS
                                                           : r->top_logprobs;
    int32_t cap = q->prompt_len + q->max_tokens;
    q->max_blocks = (cap - 1 + bt - 1) / bt;
    if (q->max_blocks > e->kv_total)
        return cf_fail(err, "request needs %d KV blocks (%d tokens); the pool holds %d", q->max_blocks, cap - 1,
                       e->kv_total);
    q->seq = malloc((size_t)cap * sizeof(int32_t));
    q->blocks = malloc((size_t)q->max_blocks * sizeof(int32_t));
    q->bptr = malloc((size_t)q->max_blocks * sizeof(float *));
    if (!q->seq || !q->blocks || !q->bptr) return cf_fail(err, "out of memory");
    memcpy(q->seq, r->prompt, (size_t)r->n_prompt * sizeof(int32_t));
    if (r->n_stop_tokens > 0) {
        q->stop_ids = malloc((size_t)r->n_stop_tokens * sizeof(int32_t));
        if (!q->stop_ids) return cf_fail(err, "out of memory");
        memcpy(q->stop_ids, r->stop_tokens, (size_t)r->n_stop_tokens * sizeof(int32_t));
        q->n_stop_ids = r->n_stop_tokens;
    }
    if (r->n_stop_strings > 0) {
        q->stop_strs = calloc((size_t)r->n_stop_strings, sizeof(char *));
        q->stop_lens = calloc((size_t)r->n_stop_strings, sizeof(size_t));
        if (!q->stop_strs || !q->stop_lens) return cf_fail(err, "out of memory");
        for (int32_t i = 0; i < r->n_stop_strings; i++) {
            const char *s = r->stop_strings[i];
            if (!s || !s[0]) return cf_fail(err, "stop string %d is empty", i);
            q->stop_strs[i] = strdup(s);
            if (!q->stop_strs[i]) return cf_fail(err, "out of memory");
            q->stop_lens[i] = strlen(s);
            q->n_stop_strs = i + 1;
        }
    }
    /* the salt, then the approximate-lineage marker (eng_swa_approx_salt: the salt plus the marker) */
    q->salt = malloc(r->cache_salt_len + sizeof ENG_SWA_APPROX_MARK);
    if (!q->salt) return cf_fail(err, "out of memory");
    if (r->cache_salt_len > 0) memcpy(q->salt, r->cache_salt, r->cache_salt_len);
    memcpy(q->salt + r->cache_salt_len, ENG_SWA_APPROX_MARK, sizeof ENG_SWA_APPROX_MARK);
    q->salt_len = r->cache_salt_len;
    sampler_params sp = {
        .temperature = r->sampling.temperature,
        .top_k = r->sampling.top_k,
        .top_p = r->sampling.top_p,
        .min_p = r->sampling.min_p,
        .repetition_penalty = r->sampling.repetition_penalty,
        .presence_penalty = r->sampling.presence_penalty,
        .frequency_penalty = r->sampling.frequency_penalty,
        .bias = (const logit_bias *)r->sampling.bias,
        .n_bias = r->sampling.n_bias,
        .seed = r->sampling.seed,
    };
    q->smp = sampler_create(&sp, e->n_vocab);
    if (!q->smp) return cf_fail(err, "out of memory for the sampler");
    detok_init(&q->dt, e->tok, false, r->keep_special);
    eng_think_init(q, r);
    if (eng_spec_init(e, q, r, err)) return -1;
    q->state = SCHED_WAITING;
    q->usage.prompt_tokens = q->prompt_len;
    if (r->n_kv_import < 0 || (r->n_kv_import > 0 && !r->kv_import)) return cf_fail(err, "inconsistent KV import");
    return eng_grammar_init(e, q, r, err); /* last: it takes the matcher only when nothing else can fail */
}

static int eng_check_request(const cinfer_engine *e, const cinfer_request *r, cf_err *err) {
    if (!r || !r->prompt || r->n_prompt < 1) return cf_fail(err, "the prompt is empty");
    if (r->n_prompt > e->opt.max_ctx)
        return cf_fail(err, "the prompt has %d tokens; the context holds %d", r->n_prompt, e->opt.max_ctx);
    if (r->max_tokens < 1) return cf_fail(err, "max_tokens is %d (expected >= 1)", r->max_tokens);
    for (int32_t i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= e->n_vocab)
            return cf_fail(err, "prompt token %d is %d (vocabulary of %d)", i, r->prompt[i], e->n_vocab);
    if (r->n_stop_tokens < 0 || r->n_stop_strings < 0 || (r->n_stop_tokens > 0 && !r->stop_tokens) ||
        (r->n_stop_strings > 0 && !r->stop_strings) || (r->sampling.n_bias > 0 && !r->sampling.bias))
        return cf_fail(err, "inconsistent stop / bias arrays");
    return eng_think_check(r, e->n_vocab, err) || eng_grammar_check(r, err) ? -1 : 0;
}

uint64_t cinfer_engine_submit(cinfer_engine *e, const cinfer_request *r, char *err, size_t err_len) {
    cf_err ce = {0};
    eng_req *q = NULL;
    if (eng_check_request(e, r, &ce) || !(q = calloc(1, sizeof *q)) || eng_req_copy(e, q, r, &ce)) {
        eng_set_err(err, err_len, ce.msg[0] ? ce.msg : "out of memory");
        eng_req_free(q);
        return 0;
    }
    q->kv_import = r->kv_import; /* owned from here (given back once installed, or with the request) */
    q->n_kv_import = r->kv_import ? r->n_kv_import : 0;
    q->kv_import_window = r->kv_import ? r->kv_import_window : NULL;
    q->kv_import_window_bytes = q->kv_import_window ? r->kv_import_window_bytes : 0;
    q->kv_import_release = r->kv_import_release;
    q->kv_import_owner = r->kv_import_owner;
    if (r->kv_export) cinfer_kv_export_ref(r->kv_export);
    q->kv_export = r->kv_export;
    pthread_mutex_lock(&e->mu);
    q->id = ++e->next_id;
    eng_req **slot = &e->buckets[q->id % ENG_HASH_BUCKETS];
    q->hnext = *slot;
    *slot = q;
    if (e->q_tail) e->q_tail->qnext = q;
    else e->q_head = q;
    e->q_tail = q;
    pthread_cond_signal(&e->work_cv);
    pthread_mutex_unlock(&e->mu);
    return q->id;
}

int cinfer_engine_cancel(cinfer_engine *e, uint64_t id) {
    pthread_mutex_lock(&e->mu);
    eng_req *r = eng_find(e, id);
    if (r && !r->engine_done) {
        r->cancel = true;
        e->cancel_pending = true;
        pthread_cond_signal(&e->work_cv);
    }
    pthread_mutex_unlock(&e->mu);
    return r ? 0 : -1;
}

int cinfer_engine_release(cinfer_engine *e, uint64_t id) {
    pthread_mutex_lock(&e->mu);
    eng_req *r = eng_find(e, id);
    if (!r) {
        pthread_mutex_unlock(&e->mu);
        return -1;
    }
    eng_unlink(e, r);
    r->reader_done = true;
    bool free_now = r->engine_done;
    if (!free_now) {
        r->cancel = true;
        e->cancel_pending = true;
        pthread_cond_signal(&e->work_cv);
    }
    pthread_mutex_unlock(&e->mu);
    if (free_now) eng_req_free(r);
    return 0;
}

/* ---- read ---- */

static bool eng_has_output(const eng_req *r) {
    return r->o_n > 0 || r->o_text.len > 0 || r->o_finish != CINFER_FINISH_NONE;
}

/* Copies r's pending output into o (mu held). Returns -1 when out of memory. */
static int eng_move_output(eng_req *r, cinfer_output *o) {
    if (r->o_n > o->tok_cap) {
        int32_t cap = r->o_n > 16 ? r->o_n : 16;
        int32_t *t = realloc(o->tokens, (size_t)cap * sizeof(int32_t));
        if (t) o->tokens = t;
        float *l = realloc(o->logprobs, (size_t)cap * sizeof(float));
        if (l) o->logprobs = l;
        if (!t || !l) return -1;
        o->tok_cap = cap;
    }
    if (r->top_k && r->o_n * r->top_k > o->top_cap) { /* top_cap counts entries, not tokens */
        int32_t cap = r->o_n * r->top_k > 256 ? r->o_n * r->top_k : 256;
        int32_t *t = realloc(o->top_ids, (size_t)cap * sizeof(int32_t));
        if (t) o->top_ids = t;
        float *l = realloc(o->top_logprobs, (size_t)cap * sizeof(float));
        if (l) o->top_logprobs = l;
        if (!t || !l) return -1;
        o->top_cap = cap;
    }
    if (r->o_text.len + 1 > o->text_cap) {
        size_t cap = r->o_text.len + 1 > 256 ? r->o_text.len + 1 : 256;
        char *p = realloc(o->text, cap);
        if (!p) return -1;
        o->text = p;
        o->text_cap = cap;
    }
    o->n_tokens = r->o_n;
    if (r->o_n) memcpy(o->tokens, r->o_tokens, (size_t)r->o_n * sizeof(int32_t));
    if (r->o_n && r->want_logprobs) memcpy(o->logprobs, r->o_logprobs, (size_t)r->o_n * sizeof(float));
    o->n_top = r->top_k;
    if (r->o_n && r->top_k) {
        memcpy(o->top_ids, r->o_top_ids, (size_t)r->o_n * (size_t)r->top_k * sizeof(int32_t));
        memcpy(o->top_logprobs, r->o_top_lps, (size_t)r->o_n * (size_t)r->top_k * sizeof(float));
    }
    o->text_len = r->o_text.len;
    if (r->o_text.len) memcpy(o->text, r->o_text.p, r->o_text.len);
    o->text[o->text_len] = 0;
    o->finish = r->o_finish;
    o->stop_string = r->o_finish != CINFER_FINISH_NONE ? r->o_stop_string : -1;
    o->usage = r->o_usage;
    memcpy(o->error, r->o_error, sizeof o->error);
    r->o_n = 0;
    r->o_text.len = 0;
    return 0;
}

int cinfer_engine_read(cinfer_engine *e, uint64_t id, cinfer_output *out, int timeout_ms) {
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    if (timeout_ms > 0) {
        dl.tv_sec += timeout_ms / 1000;
        dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&e->mu);
    eng_req *r = eng_find(e, id);
    if (!r) {
        pthread_mutex_unlock(&e->mu);
        return -1;
    }
    while (!eng_has_output(r) && timeout_ms != 0) {
        if (timeout_ms < 0) pthread_cond_wait(&e->out_cv, &e->mu);
        else if (pthread_cond_timedwait(&e->out_cv, &e->mu, &dl) == ETIMEDOUT) break;
    }
    if (!eng_has_output(r)) {
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    if (eng_move_output(r, out)) {
        pthread_mutex_unlock(&e->mu);
        return -1;
    }
    bool free_now = false;
    if (out->finish != CINFER_FINISH_NONE) {
        eng_unlink(e, r);
        r->reader_done = true;
        free_now = r->engine_done; /* false while a step in flight still refers to it: the engine frees it */
    }
    pthread_mutex_unlock(&e->mu);
    if (free_now) eng_req_free(r);
    return 1;
}

int cinfer_engine_fd(const cinfer_engine *e) { return e->efd; }

int cinfer_engine_ready(cinfer_engine *e, uint64_t *ids, int cap) {
    uint64_t v;
    ssize_t rc = read(e->efd, &v, sizeof v);
    (void)rc; /* EAGAIN when nothing was signalled */
    pthread_mutex_lock(&e->mu);
    int n = 0;
    while (n < cap && e->n_ready > 0) {
        uint64_t id = e->ready_ids[--e->n_ready];
        eng_req *r = eng_find(e, id);
        if (!r) continue;
        r->in_ready = false;
        ids[n++] = id;
    }
    bool more = e->n_ready > 0;
    pthread_mutex_unlock(&e->mu);
    if (more) {
        v = 1;
        rc = write(e->efd, &v, sizeof v);
        (void)rc;
    }
    return n;
}

cinfer_engine_stats cinfer_engine_get_stats(cinfer_engine *e) {
    pthread_mutex_lock(&e->mu);
    cinfer_engine_stats s = e->pub_st;
    pthread_mutex_unlock(&e->mu);
    return s;
}

/* ---- the engine thread ---- */

/* Grows the active array and the per-request step arrays to hold n. */
static int eng_grow_active(cinfer_engine *e, int32_t n) {
    if (n <= e->cap_active) return 0;
    int32_t cap = e->cap_active ? e->cap_active : 64;
    while (cap < n) cap *= 2;
    void *a = realloc(e->active, (size_t)cap * sizeof *e->active);
    if (a) e->active = a;
    void *b = realloc(e->s_reqs, (size_t)cap * sizeof *e->s_reqs);
    if (b) e->s_reqs = b;
    void *c = realloc(e->s_items, (size_t)cap * sizeof *e->s_items);
    if (c) e->s_items = c;
    void *d = realloc(e->s_pre, (size_t)cap * sizeof *e->s_pre);
    if (d) e->s_pre = d;
    void *f = realloc(e->s_scratch, 2 * (size_t)cap * sizeof *e->s_scratch);
    if (f) e->s_scratch = f;
    void *g = realloc(e->touched, (size_t)cap * sizeof *e->touched);
    if (g) e->touched = g;
    void *h = realloc(e->cancelled, (size_t)cap * sizeof *e->cancelled);
    if (h) e->cancelled = h;
    if (!a || !b || !c || !d || !f || !g || !h) return -1;
    e->cap_active = cap;
    return 0;
}

/* Moves submissions into the active array and collects cancelled requests
 * (mu held). Returns the number of cancelled requests in e->cancelled. */
static int32_t eng_drain(cinfer_engine *e) {
    while (e->q_head) {
        if (eng_grow_active(e, e->n_active + 1)) break; /* retry next step */
        eng_req *r = e->q_head;
        e->q_head = r->qnext;
        if (!e->q_head) e->q_tail = NULL;
        r->qnext = NULL;
        if (r->kv_import && e->inflight) { /* installed once that pass is committed (eng_admit_imports) */
            r->qnext = e->imp_head;
            e->imp_head = r;
            continue;
        }
        e->active[e->n_active++] = r;
        e->st.submitted++;
    }
    int32_t n = 0;
    if (e->cancel_pending) {
        for (int32_t i = 0; i < e->n_active; i++)
            if (e->active[i]->cancel) e->cancelled[n++] = e->active[i];
        e->cancel_pending = false;
    }
    return n;
}

/* Handoff imports held back by eng_drain: installed now (no pass in flight) and made active. */
static void eng_admit_imports(cinfer_engine *e) {
    while (e->imp_head && !e->inflight) {
        if (eng_grow_active(e, e->n_active + 1)) return; /* retry after the next pass */
        eng_req *r = e->imp_head;
        e->imp_head = r->qnext;
        r->qnext = NULL;
        eng_handoff_import(e, r);
        e->active[e->n_active++] = r;
        e->st.submitted++;
    }
}

/* When nothing can be planned although unfinished requests wait and no step
 * is in flight (cannot happen while every request fits the pool alone;
 * defensive), fail the oldest one. */
static void eng_fail_stuck(cinfer_engine *e) {
    eng_req *best = NULL;
    for (int32_t i = 0; i < e->n_active; i++) {
        eng_req *r = e->active[i];
        if (!r->done && (!best || r->id < best->id)) best = r;
    }
    if (best) eng_finish(e, best, CINFER_FINISH_ERROR, false, "the request could not be scheduled");
}

/* The loop. One iteration, with step N in flight on the executor:
 *   drain submissions and cancels            | overlaps step N
 *   plan step N+1 (eng_plan)                 | overlaps step N
 *   wait for N; commit it (sample, stops)    | critical path
 *   assemble N+1 and dispatch it             | critical path
 *   detokenize / stop strings / publish N    | overlaps step N+1
 * In sync mode the dispatch runs the forward pass inline, so nothing
 * overlaps (kept for measurement and as a fallback). */
static void *eng_main(void *arg) {
    cinfer_engine *e = arg;
    bool stalled = false; /* the last iteration ran nothing: every runnable request waits for the store */
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->stop && !e->q_head && !e->cancel_pending && !e->store_wake && !e->inflight &&
               (e->n_active == 0 || stalled)) {
            if (!stalled) pthread_cond_wait(&e->work_cv, &e->mu);
            else if (eng_store_wait(e)) break; /* timed: store load timeouts */
        }
        e->store_wake = false;
        double t0 = time_now();
        bool stop = e->stop;
        int32_t n_old = e->n_active;
        int32_t n_cancel = stop ? 0 : eng_drain(e);
        pthread_mutex_unlock(&e->mu);
        for (int32_t i = n_old; i < e->n_active; i++) /* no pass in flight here, or eng_drain held it back */
            if (e->active[i]->kv_import) eng_handoff_import(e, e->active[i]);
        if (stop) {
            eng_stepbuf *sb = eng_wait_inflight(e);
            if (sb) eng_commit(e, sb);
            break;
        }
        eng_store_poll(e);
        for (int32_t i = 0; i < n_cancel; i++) eng_finish(e, e->cancelled[i], CINFER_FINISH_CANCELLED, true, NULL);
        bool was_inflight = e->inflight != NULL;
        eng_stepbuf *next = &e->sb[e->sb_next];
        eng_plan_result rc = eng_plan(e, next);
        double t1 = time_now();
        eng_stepbuf *done = eng_wait_inflight(e);
        double t2 = time_now();
        if (done) eng_commit(e, done);
        if (e->imp_head) eng_admit_imports(e);
        if (eng_assemble(e, next) > 0) {
            eng_dispatch(e, next);
            e->sb_next ^= 1;
        }
        if (e->exec_started && e->inflight) eng_grammar_prefetch(e, e->inflight); /* overlaps its forward */
        double t_sync_fwd = 0;
        if (!e->exec_started && e->inflight) { /* sync mode: the pass already ran inside eng_dispatch */
            eng_stepbuf *sb = eng_wait_inflight(e);
            t_sync_fwd = sb->t_forward;
            eng_commit(e, sb);
            done = sb;
        }
        if (done) e->st.t_forward += done->t_forward;
        if ((rc == ENG_PLAN_IDLE || rc == ENG_PLAN_ERROR) && !was_inflight && !e->inflight) eng_fail_stuck(e);
        stalled = rc == ENG_PLAN_WAIT_STORE && !was_inflight && !e->inflight;
        double t4 = time_now();
        eng_process_outputs(e);
        eng_publish(e);
        ENG_CHECK(e, "after an engine step");
        double t5 = time_now();
        e->st.t_plan += t1 - t0;
        e->st.t_wait += t2 - t1 + t_sync_fwd;
        e->st.t_commit += t4 - t2 - t_sync_fwd;
        e->st.t_output += t5 - t4;
    }
    return NULL;
}
