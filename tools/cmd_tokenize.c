/* cmd_tokenize.c - `cinfer tokenize`: shows how a model's tokenizer splits a
 * text. Loads only the GGUF key/values it needs (the tokenizer keys); owns
 * the gguf_file and tokenizer for the duration of the command. Output goes to
 * stdout; errors are one line on stderr (exit 1), usage errors exit 2. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli_opt.h"
#include "commands.h"
#include "format/gguf.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

typedef enum { OUT_TABLE, OUT_IDS, OUT_PIECES } out_mode;

typedef struct tok_opts {
    const char *model;
    const char *text;
    out_mode mode;
    bool no_bos;
    bool parse_special;
} tok_opts;

/* CLI_OK, CLI_HELP or CLI_USAGE (message printed). */
static int parse_args(int argc, char **argv, tok_opts *o) {
    memset(o, 0, sizeof *o);
    int mode = OUT_TABLE;
    const cli_opt t[] = {
        {"model", 'm', "PATH", "GGUF file whose tokenizer.ggml.* keys define the tokenizer (required)",
         CLI_STR(&o->model)},
        {"ids", 0, NULL, "print only the ids, as a list: [1, 2, 3]", CLI_SET(&mode, OUT_IDS)},
        {"pieces", 0, NULL, "print only the pieces, one quoted piece per line", CLI_SET(&mode, OUT_PIECES)},
        {"no-bos", 0, NULL,
         "do not add the BOS token the model asks for (EOS is still added\n"
         "if the model sets add_eos_token)",
         CLI_SET(&o->no_bos, true)},
        {"parse-special", 0, NULL,
         "treat texts of control tokens in TEXT (e.g. \"<s>\") as those tokens;\n"
         "without it they are tokenized as ordinary text",
         CLI_SET(&o->parse_special, true)},
    };
    cli_cmd c = {.name = "tokenize",
                 .usage = "cinfer tokenize -m MODEL.gguf [--ids|--pieces] [--no-bos] [--parse-special] TEXT",
                 .about = "\nTokenizes TEXT with the model's tokenizer and prints the tokens.",
                 .opts = t,
                 .n_opts = sizeof t / sizeof t[0],
                 .epilog = "\nDefault output: one line per token, \"id<TAB>'piece'\". Pieces are the bytes a token\n"
                           "stands for (control tokens shown by their text); quotes, backslashes, control\n"
                           "characters and bytes that are not complete UTF-8 are escaped (\\', \\\\, \\n, \\xNN).\n"
                           "A TEXT that starts with '-' goes after \"--\"."};
    int pos, rc = cli_parse(&c, argc, argv, &pos);
    if (rc) return rc;
    o->mode = (out_mode)mode;
    if (pos < argc) o->text = argv[pos++];
    if (pos < argc) return cli_usage_error(&c, "more than one TEXT argument (quote the text)");
    if (!o->model) return cli_usage_error(&c, "-m MODEL.gguf is required");
    if (!o->text) return cli_usage_error(&c, "TEXT is missing");
    return CLI_OK;
}

/* Prints bytes, escaping what would not read back unambiguously. */
static void print_escaped(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        size_t len = utf8_seq_len(c);
        if (c == '\'' || c == '\\') printf("\\%c", c);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02X", c);
        else if (len == 1) putchar(c);
        else if (len > 1 && len <= n - i && utf8_valid(s + i, len)) {
            fwrite(s + i, 1, len, stdout);
            i += len;
            continue;
        } else printf("\\x%02X", c);
        i++;
    }
}

static void print_piece(const tokenizer *t, int32_t id) {
    char buf[256];
    size_t n = tokenizer_token_bytes(t, id, true, buf, sizeof buf);
    char *p = buf;
    if (n > sizeof buf) {
        p = malloc(n);
        if (!p) return;
        tokenizer_token_bytes(t, id, true, p, n);
    }
    putchar('\'');
    print_escaped(p, n);
    putchar('\'');
    if (p != buf) free(p);
}

static void print_tokens(const tokenizer *t, const int32_t *ids, size_t n, out_mode mode) {
    if (mode == OUT_IDS) {
        putchar('[');
        for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
        puts("]");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (mode == OUT_TABLE) printf("%d\t", ids[i]);
        print_piece(t, ids[i]);
        putchar('\n');
    }
}

static int tokenize_text(const tokenizer *t, const tok_opts *o, int32_t **ids, size_t *n, cf_err *err) {
    if (tokenizer_encode(t, o->text, strlen(o->text), !o->no_bos, o->parse_special, ids, n, err) != 0) return -1;
    if (o->no_bos && tokenizer_add_eos(t)) {
        int32_t *p = realloc(*ids, (*n + 1) * sizeof *p);
        if (!p) return cf_fail(err, "out of memory");
        p[(*n)++] = tokenizer_eos(t);
        *ids = p;
    }
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    tok_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    cf_err err = {{0}};
    gguf_file *f = NULL;
    if (gguf_open(o.model, &f, &err) != 0) return cli_fail("%s", err.msg);
    tokenizer *t = NULL;
    if (tokenizer_load_gguf(f, &t, &err) != 0) {
        gguf_close(f);
        return cli_fail("%s", err.msg);
    }
    gguf_close(f);
    int32_t *ids = NULL;
    size_t n = 0;
    if (tokenize_text(t, &o, &ids, &n, &err) != 0) {
        tokenizer_free(t);
        return cli_fail("%s", err.msg);
    }
    print_tokens(t, ids, n, o.mode);
    free(ids);
    tokenizer_free(t);
    return fflush(stdout) == 0 ? 0 : cli_fail("writing the output failed");
}
