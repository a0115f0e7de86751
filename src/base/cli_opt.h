/* cli_opt.h - command-line option tables for the `cinfer` subcommands.
 *
 * One table per command: each cli_opt row names an option (long name, optional
 * short letter, metavar, help text) and says where its value goes. The same
 * table drives getopt_long (cli_parse) and produces --help (cli_help), so the
 * parser and the help text cannot disagree. Adding a flag is one row:
 *
 *   {"n-predict", 'n', "N", "tokens to generate (default 128)", CLI_NUM(&o->n, 0, 1 << 30)},
 *
 * Accepted forms: --n-predict=5, --n-predict 5, -n5, -n 5; positional
 * arguments may be mixed with options (getopt_long permutes them to the end)
 * unless the command sets stop_at_positional; "--" ends the options. A unique
 * abbreviation of a long name is accepted (getopt_long); an ambiguous one is
 * a usage error that lists the candidates. -h/--help is added to every
 * table. A row with a NULL name is a section heading in --help.
 *
 * Invariants: cli_parse never exits; it prints at most one line to stderr
 * ("cinfer CMD: ...") for a usage error and returns CLI_USAGE (the process
 * exit code 2); it resets getopt's global state, so it may be called again.
 * Values are range-checked before they are stored; a callback (CLI_CALL)
 * reports its own error text through msg. */
#ifndef CINFER_BASE_CLI_OPT_H
#define CINFER_BASE_CLI_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum cli_kind {
    CLI_K_NONE = 0, /* section heading (name NULL) */
    CLI_K_BOOL, /* no value: *(bool *)p = set */
    CLI_K_INTSET, /* no value: *(int *)p = set */
    CLI_K_STR, /* *(const char **)p = value */
    CLI_K_LL, /* integer in [lo, hi] into long long / long / int / uint64_t */
    CLI_K_L,
    CLI_K_I,
    CLI_K_U64,
    CLI_K_D, /* finite number in [lo, hi] into double / float */
    CLI_K_F,
    CLI_K_CALL, /* fn(p, value, msg, cap): 0 ok, else msg says why */
} cli_kind;

/* A callback for options that need more than storing: repeatable lists,
 * enumerations, KEY=VALUE. Returns 0, or -1 with a reason in msg. */
typedef int (*cli_fn)(void *ctx, const char *value, char *msg, size_t cap);

typedef struct cli_opt {
    const char *name; /* long name without "--"; NULL: section heading (help = its title) */
    int short_name; /* 'n' for -n; 0: none */
    const char *metavar; /* the value's name in --help; NULL: the option takes no value */
    const char *help; /* help text; '\n' starts a continuation line */
    cli_kind kind;
    void *p; /* destination (or the callback's context) */
    double lo, hi; /* numeric range; CLI_K_BOOL/INTSET: lo is the value set */
    cli_fn fn;
} cli_opt;

/* Row tails: where the value goes. The pointer's type picks the parser. */
#define CLI_NUM(ptr, lo_, hi_) \
    .kind = _Generic((ptr), long long *: CLI_K_LL, long *: CLI_K_L, int *: CLI_K_I, unsigned long *: CLI_K_U64, \
                     double *: CLI_K_D, float *: CLI_K_F),                                                      \
    .p = (ptr), .lo = (lo_), .hi = (hi_)
#define CLI_STR(ptr) .kind = CLI_K_STR, .p = (void *)(ptr)
#define CLI_SET(ptr, v) .kind = _Generic((ptr), bool * : CLI_K_BOOL, int * : CLI_K_INTSET), .p = (ptr), .lo = (v)
#define CLI_CALL(f, ctx) .kind = CLI_K_CALL, .fn = (f), .p = (ctx)
#define CLI_SECTION(title) \
    { .name = NULL, .help = (title) }

typedef struct cli_cmd {
    const char *name; /* "serve", "bench serve": used in messages and help */
    const char *usage; /* usage line(s) without the leading "usage: " (printed first in --help) */
    const char *about; /* paragraph after the usage; may be NULL */
    const cli_opt *opts;
    size_t n_opts;
    const char *epilog; /* text after the options; may be NULL */
    bool stop_at_positional; /* options end at the first positional argument */
} cli_cmd;

enum { CLI_OK = 0, CLI_USAGE = 2, CLI_HELP = -1 };

/* Parses argv[1..argc) (argv[0] is the command's name) against c's table.
 * CLI_OK: *first_pos = index of the first positional argument (argv is
 * permuted so that they all follow the options); CLI_HELP: --help was given
 * and the help was printed to stdout; CLI_USAGE: a one-line message naming
 * the problem was printed to stderr. */
int cli_parse(const cli_cmd *c, int argc, char **argv, int *first_pos);

/* Writes c's --help text. */
void cli_help(const cli_cmd *c, FILE *out);

/* Prints "cinfer <cmd>: <message> (see cinfer <cmd> --help)" and returns CLI_USAGE. */
int cli_usage_error(const cli_cmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The long name closest to `word` (without dashes or "=value") by edit
 * distance (optimal string alignment: insertions, deletions, substitutions and
 * swaps of neighbours each cost 1), or NULL when none is close enough to be a
 * plausible typo (distance > 2, or not less than half the word's length). */
const char *cli_suggest(const cli_opt *opts, size_t n, const char *word);
size_t cli_edit_distance(const char *a, size_t na, const char *b, size_t nb);

/* Strict number parsing: 0 ok, -1 (with a message in msg) when s is not an
 * integer / a finite number in [lo, hi]. */
int cli_parse_int(const char *s, double lo, double hi, long long *out, char *msg, size_t cap);
int cli_parse_num(const char *s, double lo, double hi, double *out, char *msg, size_t cap);

#endif
