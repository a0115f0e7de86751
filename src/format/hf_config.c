/* hf_config.c - config.json of a Hugging Face model directory: the family
 * table (model_type -> GGUF architecture, tensor-name rules, Q/K row order)
 * and the hyper-parameters written as llama.cpp's GGUF keys. A family is one
 * row of `families` plus its name tables (and, where it has more
 * hyper-parameters, a read_keys hook); gemma2 / DeepSeek V4 slot in as rows.
 * Missing required fields and wrong types are one-line errors naming
 * config.json and the field; unknown model types name the supported ones. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "format/hf_internal.h"
#include "format/safetensors.h"

#define ESC(s) st_escape((s), (char[72]){0}, 72)

#define LAYER "model.layers.{L}."

static const hf_name_rule common_rules[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
    {LAYER "input_layernorm.weight", "blk.{L}.attn_norm.weight"},
    {LAYER "post_attention_layernorm.weight", "blk.{L}.ffn_norm.weight"},
    {LAYER "self_attn.o_proj.weight", "blk.{L}.attn_output.weight"},
    {LAYER "mlp.gate_proj.weight", "blk.{L}.ffn_gate.weight"},
    {LAYER "mlp.up_proj.weight", "blk.{L}.ffn_up.weight"},
    {LAYER "mlp.down_proj.weight", "blk.{L}.ffn_down.weight"},
    {NULL, NULL},
};

static const hf_name_rule mha_rules[] = {
    {LAYER "self_attn.q_proj.weight", "blk.{L}.attn_q.weight"},
    {LAYER "self_attn.k_proj.weight", "blk.{L}.attn_k.weight"},
    {LAYER "self_attn.v_proj.weight", "blk.{L}.attn_v.weight"},
    {LAYER "self_attn.q_proj.bias", "blk.{L}.attn_q.bias"},
    {LAYER "self_attn.k_proj.bias", "blk.{L}.attn_k.bias"},
    {LAYER "self_attn.v_proj.bias", "blk.{L}.attn_v.bias"},
    {NULL, NULL},
};

static const hf_name_rule qk_norm_rules[] = {
    {LAYER "self_attn.q_norm.weight", "blk.{L}.attn_q_norm.weight"},
    {LAYER "self_attn.k_norm.weight", "blk.{L}.attn_k_norm.weight"},
    {NULL, NULL},
};

static const hf_name_rule mla_rules[] = {
    {LAYER "self_attn.q_proj.weight", "blk.{L}.attn_q.weight"},
    {LAYER "self_attn.q_a_proj.weight", "blk.{L}.attn_q_a.weight"},
    {LAYER "self_attn.q_a_layernorm.weight", "blk.{L}.attn_q_a_norm.weight"},
    {LAYER "self_attn.q_b_proj.weight", "blk.{L}.attn_q_b.weight"},
    {LAYER "self_attn.kv_a_proj_with_mqa.weight", "blk.{L}.attn_kv_a_mqa.weight"},
    {LAYER "self_attn.kv_a_layernorm.weight", "blk.{L}.attn_kv_a_norm.weight"},
    {LAYER "self_attn.kv_b_proj.weight", "blk.{L}.attn_kv_b.weight"},
    {NULL, NULL},
};

static const hf_name_rule moe_rules[] = {
    {LAYER "mlp.gate.weight", "blk.{L}.ffn_gate_inp.weight"},
    {LAYER "mlp.gate.e_score_correction_bias", "blk.{L}.exp_probs_b.bias"},
    {LAYER "mlp.shared_experts.gate_proj.weight", "blk.{L}.ffn_gate_shexp.weight"},
    {LAYER "mlp.shared_experts.up_proj.weight", "blk.{L}.ffn_up_shexp.weight"},
    {LAYER "mlp.shared_experts.down_proj.weight", "blk.{L}.ffn_down_shexp.weight"},
    {LAYER "mlp.experts.{E}.gate_proj.weight", "blk.{L}.ffn_gate_exps.weight"},
    {LAYER "mlp.experts.{E}.up_proj.weight", "blk.{L}.ffn_up_exps.weight"},
    {LAYER "mlp.experts.{E}.down_proj.weight", "blk.{L}.ffn_down_exps.weight"},
    {NULL, NULL},
};

static const hf_name_rule *const llama_rules[] = {common_rules, mha_rules, NULL};
static const hf_name_rule *const qwen3_rules[] = {common_rules, mha_rules, qk_norm_rules, NULL};
static const hf_name_rule *const deepseek_rules[] = {common_rules, mla_rules, moe_rules, NULL};

static int deepseek_keys(json_t *cfg, const char *a, gguf_writer *w, int64_t *n_expert, cf_err *err);

static const hf_family families[] = {
    {"llama", "llama", true, false, llama_rules, NULL},
    {"mistral", "llama", true, false, llama_rules, NULL},
    {"qwen2", "qwen2", false, false, llama_rules, NULL},
    {"qwen3", "qwen3", false, false, qwen3_rules, NULL},
    {"deepseek_v2", "deepseek2", false, true, deepseek_rules, deepseek_keys},
    {"deepseek_v3", "deepseek2", false, true, deepseek_rules, deepseek_keys},
};
#define N_FAMILIES (sizeof families / sizeof families[0])

int hf_json_load(const char *dir, const char *name, bool required, json_t **out, cf_err *err) {
    *out = NULL;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return cf_fail(err, "%s/%s: path too long", dir, name);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        if (errno == ENOENT && !required) return 0;
        return cf_fail(err, "%s: cannot open: %s", path, strerror(errno));
    }
    json_error_t je;
    *out = json_loadf(fp, JSON_REJECT_DUPLICATES, &je);
    fclose(fp);
    if (!*out) return cf_fail(err, "%s: %s (line %d)", path, st_escape(je.text, (char[200]){0}, 200), je.line);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return cf_fail(err, "%s: not a JSON object", path);
    }
    return 0;
}

int hf_json_int(json_t *obj, const char *file, const char *field, int64_t *out, cf_err *err) {
    json_t *v = json_object_get(obj, field);
    if (!v || json_is_null(v)) return 1;
    if (!json_is_integer(v)) return cf_fail(err, "%s: field %s: not an integer", file, field);
    *out = json_integer_value(v);
    return 0;
}

int hf_json_num(json_t *obj, const char *file, const char *field, double *out, cf_err *err) {
    json_t *v = json_object_get(obj, field);
    if (!v || json_is_null(v)) return 1;
    if (!json_is_number(v)) return cf_fail(err, "%s: field %s: not a number", file, field);
    *out = json_number_value(v);
    return 0;
}

static int need_int(json_t *cfg, const char *field, int64_t lo, int64_t hi, int64_t *out, cf_err *err);
static void set_u32(gguf_writer *w, const char *a, const char *suffix, int64_t v);

/* MLA + MoE hyper-parameters, as llama.cpp's converter writes them. */
static int deepseek_keys(json_t *cfg, const char *a, gguf_writer *w, int64_t *n_expert, cf_err *err) {
    const int64_t big = (int64_t)1 << 30;
    int64_t kv_lora, nope, rope, v_dim, q_lora = 0, lead = 0, used = 0, shared = 0, ff_exp = 0, groups = 0,
                                        groups_used = 0;
    *n_expert = 0;
    if (need_int(cfg, "kv_lora_rank", 1, big, &kv_lora, err) ||
        need_int(cfg, "qk_nope_head_dim", 1, 4096, &nope, err) ||
        need_int(cfg, "qk_rope_head_dim", 2, 4096, &rope, err) || need_int(cfg, "v_head_dim", 1, 4096, &v_dim, err))
        return -1;
    const char *opt[] = {"q_lora_rank",      "first_k_dense_replace", "n_routed_experts", "num_experts_per_tok",
                         "n_shared_experts", "moe_intermediate_size", "n_group",          "topk_group"};
    int64_t *dst[] = {&q_lora, &lead, n_expert, &used, &shared, &ff_exp, &groups, &groups_used};
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
        if (json_object_get(cfg, opt[i]) && !json_is_null(json_object_get(cfg, opt[i])) &&
            need_int(cfg, opt[i], 0, big, dst[i], err))
            return -1;
    set_u32(w, a, "attention.kv_lora_rank", kv_lora);
    if (q_lora) set_u32(w, a, "attention.q_lora_rank", q_lora);
    set_u32(w, a, "attention.key_length", nope + rope);
    set_u32(w, a, "attention.value_length", v_dim);
    set_u32(w, a, "rope.dimension_count", rope);
    set_u32(w, a, "leading_dense_block_count", lead);
    set_u32(w, a, "expert_count", *n_expert);
    set_u32(w, a, "expert_used_count", used);
    set_u32(w, a, "expert_shared_count", shared);
    set_u32(w, a, "expert_feed_forward_length", ff_exp);
    set_u32(w, a, "expert_group_count", groups);
    set_u32(w, a, "expert_group_used_count", groups_used);
    json_t *sf = json_object_get(cfg, "scoring_func");
    const char *score = json_is_string(sf) ? json_string_value(sf) : "softmax";
    if (strcmp(score, "softmax") && strcmp(score, "sigmoid"))
        return cf_fail(err, "config.json: field scoring_func: '%s' is not supported (softmax, sigmoid)", ESC(score));
    /* transformers' deepseek_v3 config has no scoring_func: V3 gates with sigmoid */
    json_t *mt = json_object_get(cfg, "model_type");
    bool v3 = json_is_string(mt) && !strcmp(json_string_value(mt), "deepseek_v3");
    set_u32(w, a, "expert_gating_func", !strcmp(score, "sigmoid") || (v3 && !json_is_string(sf)) ? 2 : 1);
    double scale = 1.0;
    if (hf_json_num(cfg, "config.json", "routed_scaling_factor", &scale, err) < 0) return -1;
    char key[160];
    snprintf(key, sizeof key, "%s.expert_weights_scale", a);
    gguf_set_f32(w, key, (float)scale);
    json_t *norm = json_object_get(cfg, "norm_topk_prob");
    snprintf(key, sizeof key, "%s.expert_weights_norm", a);
    gguf_set_bool(w, key, json_is_true(norm));
    json_t *rs = json_object_get(cfg, "rope_scaling");
    double mscale_all = 0;
    if (json_is_object(rs) && hf_json_num(rs, "config.json", "rope_scaling.mscale_all_dim", &mscale_all, err) == 0 &&
        mscale_all > 0) {
        snprintf(key, sizeof key, "%s.rope.scaling.yarn_log_multiplier", a);
        gguf_set_f32(w, key, (float)(0.1 * mscale_all));
    }
    return 0;
}

static int need_int(json_t *cfg, const char *field, int64_t lo, int64_t hi, int64_t *out, cf_err *err) {
    int r = hf_json_int(cfg, "config.json", field, out, err);
    if (r < 0) return -1;
    if (r == 1) return cf_fail(err, "config.json: field %s: missing", field);
    if (*out < lo || *out > hi)
        return cf_fail(err, "config.json: field %s: %lld is outside %lld..%lld", field, (long long)*out, (long long)lo,
                       (long long)hi);
    return 0;
}

static const hf_family *find_family(json_t *cfg, cf_err *err) {
    json_t *mt = json_object_get(cfg, "model_type");
    if (!json_is_string(mt)) return cf_fail(err, "config.json: field model_type: missing or not a string"), NULL;
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (!strcmp(families[i].model_type, json_string_value(mt))) return &families[i];
    char names[200] = "";
    size_t at = 0;
    for (size_t i = 0; i < N_FAMILIES && at < sizeof names; i++)
        at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", families[i].model_type);
    cf_fail(err, "config.json: field model_type: '%s' is not supported (supported: %s)", ESC(json_string_value(mt)),
            names);
    return NULL;
}

/* rope_theta (top level, or inside rope_parameters as transformers 5 writes it)
 * and rope_scaling (linear / yarn; others refused). */
static int read_rope(json_t *cfg, const char *a, gguf_writer *w, cf_err *err) {
    char key[160];
    double theta = 10000.0;
    json_t *rp = json_object_get(cfg, "rope_parameters");
    json_t *scaling = json_object_get(cfg, "rope_scaling");
    if (json_is_object(rp) && !json_is_object(scaling)) scaling = rp;
    int r = hf_json_num(cfg, "config.json", "rope_theta", &theta, err);
    if (r == 1 && json_is_object(rp)) r = hf_json_num(rp, "config.json", "rope_parameters.rope_theta", &theta, err);
    if (r < 0) return -1;
    if (!(theta > 0)) return cf_fail(err, "config.json: field rope_theta: must be positive");
    snprintf(key, sizeof key, "%s.rope.freq_base", a);
    gguf_set_f32(w, key, (float)theta);
    if (!json_is_object(scaling)) return 0;
    json_t *type = json_object_get(scaling, "rope_type");
    if (!type) type = json_object_get(scaling, "type");
    const char *t = json_is_string(type) ? json_string_value(type) : "default";
    if (!strcmp(t, "default")) return 0;
    double factor = 0;
    if (hf_json_num(scaling, "config.json", "rope_scaling.factor", &factor, err) != 0 || !(factor > 0))
        return cf_fail(err, "config.json: field rope_scaling.factor: missing or not positive");
    if (strcmp(t, "linear") && strcmp(t, "yarn"))
        return cf_fail(err, "config.json: field rope_scaling.rope_type: '%s' is not supported (linear, yarn)", ESC(t));
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    gguf_set_str(w, key, t);
    snprintf(key, sizeof key, "%s.rope.scaling.factor", a);
    gguf_set_f32(w, key, (float)factor);
    int64_t orig = 0;
    if (hf_json_int(scaling, "config.json", "original_max_position_embeddings", &orig, err) == 0 && orig > 0) {
        snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", a);
        gguf_set_u32(w, key, (uint32_t)orig);
    }
    return 0;
}

static void set_u32(gguf_writer *w, const char *a, const char *suffix, int64_t v) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", a, suffix);
    gguf_set_u32(w, key, (uint32_t)v);
}

static int read_dims(json_t *cfg, const char *a, gguf_writer *w, hf_hparams *hp, cf_err *err) {
    int64_t embd, ff, ctx = 2048, head_dim;
    const int64_t big = (int64_t)1 << 30;
    if (need_int(cfg, "hidden_size", 1, big, &embd, err) ||
        need_int(cfg, "num_hidden_layers", 1, 4096, &hp->n_layer, err) ||
        need_int(cfg, "intermediate_size", 1, big, &ff, err) ||
        need_int(cfg, "num_attention_heads", 1, 4096, &hp->n_head, err) ||
        need_int(cfg, "vocab_size", 1, INT32_MAX, &hp->vocab_size, err))
        return -1;
    hp->n_head_kv = hp->n_head;
    if (json_object_get(cfg, "num_key_value_heads") &&
        need_int(cfg, "num_key_value_heads", 1, hp->n_head, &hp->n_head_kv, err))
        return -1;
    if (hp->n_head % hp->n_head_kv)
        return cf_fail(err, "config.json: field num_key_value_heads: %lld does not divide num_attention_heads %lld",
                       (long long)hp->n_head_kv, (long long)hp->n_head);
    if (json_object_get(cfg, "max_position_embeddings") && need_int(cfg, "max_position_embeddings", 1, big, &ctx, err))
        return -1;
    head_dim = embd / hp->n_head;
    int r = hf_json_int(cfg, "config.json", "head_dim", &head_dim, err);
    if (r < 0) return -1;
    if (head_dim < 2 || head_dim % 2) return cf_fail(err, "config.json: field head_dim: must be even and >= 2");
    double eps = 1e-5;
    if (hf_json_num(cfg, "config.json", "rms_norm_eps", &eps, err) < 0) return -1;
    if (!(eps > 0)) return cf_fail(err, "config.json: field rms_norm_eps: must be positive");
    set_u32(w, a, "context_length", ctx);
    set_u32(w, a, "embedding_length", embd);
    set_u32(w, a, "block_count", hp->n_layer);
    set_u32(w, a, "feed_forward_length", ff);
    set_u32(w, a, "attention.head_count", hp->n_head);
    set_u32(w, a, "attention.head_count_kv", hp->n_head_kv);
    set_u32(w, a, "rope.dimension_count", head_dim);
    if (head_dim != embd / hp->n_head) {
        set_u32(w, a, "attention.key_length", head_dim);
        set_u32(w, a, "attention.value_length", head_dim);
    }
    char key[160];
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", a);
    gguf_set_f32(w, key, (float)eps);
    set_u32(w, a, "vocab_size", hp->vocab_size);
    return 0;
}

int hf_config_read(const char *dir, gguf_writer *w, hf_hparams *hp, cf_err *err) {
    json_t *cfg;
    if (hf_json_load(dir, "config.json", true, &cfg, err)) return -1;
    memset(hp, 0, sizeof *hp);
    int rc = -1;
    hp->fam = find_family(cfg, err);
    if (!hp->fam) goto out;
    const char *a = hp->fam->gguf_arch;
    gguf_set_str(w, "general.architecture", a);
    const char *base = strrchr(dir, '/');
    gguf_set_str(w, "general.name", base && base[1] ? base + 1 : dir);
    json_t *act = json_object_get(cfg, "hidden_act");
    if (json_is_string(act) && strcmp(json_string_value(act), "silu"))
        cf_fail(err, "config.json: field hidden_act: '%s' is not supported (silu)", ESC(json_string_value(act)));
    else if (!read_dims(cfg, a, w, hp, err) && !read_rope(cfg, a, w, err) &&
             (!hp->fam->read_keys || !hp->fam->read_keys(cfg, a, w, &hp->n_expert, err)))
        rc = 0;
out:
    json_decref(cfg);
    return rc;
}
