/* deepseek2_experts.c - the routed experts of a deepseek2 MoE layer: their
 * stacks in the file ([in, out, n_expert]; gate and up of one type become
 * one stacked gate|up matrix per expert), their preparation and residency.
 *
 * Two modes:
 *  - every expert (no expert_keep): each expert is prepared at load into
 *    model weight buffers (model_wbuf: the arena or the weights cache), as
 *    before; emem stays NULL and nothing is released before the model.
 *  - a partial expert set (expert parallelism: model_load_opts.expert_keep):
 *    only the kept experts are prepared, each into buffers of its own
 *    (emem[e].buf: anonymous mappings of their own); the others' file pages are never read.
 *    ds2_expert_acquire prepares one more later from the file mapping (every
 *    rank maps the same file), ds2_expert_release frees its copies and drops
 *    its file pages. So a rank's resident expert memory is the experts its
 *    placement gives it.
 * Invariants: emem[e].resident is set (release) only after expert e's
 * kern_weights are complete, and cleared before they are torn down; the
 * caller of acquire/release guarantees no forward pass uses that expert
 * meanwhile (the ep runtime switches plans at a round boundary) and that one
 * expert is not acquired and released concurrently. Other experts may be in
 * use: each expert's kern_weights are its own entries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch/deepseek2.h"
#include "model/arch/expert_buf.h"

/* Finds a [in, out, n_expert] expert stack and checks its shape and type. */
static const gguf_tensor *expert_tensor(const model *m, const char *name, int64_t in, int64_t out, cf_err *err) {
    int32_t ne = m->hp.n_expert;
    const gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    if (!t) {
        cf_fail(err, "missing tensor %s", name);
        return NULL;
    }
    if (t->n_dims != 3 || t->ne[0] != in || t->ne[1] != out || t->ne[2] != ne || t->ne[3] != 1) {
        cf_fail(err, "tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %d]", name,
                (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], (long long)in,
                (long long)out, ne);
        return NULL;
    }
    if (!dtype_computable(t->type) && t->type != DT_F8_B128) {
        cf_fail(err, "tensor %s has type %s, which cinfer cannot compute", name, dtype_name(t->type));
        return NULL;
    }
    return t;
}

static void count_experts(model *m, const gguf_tensor *t, uint64_t *bytes, uint64_t *params) {
    uint64_t n = (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2]);
    m->weight_bytes += t->nbytes;
    m->n_params += n;
    *bytes += t->nbytes;
    *params += n;
}

/* Prepares expert e's matrix of stack t (FP8: its scales) from src (its
 * slice in the file mapping, or raw: bytes another process sent) into w.
 * own: the repacked copy goes into a buffer of the expert (*buf, counted in
 * *bytes) and the slice's file pages are released; a raw slice the kernels
 * read in place is copied into such a buffer. Else into a model weight
 * buffer. */
static int prep_matrix(model *m, const gguf_tensor *t, const float *scale, int32_t e, const char *src, bool raw,
                       bool own, kern_weight *w, void **buf, size_t *buf_len, uint64_t *bytes, cf_err *err) {
    int64_t in = t->ne[0], out = t->ne[1];
    if (t->type == DT_F8_B128) { /* read in place, with its slice of the stacked scales */
        *bytes += expert_slice_bytes(t);
        int64_t per = ((in + 127) / 128) * ((out + 127) / 128);
        return kern_weight_prepare_fp8(w, (const uint8_t *)src, scale + per * e, out, in, err);
    }
    if (!own) return model_prepare_weight(m, t->name, w, (dtype)t->type, src, out, in, err);
    size_t packed = kern_weight_packed_size((dtype)t->type, out, in), slice = expert_slice_bytes(t);
    if (!packed && !raw) { /* the kernels read the slice in place */
        *bytes += slice;
        return kern_weight_prepare_into(w, (dtype)t->type, src, out, in, NULL, false, err);
    }
    size_t len = packed ? packed : slice;
    if (!(*buf = expert_buf_alloc(len))) return cf_fail(err, "out of memory for %s", t->name);
    *buf_len = len;
    *bytes += len;
    if (!packed) { /* a raw slice read in place: its own copy */
        memcpy(*buf, src, slice);
        return kern_weight_prepare_into(w, (dtype)t->type, *buf, out, in, NULL, false, err);
    }
    if (kern_weight_prepare_into(w, (dtype)t->type, src, out, in, *buf, false, err)) return -1;
    w->data = NULL;
    if (!raw) gguf_release_range(m->gguf, src, slice);
    return 0;
}

/* Gate and up slices of expert e (src[0], src[1]: in the file mapping, or
 * raw bytes) stacked into one [2*n_ff_exp][E] matrix. */
static int prep_stacked(model *m, const ds2_expert_src *s, const char *const *src, bool from_raw, bool own,
                        kern_weight *w, void **buf, size_t *buf_len, uint64_t *bytes, cf_err *err) {
    int64_t E = s->gate->ne[0], fe = s->gate->ne[1];
    dtype type = (dtype)s->gate->type;
    size_t slice = expert_slice_bytes(s->gate);
    const void *parts[2] = {src[0], src[1]};
    const size_t part_bytes[2] = {slice, slice};
    if (!own) return model_prepare_stacked(m, s->gate->name, w, type, parts, part_bytes, 2, 2 * fe, E, err);
    size_t packed = kern_weight_packed_size(type, 2 * fe, E);
    char *raw = expert_buf_alloc(2 * slice); /* the weight when the kernels read it in place, else the repack's input */
    if (!raw) return cf_fail(err, "out of memory stacking %s", s->gate->name);
    memcpy(raw, parts[0], slice);
    memcpy(raw + slice, parts[1], slice);
    int r;
    if (!packed) {
        *buf = raw, *buf_len = 2 * slice, *bytes += 2 * slice;
        r = kern_weight_prepare_into(w, type, raw, 2 * fe, E, NULL, false, err);
    } else {
        if ((*buf = expert_buf_alloc(packed))) {
            *buf_len = packed, *bytes += packed;
            r = kern_weight_prepare_into(w, type, raw, 2 * fe, E, *buf, false, err);
            w->data = NULL;
        } else {
            r = cf_fail(err, "out of memory for %s", s->gate->name);
        }
        expert_buf_free(raw, 2 * slice);
    }
    if (!from_raw) {
        gguf_release_range(m->gguf, parts[0], slice);
        gguf_release_range(m->gguf, parts[1], slice);
    }
    return r;
}

/* Prepares expert e's gate and up (part 0) or down (part 1) matrices into
 * em (own: a partial expert set; else model weight buffers) from the file
 * mapping (raw NULL) or from raw: its gate, up and down slices back to back
 * (ds2_expert_read_raw's layout). */
static int prep_part(model *m, ds2_layer *L, int32_t e, int part, bool own, expert_mem *em, const char *raw,
                     cf_err *err) {
    const ds2_expert_src *s = &L->esrc;
    void **b = em->buf;
    size_t *bl = em->buf_len;
    uint64_t *n = &em->bytes;
    size_t g = expert_slice_bytes(s->gate), u = expert_slice_bytes(s->up);
    const char *src[3] = {raw ? raw : expert_slice(s->gate, e), raw ? raw + g : expert_slice(s->up, e),
                          raw ? raw + g + u : expert_slice(s->down, e)};
    bool in_raw = raw != NULL;
    int r;
    if (part == 1) r = prep_matrix(m, s->down, s->down_scale, e, src[2], in_raw, own, &L->ed[e], &b[2], &bl[2], n, err);
    else if (s->stacked) r = prep_stacked(m, s, src, in_raw, own, &L->egu[e], &b[0], &bl[0], n, err);
    else
        r = prep_matrix(m, s->gate, s->gate_scale, e, src[0], in_raw, own, &L->eg[e], &b[0], &bl[0], n, err) ||
            prep_matrix(m, s->up, s->up_scale, e, src[1], in_raw, own, &L->eu[e], &b[1], &bl[1], n, err);
    return r ? cf_prefix(err, "tensor %s (expert %d)", part == 1 ? s->down->name : s->gate->name, e) : 0;
}

/* Prepares every matrix of expert e of a partial set into its own buffers
 * (from the file mapping, or raw bytes when raw is not NULL). */
static int prep_expert(model *m, ds2_layer *L, int32_t e, const char *raw, cf_err *err) {
    L->emem[e].bytes = 0;
    return prep_part(m, L, e, 0, true, &L->emem[e], raw, err) || prep_part(m, L, e, 1, true, &L->emem[e], raw, err) ? -1
                                                                                                                    : 0;
}

/* Tears down expert e's matrices and frees its copies (a partial set). */
static void drop_expert(model *m, ds2_layer *L, int32_t e) {
    expert_mem *em = &L->emem[e];
    kern_weight *ws[] = {L->egu ? &L->egu[e] : NULL, L->eg ? &L->eg[e] : NULL, L->eu ? &L->eu[e] : NULL, &L->ed[e]};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        if (ws[i]) {
            kern_weight_release(ws[i]);
            memset(ws[i], 0, sizeof *ws[i]);
        }
    for (int i = 0; i < 3; i++) {
        expert_buf_free(em->buf[i], em->buf_len[i]);
        em->buf[i] = NULL;
        em->buf_len[i] = 0;
    }
    const gguf_tensor *ts[] = {L->esrc.gate, L->esrc.up, L->esrc.down};
    for (size_t i = 0; i < 3; i++) gguf_release_range(m->gguf, expert_slice(ts[i], e), expert_slice_bytes(ts[i]));
    em->bytes = 0;
}

static int find_stacks(model *m, int il, ds2_layer *L, cf_err *err) {
    const model_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, fe = hp->n_ff_exp;
    int32_t ne = hp->n_expert;
    char gn[96], un[96], dn[96];
    snprintf(gn, sizeof gn, "blk.%d.ffn_gate_exps.weight", il);
    snprintf(un, sizeof un, "blk.%d.ffn_up_exps.weight", il);
    snprintf(dn, sizeof dn, "blk.%d.ffn_down_exps.weight", il);
    ds2_expert_src *s = &L->esrc;
    if (!(s->gate = expert_tensor(m, gn, E, fe, err)) || !(s->up = expert_tensor(m, un, E, fe, err)) ||
        !(s->down = expert_tensor(m, dn, fe, E, err)))
        return -1;
    s->stacked = s->gate->type == s->up->type && s->gate->type != DT_F8_B128; /* FP8: scales are per stack */
    if ((s->gate->type == DT_F8_B128 && !(s->gate_scale = model_fp8_scales(m->gguf, gn, E, fe, ne, err))) ||
        (s->up->type == DT_F8_B128 && !(s->up_scale = model_fp8_scales(m->gguf, un, E, fe, ne, err))) ||
        (s->down->type == DT_F8_B128 && !(s->down_scale = model_fp8_scales(m->gguf, dn, fe, E, ne, err))))
        return -1;
    if (s->stacked) L->egu = calloc((size_t)ne, sizeof *L->egu);
    else L->eg = calloc((size_t)ne, sizeof *L->eg), L->eu = calloc((size_t)ne, sizeof *L->eu);
    L->ed = calloc((size_t)ne, sizeof *L->ed);
    if ((s->stacked ? !L->egu : !L->eg || !L->eu) || !L->ed) return cf_fail(err, "out of memory loading %s", gn);
    return 0;
}

/* Records how the stack's file pages are used: copied (released now) or read in place. */
static void note_stack(model *m, const gguf_tensor *t, int64_t n, int64_t k, bool stacked_part) {
    bool copied = t->type != DT_F8_B128 && (stacked_part || kern_weight_packed_size((dtype)t->type, n, k) > 0);
    if (copied) model_mem_copied(m, t);
    else model_mem_mapped(m, t);
}

int ds2_load_routed(model *m, int il, ds2_layer *L, uint64_t *bytes, uint64_t *params, cf_err *err) {
    const model_hparams *hp = &m->hp;
    int32_t ne = hp->n_expert;
    if (find_stacks(m, il, L, err)) return -1;
    if (m->expert_keep && il < hp->n_layer) { /* MTP layers run in-process: they keep every expert */
        if (!(L->emem = calloc((size_t)ne, sizeof *L->emem))) return cf_fail(err, "out of memory");
        for (int32_t e = 0; e < ne; e++) {
            if (!m->expert_keep(m->expert_keep_ctx, hp, il, e)) continue;
            if (prep_expert(m, L, e, NULL, err)) return -1;
            expert_mem_publish(&L->emem[e], &m->expert_resident_bytes);
        }
        m->experts_partial = true;
    } else { /* every expert, gate|up first, then down (the weights cache's buffer order) */
        expert_mem unused = {0};
        for (int part = 0; part < 2; part++)
            for (int32_t e = 0; e < ne; e++)
                if (prep_part(m, L, e, part, false, &unused, NULL, err)) return -1;
    }
    const ds2_expert_src *s = &L->esrc;
    note_stack(m, s->gate, hp->n_ff_exp, hp->n_embd, s->stacked);
    note_stack(m, s->up, hp->n_ff_exp, hp->n_embd, s->stacked);
    note_stack(m, s->down, hp->n_embd, hp->n_ff_exp, false);
    count_experts(m, s->gate, bytes, params);
    count_experts(m, s->up, bytes, params);
    count_experts(m, s->down, bytes, params);
    return 0;
}

void ds2_release_routed(model *m, ds2_layer *L) {
    int32_t ne = m->hp.n_expert;
    if (L->emem)
        for (int32_t e = 0; e < ne; e++)
            for (int i = 0; i < 3; i++) expert_buf_free(L->emem[e].buf[i], L->emem[e].buf_len[i]);
    free(L->emem);
    L->emem = NULL;
    expert_weights_free(L->egu, ne);
    expert_weights_free(L->eg, ne);
    expert_weights_free(L->eu, ne);
    expert_weights_free(L->ed, ne);
    L->egu = L->eg = L->eu = L->ed = NULL;
}

/* The layer's expert memory, or NULL (not a MoE layer, not a partial set, bad index). */
static ds2_layer *partial_layer(const model *m, int32_t layer, int32_t expert) {
    if (!m->layers || layer < 0 || layer >= m->hp.n_layer || expert < 0 || expert >= m->hp.n_expert) return NULL;
    ds2_layer *L = &((ds2_layer *)m->layers)[layer];
    return L->moe && L->emem ? L : NULL;
}

/* Makes the expert resident from the file mapping (raw NULL) or from raw bytes. */
static int acquire(model *m, int32_t layer, int32_t expert, const char *raw, cf_err *err) {
    ds2_layer *L = partial_layer(m, layer, expert);
    if (!L) return cf_fail(err, "layer %d expert %d: not a routed expert of a partially loaded model", layer, expert);
    expert_mem *em = &L->emem[expert];
    if (expert_mem_resident(em)) return 0;
    if (prep_expert(m, L, expert, raw, err)) {
        drop_expert(m, L, expert);
        return -1;
    }
    expert_mem_publish(em, &m->expert_resident_bytes);
    return 0;
}

int ds2_expert_acquire(model *m, int32_t layer, int32_t expert, cf_err *err) {
    return acquire(m, layer, expert, NULL, err);
}

size_t ds2_expert_raw_size(const model *m, int32_t layer) {
    const ds2_layer *L = partial_layer(m, layer, 0);
    if (!L) return 0;
    const ds2_expert_src *s = &L->esrc;
    if (s->gate->type == DT_F8_B128 || s->up->type == DT_F8_B128 || s->down->type == DT_F8_B128)
        return 0; /* FP8 experts are read in place with their stacks' scales: not offered */
    return expert_slice_bytes(s->gate) + expert_slice_bytes(s->up) + expert_slice_bytes(s->down);
}

int ds2_expert_read_raw(const model *m, int32_t layer, int32_t expert, void *dst, size_t n, cf_err *err) {
    size_t want = ds2_expert_raw_size(m, layer);
    if (!want || expert < 0 || expert >= m->hp.n_expert || n != want)
        return cf_fail(err, "layer %d expert %d: not a movable routed expert of %zu bytes", layer, expert, n);
    const ds2_expert_src *s = &ds2_layers(m)[layer].esrc;
    const gguf_tensor *ts[3] = {s->gate, s->up, s->down};
    char *at = dst;
    for (int i = 0; i < 3; i++) {
        memcpy(at, expert_slice(ts[i], expert), expert_slice_bytes(ts[i]));
        at += expert_slice_bytes(ts[i]);
    }
    return 0;
}

int ds2_expert_acquire_raw(model *m, int32_t layer, int32_t expert, const void *raw, size_t n, cf_err *err) {
    size_t want = ds2_expert_raw_size(m, layer);
    if (!want || n != want)
        return cf_fail(err, "layer %d expert %d: %zu bytes received, the expert has %zu", layer, expert, n, want);
    return acquire(m, layer, expert, raw, err);
}

void ds2_expert_release(model *m, int32_t layer, int32_t expert) {
    ds2_layer *L = partial_layer(m, layer, expert);
    if (L && expert_mem_retire(&L->emem[expert], &m->expert_resident_bytes)) drop_expert(m, L, expert);
}

bool ds2_expert_resident(const model *m, int32_t layer, int32_t expert) {
    if (!m->layers || layer < 0 || layer >= m->hp.n_layer || expert < 0 || expert >= m->hp.n_expert) return false;
    const ds2_layer *L = &((const ds2_layer *)m->layers)[layer];
    if (!L->moe) return false;
    return !L->emem || expert_mem_resident(&L->emem[expert]);
}
