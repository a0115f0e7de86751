/* mkmodel_ds4.c - random-weight DeepSeek V4 (`deepseek4`) models for
 * `cinfer mkmodel --arch deepseek4`: the keys and tensors llama.cpp's
 * deepseek4 loader reads (src/model/arch/deepseek4.h lists them with their
 * shapes), so the same file runs in llama.cpp as the oracle.
 *
 * Values: matrices N(0, 0.02) like every mkmodel family; the small
 * parameters that shape the computation get wider draws so a test notices
 * when one is ignored: attention sinks, hyper-connection scales and bases
 * and compressor positional biases N(0, 1); the hash-routing table holds
 * distinct expert ids per token. MTP blocks (--mtp-layers) follow the main
 * blocks with the nextn.* tensors; their compress ratio is 0 unless the
 * ratio list names one. --dspark-block N adds the DSpark block drafter's
 * tensors and keys (deepseek4.h lists them; MTP block 0 is its stage):
 * Markov factors N(0, 0.5) so their bias moves drafts by about a logit
 * (markov_w1 F32, read a row at a time; markov_w2 of the model's dtype),
 * the confidence bias N(0, 1), the noise token the last of the vocabulary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/mkmodel_internal.h"
#include "model/quantize.h"

#define DS4_MAX_LAYERS 4096

/* Parses "4,128,0" into r[]; returns the count or -1. */
static int parse_ratios(const char *s, int32_t *r, int cap) {
    int n = 0;
    if (!s || !*s) return -1;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || n >= cap || (v != 0 && v != 4 && v != 128)) return -1;
        r[n++] = (int32_t)v;
        if (*end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return n;
}

/* The DSpark taps into t[] (the list, or the last three block boundaries); the count or -1 on a bad list. */
static int dspark_taps(const mkmodel_opts *o, int32_t *t) {
    if (!o->dspark_taps) {
        int n = 0;
        for (int l = o->layers - 2; l <= o->layers; l++)
            if (l >= 1) t[n++] = l;
        return n;
    }
    int n = 0;
    const char *s = o->dspark_taps;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || n >= 8 || v < 1 || v > o->layers) return -1;
        t[n++] = (int32_t)v;
        if (*end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return n > 0 ? n : -1;
}

/* The ratio of every block (main then MTP) into r[]; -1 on a bad list. */
static int block_ratios(const mkmodel_opts *o, int32_t *r) {
    int total = o->layers + o->mtp_layers;
    int n = parse_ratios(o->ratios, r, total);
    if (n == o->layers)
        for (int i = n; i < total; i++) r[i] = 0;
    else if (n != total) return -1;
    return total;
}

bool mk_ds4_has_options(const mkmodel_opts *o) {
    return o->head_dim && o->qk_rope && o->q_lora && o->o_groups && o->o_lora && o->ratios && o->experts &&
           o->experts_used && o->expert_ffn;
}

int mk_ds4_validate(const mkmodel_opts *o, cf_err *err) {
    if (o->dim <= 0 || o->layers <= 0 || o->heads <= 0 || o->head_dim <= 0 || o->qk_rope <= 0 || o->q_lora <= 0 ||
        o->o_groups <= 0 || o->o_lora <= 0 || o->window < 0 || o->index_heads < 0 || o->index_dim < 0 ||
        o->index_topk < 0 || o->hc < 0 || o->sinkhorn < 0 || o->hash_layers < 0 || o->mtp_layers < 0 ||
        o->experts <= 0 || o->experts_used <= 0 || o->expert_ffn <= 0 || o->shared_experts < 0)
        return cf_fail(err, "deepseek4: --dim, --layers, --heads, --head-dim, --qk-rope, --q-lora, --o-groups, "
                            "--o-lora, --experts, --experts-used and --expert-ffn must be positive");
    if (o->layers + o->mtp_layers > DS4_MAX_LAYERS) return cf_fail(err, "deepseek4: too many layers");
    int32_t r[DS4_MAX_LAYERS];
    int total = block_ratios(o, r);
    if (total < 0)
        return cf_fail(err, "--ratios must list %d (or %d with MTP) values of 0, 4 or 128", o->layers,
                       o->layers + o->mtp_layers);
    bool csa = false;
    for (int i = 0; i < total; i++) csa |= r[i] == 4;
    if (o->qk_rope % 2 || o->qk_rope > o->head_dim)
        return cf_fail(err, "--qk-rope %d must be even and <= --head-dim %d", o->qk_rope, o->head_dim);
    if (o->heads % o->o_groups)
        return cf_fail(err, "--heads %d is not a multiple of --o-groups %d", o->heads, o->o_groups);
    if (csa && (o->index_heads <= 0 || o->index_dim < o->qk_rope || o->index_topk <= 0))
        return cf_fail(err, "ratio-4 layers need --index-heads, --index-dim (>= --qk-rope) and --index-topk");
    if (o->experts_used > o->experts) return cf_fail(err, "--experts-used exceeds --experts");
    if (o->hash_layers > o->layers)
        return cf_fail(err, "--hash-layers %d exceeds --layers %d", o->hash_layers, o->layers);
    int32_t taps[8];
    if (o->dspark_block && (o->dspark_block < 2 || o->dspark_block > 16 || o->mtp_layers < 1 || o->dspark_rank < 0))
        return cf_fail(err, "--dspark-block must be 2..16 and needs --mtp-layers >= 1 (its stage)");
    if (o->dspark_block && dspark_taps(o, taps) < 0)
        return cf_fail(err, "--dspark-taps must list 1..8 block boundaries of 1..%d", o->layers);
    if (o->hc != 0 && o->hc != 4) return cf_fail(err, "--hc must be 4 (llama.cpp's deepseek4 supports only 4 streams)");
    int64_t be = dtype_block_elems(o->type);
    if (o->dspark_block && (o->dspark_rank ? o->dspark_rank : 16) % be)
        return cf_fail(err, "--dspark-rank must be a multiple of %d for %s", (int)be, dtype_name(o->type));
    int64_t ins[] = {o->dim,
                     o->q_lora,
                     o->head_dim,
                     (int64_t)o->heads * o->head_dim / o->o_groups,
                     (int64_t)o->o_groups * o->o_lora,
                     o->expert_ffn};
    for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++)
        if (ins[i] % be)
            return cf_fail(err,
                           "deepseek4: --dim, --q-lora, --head-dim, heads x head-dim / o-groups, o-groups x o-lora "
                           "and --expert-ffn must be multiples of %d for %s",
                           (int)be, dtype_name(o->type));
    return 0;
}

static tdesc vec(const char *name, int64_t n, float std) {
    tdesc d = norm(name, n);
    d.mean = 0;
    d.std = std;
    return d;
}

static tdesc f32mat(const char *name, int64_t in, int64_t out, float std) {
    tdesc d = mat(name, in, out, DT_F32);
    d.std = std;
    return d;
}

/* The attention tensors of block l (ratio r). */
static int describe_attn(const mkmodel_opts *o, int l, int32_t r, tdesc *t) {
    int n = 0, hc = o->hc ? o->hc : 4;
    int64_t dim = o->dim, H = o->heads, D = o->head_dim, mix = (int64_t)(2 + hc) * hc;
    dtype ty = o->type;
    char b[64];
#define NAME(part) (snprintf(b, sizeof b, "blk.%d.%s", l, part), b)
    t[n++] = norm(NAME("attn_norm.weight"), dim);
    t[n++] = vec(NAME("attn_sinks.weight"), H, 1.0f);
    t[n++] = mat(NAME("attn_q_a.weight"), dim, o->q_lora, ty);
    t[n++] = norm(NAME("attn_q_a_norm.weight"), o->q_lora);
    t[n++] = mat(NAME("attn_q_b.weight"), o->q_lora, H * D, ty);
    t[n++] = mat(NAME("attn_kv.weight"), dim, D, ty);
    t[n++] = norm(NAME("attn_kv_a_norm.weight"), D);
    t[n++] = mat(NAME("attn_output_a.weight"), H * D / o->o_groups, (int64_t)o->o_groups * o->o_lora, ty);
    t[n++] = mat(NAME("attn_output_b.weight"), (int64_t)o->o_groups * o->o_lora, dim, ty);
    t[n++] = f32mat(NAME("hc_attn_fn.weight"), hc * dim, mix, 0.02f);
    t[n++] = vec(NAME("hc_attn_base.weight"), mix, 1.0f);
    t[n++] = vec(NAME("hc_attn_scale.weight"), 3, 1.0f);
    t[n++] = f32mat(NAME("hc_ffn_fn.weight"), hc * dim, mix, 0.02f);
    t[n++] = vec(NAME("hc_ffn_base.weight"), mix, 1.0f);
    t[n++] = vec(NAME("hc_ffn_scale.weight"), 3, 1.0f);
    if (r) {
        int64_t coff = r == 4 ? 2 : 1;
        t[n++] = mat(NAME("attn_compressor_kv.weight"), dim, coff * D, ty);
        t[n++] = mat(NAME("attn_compressor_gate.weight"), dim, coff * D, ty);
        t[n++] = f32mat(NAME("attn_compressor_ape.weight"), coff * D, r, 1.0f);
        t[n++] = norm(NAME("attn_compressor_norm.weight"), D);
    }
    if (r == 4) {
        int64_t I = o->index_dim;
        t[n++] = mat(NAME("indexer.proj.weight"), dim, o->index_heads, ty);
        t[n++] = mat(NAME("indexer.attn_q_b.weight"), o->q_lora, (int64_t)o->index_heads * I, ty);
        t[n++] = mat(NAME("indexer_compressor_kv.weight"), dim, 2 * I, ty);
        t[n++] = mat(NAME("indexer_compressor_gate.weight"), dim, 2 * I, ty);
        t[n++] = f32mat(NAME("indexer_compressor_ape.weight"), 2 * I, 4, 1.0f);
        t[n++] = norm(NAME("indexer_compressor_norm.weight"), I);
    }
#undef NAME
    return n;
}

/* The MoE FFN tensors of block l (and MTP's nextn tensors). */
static int describe_ffn(const mkmodel_opts *o, int64_t vocab, int l, tdesc *t) {
    int n = 0;
    int64_t dim = o->dim, fe = o->expert_ffn, E = o->experts;
    dtype ty = o->type;
    char b[64];
#define NAME(part) (snprintf(b, sizeof b, "blk.%d.%s", l, part), b)
    t[n++] = f32mat(NAME("ffn_gate_inp.weight"), dim, E, 0.02f);
    if (l < o->hash_layers) {
        t[n] = mat(NAME("ffn_gate_tid2eid.weight"), o->experts_used, vocab, DT_F32);
        t[n].type = DT_I32_TABLE;
        t[n++].int_range = (int32_t)E;
    } else {
        t[n++] = vec(NAME("exp_probs_b.bias"), E, 0.02f);
    }
    t[n++] = norm(NAME("ffn_norm.weight"), dim);
    t[n++] = experts(NAME("ffn_gate_exps.weight"), dim, fe, E, ty);
    t[n++] = experts(NAME("ffn_down_exps.weight"), fe, dim, E, ty);
    t[n++] = experts(NAME("ffn_up_exps.weight"), dim, fe, E, ty);
    if (o->shared_experts > 0) {
        int64_t fs = fe * o->shared_experts;
        t[n++] = mat(NAME("ffn_gate_shexp.weight"), dim, fs, ty);
        t[n++] = mat(NAME("ffn_down_shexp.weight"), fs, dim, ty);
        t[n++] = mat(NAME("ffn_up_shexp.weight"), dim, fs, ty);
    }
    if (l >= o->layers) {
        t[n++] = mat(NAME("nextn.eh_proj.weight"), 2 * dim, dim, ty);
        t[n++] = norm(NAME("nextn.enorm.weight"), dim);
        t[n++] = norm(NAME("nextn.hnorm.weight"), dim);
        t[n++] = norm(NAME("nextn.shared_head_norm.weight"), dim);
    }
#undef NAME
    return n;
}

int mk_ds4_describe(const mkmodel_opts *o, int64_t vocab, tdesc *t) {
    int n = 0, hc = o->hc ? o->hc : 4;
    int32_t r[DS4_MAX_LAYERS];
    int total = block_ratios(o, r);
    t[n++] = mat("token_embd.weight", o->dim, vocab, o->type);
    t[n++] = norm("output_norm.weight", o->dim);
    t[n++] = mat("output.weight", o->dim, vocab, o->type);
    t[n++] = f32mat("output_hc_fn.weight", (int64_t)hc * o->dim, hc, 0.02f);
    t[n++] = vec("output_hc_base.weight", hc, 1.0f);
    t[n++] = vec("output_hc_scale.weight", 1, 1.0f);
    for (int l = 0; l < total; l++) {
        n += describe_attn(o, l, r[l], t + n);
        n += describe_ffn(o, vocab, l, t + n);
    }
    if (o->dspark_block) {
        int32_t taps[8];
        int64_t nt = dspark_taps(o, taps), rank = o->dspark_rank ? o->dspark_rank : 16;
        t[n++] = mat("dspark.fc.weight", nt * o->dim, o->dim, o->type);
        t[n++] = norm("dspark.enc.output_norm.weight", o->dim);
        t[n++] = f32mat("dspark.markov_w1.weight", rank, vocab, 0.5f);
        t[n] = mat("dspark.markov_w2.weight", rank, vocab, o->type); /* a matrix of the model's dtype */
        t[n++].std = 0.5f;
        t[n++] = f32mat("dspark.conf_proj.weight", o->dim + rank, 1, 0.02f);
        t[n++] = vec("dspark.conf_proj.bias", 1, 1.0f);
    }
    return n;
}

void mk_ds4_set_hparams(gguf_writer *w, const mkmodel_opts *o, int64_t vocab) {
    int32_t r[DS4_MAX_LAYERS];
    int total = block_ratios(o, r), hc = o->hc ? o->hc : 4;
    float clamp[DS4_MAX_LAYERS];
    for (int i = 0; i < total; i++) clamp[i] = o->swiglu_limit;
    const char *a = "deepseek4";
    char k[96];
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", a, s), k)
    gguf_set_str(w, "general.architecture", a);
    gguf_set_str(w, "general.name", "cinfer-mkmodel");
    gguf_set_u32(w, "general.file_type", quantize_file_type(o->type));
    int ctx = o->ctx ? o->ctx : 2048;
    gguf_set_u32(w, KEY("context_length"), (uint32_t)ctx);
    gguf_set_u32(w, KEY("embedding_length"), (uint32_t)o->dim);
    gguf_set_u32(w, KEY("embedding_length_out"), (uint32_t)(o->dim * hc));
    gguf_set_u32(w, KEY("feed_forward_length"), (uint32_t)o->expert_ffn);
    gguf_set_u32(w, KEY("block_count"), (uint32_t)total);
    if (o->mtp_layers) gguf_set_u32(w, KEY("nextn_predict_layers"), (uint32_t)o->mtp_layers);
    gguf_set_u32(w, KEY("vocab_size"), (uint32_t)vocab);
    gguf_set_u32(w, KEY("attention.head_count"), (uint32_t)o->heads);
    gguf_set_u32(w, KEY("attention.head_count_kv"), 1);
    gguf_set_u32(w, KEY("attention.key_length"), (uint32_t)o->head_dim);
    gguf_set_u32(w, KEY("attention.value_length"), (uint32_t)o->head_dim);
    gguf_set_u32(w, KEY("rope.dimension_count"), (uint32_t)o->qk_rope);
    gguf_set_f32(w, KEY("rope.freq_base"), 10000.0f);
    gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    gguf_set_u32(w, KEY("attention.q_lora_rank"), (uint32_t)o->q_lora);
    gguf_set_u32(w, KEY("attention.sliding_window"), (uint32_t)(o->window ? o->window : 128));
    gguf_set_u32(w, KEY("attention.output_group_count"), (uint32_t)o->o_groups);
    gguf_set_u32(w, KEY("attention.output_lora_rank"), (uint32_t)o->o_lora);
    gguf_set_arr_i32(w, KEY("attention.compress_ratios"), r, (uint64_t)total);
    gguf_set_f32(w, KEY("attention.compress_rope_freq_base"),
                 o->compress_rope_base > 0 ? o->compress_rope_base : 160000.0f);
    gguf_set_u32(w, KEY("attention.indexer.head_count"), (uint32_t)o->index_heads);
    gguf_set_u32(w, KEY("attention.indexer.key_length"), (uint32_t)o->index_dim);
    gguf_set_u32(w, KEY("attention.indexer.top_k"), (uint32_t)o->index_topk);
    gguf_set_u32(w, KEY("hyper_connection.count"), (uint32_t)hc);
    gguf_set_u32(w, KEY("hyper_connection.sinkhorn_iterations"), (uint32_t)(o->sinkhorn ? o->sinkhorn : 20));
    gguf_set_f32(w, KEY("hyper_connection.epsilon"), 1e-6f);
    gguf_set_u32(w, KEY("hash_layer_count"), (uint32_t)o->hash_layers);
    gguf_set_u32(w, KEY("expert_count"), (uint32_t)o->experts);
    gguf_set_u32(w, KEY("expert_used_count"), (uint32_t)o->experts_used);
    gguf_set_u32(w, KEY("expert_shared_count"), (uint32_t)o->shared_experts);
    gguf_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)o->expert_ffn);
    gguf_set_f32(w, KEY("expert_weights_scale"), o->expert_scale > 0 ? o->expert_scale : 1.0f);
    gguf_set_bool(w, KEY("expert_weights_norm"), true);
    gguf_set_u32(w, KEY("expert_gating_func"), 4); /* sqrt(softplus) */
    gguf_set_arr_f32(w, KEY("swiglu_clamp_exp"), clamp, (uint64_t)total);
    gguf_set_arr_f32(w, KEY("swiglu_clamp_shexp"), clamp, (uint64_t)total);
    if (o->dspark_block) {
        int32_t taps[8];
        int nt = dspark_taps(o, taps);
        gguf_set_u32(w, KEY("dspark.block_size"), (uint32_t)o->dspark_block);
        gguf_set_arr_i32(w, KEY("dspark.target_layers"), taps, (uint64_t)nt);
        gguf_set_u32(w, KEY("dspark.noise_token_id"), (uint32_t)(vocab - 1));
    }
    if (o->yarn_factor > 1.0f) {
        gguf_set_str(w, KEY("rope.scaling.type"), "yarn");
        gguf_set_f32(w, KEY("rope.scaling.factor"), o->yarn_factor);
        gguf_set_u32(w, KEY("rope.scaling.original_context_length"),
                     (uint32_t)(o->yarn_orig_ctx > 0 ? o->yarn_orig_ctx : (int)((float)ctx / o->yarn_factor)));
    }
#undef KEY
}
