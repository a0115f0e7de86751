/* cmd_mkmodel.c - `cinfer mkmodel ...`: writes a random-weight model of any
 * shape (model/mkmodel.c) for tests and benchmarks. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "model/mkmodel.h"

static void mkmodel_usage(FILE *out) {
    fprintf(out,
            "usage: cinfer mkmodel --arch llama --dim D --layers L --heads H --kv-heads K --ffn F\n"
            "                      --vocab-from VOCAB.gguf --dtype TYPE --seed S [--ctx N] [--tied] OUT.gguf\n"
            "       cinfer mkmodel --arch deepseek2 --dim D --layers L --heads H --ffn F --kv-lora R\n"
            "                      --qk-nope N --qk-rope P --v-head V [--q-lora Q] --experts X\n"
            "                      --experts-used K --expert-ffn FE [--shared-experts S] [--dense-layers N]\n"
            "                      [--groups G --groups-used U] [--gating sigmoid|softmax] [--expert-scale F]\n"
            "                      [--yarn-factor F [--yarn-orig-ctx N]]\n"
            "                      --vocab-from VOCAB.gguf --dtype TYPE --seed S [--ctx N] [--tied] OUT.gguf\n"
            "\n"
            "Writes a model with random weights: matrices ~ N(0, 0.02), norm weights\n"
            "1 + N(0, 0.02), deterministic from --seed. Streams to disk (any size).\n"
            "\n"
            "  --arch NAME           llama | deepseek2 (MLA attention + MoE FFN)\n"
            "  --dim D               embedding width (multiple of --heads; of 32 for q8_0/q4_0)\n"
            "  --layers L            number of transformer blocks\n"
            "  --heads H             attention heads (head size D/H, even)\n"
            "  --kv-heads K          key/value heads (H a multiple of K)\n"
            "  --ffn F               feed-forward width (multiple of 32 for q8_0/q4_0)\n"
            "  --vocab-from V.gguf   copy every tokenizer.* key from V.gguf; vocab = its token count\n"
            "  --dtype TYPE          weight matrices: f32 | f16 | bf16 | q8_0 | q4_0 (norms stay f32)\n"
            "  --seed S              random seed (unsigned 64-bit)\n"
            "  --ctx N               llama.context_length (default 2048)\n"
            "  --tied                no output.weight: the output reuses token_embd.weight\n"
            "                        (default: a separate output.weight)\n"
            "deepseek2 (--kv-heads is not used; --ffn is the dense layers' width):\n"
            "  --q-lora Q            query compression rank (default 0: one attn_q matrix)\n"
            "  --kv-lora R           KV latent rank (the cache holds R + P floats per token, layer)\n"
            "  --qk-nope N, --qk-rope P, --v-head V   per-head query/key (N + P) and value widths\n"
            "  --experts X, --experts-used K          routed experts, chosen per token\n"
            "  --expert-ffn FE       routed expert width; --shared-experts S (default 1) shared ones\n"
            "  --dense-layers N      leading layers with a dense FFN (default 1)\n"
            "  --groups G --groups-used U             group-limited routing (DeepSeek-V3)\n"
            "  --gating sigmoid|softmax               sigmoid (default): exp_probs_b and normalized\n"
            "                        weights (V3); softmax: no bias, no normalization (V2)\n"
            "  --expert-scale F      routed scaling factor (default 1)\n"
            "  --yarn-factor F       YaRN rope scaling by F (> 1), yarn_log_multiplier 0.1;\n"
            "  --yarn-orig-ctx N     its original context (default --ctx / F)\n"
            "  -h, --help            show this help\n");
}

static int parse_int(const char *flag, const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *s == 0 || *end || v <= 0 || v > INT_MAX)
        return cli_fail("mkmodel: %s needs a positive integer, got '%s'", flag, s);
    *out = (int)v;
    return 0;
}

static int parse_nonneg(const char *flag, const char *s, int *out) {
    if (!strcmp(s, "0")) {
        *out = 0;
        return 0;
    }
    return parse_int(flag, s, out);
}

static int parse_u64(const char *flag, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *s == 0 || *end || *s == '-') return cli_fail("mkmodel: %s needs an unsigned integer, got '%s'", flag, s);
    *out = v;
    return 0;
}

int cmd_mkmodel(int argc, char **argv) {
    mkmodel_opts o = {.shared_experts = 1, .dense_layers = 1};
    const char *out = NULL, *dtype_s = NULL;
    bool have_seed = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            mkmodel_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--tied")) {
            o.tied = true;
            continue;
        }
        if (a[0] != '-' || a[1] != '-') {
            if (out) return cli_fail("mkmodel: more than one output path ('%s', '%s')", out, a);
            out = a;
            continue;
        }
        if (i + 1 >= argc) return cli_fail("mkmodel: %s needs a value (see cinfer mkmodel --help)", a);
        const char *v = argv[++i];
        int rc = 0;
        if (!strcmp(a, "--arch")) o.arch = v;
        else if (!strcmp(a, "--dim")) rc = parse_int(a, v, &o.dim);
        else if (!strcmp(a, "--layers")) rc = parse_int(a, v, &o.layers);
        else if (!strcmp(a, "--heads")) rc = parse_int(a, v, &o.heads);
        else if (!strcmp(a, "--kv-heads")) rc = parse_int(a, v, &o.kv_heads);
        else if (!strcmp(a, "--ffn")) rc = parse_int(a, v, &o.ffn);
        else if (!strcmp(a, "--ctx")) rc = parse_int(a, v, &o.ctx);
        else if (!strcmp(a, "--vocab-from")) o.vocab_from = v;
        else if (!strcmp(a, "--dtype")) dtype_s = v;
        else if (!strcmp(a, "--seed")) rc = parse_u64(a, v, &o.seed), have_seed = true;
        else if (!strcmp(a, "--q-lora")) rc = parse_nonneg(a, v, &o.q_lora);
        else if (!strcmp(a, "--kv-lora")) rc = parse_int(a, v, &o.kv_lora);
        else if (!strcmp(a, "--qk-nope")) rc = parse_int(a, v, &o.qk_nope);
        else if (!strcmp(a, "--qk-rope")) rc = parse_int(a, v, &o.qk_rope);
        else if (!strcmp(a, "--v-head")) rc = parse_int(a, v, &o.v_head);
        else if (!strcmp(a, "--experts")) rc = parse_int(a, v, &o.experts);
        else if (!strcmp(a, "--experts-used")) rc = parse_int(a, v, &o.experts_used);
        else if (!strcmp(a, "--expert-ffn")) rc = parse_int(a, v, &o.expert_ffn);
        else if (!strcmp(a, "--shared-experts")) rc = parse_nonneg(a, v, &o.shared_experts);
        else if (!strcmp(a, "--dense-layers")) rc = parse_nonneg(a, v, &o.dense_layers);
        else if (!strcmp(a, "--groups")) rc = parse_nonneg(a, v, &o.groups);
        else if (!strcmp(a, "--groups-used")) rc = parse_nonneg(a, v, &o.groups_used);
        else if (!strcmp(a, "--gating")) {
            if (strcmp(v, "sigmoid") && strcmp(v, "softmax"))
                return cli_fail("mkmodel: --gating must be sigmoid or softmax, got '%s'", v);
            o.softmax_gating = !strcmp(v, "softmax");
        } else if (!strcmp(a, "--yarn-orig-ctx")) {
            rc = parse_int(a, v, &o.yarn_orig_ctx);
        } else if (!strcmp(a, "--yarn-factor")) {
            char *end;
            o.yarn_factor = strtof(v, &end);
            if (*v == 0 || *end || !(o.yarn_factor > 1.0f) || o.yarn_factor > 1e6f)
                return cli_fail("mkmodel: --yarn-factor needs a number > 1, got '%s'", v);
        } else if (!strcmp(a, "--expert-scale")) {
            char *end;
            o.expert_scale = strtof(v, &end);
            if (*v == 0 || *end || !(o.expert_scale > 0) || o.expert_scale > 1e6f)
                return cli_fail("mkmodel: --expert-scale needs a positive number, got '%s'", v);
        }
        else return cli_fail("mkmodel: unknown option '%s' (see cinfer mkmodel --help)", a);
        if (rc) return rc;
    }
    if (!o.arch || !o.dim || !o.layers || !o.heads || !o.ffn || !o.vocab_from || !dtype_s || !have_seed || !out ||
        !mkmodel_has_arch_options(&o)) {
        mkmodel_usage(stderr);
        return 2;
    }
    if (dtype_parse(dtype_s, &o.type)) return cli_fail("mkmodel: unknown --dtype '%s' (f32|f16|bf16|q8_0|q4_0)", dtype_s);
    cf_err err;
    if (mkmodel_write(&o, out, &err)) return cli_fail("mkmodel: %s", err.msg);
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}
