/* mkmodel.c - random-weight llama, deepseek2 and gemma2 models (see mkmodel.h).
 * Each architecture is one row of mk_archs (validate its options, list its
 * tensors, write its keys), chosen by --arch name; the rest is shared.
 *
 * Layout matches what llama.cpp writes for llama: token_embd, output_norm,
 * output (unless tied), then per block attn_norm, attn_q, attn_k, attn_v,
 * attn_output, ffn_norm, ffn_gate, ffn_down, ffn_up; ne = {in, out}.
 * deepseek2: the tensors and keys of llama.cpp's converter
 * (src/model/arch/deepseek2.h lists them; --mtp-layers N appends N next-n
 * layers, blk.N.nextn.*, and nextn_predict_layers); expert stacks are 3-D,
 * ne = {in, out, n_expert}, generated row by row like the rest.
 * gemma2: llama.cpp's gemma2 tensors (post-attention / post-FFN norms, no
 * output.weight: the LM head is always token_embd) and keys.
 *
 * Speed: rows are generated in parallel batches (one thread per core, at most
 * 16) into one of two output buffers while the previous batch is appended to
 * the stream: a 1.1B-parameter model costs ~20 s of CPU in all, spread over
 * the cores. Each row's values depend only on (seed, tensor name, row index):
 * xoshiro256** seeded through splitmix64, normals by the polar Box-Muller
 * method. */
#include "model/mkmodel.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/gguf.h"
#include "model/mkmodel_internal.h"
#include "model/quantize.h"

#define MAX_THREADS 16
#define BATCH_BYTES (16u << 20)

/* ---- random numbers ---- */

typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(rng *r, uint64_t seed, uint64_t tensor, uint64_t row) {
    uint64_t x = seed ^ (tensor * 0xd1b54a32d192ed03ull) ^ (row * 0x8cb92ba72f3d8dd7ull);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(rng *r) {
    uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return out;
}

/* n values mean + stddev * N(0,1): Marsaglia's polar form of Box-Muller in
 * float (no trig), both coordinates of a 64-bit draw, two normals per accept. */
static void fill_normal(rng *r, float *out, int64_t n, float mean, float stddev) {
    int64_t i = 0;
    while (i < n) {
        uint64_t a = rng_next(r);
        float u = (float)((int32_t)(a >> 40) - (1 << 23)) * 0x1p-23f;
        float v = (float)((int32_t)(a & 0xffffff) - (1 << 23)) * 0x1p-23f;
        float s = u * u + v * v;
        if (s >= 1.0f || s == 0.0f) continue;
        float m = stddev * sqrtf(-2.0f * logf(s) / s);
        out[i++] = mean + m * u;
        if (i < n) out[i++] = mean + m * v;
    }
}

/* n distinct ids in [0, range) (n <= range): a partial Fisher-Yates
 * shuffle done by rejection, since n is small (experts per token). */
static void fill_distinct_ids(rng *r, int32_t *out, int64_t n, int32_t range) {
    for (int64_t i = 0; i < n; i++) {
        int32_t v;
        bool dup;
        do {
            v = (int32_t)(rng_next(r) % (uint64_t)range);
            dup = false;
            for (int64_t k = 0; k < i; k++) dup |= out[k] == v;
        } while (dup);
        out[i] = v;
    }
}

/* ---- model description ---- */

static int validate_ds2(const mkmodel_opts *o, cf_err *err) {
    if (o->dim <= 0 || o->layers <= 0 || o->heads <= 0 || o->ffn <= 0 || o->ctx < 0 || o->q_lora < 0 ||
        o->kv_lora <= 0 || o->qk_nope <= 0 || o->qk_rope <= 0 || o->v_head <= 0 || o->dense_layers < 0 ||
        o->groups < 0 || o->groups_used < 0 || o->shared_experts < 0)
        return cf_fail(err, "deepseek2: --dim, --layers, --heads, --ffn, --kv-lora, --qk-nope, --qk-rope and "
                            "--v-head must be positive");
    if (o->qk_rope % 2) return cf_fail(err, "--qk-rope %d must be even", o->qk_rope);
    if (o->dense_layers > o->layers)
        return cf_fail(err, "--dense-layers %d exceeds --layers %d", o->dense_layers, o->layers);
    if (o->dense_layers < o->layers && (o->experts <= 0 || o->experts_used <= 0 || o->experts_used > o->experts ||
                                        o->expert_ffn <= 0 || o->experts > 4096))
        return cf_fail(err, "deepseek2: MoE layers need --experts (<= 4096), --experts-used (<= experts) and "
                            "--expert-ffn");
    if (o->hot_experts < 0 || o->hot_experts > o->experts || (o->hot_experts > 0 && o->softmax_gating))
        return cf_fail(err, "--hot-experts %d: at most --experts (%d), with sigmoid gating (the bias it raises)",
                       o->hot_experts, o->experts);
    if (o->groups > 1 && (o->experts % o->groups || o->experts / o->groups < 2 || o->groups_used <= 0 ||
                          o->groups_used > o->groups || o->groups_used * (o->experts / o->groups) < o->experts_used))
        return cf_fail(err, "--groups %d / --groups-used %d do not fit %d experts (top %d)", o->groups, o->groups_used,
                       o->experts, o->experts_used);
    int64_t be = dtype_block_elems(o->type);
    int64_t ins[] = {o->dim, o->q_lora, o->kv_lora, (int64_t)o->heads * o->v_head, o->ffn, o->expert_ffn};
    for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++)
        if (ins[i] % be)
            return cf_fail(err,
                           "deepseek2: --dim, --q-lora, --kv-lora, --heads x --v-head, --ffn and --expert-ffn "
                           "must be multiples of %d for %s",
                           (int)be, dtype_name(o->type));
    return 0;
}

static int validate_llama(const mkmodel_opts *o, cf_err *err) {
    if (o->dim <= 0 || o->layers <= 0 || o->heads <= 0 || o->kv_heads <= 0 || o->ffn <= 0 || o->ctx < 0)
        return cf_fail(err, "--dim, --layers, --heads, --kv-heads and --ffn must be positive");
    if (o->dim % o->heads || (o->dim / o->heads) % 2)
        return cf_fail(err, "--dim %d must be a multiple of --heads %d with an even head size", o->dim, o->heads);
    if (o->kv_heads > o->heads || o->heads % o->kv_heads)
        return cf_fail(err, "--heads %d must be a multiple of --kv-heads %d", o->heads, o->kv_heads);
    int64_t be = dtype_block_elems(o->type);
    if (o->dim % be || o->ffn % be)
        return cf_fail(err, "--dim %d and --ffn %d must be multiples of %d for %s", o->dim, o->ffn, (int)be,
                       dtype_name(o->type));
    return 0;
}

tdesc mat(const char *name, int64_t in, int64_t out, dtype t) {
    tdesc d = {.n_dims = 2, .ne = {in, out, 1}, .type = t, .mean = 0};
    snprintf(d.name, sizeof d.name, "%s", name);
    return d;
}
tdesc norm(const char *name, int64_t n) {
    tdesc d = {.n_dims = 1, .ne = {n, 1, 1}, .type = DT_F32, .mean = 1};
    snprintf(d.name, sizeof d.name, "%s", name);
    return d;
}

tdesc experts(const char *name, int64_t in, int64_t out, int64_t n_exp, dtype t) {
    tdesc d = mat(name, in, out, t);
    d.n_dims = 3;
    d.ne[2] = n_exp;
    return d;
}

#define DS2_MAX_PER_LAYER 22 /* 16 + the next-n extras */

static int describe_ds2(const mkmodel_opts *o, int64_t vocab, tdesc *t) {
    int n = 0;
    int64_t dim = o->dim, H = o->heads, qk = o->qk_nope + o->qk_rope, fe = o->expert_ffn;
    dtype ty = o->type;
    t[n++] = mat("token_embd.weight", dim, vocab, ty);
    t[n++] = norm("output_norm.weight", dim);
    if (!o->tied) t[n++] = mat("output.weight", dim, vocab, ty);
    for (int l = 0; l < o->layers + o->mtp_layers; l++) {
        char b[64];
#define NAME(part) (snprintf(b, sizeof b, "blk.%d.%s", l, part), b)
        if (l >= o->layers) { /* a next-n (MTP) layer: llama.cpp's blk.N.nextn.* as its converter writes them */
            t[n++] = mat(NAME("nextn.eh_proj.weight"), 2 * dim, dim, ty);
            t[n++] = norm(NAME("nextn.enorm.weight"), dim);
            t[n++] = norm(NAME("nextn.hnorm.weight"), dim);
            t[n++] = norm(NAME("nextn.shared_head_norm.weight"), dim);
            t[n++] = mat(NAME("nextn.shared_head_head.weight"), dim, vocab, ty);
            t[n++] = mat(NAME("nextn.embed_tokens.weight"), dim, vocab, ty);
        }
        t[n++] = norm(NAME("attn_norm.weight"), dim);
        if (o->q_lora > 0) {
            t[n++] = mat(NAME("attn_q_a.weight"), dim, o->q_lora, ty);
            t[n++] = norm(NAME("attn_q_a_norm.weight"), o->q_lora);
            t[n++] = mat(NAME("attn_q_b.weight"), o->q_lora, H * qk, ty);
        } else {
            t[n++] = mat(NAME("attn_q.weight"), dim, H * qk, ty);
        }
        t[n++] = mat(NAME("attn_kv_a_mqa.weight"), dim, o->kv_lora + o->qk_rope, ty);
        t[n++] = norm(NAME("attn_kv_a_norm.weight"), o->kv_lora);
        t[n++] = mat(NAME("attn_kv_b.weight"), o->kv_lora, H * (o->qk_nope + o->v_head), ty);
        t[n++] = mat(NAME("attn_output.weight"), H * o->v_head, dim, ty);
        t[n++] = norm(NAME("ffn_norm.weight"), dim);
        if (l < o->dense_layers || o->experts == 0) { /* an MTP layer of a dense model is dense too */
            t[n++] = mat(NAME("ffn_gate.weight"), dim, o->ffn, ty);
            t[n++] = mat(NAME("ffn_down.weight"), o->ffn, dim, ty);
            t[n++] = mat(NAME("ffn_up.weight"), dim, o->ffn, ty);
            continue;
        }
        t[n++] = mat(NAME("ffn_gate_inp.weight"), dim, o->experts, DT_F32);
        if (!o->softmax_gating) {
            t[n] = mat(NAME("exp_probs_b.bias"), o->experts, 1, DT_F32);
            t[n].hot_n = o->hot_experts, t[n].hot_add = o->hot_bias != 0.0f ? o->hot_bias : 0.05f;
            t[n++].n_dims = 1;
        }
        t[n++] = experts(NAME("ffn_gate_exps.weight"), dim, fe, o->experts, ty);
        t[n++] = experts(NAME("ffn_down_exps.weight"), fe, dim, o->experts, ty);
        t[n++] = experts(NAME("ffn_up_exps.weight"), dim, fe, o->experts, ty);
        if (o->shared_experts > 0) {
            int64_t fs = fe * o->shared_experts;
            t[n++] = mat(NAME("ffn_gate_shexp.weight"), dim, fs, ty);
            t[n++] = mat(NAME("ffn_down_shexp.weight"), fs, dim, ty);
            t[n++] = mat(NAME("ffn_up_shexp.weight"), dim, fs, ty);
        }
#undef NAME
    }
    return n;
}

/* Fills the tensor list; returns the count (caller's array has room). */
static int describe_llama(const mkmodel_opts *o, int64_t vocab, tdesc *t) {
    int n = 0;
    int64_t dim = o->dim, kv = (int64_t)o->dim / o->heads * o->kv_heads, ffn = o->ffn;
    t[n++] = mat("token_embd.weight", dim, vocab, o->type);
    t[n++] = norm("output_norm.weight", dim);
    if (!o->tied) t[n++] = mat("output.weight", dim, vocab, o->type);
    for (int l = 0; l < o->layers; l++) {
        char b[64];
#define NAME(part) (snprintf(b, sizeof b, "blk.%d.%s.weight", l, part), b)
        t[n++] = norm(NAME("attn_norm"), dim);
        t[n++] = mat(NAME("attn_q"), dim, dim, o->type);
        t[n++] = mat(NAME("attn_k"), dim, kv, o->type);
        t[n++] = mat(NAME("attn_v"), dim, kv, o->type);
        t[n++] = mat(NAME("attn_output"), dim, dim, o->type);
        t[n++] = norm(NAME("ffn_norm"), dim);
        t[n++] = mat(NAME("ffn_gate"), dim, ffn, o->type);
        t[n++] = mat(NAME("ffn_down"), ffn, dim, o->type);
        t[n++] = mat(NAME("ffn_up"), dim, ffn, o->type);
#undef NAME
    }
    return n;
}

static int validate_gemma2(const mkmodel_opts *o, cf_err *err) {
    if (o->dim <= 0 || o->layers <= 0 || o->heads <= 0 || o->kv_heads <= 0 || o->ffn <= 0 || o->ctx < 0 ||
        o->head_dim < 0 || o->window < 0 || o->swa_pattern < 0)
        return cf_fail(err, "--dim, --layers, --heads, --kv-heads and --ffn must be positive");
    int hd = o->head_dim ? o->head_dim : o->dim / o->heads;
    if (hd <= 0 || hd % 2) return cf_fail(err, "gemma2: the head size %d must be even and positive", hd);
    if (o->kv_heads > o->heads || o->heads % o->kv_heads)
        return cf_fail(err, "--heads %d must be a multiple of --kv-heads %d", o->heads, o->kv_heads);
    if (o->swa_pattern == 1 || (o->swa_pattern == 0 && o->layers < 2))
        return cf_fail(err, "gemma2: at least one layer must be global (--swa-pattern >= 2, --layers >= 2)");
    int64_t be = dtype_block_elems(o->type);
    if (o->dim % be || o->ffn % be || ((int64_t)o->heads * hd) % be)
        return cf_fail(err, "gemma2: --dim, --ffn and --heads x head size must be multiples of %d for %s", (int)be,
                       dtype_name(o->type));
    return 0;
}

/* llama.cpp's gemma2 layout: no output.weight, post-norms after attention and FFN. */
static int describe_gemma2(const mkmodel_opts *o, int64_t vocab, tdesc *t) {
    int n = 0;
    int64_t dim = o->dim, hd = o->head_dim ? o->head_dim : o->dim / o->heads;
    int64_t qd = hd * o->heads, kv = hd * o->kv_heads, ffn = o->ffn;
    t[n++] = mat("token_embd.weight", dim, vocab, o->type);
    t[n++] = norm("output_norm.weight", dim);
    for (int l = 0; l < o->layers; l++) {
        char b[64];
#define NAME(part) (snprintf(b, sizeof b, "blk.%d.%s.weight", l, part), b)
        t[n++] = norm(NAME("attn_norm"), dim);
        t[n++] = mat(NAME("attn_q"), dim, qd, o->type);
        t[n++] = mat(NAME("attn_k"), dim, kv, o->type);
        t[n++] = mat(NAME("attn_v"), dim, kv, o->type);
        t[n++] = mat(NAME("attn_output"), qd, dim, o->type);
        t[n++] = norm(NAME("post_attention_norm"), dim);
        t[n++] = norm(NAME("ffn_norm"), dim);
        t[n++] = mat(NAME("ffn_gate"), dim, ffn, o->type);
        t[n++] = mat(NAME("ffn_down"), ffn, dim, o->type);
        t[n++] = mat(NAME("ffn_up"), dim, ffn, o->type);
        t[n++] = norm(NAME("post_ffw_norm"), dim);
#undef NAME
    }
    return n;
}

static void set_hparams_gemma2(gguf_writer *w, const mkmodel_opts *o, int64_t vocab) {
    int hd = o->head_dim ? o->head_dim : o->dim / o->heads;
    gguf_set_str(w, "general.architecture", "gemma2");
    gguf_set_str(w, "general.name", "cinfer-mkmodel");
    gguf_set_u32(w, "general.file_type", quantize_file_type(o->type));
    gguf_set_u32(w, "gemma2.context_length", (uint32_t)(o->ctx ? o->ctx : 2048));
    gguf_set_u32(w, "gemma2.embedding_length", (uint32_t)o->dim);
    gguf_set_u32(w, "gemma2.feed_forward_length", (uint32_t)o->ffn);
    gguf_set_u32(w, "gemma2.block_count", (uint32_t)o->layers);
    gguf_set_u32(w, "gemma2.attention.head_count", (uint32_t)o->heads);
    gguf_set_u32(w, "gemma2.attention.head_count_kv", (uint32_t)o->kv_heads);
    gguf_set_u32(w, "gemma2.attention.key_length", (uint32_t)hd);
    gguf_set_u32(w, "gemma2.attention.value_length", (uint32_t)hd);
    gguf_set_f32(w, "gemma2.attention.layer_norm_rms_epsilon", 1e-6f);
    gguf_set_f32(w, "gemma2.attn_logit_softcapping", o->attn_softcap > 0 ? o->attn_softcap : 50.0f);
    gguf_set_f32(w, "gemma2.final_logit_softcapping", o->final_softcap > 0 ? o->final_softcap : 30.0f);
    gguf_set_u32(w, "gemma2.attention.sliding_window", (uint32_t)(o->window ? o->window : 4096));
    if (o->swa_pattern) gguf_set_u32(w, "gemma2.attention.sliding_window_pattern", (uint32_t)o->swa_pattern);
    gguf_set_u32(w, "gemma2.vocab_size", (uint32_t)vocab);
}

/* Copies the vocab's tokenizer.* keys; returns the token count via *vocab. */
static int copy_vocab(gguf_writer *w, const char *path, int64_t *vocab, cf_err *err) {
    gguf_file *v;
    if (gguf_open(path, &v, err)) return -1;
    int64_t i = gguf_find_key(v, "tokenizer.ggml.tokens");
    if (i < 0 || gguf_arr_type(v, i) != GGUF_STRING || gguf_arr_len(v, i) == 0) {
        gguf_close(v);
        return cf_fail(err, "%s: no tokenizer.ggml.tokens string array (not a vocab GGUF?)", path);
    }
    *vocab = (int64_t)gguf_arr_len(v, i);
    int rc = gguf_writer_copy_kv(w, v, err);
    for (int64_t k = 0; rc == 0 && k < gguf_kv_count(v); k++) {
        const char *key = gguf_key_name(v, k);
        if (strncmp(key, "tokenizer.", 10)) gguf_writer_remove_key(w, key);
    }
    gguf_close(v);
    return rc;
}

static void set_hparams_ds2(gguf_writer *w, const mkmodel_opts *o, int64_t vocab) {
    gguf_set_str(w, "general.architecture", "deepseek2");
    gguf_set_str(w, "general.name", "cinfer-mkmodel");
    gguf_set_u32(w, "general.file_type", quantize_file_type(o->type));
    gguf_set_u32(w, "deepseek2.context_length", (uint32_t)(o->ctx ? o->ctx : 2048));
    gguf_set_u32(w, "deepseek2.embedding_length", (uint32_t)o->dim);
    gguf_set_u32(w, "deepseek2.feed_forward_length", (uint32_t)o->ffn);
    gguf_set_u32(w, "deepseek2.block_count", (uint32_t)(o->layers + o->mtp_layers));
    if (o->mtp_layers) gguf_set_u32(w, "deepseek2.nextn_predict_layers", (uint32_t)o->mtp_layers);
    gguf_set_u32(w, "deepseek2.attention.head_count", (uint32_t)o->heads);
    gguf_set_u32(w, "deepseek2.attention.head_count_kv", (uint32_t)o->heads);
    gguf_set_f32(w, "deepseek2.rope.freq_base", 10000.0f);
    gguf_set_f32(w, "deepseek2.attention.layer_norm_rms_epsilon", 1e-6f);
    gguf_set_u32(w, "deepseek2.vocab_size", (uint32_t)vocab);
    if (o->q_lora > 0) gguf_set_u32(w, "deepseek2.attention.q_lora_rank", (uint32_t)o->q_lora);
    gguf_set_u32(w, "deepseek2.attention.kv_lora_rank", (uint32_t)o->kv_lora);
    gguf_set_u32(w, "deepseek2.attention.key_length", (uint32_t)(o->qk_nope + o->qk_rope));
    gguf_set_u32(w, "deepseek2.attention.value_length", (uint32_t)o->v_head);
    gguf_set_u32(w, "deepseek2.rope.dimension_count", (uint32_t)o->qk_rope);
    gguf_set_u32(w, "deepseek2.leading_dense_block_count", (uint32_t)o->dense_layers);
    if (o->dense_layers < o->layers) {
        gguf_set_u32(w, "deepseek2.expert_count", (uint32_t)o->experts);
        gguf_set_u32(w, "deepseek2.expert_used_count", (uint32_t)o->experts_used);
        gguf_set_u32(w, "deepseek2.expert_shared_count", (uint32_t)o->shared_experts);
        gguf_set_u32(w, "deepseek2.expert_feed_forward_length", (uint32_t)o->expert_ffn);
        gguf_set_f32(w, "deepseek2.expert_weights_scale", o->expert_scale > 0 ? o->expert_scale : 1.0f);
        gguf_set_bool(w, "deepseek2.expert_weights_norm", !o->softmax_gating);
        gguf_set_u32(w, "deepseek2.expert_gating_func", o->softmax_gating ? 1 : 2);
        if (o->groups > 1) {
            gguf_set_u32(w, "deepseek2.expert_group_count", (uint32_t)o->groups);
            gguf_set_u32(w, "deepseek2.expert_group_used_count", (uint32_t)o->groups_used);
        }
    }
    gguf_set_f32(w, "deepseek2.rope.scaling.yarn_log_multiplier", 0.1f);
    if (o->yarn_factor > 1.0f) {
        int ctx = o->ctx ? o->ctx : 2048;
        gguf_set_str(w, "deepseek2.rope.scaling.type", "yarn");
        gguf_set_f32(w, "deepseek2.rope.scaling.factor", o->yarn_factor);
        gguf_set_u32(w, "deepseek2.rope.scaling.original_context_length",
                     (uint32_t)(o->yarn_orig_ctx > 0 ? o->yarn_orig_ctx : (int)((float)ctx / o->yarn_factor)));
    }
}

static void set_hparams_llama(gguf_writer *w, const mkmodel_opts *o, int64_t vocab) {
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_str(w, "general.name", "cinfer-mkmodel");
    gguf_set_u32(w, "general.file_type", quantize_file_type(o->type));
    gguf_set_u32(w, "llama.context_length", (uint32_t)(o->ctx ? o->ctx : 2048));
    gguf_set_u32(w, "llama.embedding_length", (uint32_t)o->dim);
    gguf_set_u32(w, "llama.feed_forward_length", (uint32_t)o->ffn);
    gguf_set_u32(w, "llama.block_count", (uint32_t)o->layers);
    gguf_set_u32(w, "llama.attention.head_count", (uint32_t)o->heads);
    gguf_set_u32(w, "llama.attention.head_count_kv", (uint32_t)o->kv_heads);
    gguf_set_u32(w, "llama.rope.dimension_count", (uint32_t)(o->dim / o->heads));
    gguf_set_f32(w, "llama.rope.freq_base", 10000.0f);
    gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_set_u32(w, "llama.vocab_size", (uint32_t)vocab);
}

/* ---- the architectures mkmodel writes ---- */

typedef struct mk_arch {
    const char *name; /* --arch */
    int (*validate)(const mkmodel_opts *o, cf_err *err); /* the options it needs */
    int (*describe)(const mkmodel_opts *o, int64_t vocab, tdesc *t); /* tensors, file order */
    void (*set_hparams)(gguf_writer *w, const mkmodel_opts *o, int64_t vocab); /* general.* and its keys */
    int max_per_layer; /* tensors per block, at most */
    bool (*has_options)(const mkmodel_opts *o); /* its required options are set */
} mk_arch;

static bool llama_has_options(const mkmodel_opts *o) { return o->kv_heads != 0; }
static bool gemma2_has_options(const mkmodel_opts *o) { return o->kv_heads != 0; }
static bool ds2_has_options(const mkmodel_opts *o) { return o->kv_lora && o->qk_nope && o->qk_rope && o->v_head; }

static const mk_arch mk_archs[] = {
    {"llama", validate_llama, describe_llama, set_hparams_llama, 9, llama_has_options},
    {"deepseek2", validate_ds2, describe_ds2, set_hparams_ds2, DS2_MAX_PER_LAYER, ds2_has_options},
    {"gemma2", validate_gemma2, describe_gemma2, set_hparams_gemma2, 11, gemma2_has_options},
    {"deepseek4", mk_ds4_validate, mk_ds4_describe, mk_ds4_set_hparams, MK_DS4_MAX_PER_LAYER, mk_ds4_has_options},
};

static const mk_arch *lookup_arch(const char *name) {
    for (size_t i = 0; name && i < sizeof mk_archs / sizeof mk_archs[0]; i++)
        if (!strcmp(mk_archs[i].name, name)) return &mk_archs[i];
    return NULL;
}

static const mk_arch *find_arch(const mkmodel_opts *o, cf_err *err) {
    const mk_arch *a = lookup_arch(o->arch);
    if (!a)
        cf_fail(err, "unsupported --arch '%s' (supported: llama, deepseek2, gemma2, deepseek4)",
                o->arch ? o->arch : "");
    return a;
}

bool mkmodel_has_arch_options(const mkmodel_opts *o) {
    const mk_arch *a = lookup_arch(o->arch);
    return !a || a->has_options(o);
}

/* ---- parallel row generation ---- */

typedef struct job {
    const tdesc *t;
    uint64_t seed, tensor;
    int64_t row0, nrows; /* rows of this batch */
    size_t row_bytes;
    uint8_t *out;
    int tid, nthreads;
} job;

static void *gen_rows(void *arg) {
    job *j = arg;
    int64_t n = j->t->ne[0];
    float *f = malloc((size_t)(n + 1) * sizeof *f);
    if (!f) return (void *)1;
    for (int64_t r = j->tid; r < j->nrows; r += j->nthreads) {
        rng g;
        rng_seed(&g, j->seed, j->tensor, (uint64_t)(j->row0 + r));
        if (j->t->int_range > 0) {
            fill_distinct_ids(&g, (int32_t *)(void *)(j->out + (size_t)r * j->row_bytes), n, j->t->int_range);
            continue;
        }
        fill_normal(&g, f, n, j->t->mean, j->t->std > 0 ? j->t->std : 0.02f);
        for (int64_t i = 0; i < j->t->hot_n && i < n; i++) f[i] += j->t->hot_add;
        dtype_quantize_row((dtype)j->t->type, f, j->out + (size_t)r * j->row_bytes, n);
    }
    free(f);
    return NULL;
}

/* The tensor's generator id: a hash of its name (independent of layout). */
static uint64_t tensor_id(const char *name) {
    uint64_t h = 1469598103934665603ull;
    for (; *name; name++) h = (h ^ (uint8_t)*name) * 1099511628211ull;
    return h;
}

/* Double-buffered output: workers fill buf[cur] while the caller's thread
 * writes the previous batch from buf[!cur]. */
typedef struct pipeline {
    uint8_t *buf[2];
    int cur;
    size_t pending; /* bytes of buf[!cur] not yet written */
    int nthreads;
} pipeline;

static int flush_pending(gguf_writer *w, pipeline *p, cf_err *err) {
    int rc = p->pending ? gguf_writer_write_data(w, p->buf[!p->cur], p->pending, err) : 0;
    p->pending = 0;
    return rc;
}

/* Generates rows [row0, row0+nrows) of t into buf[cur] on worker threads while
 * flushing the previous batch; then swaps buffers. */
static int run_batch(gguf_writer *w, pipeline *p, const job *proto, cf_err *err) {
    int nt = proto->nrows < p->nthreads ? (int)proto->nrows : p->nthreads;
    job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    bool started[MAX_THREADS] = {0};
    int failed = 0;
    for (int k = 0; k < nt; k++) {
        jobs[k] = *proto;
        jobs[k].out = p->buf[p->cur];
        jobs[k].tid = k;
        jobs[k].nthreads = nt;
        started[k] = pthread_create(&th[k], NULL, gen_rows, &jobs[k]) == 0;
    }
    int wrc = flush_pending(w, p, err);
    for (int k = 0; k < nt; k++) {
        void *ret = NULL;
        if (started[k]) pthread_join(th[k], &ret);
        else ret = gen_rows(&jobs[k]); /* could not start a thread: do its share here */
        failed |= ret != NULL;
    }
    if (wrc) return -1;
    if (failed) return cf_fail(err, "out of memory generating '%s'", proto->t->name);
    p->pending = (size_t)proto->nrows * proto->row_bytes;
    p->cur ^= 1;
    return 0;
}

static int stream_tensor(gguf_writer *w, pipeline *p, const tdesc *t, uint64_t id, uint64_t seed, cf_err *err) {
    size_t row_bytes = dtype_row_bytes(t->type, t->ne[0]);
    int64_t per_batch = (int64_t)(BATCH_BYTES / row_bytes);
    if (per_batch < 1) per_batch = 1;
    int64_t rows = t->ne[1] * t->ne[2];
    for (int64_t row0 = 0; row0 < rows; row0 += per_batch) {
        int64_t nrows = rows - row0 < per_batch ? rows - row0 : per_batch;
        job proto = {.t = t, .seed = seed, .tensor = id, .row0 = row0, .nrows = nrows, .row_bytes = row_bytes};
        if (run_batch(w, p, &proto, err)) return -1;
    }
    return 0;
}

int mkmodel_write(const mkmodel_opts *o, const char *out_path, cf_err *err) {
    const mk_arch *a = find_arch(o, err);
    if (!a || a->validate(o, err)) return -1;
    if (o->hot_experts && strcmp(a->name, "deepseek2"))
        return cf_fail(err, "--hot-experts is a deepseek2 option (--arch %s)", a->name);
    if ((o->dspark_block || o->dspark_taps || o->dspark_rank) && strcmp(a->name, "deepseek4"))
        return cf_fail(err, "--dspark-* are deepseek4 options (--arch %s)", a->name);
    if (!o->dspark_block && (o->dspark_taps || o->dspark_rank))
        return cf_fail(err, "--dspark-taps and --dspark-rank need --dspark-block");
    if (o->layers > 100000) return cf_fail(err, "--layers %d is too many", o->layers);
    gguf_writer *w = gguf_writer_create();
    tdesc *t = calloc((size_t)(o->layers + o->mtp_layers) * (size_t)a->max_per_layer + 16, sizeof *t);
    pipeline pipe = {0};
    int rc = -1;
    int64_t vocab = 0;
    if (!w || !t) {
        cf_fail(err, "out of memory");
        goto done;
    }
    if (copy_vocab(w, o->vocab_from, &vocab, err)) goto done;
    a->set_hparams(w, o, vocab);
    int n = a->describe(o, vocab, t);
    size_t max_row = 0;
    for (int i = 0; i < n; i++) {
        if (gguf_writer_add_tensor(w, t[i].name, (dtype)t[i].type, t[i].n_dims, t[i].ne, NULL, false, err)) goto done;
        size_t rb = dtype_row_bytes(t[i].type, t[i].ne[0]);
        if (rb > max_row) max_row = rb;
    }
    size_t cap = max_row > BATCH_BYTES ? max_row : BATCH_BYTES;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    pipe.nthreads = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (int)cpus;
    pipe.buf[0] = malloc(cap);
    pipe.buf[1] = malloc(cap);
    if (!pipe.buf[0] || !pipe.buf[1]) {
        cf_fail(err, "out of memory");
        goto done;
    }
    if (gguf_writer_begin(w, out_path, err)) goto done;
    for (int i = 0; i < n; i++)
        if (stream_tensor(w, &pipe, &t[i], tensor_id(t[i].name), o->seed, err)) goto done;
    if (flush_pending(w, &pipe, err)) goto done;
    rc = gguf_writer_finish(w, err);
done:
    free(pipe.buf[0]);
    free(pipe.buf[1]);
    free(t);
    gguf_writer_free(w);
    return rc;
}
