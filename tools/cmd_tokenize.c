/* cmd_tokenize.c - `cinfer tokenize`: shows how a model's tokenizer splits a
 * text. Loads only the GGUF key/values it needs (the tokenizer keys); owns
 * the gguf_file and tokenizer for the duration of the command. Output goes to
 * stdout; errors are one line on stderr (exit 1), usage errors exit 2. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void usage(FILE *out) {
    fprintf(out,
            "usage: cinfer tokenize -m MODEL.gguf [--ids|--pieces] [--no-bos] [--parse-special] TEXT\n"
            "\n"
            "Tokenizes TEXT with the model's tokenizer and prints the tokens.\n"
            "\n"
            "options:\n"
            "  -m, --model PATH   GGUF file whose tokenizer.ggml.* keys define the tokenizer (required)\n"
            "  --ids              print only the ids, as a list: [1, 2, 3]\n"
            "  --pieces           print only the pieces, one quoted piece per line\n"
            "  --no-bos           do not add the BOS token the model asks for (EOS is still added\n"
            "                     if the model sets add_eos_token)\n"
            "  --parse-special    treat texts of control tokens in TEXT (e.g. \"<s>\") as those tokens;\n"
            "                     without it they are tokenized as ordinary text\n"
            "  -h, --help         show this help\n"
            "\n"
            "Default output: one line per token, \"id<TAB>'piece'\". Pieces are the bytes a token\n"
            "stands for (control tokens shown by their text); quotes, backslashes, control\n"
            "characters and bytes that are not complete UTF-8 are escaped (\\', \\\\, \\n, \\xNN).\n");
}

/* 0 ok, 1 help printed, 2 usage error (message printed). */
static int parse_args(int argc, char **argv, tok_opts *o) {
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "cinfer tokenize: %s needs a path\n", a);
                return 2;
            }
            o->model = argv[++i];
        } else if (!strcmp(a, "--ids")) {
            o->mode = OUT_IDS;
        } else if (!strcmp(a, "--pieces")) {
            o->mode = OUT_PIECES;
        } else if (!strcmp(a, "--no-bos")) {
            o->no_bos = true;
        } else if (!strcmp(a, "--parse-special")) {
            o->parse_special = true;
        } else if (!strcmp(a, "--")) {
            if (i + 1 < argc && !o->text) o->text = argv[++i];
            if (i + 1 < argc) {
                fprintf(stderr, "cinfer tokenize: more than one TEXT argument\n");
                return 2;
            }
        } else if (a[0] == '-' && a[1] != 0) {
            fprintf(stderr, "cinfer tokenize: unknown option '%s' (see cinfer tokenize --help)\n", a);
            return 2;
        } else if (o->text) {
            fprintf(stderr, "cinfer tokenize: more than one TEXT argument (quote the text)\n");
            return 2;
        } else {
            o->text = a;
        }
    }
    if (!o->model || !o->text) {
        fprintf(stderr, "cinfer tokenize: %s\n", !o->model ? "-m MODEL.gguf is required" : "TEXT is missing");
        usage(stderr);
        return 2;
    }
    return 0;
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
    if (rc == 1) return 0;
    if (rc != 0) return 2;
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
