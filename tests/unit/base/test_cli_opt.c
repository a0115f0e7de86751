/* test_cli_opt.c - the option tables of src/base/cli_opt.h: --opt=V, --opt V,
 * -nV and -n V forms; positional arguments mixed with options; range checks;
 * missing values; unknown options with and without a suggestion (exit code 2);
 * callbacks for repeatable options; --help lists every row; the edit distance. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cli_opt.h"
#include "testutil.h"

typedef struct opts {
    long long port, n;
    double temp;
    float topp;
    const char *model;
    bool flag;
    int echo;
    unsigned long seed;
    int n_names;
    const char *names[4];
} opts;

static int add_name(void *ctx, const char *v, char *msg, size_t cap) {
    opts *o = ctx;
    if (!*v || o->n_names == 4) return snprintf(msg, cap, "needs a name (at most 4)"), -1;
    o->names[o->n_names++] = v;
    return 0;
}

static int parse(opts *o, int argc, const char **args, int *pos) {
    memset(o, 0, sizeof *o);
    o->echo = 1;
    const cli_opt t[] = {
        {"model", 'm', "FILE", "model", CLI_STR(&o->model)},
        {"port", 0, "N", "TCP port", CLI_NUM(&o->port, 0, 65535)},
        {"n-predict", 'n', "N", "tokens\nsecond line", CLI_NUM(&o->n, 0, 100)},
        CLI_SECTION("sampling:"),
        {"temp", 0, "T", "temperature", CLI_NUM(&o->temp, 0, 2)},
        {"top-p", 0, "P", "top-p", CLI_NUM(&o->topp, 0, 1)},
        {"seed", 0, "S", "seed", CLI_NUM(&o->seed, 0, 0)},
        {"ignore-eos", 0, NULL, "flag", CLI_SET(&o->flag, true)},
        {"no-echo", 0, NULL, "no echo", CLI_SET(&o->echo, 0)},
        {"served-model-name", 0, "NAME", "name", CLI_CALL(add_name, o)},
    };
    cli_cmd c = {.name = "test", .usage = "cinfer test [options] ARG", .opts = t, .n_opts = sizeof t / sizeof t[0]};
    char *argv[32];
    argv[0] = "test";
    for (int i = 0; i < argc; i++) argv[i + 1] = (char *)args[i];
    int rc = cli_parse(&c, argc + 1, argv, pos);
    /* positionals are permuted to argv[*pos..]: copy them back for checking */
    for (int i = 0; i < argc; i++) args[i] = argv[i + 1];
    return rc;
}

static void forms(void) {
    opts o;
    int pos;
    const char **a;
    int n;
    a = (const char *[]){"--port=8080", "-n5", "x.gguf", "--temp", "0.5", "-m", "m.gguf", "--top-p=0.9"};
    n = 8;
    CHECK(parse(&o, n, a, &pos) == CLI_OK);
    CHECK(o.port == 8080 && o.n == 5 && o.temp == 0.5 && o.topp > 0.89f && o.topp < 0.91f);
    CHECK(o.model && !strcmp(o.model, "m.gguf"));
    CHECK(pos == n && !strcmp(a[pos - 1], "x.gguf")); /* the positional is moved after the options */
    a = (const char *[]){
        "--port", "8080", "-n", "7", "--n-predict=9", "--ignore-eos", "--no-echo", "--seed", "18446744073709551615"};
    CHECK(parse(&o, 9, a, &pos) == CLI_OK);
    CHECK(o.port == 8080 && o.n == 9 && o.flag && o.echo == 0 && o.seed == 18446744073709551615ul);
    a = (const char *[]){"--served-model-name", "a", "--served-model-name=b"};
    CHECK(parse(&o, 3, a, &pos) == CLI_OK && o.n_names == 2 && !strcmp(o.names[1], "b"));
    a = (const char *[]){"--", "--port"};
    CHECK(parse(&o, 2, a, &pos) == CLI_OK && pos == 2 && o.port == 0); /* after "--" everything is positional */
}

static void errors(void) {
    opts o;
    int pos;
    CHECK(parse(&o, 1, (const char *[]){"--prot=5"}, &pos) == CLI_USAGE);
    CHECK(parse(&o, 1, (const char *[]){"--frobnicate"}, &pos) == CLI_USAGE);
    CHECK(parse(&o, 1, (const char *[]){"-x"}, &pos) == CLI_USAGE);
    CHECK(parse(&o, 1, (const char *[]){"--port"}, &pos) == CLI_USAGE); /* missing value */
    CHECK(parse(&o, 1, (const char *[]){"--port=70000"}, &pos) == CLI_USAGE); /* out of range */
    CHECK(parse(&o, 1, (const char *[]){"--port=12x"}, &pos) == CLI_USAGE);
    CHECK(parse(&o, 1, (const char *[]){"-n"}, &pos) == CLI_USAGE);
    CHECK(parse(&o, 1, (const char *[]){"--temp=nan"}, &pos) == CLI_USAGE);
    CHECK(parse(&o, 1, (const char *[]){"--seed=-1"}, &pos) == CLI_USAGE);
    CHECK(parse(&o, 1, (const char *[]){"--ignore-eos=1"}, &pos) == CLI_USAGE);
    CHECK(parse(&o, 1, (const char *[]){"--served-model-name="}, &pos) == CLI_USAGE); /* callback error */
    CHECK(parse(&o, 2, (const char *[]){"--n-p", "4"}, &pos) == CLI_OK && o.n == 4); /* a unique abbreviation */
    CHECK(parse(&o, 2, (const char *[]){"--n", "4"}, &pos) == CLI_USAGE); /* ambiguous: --n-predict, --no-echo */
    CHECK(parse(&o, 2, (const char *[]){"--t", "1"}, &pos) == CLI_USAGE); /* ambiguous: --temp, --top-p */
    /* parse again after errors: getopt state is reset */
    CHECK(parse(&o, 1, (const char *[]){"-n3"}, &pos) == CLI_OK && o.n == 3);
}

static void suggest(void) {
    const cli_opt t[] = {{"port", 0, "N", "", CLI_STR(NULL)},
                         {"threads", 't', "N", "", CLI_STR(NULL)},
                         {"served-model-name", 0, "N", "", CLI_STR(NULL)},
                         CLI_SECTION("x")};
    size_t n = sizeof t / sizeof t[0];
    const char *s = cli_suggest(t, n, "--prot");
    CHECK(s && !strcmp(s, "port"));
    s = cli_suggest(t, n, "--threds=4");
    CHECK(s && !strcmp(s, "threads"));
    s = cli_suggest(t, n, "--served-model");
    CHECK(s == NULL); /* 5 edits: too far */
    s = cli_suggest(t, n, "--serverd-model-name");
    CHECK(s && !strcmp(s, "served-model-name"));
    s = cli_suggest(t, n, "--hepl");
    CHECK(s && !strcmp(s, "help"));
    CHECK(cli_suggest(t, n, "--xyz") == NULL);
    CHECK(cli_edit_distance("prot", 4, "port", 4) == 1);
    CHECK(cli_edit_distance("", 0, "abc", 3) == 3);
    CHECK(cli_edit_distance("kitten", 6, "sitting", 7) == 3);
}

static void help(void) {
    opts o;
    const cli_opt t[] = {{"model", 'm', "FILE", "the model", CLI_STR(&o.model)},
                         CLI_SECTION("more:"),
                         {"a-very-long-option-name", 0, "VALUE", "first\nsecond", CLI_STR(&o.model)}};
    cli_cmd c = {.name = "x", .usage = "cinfer x", .about = "About.", .opts = t, .n_opts = 3, .epilog = "End."};
    char path[256];
    temp_path(path, sizeof path, "clihelp");
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    cli_help(&c, f);
    fclose(f);
    size_t len;
    char *txt = read_file(path, &len);
    unlink(path);
    CHECK(txt != NULL);
    if (!txt) return;
    CHECK(strstr(txt, "usage: cinfer x\n") != NULL);
    CHECK(strstr(txt, "  -m, --model FILE          the model\n") != NULL);
    CHECK(strstr(txt, "more:\n") != NULL);
    CHECK(strstr(txt, "      --a-very-long-option-name VALUE\n                            first\n                      "
                      "      second\n") != NULL);
    CHECK(strstr(txt, "  -h, --help") != NULL);
    CHECK(strstr(txt, "End.") != NULL);
    free(txt);
}

int main(void) {
    forms();
    errors();
    suggest();
    help();
    return test_finish();
}
