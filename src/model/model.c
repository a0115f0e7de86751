/* model.c - loading a GGUF model: picks the architecture's hook table
 * (arch/registry.c) by general.architecture, reads and checks the
 * hyper-parameters every family shares, the shared tensors
 * (embeddings, output head, rope frequency factors), and lets the family
 * read its own keys and layers (arch/arch.h gives the order). A Hugging
 * Face directory is read through format/hf_dir.h as the same gguf_file. Every problem
 * is a one-line error naming the file and the key or tensor. See model.h for
 * ownership (the tokenizer is text's). Also the generic queries (sizes, KV layout, fingerprint). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "format/hf_dir.h"
#include "model/arch/arch.h"
#include "model/weights_cache.h"

int model_key_i32(const gguf_file *f, const char *arch, const char *suffix, int32_t *out, bool required, cf_err *err) {
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

static int read_hparams(const gguf_file *f, model_hparams *hp, const model_arch **out, cf_err *err) {
    gguf_str arch;
    int r = gguf_get_str(f, "general.architecture", &arch, err);
    if (r < 0) return -1;
    if (r == 1) return cf_fail(err, "missing key general.architecture");
    const model_arch *fam = model_arch_find(arch.s);
    if (!fam) {
        char names[128], shown[41]; /* the name comes from the file: escaped, so the error stays one line */
        model_arch_list(names, sizeof names);
        cf_log_escape(shown, sizeof shown, arch.s, arch.len < 40 ? (size_t)arch.len : 40);
        return cf_fail(err, "unsupported architecture '%s' (supported: %s)", shown, names);
    }
    *out = fam;
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
        return cf_fail(err,
                       "%s: embedding_length, block_count, feed_forward_length, head counts and "
                       "context_length must be positive",
                       a);
    if (hp->n_head % hp->n_head_kv)
        return cf_fail(err, "%s.attention.head_count (%d) is not a multiple of head_count_kv (%d)", a, hp->n_head,
                       hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    if (model_key_i32(f, a, "attention.key_length", &hp->head_dim, false, err)) return -1;
    int32_t vlen = hp->head_dim;
    if (model_key_i32(f, a, "attention.value_length", &vlen, false, err)) return -1;
    if (hp->head_dim <= 0 || vlen <= 0)
        return cf_fail(err, "%s: key_length (%d) and value_length (%d) must be positive", a, hp->head_dim, vlen);
    hp->v_head_dim = vlen;
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
    hp->rope_mode = ROPE_NORM; /* a family may choose NEOX */

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
        char shown[48]; /* the file's text, control characters escaped: the error stays one line */
        return cf_fail(err, "%s = '%s' is not supported (none, linear, yarn)", key,
                       cf_log_escape(shown, sizeof shown, st.s, st.len < 40 ? st.len : 40));
    }
    if (hp->rope_scaling != ROPE_SCALING_NONE) {
        if (!(factor > 0.0f)) return cf_fail(err, "%s.rope.scaling.factor must be positive", a);
        hp->rope_factor = factor;
        if (model_key_i32(f, a, "rope.scaling.original_context_length", &hp->rope_orig_ctx, false, err) ||
            model_key_f32(f, a, "rope.scaling.attn_factor", &hp->yarn_attn_factor, err))
            return -1;
    }
    return fam->read_hparams(f, hp, err);
}

int model_read_hparams(const gguf_file *f, model_hparams *hp, cf_err *err) {
    const model_arch *fam;
    return read_hparams(f, hp, &fam, err);
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
        cf_fail(err, "tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld%s%lld]", name, (long long)t->ne[0],
                (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], (long long)ne0, ne1 ? ", " : "",
                ne1 ? (long long)ne1 : 0LL);
        *failed = 1;
        return NULL;
    }
    if (!dtype_computable(t->type) && !(t->type == DT_F8_B128 && want_dims == 2)) {
        model_unsupported_type(t, err);
        *failed = 1;
        return NULL;
    }
    return t;
}

const float *model_fp8_scales(const gguf_file *f, const char *name, int64_t in, int64_t out, int64_t n_expert,
                              cf_err *err) {
    char sname[160];
    snprintf(sname, sizeof sname, "%s_scale_inv", name);
    const gguf_tensor *s = gguf_find_tensor(f, sname);
    int64_t sc = (in + 127) / 128, sr = (out + 127) / 128;
    if (!s || s->type != DT_F32 || s->ne[0] != sc || s->ne[1] != sr || s->ne[2] != n_expert || s->ne[3] != 1 ||
        (uintptr_t)s->data % sizeof(float)) {
        cf_fail(err, "FP8 tensor %s needs %s: f32 [%lld, %lld, %lld]", name, sname, (long long)sc, (long long)sr,
                (long long)n_expert);
        return NULL;
    }
    return s->data;
}

int model_unsupported_type(const gguf_tensor *t, cf_err *err) {
    char up[16];
    const char *n = dtype_name(t->type);
    size_t i = 0;
    for (; n[i] && i + 1 < sizeof up; i++) up[i] = (char)(n[i] >= 'a' && n[i] <= 'z' ? n[i] - 32 : n[i]);
    up[i] = 0;
    return cf_fail(
        err,
        "tensor %s has type %s, which cinfer cannot run yet; supported: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 "
        "Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS MXFP4 - use a GGUF of this model in one of those types (`cinfer "
        "quantize` re-encodes to F16, BF16, Q8_0 or Q4_0)",
        t->name, up);
}

/* The first weight matrix whose type cannot be computed, before anything else is
 * checked: a K-quant file then says so instead of failing on a later check. */
static int check_types(const gguf_file *f, cf_err *err) {
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        size_t n = strlen(t->name);
        bool table = t->type >= 24 && t->type <= 27; /* i8..i64: index tables (deepseek4's tid2eid) */
        bool matrix = t->n_dims >= 2 && n > 7 && !strcmp(t->name + n - 7, ".weight") && !table;
        if (matrix && !dtype_computable(t->type) && t->type != DT_F8_B128) return model_unsupported_type(t, err);
    }
    return 0;
}

const float *model_tensor_f32(model *m, const gguf_tensor *t, int64_t n, cf_err *err) {
    if (t->type == DT_F32 && (uintptr_t)t->data % sizeof(float) == 0) {
        model_mem_mapped(m, t);
        return t->data;
    }
    bool filled;
    float *v = model_wbuf(m, t->name, WC_KIND_F32, (size_t)n * sizeof(float), &filled, err);
    if (!v) return NULL;
    if (!filled) {
        size_t rb = dtype_row_bytes(t->type, t->ne[0]);
        for (int64_t r = 0; r < n / t->ne[0]; r++)
            dtype_dequantize_row((dtype)t->type, (const char *)t->data + rb * (size_t)r, v + r * t->ne[0], t->ne[0]);
    }
    model_mem_copied(m, t); /* its first use: pages released */
    model_mem_drop_pages(m, t); /* also used elsewhere (deepseek2's attn_kv_b): the pages the conversion read */
    return v;
}

int model_load_vector(model *m, const char *name, int64_t n, bool required, const float **out, cf_err *err) {
    int failed = 0;
    const gguf_tensor *t = model_need_tensor(m->gguf, name, n, 0, required, err, &failed);
    if (failed) return -1;
    if (!t) return 0;
    if (!(*out = model_tensor_f32(m, t, n, err))) return -1;
    m->n_params += (uint64_t)n;
    return 0;
}

int model_load_matrix(model *m, const char *name, int64_t in, int64_t out_rows, kern_weight *w, cf_err *err) {
    int failed = 0;
    const gguf_tensor *t = model_need_tensor(m->gguf, name, in, out_rows, true, err, &failed);
    if (failed) return -1;
    if (t->type == DT_F8_B128) {
        const float *scale = model_fp8_scales(m->gguf, name, in, out_rows, 1, err);
        if (!scale || kern_weight_prepare_fp8(w, t->data, scale, out_rows, in, err)) return -1;
    } else if (model_prepare_weight(m, name, w, (dtype)t->type, t->data, out_rows, in, err) != 0) {
        return cf_prefix(err, "tensor %s", name);
    }
    if (w->packed) model_mem_copied(m, t);
    else model_mem_mapped(m, t);
    m->weight_bytes += t->nbytes;
    m->n_params += (uint64_t)(in * out_rows);
    return 0;
}

static int load_weights(model *m, cf_err *err) {
    model_hparams *hp = &m->hp;
    int failed = 0;
    const gguf_tensor *emb = gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!emb) return cf_fail(err, "missing tensor token_embd.weight");
    int64_t vk = gguf_find_key(m->gguf, "tokenizer.ggml.tokens");
    if (vk < 0 || gguf_kv_type(m->gguf, vk) != GGUF_ARRAY || gguf_arr_type(m->gguf, vk) != GGUF_STRING)
        return cf_fail(err, "no vocabulary (string array tokenizer.ggml.tokens)");
    uint64_t nv = gguf_arr_len(m->gguf, vk);
    if (nv == 0 || nv > INT32_MAX) return cf_fail(err, "vocabulary of %llu tokens", (unsigned long long)nv);
    hp->n_vocab = (int32_t)nv;
    m->tok_embd = model_need_tensor(m->gguf, "token_embd.weight", hp->n_embd, hp->n_vocab, true, err, &failed);
    if (failed) return cf_prefix(err, "vocabulary has %d tokens", hp->n_vocab);
    m->n_params += (uint64_t)hp->n_embd * (uint64_t)hp->n_vocab;
    m->weight_bytes += m->tok_embd->nbytes / (uint64_t)hp->n_vocab;
    if (model_load_vector(m, "output_norm.weight", hp->n_embd, true, &m->output_norm, err)) return -1;
    if (gguf_find_tensor(m->gguf, "output.weight")) {
        if (model_load_matrix(m, "output.weight", hp->n_embd, hp->n_vocab, &m->output, err)) return -1;
    } else {
        hp->tied_output = true;
        if (model_prepare_weight(m, "token_embd.weight", &m->output, (dtype)m->tok_embd->type, m->tok_embd->data,
                                 hp->n_vocab, hp->n_embd, err))
            return cf_prefix(err, "tensor token_embd.weight (as LM head)");
        m->weight_bytes += m->tok_embd->nbytes;
        /* still read in place for embedding rows, but sparsely: the repack
         * read all of it, so drop the pages; rows fault back in when used */
        if (m->output.packed) model_mem_drop_pages(m, m->tok_embd);
    }
    model_mem_mapped(m, m->tok_embd);
    const gguf_tensor *rf = gguf_find_tensor(m->gguf, "rope_freqs.weight");
    if (rf) {
        if (rf->type != DT_F32 || rf->ne[0] != hp->rope_dim / 2 || rf->n_dims != 1)
            return cf_fail(err, "tensor rope_freqs.weight must be f32 [%d]", hp->rope_dim / 2);
        if (!(m->rope_freq_factors = model_tensor_f32(m, rf, rf->ne[0], err))) return -1;
    }
    return m->arch->load(m, err);
}

int model_load(const char *path, model **out, cf_err *err) { return model_load_with(path, NULL, out, err); }

int model_load_progress(const char *path, model_progress_fn fn, void *ctx, model **out, cf_err *err) {
    model_load_opts o = {.progress = fn, .progress_ctx = ctx};
    return model_load_with(path, &o, out, err);
}

typedef enum { CACHE_NONE, CACHE_USE, CACHE_REBUILD } cache_mode;

/* Opens the weights cache for m (a verified hit or a build) before the
 * weights load; without one the load goes on from the file, noting why. */
static void open_cache(model *m, const char *dir, cache_mode mode) {
    cf_err ce = {0};
    if (wcache_open(dir, m->gguf, mode == CACHE_REBUILD, m->progress, m->progress_ctx, &m->mem.wc, &ce)) {
        LOG_WARN("%s; loading without it", ce.msg);
        snprintf(m->mem.cache_note, sizeof m->mem.cache_note, "not used: %.280s", ce.msg);
        return;
    }
    if (wcache_rejected(m->mem.wc)[0])
        snprintf(m->mem.cache_note, sizeof m->mem.cache_note, "rebuilt: the old file was rejected (%.250s)",
                 wcache_rejected(m->mem.wc));
    else if (mode == CACHE_REBUILD)
        snprintf(m->mem.cache_note, sizeof m->mem.cache_note, "rebuilt: the old file did not fit this load");
    m->mem.source = wcache_is_hit(m->mem.wc) ? MODEL_WEIGHTS_CACHE_HIT : MODEL_WEIGHTS_CACHE_BUILT;
}

/* One load. *cache_failed: it failed because of the weights cache (retry);
 * *was_hit: that cache was an existing file. */
static int load_once(const char *path, const model_load_opts *o, cache_mode mode, model **out, bool *cache_failed,
                     bool *was_hit, cf_err *err) {
    *out = NULL;
    *cache_failed = *was_hit = false;
    model *m = calloc(1, sizeof *m);
    if (!m) return cf_fail(err, "%s: out of memory", path);
    m->progress = o->progress;
    m->progress_ctx = o->progress_ctx;
    m->expert_keep = o->expert_keep;
    m->expert_keep_ctx = o->expert_keep_ctx;
    int opened = hf_is_model_dir(path) ? hf_dir_open(path, &m->gguf, err) : gguf_open(path, &m->gguf, err);
    if (opened != 0) {
        free(m);
        return -1;
    }
    int r = model_mem_init(m, err) || check_types(m->gguf, err) || read_hparams(m->gguf, &m->hp, &m->arch, err);
    if (!r && mode != CACHE_NONE) open_cache(m, o->weights_cache_dir, mode);
    r = r || load_weights(m, err) || (m->mem.wc && wcache_finish(m->mem.wc, err));
    model_mem_end_load(m);
    if (r) {
        *cache_failed = wcache_failed(m->mem.wc);
        *was_hit = wcache_is_hit(m->mem.wc);
        cf_prefix(err, "%s", path);
        model_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

int model_load_with(const char *path, const model_load_opts *opts, model **out, cf_err *err) {
    model_load_opts o = opts ? *opts : (model_load_opts){0};
    cache_mode mode = o.weights_cache_dir && *o.weights_cache_dir ? CACHE_USE : CACHE_NONE;
    if (mode != CACHE_NONE && o.expert_keep) /* the cache holds every weight; a partial set has its own buffers */
        return cf_fail(err, "%s: a weights cache cannot be used with a partial expert set (expert parallelism)", path);
    for (;;) {
        bool cache_failed, was_hit;
        int r = load_once(path, &o, mode, out, &cache_failed, &was_hit, err);
        if (r == 0 || !cache_failed || mode == CACHE_NONE) return r;
        /* a hit that did not fit the load is rebuilt; a failed build loads without a cache */
        mode = was_hit && mode == CACHE_USE ? CACHE_REBUILD : CACHE_NONE;
        LOG_WARN("%s; %s", err->msg, mode == CACHE_REBUILD ? "rebuilding the weights cache" : "loading without it");
    }
}

void model_free(model *m) {
    if (!m) return;
    if (m->arch) m->arch->release(m);
    kern_weight_release(&m->output);
    model_mem_free(m); /* after the hooks: the weight buffers go last */
    gguf_close(m->gguf);
    free(m);
}

const model_hparams *model_get_hparams(const model *m) { return &m->hp; }
const gguf_file *model_get_gguf(const model *m) { return m->gguf; }
uint64_t model_active_weight_bytes(const model *m) { return m->active_bytes; }
uint64_t model_expert_bytes(const model *m) { return m->routed_expert_bytes; }
uint64_t model_active_params(const model *m) { return m->active_params; }
bool model_experts_partial(const model *m) { return m->experts_partial; }
uint64_t model_expert_resident_bytes(const model *m) {
    return (uint64_t)atomic_load_explicit(&((model *)m)->expert_resident_bytes, memory_order_relaxed);
}
bool model_expert_resident(const model *m, int32_t layer, int32_t expert) {
    return m->arch && m->arch->expert_resident && m->arch->expert_resident(m, layer, expert);
}
int model_expert_acquire(model *m, int32_t layer, int32_t expert, cf_err *err) {
    if (!m->experts_partial || !m->arch->expert_acquire)
        return cf_fail(err, "model %s: routed experts are not loaded per expert", m->hp.arch);
    return m->arch->expert_acquire(m, layer, expert, err);
}
void model_expert_release(model *m, int32_t layer, int32_t expert) {
    if (m->experts_partial && m->arch->expert_release) m->arch->expert_release(m, layer, expert);
}
size_t model_expert_raw_size(const model *m, int32_t layer) {
    return m->experts_partial && m->arch->expert_raw_size ? m->arch->expert_raw_size(m, layer) : 0;
}
int model_expert_read_raw(const model *m, int32_t layer, int32_t expert, void *dst, size_t n, cf_err *err) {
    if (!m->arch->expert_read_raw) return cf_fail(err, "model %s: experts cannot be moved as bytes", m->hp.arch);
    return m->arch->expert_read_raw(m, layer, expert, dst, n, err);
}
int model_expert_acquire_raw(model *m, int32_t layer, int32_t expert, const void *raw, size_t n, cf_err *err) {
    if (!m->experts_partial || !m->arch->expert_acquire_raw)
        return cf_fail(err, "model %s: routed experts are not loaded per expert", m->hp.arch);
    return m->arch->expert_acquire_raw(m, layer, expert, raw, n, err);
}
uint64_t model_n_params(const model *m) { return m->n_params; }
void model_kv_layout(const model *m, kv_spec *out) {
    memset(out, 0, sizeof *out);
    m->arch->kv_layout(m, out);
}

int model_kv_dtype_check(const model *m, kv_dtype dt, cf_err *err) {
    if ((unsigned)dt >= KV_DTYPE_COUNT) return cf_fail(err, "unknown KV cache type %d", (int)dt);
    if (dt == KV_DTYPE_F32) return 0;
    if (!(m->arch->kv_dtypes & (1u << dt)) || !m->arch->fwd_set_kv_dtype)
        return cf_fail(err, "--kv-dtype %s is not supported for architecture '%s' (use f32)", kv_dtype_name(dt),
                       m->hp.arch);
    if (!kv_dtype_fits(dt, m->hp.head_dim))
        return cf_fail(err, "--kv-dtype %s needs a head dimension that is a multiple of 32 (this model: %d)",
                       kv_dtype_name(dt), m->hp.head_dim);
    return 0;
}

void model_kv_layout_as(const model *m, kv_dtype dt, kv_spec *out) {
    model_kv_layout(m, out);
    out->dtype = dt;
    if (dt == KV_DTYPE_F32) return;
    for (int i = 0; i < out->n_groups; i++) {
        kv_group_spec *g = &out->groups[i];
        if (g->kind == KV_LAYER_FULL || g->kind == KV_LAYER_WINDOW) /* a K row and a V row */
            g->token_floats = (int32_t)(2 * kv_dtype_row_units(dt, g->token_floats / 2));
    }
}

int64_t model_kv_block_floats_as(const model *m, kv_dtype dt, int block_tokens) {
    kv_spec s;
    model_kv_layout_as(m, dt, &s);
    return kv_spec_paged_block_floats(&s, block_tokens);
}

double model_kv_token_bytes_as(const model *m, kv_dtype dt) {
    kv_spec s;
    model_kv_layout_as(m, dt, &s);
    int32_t mult = kv_spec_block_multiple(&s);
    return (double)kv_spec_paged_block_floats(&s, mult) * (double)sizeof(float) / mult;
}

int64_t model_kv_block_floats(const model *m, int block_tokens) {
    kv_spec s;
    model_kv_layout(m, &s);
    return kv_spec_paged_block_floats(&s, block_tokens);
}

int64_t kv_spec_paged_block_floats(const kv_spec *s, int32_t block_tokens) {
    int64_t f = 0;
    for (int i = 0; i < s->n_groups; i++) {
        const kv_group_spec *g = &s->groups[i];
        if (g->kind == KV_LAYER_WINDOW) continue;
        int32_t per = g->row_tokens > 1 ? g->row_tokens : 1;
        f += (int64_t)g->n_layers * g->token_floats * (block_tokens / per);
    }
    return f;
}

static int64_t gcd64(int64_t a, int64_t b) { return b ? gcd64(b, a % b) : a; }

int32_t kv_spec_block_multiple(const kv_spec *s) {
    int64_t m = 1;
    for (int i = 0; i < s->n_groups; i++) {
        int64_t r = s->groups[i].kind != KV_LAYER_WINDOW && s->groups[i].row_tokens > 1 ? s->groups[i].row_tokens : 1;
        m = m / gcd64(m, r) * r;
        if (m > (1 << 20)) return 1 << 20;
    }
    return (int32_t)m;
}

double model_kv_token_bytes(const model *m) {
    kv_spec s;
    model_kv_layout(m, &s);
    int32_t mult = kv_spec_block_multiple(&s);
    return (double)kv_spec_paged_block_floats(&s, mult) * (double)sizeof(float) / mult;
}

int32_t model_kv_block_tokens(const model *m, int32_t want) {
    kv_spec s;
    model_kv_layout(m, &s);
    int32_t mult = kv_spec_block_multiple(&s);
    if (want <= 0) want = 16;
    return (int32_t)(((int64_t)want + mult - 1) / mult * mult);
}

int64_t kv_spec_paged_token_floats(const kv_spec *s) {
    int64_t f = 0;
    for (int i = 0; i < s->n_groups; i++)
        if (s->groups[i].kind != KV_LAYER_WINDOW) f += (int64_t)s->groups[i].n_layers * s->groups[i].token_floats;
    return f;
}

int64_t kv_spec_ring_row_floats(const kv_spec *s) {
    int64_t f = 0;
    for (int i = 0; i < s->n_groups; i++)
        if (s->groups[i].kind == KV_LAYER_WINDOW) f += (int64_t)s->groups[i].n_layers * s->groups[i].token_floats;
    return f;
}

int32_t kv_spec_max_window(const kv_spec *s) {
    int32_t w = 0;
    for (int i = 0; i < s->n_groups; i++)
        if (s->groups[i].kind == KV_LAYER_WINDOW && s->groups[i].window > w) w = s->groups[i].window;
    return w;
}

bool kv_spec_replay_by_default(const kv_spec *s) {
    /* the layout declares it (deepseek4: window rings beside compressed streams, trained for it) */
    return s->bounded_replay && kv_spec_max_window(s) > 0;
}

int32_t kv_spec_default_replay_tokens(const kv_spec *s) {
    return kv_spec_replay_by_default(s) ? 128 : kv_spec_max_window(s);
}

int32_t kv_ring_tokens(int32_t window, int32_t max_chunk, int32_t block_tokens) {
    if (window <= 0 || block_tokens <= 0) return 0;
    int64_t rows = (int64_t)window + (max_chunk > 1 ? max_chunk : 1) - 1;
    rows = (rows + block_tokens - 1) / block_tokens * block_tokens;
    return rows > INT32_MAX / 2 ? INT32_MAX / 2 : (int32_t)rows;
}

void model_kv_describe(const model *m, char *buf, size_t n) {
    if (n) buf[0] = 0;
    m->arch->kv_describe(m, buf, n);
}

int model_fp_u32(model_fp_writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return w->write(w->ctx, b, 4);
}

int model_fp_f32(model_fp_writer *w, float f) {
    uint32_t v;
    memcpy(&v, &f, 4);
    return model_fp_u32(w, v);
}

int model_fp_arch_hparams(const model_hparams *hp, model_fp_writer *w) {
    char name[sizeof hp->arch] = {0};
    memcpy(name, hp->arch, sizeof name - 1);
    const model_arch *fam = model_arch_find(name);
    return fam ? fam->fingerprint(hp, w) : 0;
}
