/* cmd_quantize.c - `cinfer quantize IN.gguf OUT.gguf TYPE`: re-encodes a GGUF
 * model's weight matrices (model/quantize.c). */
#include <stdio.h>
#include <string.h>

#include "base/cli_opt.h"
#include "commands.h"
#include "model/quantize.h"

static const cli_cmd quantize_cli = {
    .name = "quantize",
    .usage = "cinfer quantize IN.gguf OUT.gguf {q8_0,q4_0,q4_k,q5_k,q6_k,iq4_xs,bf16,f16,f32}",
    .about = "\nRe-encodes every 2-D '*.weight' tensor whose row length is a multiple of the\n"
             "type's block size (32 for q8_0/q4_0, 256 for the K-quants and iq4_xs) to TYPE;\n"
             "all other tensors (norms, odd widths) are written as f32. q4_k, q5_k and\n"
             "iq4_xs are llama.cpp's Q4_K_M, Q5_K_M and IQ4_XS mixes: output.weight gets\n"
             "q6_k; for q4_k/q5_k attn_v and ffn_down get q6_k in the first and last eighth\n"
             "of the layers and every third layer between; for iq4_xs attn_v gets q5_k\n"
             "(when 4+ query heads share a KV head) and ffn_down q5_k in the first eighth.\n"
             "Key/values are copied; general.file_type is set. Source tensors may be any\n"
             "type cinfer computes (f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k..q6_k iq4_nl\n"
             "iq4_xs mxfp4). Streams row by row. The quantizers are simple (no search, no\n"
             "importance matrix): for benchmarks and tests; use llama.cpp's files for quality.\n"
             "\n"
             "  IN.gguf      source model\n"
             "  OUT.gguf     output path (may equal IN.gguf; replaced atomically)\n"
             "  TYPE         q8_0 | q4_0 | q4_k | q5_k | q6_k | iq4_xs | bf16 | f16 | f32"};

int cmd_quantize(int argc, char **argv) {
    int pos, rc = cli_parse(&quantize_cli, argc, argv, &pos);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    if (argc - pos != 3) return cli_usage_error(&quantize_cli, "expects 3 arguments, got %d", argc - pos);
    argv += pos - 1;
    dtype t;
    if (dtype_parse(argv[3], &t))
        return cli_usage_error(&quantize_cli, "unknown type '%s' (q8_0|q4_0|q4_k|q5_k|q6_k|iq4_xs|bf16|f16|f32)",
                               argv[3]);
    cf_err err;
    if (gguf_quantize(argv[1], argv[2], t, &err)) return cli_fail("%s", err.msg);
    fprintf(stderr, "wrote %s (%s)\n", argv[2], dtype_name(t));
    return 0;
}
