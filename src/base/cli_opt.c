/* cli_opt.c - see cli_opt.h. Owns nothing beyond one cli_parse call: the
 * getopt_long tables it builds are freed before it returns. getopt's globals
 * (optind, opterr, optopt, optarg) are reset at the start of every call. */
#include "base/cli_opt.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define LONG_ONLY_BASE 0x100 /* getopt val of a row without a short letter: base + row index */
#define HELP_COL 28 /* help text starts in this column */

/* "cinfer serve" / "cinfer" (the top level has the name ""). */
static void who(const cli_cmd *c, char *buf, size_t cap) {
    snprintf(buf, cap, "cinfer%s%s", c->name && *c->name ? " " : "", c->name ? c->name : "");
}

int cli_usage_error(const cli_cmd *c, const char *fmt, ...) {
    char w[96];
    who(c, w, sizeof w);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", w);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see %s --help)\n", w);
    va_end(ap);
    return CLI_USAGE;
}

int cli_parse_int(const char *s, double lo, double hi, long long *out, char *msg, size_t cap) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || (double)v < lo || (double)v > hi) {
        snprintf(msg, cap, "expects an integer in [%.0f, %.0f], got '%s'", lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_num(const char *s, double lo, double hi, double *out, char *msg, size_t cap) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        snprintf(msg, cap, "expects a number in [%g, %g], got '%s'", lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_u64(const char *s, double hi, unsigned long *out, char *msg, size_t cap) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-' || *s == '+' || (hi > 0 && (double)v > hi)) {
        snprintf(msg, cap, "expects an unsigned integer, got '%s'", s);
        return -1;
    }
    *out = (unsigned long)v;
    return 0;
}

size_t cli_edit_distance(const char *a, size_t na, const char *b, size_t nb) {
    /* three rows of the optimal-string-alignment table */
    size_t *buf = calloc(3 * (nb + 1), sizeof(size_t));
    if (!buf) return (size_t)-1;
    size_t *prev2 = buf, *prev = prev2 + nb + 1, *cur = prev + nb + 1;
    for (size_t j = 0; j <= nb; j++) prev[j] = j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t d = prev[j] + 1;
            if (cur[j - 1] + 1 < d) d = cur[j - 1] + 1;
            if (prev[j - 1] + cost < d) d = prev[j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < d)
                d = prev2[j - 2] + 1;
            cur[j] = d;
        }
        size_t *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    size_t r = prev[nb];
    free(buf);
    return r;
}

const char *cli_suggest(const cli_opt *opts, size_t n, const char *word) {
    while (*word == '-') word++;
    size_t nw = strcspn(word, "=");
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i <= n; i++) {
        const char *name = i < n ? opts[i].name : "help";
        if (!name) continue;
        size_t d = cli_edit_distance(word, nw, name, strlen(name));
        if (d < best_d) best_d = d, best = name;
    }
    if (!best || best_d > 2 || 2 * best_d >= nw) return NULL;
    return best;
}

/* Stores one option's value (or runs its callback). 0 ok, else msg is set. */
static int apply(const cli_opt *o, const char *v, char *msg, size_t cap) {
    long long iv;
    double dv;
    switch (o->kind) {
    case CLI_K_BOOL: *(bool *)o->p = o->lo != 0; return 0;
    case CLI_K_INTSET: *(int *)o->p = (int)o->lo; return 0;
    case CLI_K_STR: *(const char **)o->p = v; return 0;
    case CLI_K_LL:
    case CLI_K_L:
    case CLI_K_I:
        if (cli_parse_int(v, o->lo, o->hi, &iv, msg, cap)) return -1;
        if (o->kind == CLI_K_LL) *(long long *)o->p = iv;
        else if (o->kind == CLI_K_L) *(long *)o->p = (long)iv;
        else *(int *)o->p = (int)iv;
        return 0;
    case CLI_K_U64: return parse_u64(v, o->hi, (unsigned long *)o->p, msg, cap);
    case CLI_K_D:
    case CLI_K_F:
        if (cli_parse_num(v, o->lo, o->hi, &dv, msg, cap)) return -1;
        if (o->kind == CLI_K_D) *(double *)o->p = dv;
        else *(float *)o->p = (float)dv;
        return 0;
    case CLI_K_CALL: return o->fn(o->p, v, msg, cap);
    case CLI_K_NONE: break;
    }
    snprintf(msg, cap, "has no destination");
    return -1;
}

/* The row a getopt val stands for; n for -h/--help; -1 for none. */
static long row_of(const cli_cmd *c, int val) {
    if (val == 'h') return (long)c->n_opts;
    if (val >= LONG_ONLY_BASE && (size_t)(val - LONG_ONLY_BASE) < c->n_opts) return val - LONG_ONLY_BASE;
    for (size_t i = 0; i < c->n_opts; i++)
        if (c->opts[i].name && c->opts[i].short_name == val) return (long)i;
    return -1;
}

/* The message for getopt's '?' (unknown option, or a value given to a flag). */
static int unknown(const cli_cmd *c, int argc, char **argv) {
    const char *arg = optind - 1 < argc && optind >= 1 ? argv[optind - 1] : "";
    if (optopt && optopt < LONG_ONLY_BASE && strncmp(arg, "--", 2) != 0)
        return cli_usage_error(c, "unknown option -%c", optopt);
    size_t len = strcspn(arg, "=");
    if (optopt && arg[len] == '=') return cli_usage_error(c, "option %.*s takes no value", (int)len, arg);
    char amb[256] = "";
    size_t k = 0, n_amb = 0;
    for (size_t i = 0; len > 2 && i < c->n_opts && k < sizeof amb; i++) /* getopt's abbreviations */
        if (c->opts[i].name && !strncmp(c->opts[i].name, arg + 2, len - 2)) {
            int w = snprintf(amb + k, sizeof amb - k, "%s--%s", n_amb++ ? ", " : "", c->opts[i].name);
            k += w > 0 ? (size_t)w : 0;
        }
    if (n_amb > 1) return cli_usage_error(c, "option %.*s is ambiguous (%s)", (int)len, arg, amb);
    const char *sug = cli_suggest(c->opts, c->n_opts, arg);
    if (sug) {
        char w[96];
        who(c, w, sizeof w);
        fprintf(stderr, "%s: unknown option %.*s; did you mean --%s?\n", w, (int)len, arg, sug);
        return CLI_USAGE;
    }
    return cli_usage_error(c, "unknown option %.*s", (int)len, arg);
}

/* getopt_long's tables for c: longopts (n_opts + help + terminator) and the short string. */
static int build(const cli_cmd *c, struct option **lo_out, char **so_out) {
    struct option *lo = calloc(c->n_opts + 2, sizeof *lo);
    char *so = malloc(3 * c->n_opts + 8);
    if (!lo || !so) {
        free(lo);
        free(so);
        return -1;
    }
    size_t k = 0, s = 0;
    if (c->stop_at_positional) so[s++] = '+';
    so[s++] = ':';
    so[s++] = 'h';
    for (size_t i = 0; i < c->n_opts; i++) {
        const cli_opt *o = &c->opts[i];
        if (!o->name) continue;
        lo[k++] = (struct option){o->name, o->metavar ? required_argument : no_argument, NULL,
                                  o->short_name ? o->short_name : LONG_ONLY_BASE + (int)i};
        if (o->short_name) {
            so[s++] = (char)o->short_name;
            if (o->metavar) so[s++] = ':';
        }
    }
    lo[k++] = (struct option){"help", no_argument, NULL, 'h'};
    so[s] = 0;
    *lo_out = lo;
    *so_out = so;
    return 0;
}

int cli_parse(const cli_cmd *c, int argc, char **argv, int *first_pos) {
    struct option *lo;
    char *so;
    if (build(c, &lo, &so)) {
        fputs("cinfer: out of memory\n", stderr);
        return CLI_USAGE;
    }
    optind = 0; /* glibc: full re-initialisation */
    opterr = 0;
    int rc = CLI_OK, ch;
    while (rc == CLI_OK && (ch = getopt_long(argc, argv, so, lo, NULL)) != -1) {
        long r = ch == '?' || ch == ':' ? row_of(c, optopt) : row_of(c, ch);
        if (ch == '?') {
            rc = unknown(c, argc, argv);
        } else if (ch == ':') {
            const cli_opt *o = r >= 0 && (size_t)r < c->n_opts ? &c->opts[r] : NULL;
            rc = o ? cli_usage_error(c, "option --%s needs a value (%s)", o->name, o->metavar)
                   : cli_usage_error(c, "option -%c needs a value", optopt);
        } else if (r == (long)c->n_opts) {
            cli_help(c, stdout);
            rc = CLI_HELP;
        } else if (r >= 0) {
            char msg[256] = "";
            if (apply(&c->opts[r], optarg, msg, sizeof msg)) {
                char w[96];
                who(c, w, sizeof w);
                fprintf(stderr, "%s: --%s %s\n", w, c->opts[r].name, msg);
                rc = CLI_USAGE;
            }
        } else {
            rc = cli_usage_error(c, "unexpected option character %d", ch);
        }
    }
    *first_pos = optind;
    free(lo);
    free(so);
    return rc;
}

/* Writes text, indenting every line after the first to `col`. */
static void put_indented(FILE *out, const char *text, int col) {
    for (const char *p = text; *p; p++) {
        fputc(*p, out);
        if (*p == '\n' && p[1]) fprintf(out, "%*s", col, "");
    }
    fputc('\n', out);
}

static void help_row(FILE *out, int short_name, const char *name, const char *metavar, const char *help) {
    char left[128];
    int n = snprintf(left, sizeof left, "  %c%c%s--%s%s%s", short_name ? '-' : ' ', short_name ? short_name : ' ',
                     short_name ? ", " : "  ", name, metavar ? " " : "", metavar ? metavar : "");
    if (n < HELP_COL - 1) fprintf(out, "%-*s", HELP_COL, left);
    else fprintf(out, "%s\n%*s", left, HELP_COL, ""); /* too wide: the help starts on the next line */
    put_indented(out, help ? help : "", HELP_COL);
}

void cli_help(const cli_cmd *c, FILE *out) {
    fprintf(out, "usage: ");
    put_indented(out, c->usage, 7);
    if (c->about) put_indented(out, c->about, 0);
    fprintf(out, "\noptions:\n");
    for (size_t i = 0; i < c->n_opts; i++) {
        const cli_opt *o = &c->opts[i];
        if (!o->name) fprintf(out, "%s\n", o->help);
        else help_row(out, o->short_name, o->name, o->metavar, o->help);
    }
    help_row(out, 'h', "help", NULL, "show this help and exit");
    if (c->epilog) put_indented(out, c->epilog, 0);
}
