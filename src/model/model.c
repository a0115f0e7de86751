/* model.c - loading a GGUF model: reads and checks hyper-parameters, checks
 * every tensor's presence, shape and type, prepares weight matrices for the
 * kernels and loads the tokenizer. Architectures: llama (qwen2's Q/K/V biases
 * are accepted when present), deepseek2 (its layers: arch_deepseek2.c). Every problem is a one-line error naming the
 * file and the key or tensor. See model.h for ownership. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"

int model_key_i32(const gguf_file *f, const char *arch, const char *suffix, int32_t *out, bool required,
                   cf_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    int r = gguf_get_int(f, key, &v, err);
    if (r < 0) return -1;
    if (r == 1) return required ? cf_fail(err, "missing key %s", key) : 0;
    if (v < 0 || v > INT32_MAX) return cf_fail(err, "key %s = %lld is out of range", key, (long long)v);
    *out = (int32_t)v;
    return 0;
}

int model_key_f32(const gguf_file *f, const char *arch, const char *suffix, float *out, cf_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v;
    int r = gguf_get_float(f, key, &v, err);
    if (r < 0) return -1;
    if (r == 0) {
        if (!isfinite(v)) return cf_fail(err, "key %s is not a finite number", key);
        *out = (float)v;
    }
    return 0;
}

static int read_hparams(const gguf_file *f, model_hparams *hp, cf_err *err) {
    gguf_str arch;
    int r = gguf_get_str(f, "general.architecture", &arch, err);
    if (r < 0) return -1;
    if (r == 1) return cf_fail(err, "missing key general.architecture");
    if (strcmp(arch.s, "llama") != 0 && strcmp(arch.s, "qwen2") != 0 && strcmp(arch.s, "deepseek2") != 0)
        return cf_fail(err, "unsupported architecture '%.40s' (supported: llama, qwen2, deepseek2)", arch.s);
    bool ds2 = strcmp(arch.s, "deepseek2") == 0;
    memset(hp, 0, sizeof *hp);
    snprintf(hp->arch, sizeof hp->arch, "%s", arch.s);
    const char *a = hp->arch;
    if (model_key_i32(f, a, "embedding_length", &hp->n_embd, true, err) ||
        model_key_i32(f, a, "block_count", &hp->n_layer, true, err) ||
        model_key_i32(f, a, "feed_forward_length", &hp->n_ff, true, err) ||
        model_key_i32(f, a, "attention.head_count", &hp->n_head, true, err))
        return -1;
    hp->n_head_kv = hp->n_head;
    hp->n_ctx_train = 2048;
    if (model_key_i32(f, a, "attention.head_count_kv", &hp->n_head_kv, false, err) ||
        model_key_i32(f, a, "context_length", &hp->n_ctx_train, false, err))
        return -1;
    if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_ff <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 ||
        hp->n_ctx_train <= 0)
        return cf_fail(err, "%s: embedding_length, block_count, feed_forward_length, head counts and "
                            "context_length must be positive", a);
    if (hp->n_head % hp->n_head_kv)
        return cf_fail(err, "%s.attention.head_count (%d) is not a multiple of head_count_kv (%d)", a, hp->n_head,
                       hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    if (model_key_i32(f, a, "attention.key_length", &hp->head_dim, false, err)) return -1;
    int32_t vlen = hp->head_dim;
    if (model_key_i32(f, a, "attention.value_length", &vlen, false, err)) return -1;
    if (hp->head_dim <= 0 || vlen <= 0 || (!ds2 && vlen != hp->head_dim))
        return cf_fail(err, "%s: key_length (%d) and value_length (%d) must be equal and positive", a, hp->head_dim,
                       vlen);
    hp->rope_dim = hp->head_dim;
    if (model_key_i32(f, a, "rope.dimension_count", &hp->rope_dim, false, err)) return -1;
    if (hp->rope_dim <= 0 || hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return cf_fail(err, "%s.rope.dimension_count (%d) must be even and <= head dim %d", a, hp->rope_dim,
                       hp->head_dim);
    hp->rms_eps = 1e-5f;
    hp->rope_base = 10000.0f;
    if (model_key_f32(f, a, "attention.layer_norm_rms_epsilon", &hp->rms_eps, err) ||
        model_key_f32(f, a, "rope.freq_base", &hp->rope_base, err))
        return -1;
    if (!(hp->rms_eps > 0) || !(hp->rope_base > 0))
        return cf_fail(err, "%s: rms epsilon and rope.freq_base must be positive", a);
    hp->rope_mode = strcmp(a, "qwen2") == 0 ? ROPE_NEOX : ROPE_NORM;

    /* rope scaling: type + factor (older files: rope.scale_linear) */
    hp->rope_scaling = ROPE_SCALING_NONE;
    hp->rope_factor = 1.0f;
    hp->yarn_attn_factor = 1.0f;
    hp->yarn_beta_fast = 32.0f;
    hp->yarn_beta_slow = 1.0f;
    hp->rope_orig_ctx = hp->n_ctx_train;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    gguf_str st;
    r = gguf_get_str(f, key, &st, err);
    if (r < 0) return -1;
    float factor = 0.0f;
    if (model_key_f32(f, a, "rope.scaling.factor", &factor, err)) return -1;
    if (factor == 0.0f && model_key_f32(f, a, "rope.scale_linear", &factor, err)) return -1;
    if (r == 0 && strcmp(st.s, "yarn") == 0) {
        hp->rope_scaling = ROPE_SCALING_YARN;
        hp->yarn_ext_factor = 1.0f;
    } else if ((r == 0 && strcmp(st.s, "linear") == 0) || (r == 1 && factor > 0.0f && factor != 1.0f)) {
        hp->rope_scaling = ROPE_SCALING_LINEAR;
    } else if (r == 0 && strcmp(st.s, "none") != 0) {
        return cf_fail(err, "%s = '%.40s' is not supported (none, linear, yarn)", key, st.s);
    }
    if (hp->rope_scaling != ROPE_SCALING_NONE) {
        if (!(factor > 0.0f)) return cf_fail(err, "%s.rope.scaling.factor must be positive", a);
        hp->rope_factor = factor;
        if (model_key_i32(f, a, "rope.scaling.original_context_length", &hp->rope_orig_ctx, false, err) ||
            model_key_f32(f, a, "rope.scaling.attn_factor", &hp->yarn_attn_factor, err))
            return -1;
    }
    if (ds2) {
        hp->v_head_dim = vlen;
        return ds2_read_hparams(f, hp, err);
    }
    return 0;
}

/* Finds a tensor and checks its shape (ne[0], ne[1]; ne1 = 0 means 1-D). */
const gguf_tensor *model_need_tensor(const gguf_file *f, const char *name, int64_t ne0, int64_t ne1, bool required,
                                      cf_err *err, int *failed) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) {
        if (required) {
            cf_fail(err, "missing tensor %s", name);
            *failed = 1;
        }
        return NULL;
    }
    int want_dims = ne1 ? 2 : 1;
    bool ok = t->ne[0] == ne0 && (ne1 ? t->ne[1] == ne1 : 1) && t->ne[2] == 1 && t->ne[3] == 1 &&
              (t->n_dims == want_dims || (want_dims == 2 && t->n_dims == 2));
    if (!ok) {
        cf_fail(err, "tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld%s%lld]", name,
                (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], (long long)ne0,
                ne1 ? ", " : "", ne1 ? (long long)ne1 : 0LL);
        *failed = 1;
        return NULL;
    }
    if (!dtype_computable(t->type)) {
        model_unsupported_type(t, err);
        *failed = 1;
        return NULL;
    }
    return t;
}

int model_unsupported_type(const gguf_tensor *t, cf_err *err) {
    char up[16];
    const char *n = dtype_name(t->type);
    size_t i = 0;
    for (; n[i] && i + 1 < sizeof up; i++) up[i] = (char)(n[i] >= 'a' && n[i] <= 'z' ? n[i] - 32 : n[i]);
    up[i] = 0;
    return cf_fail(err, "tensor %s has type %s, which cinfer cannot run yet; supported: F32 F16 BF16 Q8_0 Q4_0 - use "
                   "an F16, BF16, Q8_0 or Q4_0 GGUF of this model (`cinfer quantize` re-encodes those types)",
                   t->name, up);
}

/* The first weight matrix whose type cannot be computed, before anything else is
 * checked: a K-quant file then says so instead of failing on a later check. */
static int check_types(const gguf_file *f, cf_err *err) {
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        size_t n = strlen(t->name);
        bool matrix = t->n_dims >= 2 && n > 7 && !strcmp(t->name + n - 7, ".weight");
        if (matrix && !dtype_computable(t->type)) return model_unsupported_type(t, err);
    }
    return 0;
}

float *model_vector_f32(const gguf_tensor *t) {
    float *v = malloc((size_t)t->ne[0] * sizeof(float));
    if (v) dtype_dequantize_row((dtype)t->type, t->data, v, t->ne[0]);
    return v;
}

int model_load_vector(model *m, const char *name, int64_t n, bool required, float **out, cf_err *err) {
    int failed = 0;
    const gguf_tensor *t = model_need_tensor(m->gguf, name, n, 0, required, err, &failed);
    if (failed) return -1;
    if (!t) return 0;
    *out = model_vector_f32(t);
    if (!*out) return cf_fail(err, "out of memory loading %s", name);
    m->n_params += (uint64_t)n;
    return 0;
}

int model_load_matrix(model *m, const char *name, int64_t in, int64_t out_rows, kern_weight *w, cf_err *err) {
    int failed = 0;
    const gguf_tensor *t = model_need_tensor(m->gguf, name, in, out_rows, true, err, &failed);
    if (failed) return -1;
    if (kern_weight_prepare(w, (dtype)t->type, t->data, out_rows, in, err) != 0)
        return cf_prefix(err, "tensor %s", name);
    m->weight_bytes += t->nbytes;
    m->n_params += (uint64_t)(in * out_rows);
    return 0;
}

/* Loads `count` matrices with the same input width; if they share a type,
 * stacks their rows into one prepared matrix (*fused, *raw_owned) instead of
 * preparing each one into out[i]. */
static int load_stacked(model *m, const char *const *names, const int64_t *rows, int count, int64_t in,
                        kern_weight *const *out, kern_weight *fused, bool *is_fused, void **raw_owned, cf_err *err) {
    const gguf_tensor *t[4];
    int64_t total = 0;
    bool same = true;
    for (int i = 0; i < count; i++) {
        int failed = 0;
        t[i] = model_need_tensor(m->gguf, names[i], in, rows[i], true, err, &failed);
        if (failed) return -1;
        same = same && t[i]->type == t[0]->type;
        total += rows[i];
    }
    if (!same) {
        for (int i = 0; i < count; i++)
            if (model_load_matrix(m, names[i], in, rows[i], out[i], err)) return -1;
        return 0;
    }
    size_t off = 0, bytes = 0;
    for (int i = 0; i < count; i++) bytes += t[i]->nbytes;
    char *raw = malloc(bytes);
    if (!raw) return cf_fail(err, "out of memory stacking %s", names[0]);
    for (int i = 0; i < count; i++) {
        memcpy(raw + off, t[i]->data, t[i]->nbytes);
        off += t[i]->nbytes;
        m->weight_bytes += t[i]->nbytes;
        m->n_params += (uint64_t)(in * rows[i]);
    }
    if (kern_weight_prepare(fused, (dtype)t[0]->type, raw, total, in, err) != 0) {
        free(raw);
        return cf_prefix(err, "tensor %s", names[0]);
    }
    if (fused->packed) free(raw); /* repacked: the stacked copy is no longer read */
    else *raw_owned = raw;
    *is_fused = true;
    return 0;
}

static int load_layer(model *m, int il, cf_err *err) {
    const model_hparams *hp = &m->hp;
    layer_weights *L = &m->layers[il];
    int64_t qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    if (model_load_vector(m, NAME("attn_norm.weight"), hp->n_embd, true, &L->attn_norm, err) ||
        model_load_vector(m, NAME("ffn_norm.weight"), hp->n_embd, true, &L->ffn_norm, err) ||
        model_load_vector(m, NAME("attn_q.bias"), qd, false, &L->bq, err) ||
        model_load_vector(m, NAME("attn_k.bias"), kvd, false, &L->bk, err) ||
        model_load_vector(m, NAME("attn_v.bias"), kvd, false, &L->bv, err) ||
        model_load_matrix(m, NAME("attn_output.weight"), qd, hp->n_embd, &L->wo, err) ||
        model_load_matrix(m, NAME("ffn_down.weight"), hp->n_ff, hp->n_embd, &L->w_down, err))
        return -1;
#undef NAME
    char qn[3][96], gn[2][96];
    snprintf(qn[0], 96, "blk.%d.attn_q.weight", il);
    snprintf(qn[1], 96, "blk.%d.attn_k.weight", il);
    snprintf(qn[2], 96, "blk.%d.attn_v.weight", il);
    snprintf(gn[0], 96, "blk.%d.ffn_gate.weight", il);
    snprintf(gn[1], 96, "blk.%d.ffn_up.weight", il);
    const char *qnames[3] = {qn[0], qn[1], qn[2]}, *gnames[2] = {gn[0], gn[1]};
    const int64_t qrows[3] = {qd, kvd, kvd}, grows[2] = {hp->n_ff, hp->n_ff};
    kern_weight *qout[3] = {&L->wq, &L->wk, &L->wv}, *gout[2] = {&L->w_gate, &L->w_up};
    if (load_stacked(m, qnames, qrows, 3, hp->n_embd, qout, &L->wqkv, &L->qkv_fused, &L->qkv_raw, err) ||
        load_stacked(m, gnames, grows, 2, hp->n_embd, gout, &L->w_gu, &L->gu_fused, &L->gu_raw, err))
        return -1;
    return 0;
}

static int load_weights(model *m, cf_err *err) {
    model_hparams *hp = &m->hp;
    int failed = 0;
    const gguf_tensor *emb = gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!emb) return cf_fail(err, "missing tensor token_embd.weight");
    hp->n_vocab = tokenizer_n_vocab(m->tok);
    m->tok_embd = model_need_tensor(m->gguf, "token_embd.weight", hp->n_embd, hp->n_vocab, true, err, &failed);
    if (failed) return cf_prefix(err, "vocabulary has %d tokens", hp->n_vocab);
    m->n_params += (uint64_t)hp->n_embd * (uint64_t)hp->n_vocab;
    m->weight_bytes += m->tok_embd->nbytes / (uint64_t)hp->n_vocab;
    if (model_load_vector(m, "output_norm.weight", hp->n_embd, true, &m->output_norm, err)) return -1;
    if (gguf_find_tensor(m->gguf, "output.weight")) {
        if (model_load_matrix(m, "output.weight", hp->n_embd, hp->n_vocab, &m->output, err)) return -1;
    } else {
        hp->tied_output = true;
        if (kern_weight_prepare(&m->output, (dtype)m->tok_embd->type, m->tok_embd->data, hp->n_vocab, hp->n_embd,
                                err))
            return cf_prefix(err, "tensor token_embd.weight (as LM head)");
        m->weight_bytes += m->tok_embd->nbytes;
    }
    const gguf_tensor *rf = gguf_find_tensor(m->gguf, "rope_freqs.weight");
    if (rf) {
        if (rf->type != DT_F32 || rf->ne[0] != hp->rope_dim / 2 || rf->n_dims != 1)
            return cf_fail(err, "tensor rope_freqs.weight must be f32 [%d]", hp->rope_dim / 2);
        m->rope_freq_factors = model_vector_f32(rf);
        if (!m->rope_freq_factors) return cf_fail(err, "out of memory");
    }
    if (strcmp(hp->arch, "deepseek2") == 0) return ds2_load_layers(m, err);
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return cf_fail(err, "out of memory");
    for (int il = 0; il < hp->n_layer; il++) {
        if (load_layer(m, il, err)) return -1;
        if (m->progress) m->progress(m->progress_ctx, il + 1, hp->n_layer);
    }
    m->active_bytes = m->weight_bytes;
    m->active_params = m->n_params;
    return 0;
}

int model_load(const char *path, model **out, cf_err *err) { return model_load_progress(path, NULL, NULL, out, err); }

int model_load_progress(const char *path, model_progress_fn fn, void *ctx, model **out, cf_err *err) {
    *out = NULL;
    model *m = calloc(1, sizeof *m);
    if (!m) return cf_fail(err, "%s: out of memory", path);
    m->progress = fn;
    m->progress_ctx = ctx;
    if (gguf_open(path, &m->gguf, err) != 0) {
        free(m);
        return -1;
    }
    if (check_types(m->gguf, err) || read_hparams(m->gguf, &m->hp, err) || tokenizer_load_gguf(m->gguf, &m->tok, err) ||
        load_weights(m, err)) {
        cf_prefix(err, "%s", path);
        model_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

void model_free(model *m) {
    if (!m) return;
    if (m->layers) {
        for (int il = 0; il < m->hp.n_layer; il++) {
            layer_weights *L = &m->layers[il];
            free(L->attn_norm);
            free(L->ffn_norm);
            free(L->bq);
            free(L->bk);
            free(L->bv);
            kern_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down, &L->wqkv, &L->w_gu};
            for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) kern_weight_release(ws[i]);
            free(L->qkv_raw);
            free(L->gu_raw);
        }
        free(m->layers);
    }
    ds2_free_layers(m);
    kern_weight_release(&m->output);
    free(m->output_norm);
    free(m->rope_freq_factors);
    tokenizer_free(m->tok);
    gguf_close(m->gguf);
    free(m);
}

const model_hparams *model_get_hparams(const model *m) { return &m->hp; }
const tokenizer *model_get_tokenizer(const model *m) { return m->tok; }
const gguf_file *model_get_gguf(const model *m) { return m->gguf; }
uint64_t model_weight_bytes(const model *m) { return m->weight_bytes; }
uint64_t model_active_weight_bytes(const model *m) { return m->active_bytes; }
uint64_t model_active_params(const model *m) { return m->active_params; }
uint64_t model_n_params(const model *m) { return m->n_params; }
bool model_is_mla(const model *m) { return m->is_ds2; }

int32_t model_kv_token_floats(const model *m) {
    if (m->is_ds2) return m->hp.kv_lora_rank + m->hp.rope_dim;
    return 2 * m->hp.n_head_kv * m->hp.head_dim;
}

int64_t model_kv_block_floats(const model *m, int block_tokens) {
    return (int64_t)m->hp.n_layer * block_tokens * model_kv_token_floats(m);
}
