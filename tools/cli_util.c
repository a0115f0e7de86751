/* cli_util.c - see cli_util.h. */
#include "cli_util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "commands.h"

int cli_int(const char *flag, const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return cli_fail("%s expects an integer in [%lld, %lld], got '%s'", flag, lo, hi, s), -1;
    *out = v;
    return 0;
}

int cli_float(const char *flag, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
        return cli_fail("%s expects a number in [%g, %g], got '%s'", flag, lo, hi, s), -1;
    *out = v;
    return 0;
}

const char *cli_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_fail("%s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}
