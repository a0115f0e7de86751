/* deepseek4_experts.c - the routed experts of a deepseek4 block: their
 * stacks in the file (ffn_{gate,up,down}_exps, [in, out, n_expert]; one
 * matrix per expert each), their preparation and residency. Hash layers and
 * score layers alike: routing never looks at which experts are resident.
 *
 * Two modes (the same contract as deepseek2_experts.c):
 *  - every expert (no expert_keep, and always in MTP blocks, which run
 *    in-process): each expert is prepared at load into model weight buffers
 *    (model_wbuf); emem stays NULL and nothing is released before the model.
 *  - a partial expert set (expert parallelism: model_load_opts.expert_keep)
 *    in a main block: only the kept experts are prepared, each matrix into a
 *    buffer of its own (emem[e].buf: an anonymous mapping of its own, so
 *    releasing the expert gives its pages back at once); the others' file
 *    pages are never read. ds4_expert_acquire prepares one more later from
 *    the file mapping; ds4_expert_release frees its copies and drops its
 *    file pages. A rank's resident expert memory is what its placement gives.
 * Invariants: emem[e].resident is set (release) only after expert e's
 * kern_weights are complete, and cleared before they are torn down; the
 * caller of acquire/release guarantees no forward pass uses that expert
 * meanwhile (the ep runtime switches plans at a round boundary) and that one
 * expert is not acquired and released concurrently. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch/deepseek4.h"
#include "model/arch/expert_buf.h"

enum { DS4_GATE, DS4_UP, DS4_DOWN };

static kern_weight *matrix_of(ds4_layer *L, int part, int32_t e) {
    kern_weight *ws[3] = {L->eg, L->eu, L->ed};
    return &ws[part][e];
}

/* The [in, out, n_expert] stack `name`, shape and type checked. */
static const gguf_tensor *find_stack(model *m, int il, const char *part, int64_t in, int64_t out, cf_err *err) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", il, part);
    int32_t ne = m->hp.n_expert;
    const gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    if (!t) {
        cf_fail(err, "missing tensor %s", name);
        return NULL;
    }
    if (t->n_dims != 3 || t->ne[0] != in || t->ne[1] != out || t->ne[2] != ne) {
        cf_fail(err, "tensor %s has shape [%lld, %lld, %lld], expected [%lld, %lld, %d]", name, (long long)t->ne[0],
                (long long)t->ne[1], (long long)t->ne[2], (long long)in, (long long)out, ne);
        return NULL;
    }
    if (!dtype_computable(t->type)) {
        model_unsupported_type(t, err);
        return NULL;
    }
    return t;
}

/* Prepares matrix `part` of expert e from src (raw: bytes another process
 * sent, else the slice in the file mapping) into a buffer of the expert's
 * own; a slice the kernels read as it is stays in place in the file
 * mapping, or is copied into its own buffer when it came raw. */
static int prep_own(model *m, ds4_layer *L, int part, int32_t e, const char *src, bool raw, cf_err *err) {
    const gguf_tensor *t = L->exps[part];
    expert_mem *em = &L->emem[e];
    int64_t in = t->ne[0], out = t->ne[1];
    kern_weight *w = matrix_of(L, part, e);
    size_t packed = kern_weight_packed_size((dtype)t->type, out, in), slice = expert_slice_bytes(t);
    if (!packed && !raw) { /* the kernels read the slice in place */
        em->bytes += slice;
        return kern_weight_prepare_into(w, (dtype)t->type, src, out, in, NULL, false, err);
    }
    size_t len = packed ? packed : slice;
    if (!(em->buf[part] = expert_buf_alloc(len))) return cf_fail(err, "out of memory for %s", t->name);
    em->buf_len[part] = len;
    em->bytes += len;
    if (!packed) { /* a raw slice read in place: its own copy */
        memcpy(em->buf[part], src, slice);
        return kern_weight_prepare_into(w, (dtype)t->type, em->buf[part], out, in, NULL, false, err);
    }
    if (kern_weight_prepare_into(w, (dtype)t->type, src, out, in, em->buf[part], false, err)) return -1;
    w->data = NULL;
    if (!raw) gguf_release_range(m->gguf, src, slice);
    return 0;
}

/* Expert e's matrices from the file mapping (raw NULL) or from raw: its
 * gate, up and down slices back to back (ds4_expert_read_raw's layout). */
static int prep_expert(model *m, ds4_layer *L, int32_t e, const char *raw, cf_err *err) {
    L->emem[e].bytes = 0;
    for (int part = 0; part < 3; part++) {
        const char *src = raw ? raw : expert_slice(L->exps[part], e);
        if (prep_own(m, L, part, e, src, raw != NULL, err))
            return cf_prefix(err, "tensor %s (expert %d)", L->exps[part]->name, e);
        if (raw) raw += expert_slice_bytes(L->exps[part]);
    }
    return 0;
}

/* Tears down expert e's matrices and frees its copies (a partial set). */
static void drop_expert(model *m, ds4_layer *L, int32_t e) {
    expert_mem *em = &L->emem[e];
    for (int part = 0; part < 3; part++) {
        kern_weight *w = matrix_of(L, part, e);
        kern_weight_release(w);
        memset(w, 0, sizeof *w);
        expert_buf_free(em->buf[part], em->buf_len[part]);
        em->buf[part] = NULL;
        em->buf_len[part] = 0;
        gguf_release_range(m->gguf, expert_slice(L->exps[part], e), expert_slice_bytes(L->exps[part]));
    }
    em->bytes = 0;
}

/* Every expert into model weight buffers, one stack after another (the weights cache's buffer order). */
static int prep_all(model *m, ds4_layer *L, cf_err *err) {
    for (int part = 0; part < 3; part++) {
        const gguf_tensor *t = L->exps[part];
        for (int32_t e = 0; e < m->hp.n_expert; e++)
            if (model_prepare_weight(m, t->name, matrix_of(L, part, e), (dtype)t->type, expert_slice(t, e), t->ne[1],
                                     t->ne[0], err))
                return cf_prefix(err, "tensor %s (expert %d)", t->name, e);
    }
    return 0;
}

/* Records how a stack's file pages are used: copied (released) or read in place. */
static void note_stack(model *m, const gguf_tensor *t) {
    if (kern_weight_packed_size((dtype)t->type, t->ne[1], t->ne[0]) > 0) model_mem_copied(m, t);
    else model_mem_mapped(m, t);
}

int ds4_load_routed(model *m, int il, ds4_layer *L, uint64_t *routed, cf_err *err) {
    const model_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, FE = hp->n_ff_exp;
    int32_t ne = hp->n_expert;
    if (!(L->exps[DS4_GATE] = find_stack(m, il, "ffn_gate_exps.weight", E, FE, err)) ||
        !(L->exps[DS4_UP] = find_stack(m, il, "ffn_up_exps.weight", E, FE, err)) ||
        !(L->exps[DS4_DOWN] = find_stack(m, il, "ffn_down_exps.weight", FE, E, err)))
        return -1;
    L->eg = calloc((size_t)ne, sizeof *L->eg);
    L->eu = calloc((size_t)ne, sizeof *L->eu);
    L->ed = calloc((size_t)ne, sizeof *L->ed);
    if (!L->eg || !L->eu || !L->ed) return cf_fail(err, "out of memory loading block %d's experts", il);
    if (m->expert_keep && il < hp->n_layer) { /* MTP blocks run in-process: they keep every expert */
        if (!(L->emem = calloc((size_t)ne, sizeof *L->emem))) return cf_fail(err, "out of memory");
        for (int32_t e = 0; e < ne; e++) {
            if (!m->expert_keep(m->expert_keep_ctx, hp, il, e)) continue;
            if (prep_expert(m, L, e, NULL, err)) return -1;
            expert_mem_publish(&L->emem[e], &m->expert_resident_bytes);
        }
        m->experts_partial = true;
    } else if (prep_all(m, L, err)) {
        return -1;
    }
    for (int part = 0; part < 3; part++) {
        const gguf_tensor *t = L->exps[part];
        note_stack(m, t);
        m->weight_bytes += t->nbytes;
        m->n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2]);
        *routed += t->nbytes;
    }
    return 0;
}

void ds4_release_routed(model *m, ds4_layer *L) {
    int32_t ne = m->hp.n_expert;
    if (L->emem)
        for (int32_t e = 0; e < ne; e++)
            for (int i = 0; i < 3; i++) expert_buf_free(L->emem[e].buf[i], L->emem[e].buf_len[i]);
    free(L->emem);
    L->emem = NULL;
    expert_weights_free(L->eg, ne);
    expert_weights_free(L->eu, ne);
    expert_weights_free(L->ed, ne);
    L->eg = L->eu = L->ed = NULL;
}

/* The main block's expert memory, or NULL (MTP block, not a partial set, bad index). */
static ds4_layer *partial_layer(const model *m, int32_t layer, int32_t expert) {
    if (!m->layers || layer < 0 || layer >= m->hp.n_layer || expert < 0 || expert >= m->hp.n_expert) return NULL;
    ds4_layer *L = &((ds4_weights *)m->layers)->layer[layer];
    return L->emem ? L : NULL;
}

/* Makes the expert resident from the file mapping (raw NULL) or from raw bytes. */
static int acquire(model *m, int32_t layer, int32_t expert, const char *raw, cf_err *err) {
    ds4_layer *L = partial_layer(m, layer, expert);
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

int ds4_expert_acquire(model *m, int32_t layer, int32_t expert, cf_err *err) {
    return acquire(m, layer, expert, NULL, err);
}

size_t ds4_expert_raw_size(const model *m, int32_t layer) {
    if (!m->layers || layer < 0 || layer >= m->hp.n_layer) return 0;
    const ds4_layer *L = &ds4_w(m)->layer[layer];
    return L->exps[0] ? expert_slice_bytes(L->exps[0]) + expert_slice_bytes(L->exps[1]) + expert_slice_bytes(L->exps[2])
                      : 0;
}

int ds4_expert_read_raw(const model *m, int32_t layer, int32_t expert, void *dst, size_t n, cf_err *err) {
    size_t want = ds4_expert_raw_size(m, layer);
    if (!want || expert < 0 || expert >= m->hp.n_expert || n != want)
        return cf_fail(err, "layer %d expert %d: not a routed expert of %zu bytes", layer, expert, n);
    const ds4_layer *L = &ds4_w(m)->layer[layer];
    char *at = dst;
    for (int part = 0; part < 3; part++) {
        memcpy(at, expert_slice(L->exps[part], expert), expert_slice_bytes(L->exps[part]));
        at += expert_slice_bytes(L->exps[part]);
    }
    return 0;
}

int ds4_expert_acquire_raw(model *m, int32_t layer, int32_t expert, const void *raw, size_t n, cf_err *err) {
    size_t want = ds4_expert_raw_size(m, layer);
    if (!want || n != want)
        return cf_fail(err, "layer %d expert %d: %zu bytes received, the expert has %zu", layer, expert, n, want);
    return acquire(m, layer, expert, raw, err);
}

void ds4_expert_release(model *m, int32_t layer, int32_t expert) {
    ds4_layer *L = partial_layer(m, layer, expert);
    if (L && expert_mem_retire(&L->emem[expert], &m->expert_resident_bytes)) drop_expert(m, L, expert);
}

bool ds4_expert_resident(const model *m, int32_t layer, int32_t expert) { /* MTP blocks too: every expert */
    if (!m->layers || layer < 0 || layer >= ds4_w(m)->n_blocks || expert < 0 || expert >= m->hp.n_expert) return false;
    const ds4_layer *L = &ds4_w(m)->layer[layer];
    return !L->emem || expert_mem_resident(&L->emem[expert]);
}
