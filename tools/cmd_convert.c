/* cmd_convert.c - `cinfer convert llama2c MODEL.bin TOKENIZER.bin OUT.gguf`
 * imports a karpathy/llama2.c checkpoint and tokenizer (model/llama2c.c);
 * `cinfer convert hf DIR OUT.gguf` a Hugging Face directory (format/hf_dir.c). */
#include <stdio.h>
#include <string.h>

#include "base/cli_opt.h"
#include "commands.h"
#include "format/hf_dir.h"
#include "model/llama2c.h"

static const cli_cmd convert_cli = {
    .name = "convert",
    .usage = "cinfer convert llama2c MODEL.bin TOKENIZER.bin OUT.gguf | cinfer convert hf DIR OUT.gguf",
    .about = "\nConverts a llama2.c checkpoint (run.c format: 7-int32 config then float32\n"
             "weights) and its tokenizer (tokenizer.bin / tok512.bin) into a GGUF 'llama'\n"
             "model with F32 tensors, laid out as llama.cpp's convert-llama2c-to-ggml does.\n"
             "\n"
             "Or converts a Hugging Face model directory (config.json, *.safetensors,\n"
             "tokenizer.json; llama, mistral, qwen2, qwen3; F32/F16/BF16) into a GGUF in\n"
             "llama.cpp's layout (tensor names, Q/K row order, tokenizer keys).\n"
             "\n"
             "  llama2c | hf   the source format\n"
             "  DIR            Hugging Face directory (sharded weights via model.safetensors.index.json)\n"
             "  MODEL.bin      llama2.c checkpoint; its size must match its config\n"
             "  TOKENIZER.bin  llama2.c tokenizer with as many tokens as the config's vocab_size\n"
             "  OUT.gguf       output path (written to OUT.gguf.tmp, then renamed)"};

int cmd_convert(int argc, char **argv) {
    int pos, rc = cli_parse(&convert_cli, argc, argv, &pos);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    cf_err err;
    if (argc - pos == 3 && !strcmp(argv[pos], "hf")) {
        if (hf_dir_convert(argv[pos + 1], argv[pos + 2], &err)) return cli_fail("%s", err.msg);
        fprintf(stderr, "wrote %s\n", argv[pos + 2]);
        return 0;
    }
    if (argc - pos != 4) return cli_usage_error(&convert_cli, "expects 4 arguments (3 for hf), got %d", argc - pos);
    argv += pos - 1;
    if (strcmp(argv[1], "llama2c"))
        return cli_usage_error(&convert_cli, "unknown source format '%s' (supported: llama2c, hf)", argv[1]);
    if (llama2c_convert(argv[2], argv[3], argv[4], &err)) return cli_fail("%s", err.msg);
    fprintf(stderr, "wrote %s\n", argv[4]);
    return 0;
}
