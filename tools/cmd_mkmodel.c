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
            "\n"
            "Writes a llama model with random weights: matrices ~ N(0, 0.02), norm weights\n"
            "1 + N(0, 0.02), deterministic from --seed. Streams to disk (any size).\n"
            "\n"
            "  --arch llama          architecture (only llama)\n"
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

static int parse_u64(const char *flag, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *s == 0 || *end || *s == '-') return cli_fail("mkmodel: %s needs an unsigned integer, got '%s'", flag, s);
    *out = v;
    return 0;
}

int cmd_mkmodel(int argc, char **argv) {
    mkmodel_opts o = {0};
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
        else return cli_fail("mkmodel: unknown option '%s' (see cinfer mkmodel --help)", a);
        if (rc) return rc;
    }
    if (!o.arch || !o.dim || !o.layers || !o.heads || !o.kv_heads || !o.ffn || !o.vocab_from || !dtype_s ||
        !have_seed || !out) {
        mkmodel_usage(stderr);
        return 2;
    }
    if (dtype_parse(dtype_s, &o.type)) return cli_fail("mkmodel: unknown --dtype '%s' (f32|f16|bf16|q8_0|q4_0)", dtype_s);
    cf_err err;
    if (mkmodel_write(&o, out, &err)) return cli_fail("mkmodel: %s", err.msg);
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}
