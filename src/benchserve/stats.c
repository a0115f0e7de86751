/* stats.c - see stats.h. */
#include "benchserve/stats.h"

#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bs_sort(double *v, size_t n) {
    if (n > 1) qsort(v, n, sizeof *v, cmp_double);
}

double bs_percentile(const double *s, size_t n, double q) {
    if (n == 0) return 0;
    if (q <= 0) return s[0];
    if (q >= 1) return s[n - 1];
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    double f = pos - (double)i;
    return i + 1 < n ? s[i] + f * (s[i + 1] - s[i]) : s[i];
}

bs_summary bs_summarize(double *v, size_t n) {
    bs_summary r = {.n = n};
    if (!n) return r;
    bs_sort(v, n);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    r.mean = sum / (double)n;
    r.p50 = bs_percentile(v, n, 0.5);
    r.p90 = bs_percentile(v, n, 0.9);
    r.p99 = bs_percentile(v, n, 0.99);
    r.min = v[0];
    r.max = v[n - 1];
    return r;
}
