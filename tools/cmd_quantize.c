/* cmd_quantize.c - `cinfer quantize IN.gguf OUT.gguf TYPE`: re-encodes a GGUF
 * model's weight matrices (model/quantize.c). */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "model/quantize.h"

static void quantize_usage(FILE *out) {
    fprintf(out,
            "usage: cinfer quantize IN.gguf OUT.gguf {q8_0,q4_0,bf16,f16,f32}\n"
            "\n"
            "Re-encodes every 2-D '*.weight' tensor whose row length is a multiple of the\n"
            "type's block size (32 for q8_0/q4_0) to TYPE; all other tensors (norms, odd\n"
            "widths) are written as f32. Key/values are copied; general.file_type is set.\n"
            "Source tensors must be f32, f16, bf16, q8_0 or q4_0. Streams row by row.\n"
            "\n"
            "  IN.gguf      source model\n"
            "  OUT.gguf     output path (may equal IN.gguf; replaced atomically)\n"
            "  TYPE         q8_0 | q4_0 | bf16 | f16 | f32\n"
            "  -h, --help   show this help\n");
}

int cmd_quantize(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            quantize_usage(stdout);
            return 0;
        }
    if (argc != 4) {
        quantize_usage(stderr);
        return 2;
    }
    dtype t;
    if (dtype_parse(argv[3], &t)) return cli_fail("quantize: unknown type '%s' (q8_0|q4_0|bf16|f16|f32)", argv[3]);
    cf_err err;
    if (gguf_quantize(argv[1], argv[2], t, &err)) return cli_fail("%s", err.msg);
    fprintf(stderr, "wrote %s (%s)\n", argv[2], dtype_name(t));
    return 0;
}
