/* cmd_mkmodel.c - `cinfer mkmodel ...`: writes a random-weight model of any
 * shape (model/mkmodel.c) for tests and benchmarks. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli_opt.h"
#include "commands.h"
#include "model/mkmodel.h"

static const char mk_usage[] =
    "cinfer mkmodel --arch llama --dim D --layers L --heads H --kv-heads K --ffn F\n"
    "               --vocab-from VOCAB.gguf --dtype TYPE --seed S [--ctx N] [--tied] OUT.gguf\n"
    "cinfer mkmodel --arch deepseek2 --dim D --layers L --heads H --ffn F --kv-lora R\n"
    "               --qk-nope N --qk-rope P --v-head V [--q-lora Q] --experts X\n"
    "               --experts-used K --expert-ffn FE [--shared-experts S] [--dense-layers N]\n"
    "               [--groups G --groups-used U] [--gating sigmoid|softmax] [--expert-scale F]\n"
    "               [--hot-experts N [--hot-bias B]]\n"
    "               [--yarn-factor F [--yarn-orig-ctx N]] [--mtp-layers N]\n"
    "               --vocab-from VOCAB.gguf --dtype TYPE --seed S [--ctx N] [--tied] OUT.gguf\n"
    "cinfer mkmodel --arch gemma2 --dim D --layers L --heads H --kv-heads K --ffn F [--head-dim HD]\n"
    "               [--window W] [--swa-pattern N] [--attn-softcap C] [--final-softcap C]\n"
    "               --vocab-from VOCAB.gguf --dtype TYPE --seed S [--ctx N] OUT.gguf\n"
    "cinfer mkmodel --arch deepseek4 --dim D --layers L --heads H --ffn F --head-dim HD\n"
    "               --qk-rope P --q-lora Q --o-groups G --o-lora R --ratios 4,128,0,...\n"
    "               [--index-heads IH --index-dim ID --index-topk K] [--window W] [--hc 4]\n"
    "               [--sinkhorn N] --experts X --experts-used K --expert-ffn FE\n"
    "               [--shared-experts S] [--hash-layers N] [--mtp-layers N] [--swiglu-limit F]\n"
    "               [--dspark-block N [--dspark-taps LIST] [--dspark-rank R]]\n"
    "               [--expert-scale F] [--compress-rope-base B] [--yarn-factor F [--yarn-orig-ctx N]]\n"
    "               --vocab-from VOCAB.gguf --dtype TYPE --seed S [--ctx N] OUT.gguf";

typedef struct mk_args {
    mkmodel_opts o;
    const char *dtype_s;
    bool have_seed;
} mk_args;

static int opt_seed(void *ctx, const char *v, char *msg, size_t cap) {
    mk_args *a = ctx;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0);
    if (errno || !*v || *end || *v == '-') return snprintf(msg, cap, "needs an unsigned integer, got '%s'", v), -1;
    a->o.seed = x;
    a->have_seed = true;
    return 0;
}

static int opt_gating(void *ctx, const char *v, char *msg, size_t cap) {
    if (strcmp(v, "sigmoid") && strcmp(v, "softmax"))
        return snprintf(msg, cap, "must be sigmoid or softmax, got '%s'", v), -1;
    ((mkmodel_opts *)ctx)->softmax_gating = !strcmp(v, "softmax");
    return 0;
}

/* CLI_OK with *out set, CLI_HELP or CLI_USAGE. One row per flag. */
static int parse_mkmodel(int argc, char **argv, mk_args *a, const char **out) {
    mkmodel_opts *o = &a->o;
    const cli_opt t[] = {
        {"arch", 0, "NAME",
         "llama | deepseek2 (MLA attention + MoE FFN) | gemma2 (sliding-window hybrid) | deepseek4 (V4 hybrid "
         "attention)",
         CLI_STR(&o->arch)},
        {"dim", 0, "D", "embedding width (multiple of --heads; of 32 for q8_0/q4_0, 256 for q4_k/q6_k)",
         CLI_NUM(&o->dim, 1, INT_MAX)},
        {"layers", 0, "L", "number of transformer blocks", CLI_NUM(&o->layers, 1, INT_MAX)},
        {"heads", 0, "H", "attention heads (head size D/H, even)", CLI_NUM(&o->heads, 1, INT_MAX)},
        {"kv-heads", 0, "K", "key/value heads (H a multiple of K)", CLI_NUM(&o->kv_heads, 1, INT_MAX)},
        {"ffn", 0, "F", "feed-forward width (multiple of 32 for q8_0/q4_0, 256 for q4_k/q6_k)",
         CLI_NUM(&o->ffn, 1, INT_MAX)},
        {"vocab-from", 0, "V.gguf", "copy every tokenizer.* key from V.gguf; vocab = its token count",
         CLI_STR(&o->vocab_from)},
        {"dtype", 0, "TYPE",
         "weight matrices: f32 | f16 | bf16 | q8_0 | q4_0 | q4_k | q5_k | q6_k | iq4_xs (norms stay f32)",
         CLI_STR(&a->dtype_s)},
        {"seed", 0, "S", "random seed (unsigned 64-bit)", CLI_CALL(opt_seed, a)},
        {"ctx", 0, "N", "llama.context_length (default 2048)", CLI_NUM(&o->ctx, 1, INT_MAX)},
        {"tied", 0, NULL, "no output.weight: the output reuses token_embd.weight\n(default: a separate output.weight)",
         CLI_SET(&o->tied, true)},
        CLI_SECTION("deepseek2 (--kv-heads is not used; --ffn is the dense layers' width):"),
        {"q-lora", 0, "Q", "query compression rank (default 0: one attn_q matrix)", CLI_NUM(&o->q_lora, 0, INT_MAX)},
        {"kv-lora", 0, "R", "KV latent rank (the cache holds R + P floats per token, layer)",
         CLI_NUM(&o->kv_lora, 1, INT_MAX)},
        {"qk-nope", 0, "N", "per-head query/key width without rope", CLI_NUM(&o->qk_nope, 1, INT_MAX)},
        {"qk-rope", 0, "P", "per-head query/key rope width", CLI_NUM(&o->qk_rope, 1, INT_MAX)},
        {"v-head", 0, "V", "per-head value width", CLI_NUM(&o->v_head, 1, INT_MAX)},
        {"experts", 0, "X", "routed experts", CLI_NUM(&o->experts, 1, INT_MAX)},
        {"experts-used", 0, "K", "routed experts chosen per token", CLI_NUM(&o->experts_used, 1, INT_MAX)},
        {"expert-ffn", 0, "FE", "routed expert width", CLI_NUM(&o->expert_ffn, 1, INT_MAX)},
        {"shared-experts", 0, "S", "shared experts (default 1)", CLI_NUM(&o->shared_experts, 0, INT_MAX)},
        {"dense-layers", 0, "N", "leading layers with a dense FFN (default 1)", CLI_NUM(&o->dense_layers, 0, INT_MAX)},
        {"groups", 0, "G", "expert groups for group-limited routing (DeepSeek-V3)", CLI_NUM(&o->groups, 0, INT_MAX)},
        {"groups-used", 0, "U", "groups chosen per token", CLI_NUM(&o->groups_used, 0, INT_MAX)},
        {"gating", 0, "sigmoid|softmax",
         "sigmoid (default): exp_probs_b and normalized\n"
         "weights (V3); softmax: no bias, no normalization (V2)",
         CLI_CALL(opt_gating, o)},
        {"expert-scale", 0, "F", "routed scaling factor (default 1)", CLI_NUM(&o->expert_scale, 1e-30, 1e6)},
        {"hot-experts", 0, "N",
         "deepseek2: a skewed router: experts 0..N-1 of every MoE layer\n"
         "get --hot-bias added to exp_probs_b (selection only; sigmoid)",
         CLI_NUM(&o->hot_experts, 0, 4096)},
        {"hot-bias", 0, "B", "the bias --hot-experts adds (default 0.05)", CLI_NUM(&o->hot_bias, -1e3, 1e3)},
        {"yarn-factor", 0, "F", "YaRN rope scaling by F (> 1), yarn_log_multiplier 0.1",
         CLI_NUM(&o->yarn_factor, 1.000001, 1e6)},
        {"yarn-orig-ctx", 0, "N", "its original context (default --ctx / F)", CLI_NUM(&o->yarn_orig_ctx, 1, INT_MAX)},
        CLI_SECTION("gemma2 and deepseek4:"),
        {"head-dim", 0, "HD",
         "gemma2: per-head width (default D/H); deepseek4: shared latent KV width = query head width",
         CLI_NUM(&o->head_dim, 1, INT_MAX)},
        {"window", 0, "W", "sliding window in tokens (default: gemma2 4096, deepseek4 128)",
         CLI_NUM(&o->window, 1, INT_MAX)},
        CLI_SECTION("gemma2 (always tied: the LM head is token_embd):"),
        {"swa-pattern", 0, "N", "layer il is a window layer when il % N < N - 1 (default 2: even layers)",
         CLI_NUM(&o->swa_pattern, 2, INT_MAX)},
        {"attn-softcap", 0, "C", "attention score soft-cap (default 50)", CLI_NUM(&o->attn_softcap, 1e-6, 1e6)},
        {"final-softcap", 0, "C", "final logit soft-cap (default 30)", CLI_NUM(&o->final_softcap, 1e-6, 1e6)},
        CLI_SECTION("deepseek4 (also --q-lora, --qk-rope, --experts*, --expert-ffn, --shared-experts,\n"
                    "--expert-scale, --yarn-*; --ffn is written as feed_forward_length only):"),
        {"o-groups", 0, "G", "output projection groups (divides --heads)", CLI_NUM(&o->o_groups, 1, INT_MAX)},
        {"o-lora", 0, "R", "output projection rank per group", CLI_NUM(&o->o_lora, 1, INT_MAX)},
        {"ratios", 0, "LIST", "compress ratio per layer: 0 (window only), 4 (CSA), 128 (HCA)", CLI_STR(&o->ratios)},
        {"index-heads", 0, "IH", "lightning indexer heads (ratio-4 layers)", CLI_NUM(&o->index_heads, 1, INT_MAX)},
        {"index-dim", 0, "ID", "lightning indexer head width", CLI_NUM(&o->index_dim, 1, INT_MAX)},
        {"index-topk", 0, "K", "compressed rows each query attends to", CLI_NUM(&o->index_topk, 1, INT_MAX)},
        {"hc", 0, "N", "hyper-connection streams (default 4; llama.cpp supports 4)", CLI_NUM(&o->hc, 1, 64)},
        {"sinkhorn", 0, "N", "Sinkhorn iterations (default 20)", CLI_NUM(&o->sinkhorn, 1, 1000)},
        {"hash-layers", 0, "N", "leading layers routed by token id (tid2eid)", CLI_NUM(&o->hash_layers, 0, INT_MAX)},
        {"mtp-layers", 0, "N",
         "multi-token-prediction blocks after the main ones (deepseek2: next-n layers; deepseek4: MTP blocks)",
         CLI_NUM(&o->mtp_layers, 0, 16)},
        {"dspark-block", 0, "N",
         "deepseek4: add a DSpark block drafter of N rows (2..16; needs --mtp-layers 1, its stage; docs/deepseek4.md)",
         CLI_NUM(&o->dspark_block, 2, 16)},
        {"dspark-taps", 0, "LIST", "DSpark target layers, block boundaries 1..layers (default: the last three)",
         CLI_STR(&o->dspark_taps)},
        {"dspark-rank", 0, "R", "DSpark Markov head rank (default 16)", CLI_NUM(&o->dspark_rank, 1, 4096)},
        {"swiglu-limit", 0, "F", "SwiGLU clamp (default 0: none)", CLI_NUM(&o->swiglu_limit, 0, 1e6)},
        {"compress-rope-base", 0, "B", "rope base of compressed layers (default 160000)",
         CLI_NUM(&o->compress_rope_base, 1, 1e12)},
    };
    cli_cmd c = {.name = "mkmodel",
                 .usage = mk_usage,
                 .about = "\nWrites a model with random weights: matrices ~ N(0, 0.02), norm weights\n"
                          "1 + N(0, 0.02), deterministic from --seed. Streams to disk (any size).",
                 .opts = t,
                 .n_opts = sizeof t / sizeof t[0]};
    int pos, rc = cli_parse(&c, argc, argv, &pos);
    if (rc) return rc;
    if (argc - pos > 1) return cli_usage_error(&c, "more than one output path ('%s', '%s')", argv[pos], argv[pos + 1]);
    *out = pos < argc ? argv[pos] : NULL;
    const struct {
        bool missing;
        const char *what;
    } need[] = {{!o->arch, "--arch"},     {!o->dim, "--dim"},        {!o->layers, "--layers"},
                {!o->heads, "--heads"},   {!o->ffn, "--ffn"},        {!o->vocab_from, "--vocab-from"},
                {!a->dtype_s, "--dtype"}, {!a->have_seed, "--seed"}, {!*out, "OUT.gguf"}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (need[i].missing) return cli_usage_error(&c, "%s is required", need[i].what);
    if (!mkmodel_has_arch_options(o))
        return cli_usage_error(&c, "--arch %s needs its own options (see cinfer mkmodel --help)", o->arch);
    if (dtype_parse(a->dtype_s, &o->type))
        return cli_usage_error(&c, "unknown --dtype '%s' (f32|f16|bf16|q8_0|q4_0|q4_k|q5_k|q6_k|iq4_xs)", a->dtype_s);
    return CLI_OK;
}

int cmd_mkmodel(int argc, char **argv) {
    mk_args a = {.o = {.shared_experts = 1, .dense_layers = 1}};
    const char *out = NULL;
    int rc = parse_mkmodel(argc, argv, &a, &out);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    cf_err err;
    if (mkmodel_write(&a.o, out, &err)) return cli_fail("mkmodel: %s", err.msg);
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}
