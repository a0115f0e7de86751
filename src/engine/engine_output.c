/* engine_output.c - what happens to a sampled token after the forward pass,
 * and how outputs reach readers. Runs on the engine thread, in two parts.
 *
 * Commit side (eng_on_token, on the critical path between two forward
 * passes): the token is recorded as pending; EOS/EOG (unless ignore_eos) or a
 * stop token id -> finish STOP, the token is counted but neither its id nor
 * its text is emitted; n_generated reaching max_tokens (already clipped to the
 * context) -> finish LENGTH. A finishing request is marked done and its
 * blocks are released at once, so the next step drops it.
 *
 * Output side (eng_process_outputs, while the next step computes): each
 * pending id (one per step, or several from a verify item) is staged, its bytes go through the request's streaming
 * detokenizer into `held`; a stop string found in `held` ends the request
 * (text before it is emitted, the stop string only with include_stop_str, anything after never;
 * its index is reported with the finish, cinfer_output.stop_string;
 * if the request was already in the next step, that step's result for it is
 * dropped because its epoch changed); otherwise everything in `held` except
 * the longest tail that is a proper prefix of some stop string is emitted
 * (that tail may still complete a stop string with the next token's text);
 * then a finish decided at commit is applied (flushing held text).
 * Correctness of the hold-back: no emitted byte can begin an occurrence of a
 * stop string, so any occurrence lies entirely inside `held`.
 *
 * Publishing (eng_publish): staged outputs of every request touched this step
 * are appended to their shared queues under mu in one critical section
 * (memcpy only), then readers are woken (condvar broadcast + eventfd).
 * Finished requests leave the active array once no step in flight refers to
 * them; if the reader already let go (cinfer_engine_release) they are freed
 * there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine_internal.h"

void eng_touch(cinfer_engine *e, eng_req *r) {
    if (r->st_touched) return;
    r->st_touched = true;
    e->touched[e->n_touched++] = r;
}

/* Moves held[0..n) to the staged text. */
static void eng_emit_held(eng_req *r, size_t n) {
    if (n == 0) return;
    if (strbuf_append(&r->st_text, r->held.p, n)) n = 0; /* out of memory: text dropped, ids still flow */
    memmove(r->held.p, r->held.p + n, r->held.len - n);
    r->held.len -= n;
}

void eng_finish(cinfer_engine *e, eng_req *r, cinfer_finish why, bool flush, const char *error) {
    if (r->st_finish != CINFER_FINISH_NONE) return;
    eng_touch(e, r);
    if (flush) {
        size_t n = detok_flush(&r->dt, e->dtbuf, e->dtbuf_cap);
        if (n) strbuf_append(&r->held, e->dtbuf, n);
        eng_emit_held(r, r->held.len);
    }
    r->held.len = 0;
    r->st_finish = why;
    r->done = true;
    eng_release_blocks(e, r);
    if (error) snprintf(r->st_error, sizeof r->st_error, "%s", error);
    r->usage.completion_tokens = r->n_generated;
}

static bool eng_is_stop_id(const eng_req *r, int32_t tok) {
    for (int32_t i = 0; i < r->n_stop_ids; i++)
        if (r->stop_ids[i] == tok) return true;
    return false;
}

/* Offset of the earliest stop string occurrence in held, or -1; *which gets
 * that stop string's index (the lowest one among those at that offset). */
static ptrdiff_t eng_find_stop(const eng_req *r, int32_t *which) {
    ptrdiff_t best = -1;
    for (int32_t i = 0; i < r->n_stop_strs; i++) {
        const char *p = memmem(r->held.p, r->held.len, r->stop_strs[i], r->stop_lens[i]);
        if (p && (best < 0 || p - r->held.p < best)) {
            best = p - r->held.p;
            *which = i;
        }
    }
    return best;
}

/* Bytes of held that can no longer be part of a stop string. */
static size_t eng_safe_len(const eng_req *r) {
    size_t len = r->held.len;
    for (size_t i = 0; i < len; i++) {
        size_t tail = len - i;
        for (int32_t s = 0; s < r->n_stop_strs; s++)
            if (tail < r->stop_lens[s] && !memcmp(r->held.p + i, r->stop_strs[s], tail)) return i;
    }
    return len;
}

void eng_on_token(cinfer_engine *e, eng_req *r, int32_t tok, float logprob, bool drafted) {
    eng_touch(e, r);
    if (r->pend_n == 0) r->pend_gen = r->n_generated - 1;
    r->usage.accepted_draft_tokens += drafted;
    if ((!r->ignore_eos && tokenizer_is_eog(e->tok, tok)) || eng_is_stop_id(r, tok)) {
        r->pend_finish = CINFER_FINISH_STOP;
    } else {
        int32_t i = r->pend_n++;
        r->pend_tok[i] = tok;
        r->pend_lp[i] = logprob;
        r->pend_drafted[i] = drafted;
        if (r->n_generated >= r->max_tokens) r->pend_finish = CINFER_FINISH_LENGTH;
    }
    if (r->pend_finish != CINFER_FINISH_NONE) {
        r->done = true;
        eng_release_blocks(e, r);
    }
}

/* Output side for r's pending token i. A stop string found there ends the
 * request: tokens committed after it in the same step (a verify item's) are
 * not output and not counted, as if generation had stopped there. */
static void eng_output_token(cinfer_engine *e, eng_req *r, int32_t i) {
    int32_t n = r->st_n++;
    r->st_tokens[n] = r->pend_tok[i];
    r->st_logprobs[n] = r->pend_lp[i];
    if (r->top_k) {
        memcpy(r->st_top_ids[n], r->pend_top_ids[i], (size_t)r->top_k * sizeof(int32_t));
        memcpy(r->st_top_lps[n], r->pend_top_lps[i], (size_t)r->top_k * sizeof(float));
    }
    size_t len = detok_push(&r->dt, r->pend_tok[i], e->dtbuf, e->dtbuf_cap);
    if (len) strbuf_append(&r->held, e->dtbuf, len);
    if (r->n_stop_strs > 0) {
        int32_t which = -1;
        ptrdiff_t at = eng_find_stop(r, &which);
        if (at >= 0) {
            eng_emit_held(r, (size_t)at + (r->include_stop_str ? r->stop_lens[which] : 0));
            eng_finish(e, r, CINFER_FINISH_STOP, false, NULL);
            r->st_stop_string = which; /* eng_finish staged this finish (the first one wins) */
            r->usage.completion_tokens = r->pend_gen + i + 1;
            for (int32_t j = i + 1; j < r->pend_n; j++) r->usage.accepted_draft_tokens -= r->pend_drafted[j];
            return;
        }
    }
    eng_emit_held(r, r->n_stop_strs > 0 ? eng_safe_len(r) : r->held.len);
}

void eng_process_outputs(cinfer_engine *e) {
    for (int32_t i = 0; i < e->n_touched; i++) {
        eng_req *r = e->touched[i];
        for (int32_t j = 0; j < r->pend_n && r->st_finish == CINFER_FINISH_NONE; j++) eng_output_token(e, r, j);
        if (r->st_finish == CINFER_FINISH_NONE && r->pend_finish != CINFER_FINISH_NONE)
            eng_finish(e, r, r->pend_finish, true, NULL);
        r->pend_n = 0;
        r->pend_finish = CINFER_FINISH_NONE;
    }
}

/* Appends r's staged output to its shared queue (mu held). */
static void eng_publish_one(cinfer_engine *e, eng_req *r) {
    for (int32_t i = 0; i < r->st_n; i++) {
        if (r->o_n == r->o_cap) {
            int32_t cap = r->o_cap ? 2 * r->o_cap : 16;
            int32_t *t = realloc(r->o_tokens, (size_t)cap * sizeof(int32_t));
            if (t) r->o_tokens = t;
            float *l = realloc(r->o_logprobs, (size_t)cap * sizeof(float));
            if (l) r->o_logprobs = l;
            bool top_ok = true;
            if (r->top_k) {
                int32_t *ti = realloc(r->o_top_ids, (size_t)cap * (size_t)r->top_k * sizeof(int32_t));
                if (ti) r->o_top_ids = ti;
                float *tl = realloc(r->o_top_lps, (size_t)cap * (size_t)r->top_k * sizeof(float));
                if (tl) r->o_top_lps = tl;
                top_ok = ti && tl;
            }
            if (t && l && top_ok) r->o_cap = cap;
        }
        if (r->o_n < r->o_cap) {
            if (r->top_k) {
                memcpy(r->o_top_ids + (size_t)r->o_n * (size_t)r->top_k, r->st_top_ids[i],
                       (size_t)r->top_k * sizeof(int32_t));
                memcpy(r->o_top_lps + (size_t)r->o_n * (size_t)r->top_k, r->st_top_lps[i],
                       (size_t)r->top_k * sizeof(float));
            }
            r->o_tokens[r->o_n] = r->st_tokens[i];
            r->o_logprobs[r->o_n++] = r->st_logprobs[i];
        }
    }
    if (r->st_text.len) strbuf_append(&r->o_text, r->st_text.p, r->st_text.len);
    if (r->st_finish != CINFER_FINISH_NONE) {
        r->o_finish = r->st_finish;
        r->o_stop_string = r->st_stop_string;
        r->o_usage = r->usage;
        memcpy(r->o_error, r->st_error, sizeof r->o_error);
    }
    r->st_n = 0;
    r->st_text.len = 0;
    if (!r->in_ready && !r->reader_done) {
        if (e->n_ready == e->cap_ready) {
            int32_t cap = e->cap_ready ? 2 * e->cap_ready : 64;
            uint64_t *p = realloc(e->ready_ids, (size_t)cap * sizeof(uint64_t));
            if (p) {
                e->ready_ids = p;
                e->cap_ready = cap;
            }
        }
        if (e->n_ready < e->cap_ready) {
            e->ready_ids[e->n_ready++] = r->id;
            r->in_ready = true;
        }
    }
}

/* Drops finished requests no step in flight refers to from the active array
 * (order does not matter: the scheduler ranks by priority and arrival) and
 * counts the states left (mu held). They become engine_done; those whose
 * reader already let go are collected in free_list. */
static int32_t eng_compact(cinfer_engine *e, eng_req **free_list) {
    int32_t w = 0, running = 0, n_free = 0;
    for (int32_t i = 0; i < e->n_active; i++) {
        eng_req *r = e->active[i];
        if (r->st_finish != CINFER_FINISH_NONE && !r->in_flight) {
            r->engine_done = true;
            e->st.finished++;
            if (r->reader_done) free_list[n_free++] = r;
            continue;
        }
        running += r->state == SCHED_RUNNING && !r->done;
        e->active[w++] = r;
    }
    e->n_active = w;
    e->st.running = running;
    e->st.waiting = w - running;
    return n_free;
}

void eng_publish(cinfer_engine *e) {
    eng_note_kv(e);
    pthread_mutex_lock(&e->mu);
    for (int32_t i = 0; i < e->n_touched; i++) {
        eng_req *r = e->touched[i];
        r->st_touched = false;
        eng_publish_one(e, r);
    }
    bool any = e->n_touched > 0;
    e->n_touched = 0;
    int32_t n_free = eng_compact(e, e->touched); /* reuse the array: to free below */
    e->pub_st = e->st;
    if (any) pthread_cond_broadcast(&e->out_cv);
    pthread_mutex_unlock(&e->mu);
    for (int32_t i = 0; i < n_free; i++) eng_req_free(e->touched[i]);
    if (any) {
        uint64_t one = 1;
        ssize_t rc = write(e->efd, &one, sizeof one);
        (void)rc;
    }
}
