/* cli_util.h - strict number parsing for command-line flags. Each returns 0
 * on success and -1 (after printing a one-line message) when the text is not
 * a number in range. */
#ifndef CINFER_TOOLS_CLI_UTIL_H
#define CINFER_TOOLS_CLI_UTIL_H

#include <stdint.h>

int cli_int(const char *flag, const char *s, long long lo, long long hi, long long *out);
int cli_float(const char *flag, const char *s, double lo, double hi, double *out);
/* Returns argv[++*i] or NULL (with a message) when the flag has no value. */
const char *cli_value(int argc, char **argv, int *i);

#endif
