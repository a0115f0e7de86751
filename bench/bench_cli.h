/* bench_cli.h - command-line handling shared by the bench/ programs
 * (header-only, static): the one-line usage error for an unknown option or a
 * missing/bad value (exit status 2, nothing touched), and strict parsing of
 * numeric option values. Each program keeps its own usage text and answers
 * -h/--help with it (exit 0). */
#ifndef CINFER_BENCH_CLI_H
#define CINFER_BENCH_CLI_H

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_USAGE_ERROR 2

/* After getopt_long (optstring starting with ':') returned '?' or ':': prints
 * one line naming the option and returns BENCH_USAGE_ERROR. */
static inline int bench_bad_option(const char *prog, int c, char *const argv[]) {
    const char *arg = optind > 0 ? argv[optind - 1] : "?";
    if (c == ':') fprintf(stderr, "%s: option '%s' needs a value (see %s --help)\n", prog, arg, prog);
    else if (optopt) fprintf(stderr, "%s: unknown option '-%c' (see %s --help)\n", prog, optopt, prog);
    else fprintf(stderr, "%s: unknown option '%s' (see %s --help)\n", prog, arg, prog);
    return BENCH_USAGE_ERROR;
}

/* Parses a whole decimal integer in [lo, hi]; on failure prints one line and
 * returns -1. */
static inline int bench_parse_long(const char *prog, const char *what, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: %s must be an integer in [%ld, %ld], got '%s' (see %s --help)\n", prog, what, lo, hi, s,
                prog);
        return -1;
    }
    *out = v;
    return 0;
}

/* Parses a whole number (floating point) in [lo, hi]; prints one line and returns -1 on failure. */
static inline int bench_parse_double(const char *prog, const char *what, const char *s, double lo, double hi,
                                     double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "%s: %s must be a number in [%g, %g], got '%s' (see %s --help)\n", prog, what, lo, hi, s, prog);
        return -1;
    }
    *out = v;
    return 0;
}

#endif
