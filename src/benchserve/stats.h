/* stats.h - summary statistics of a sample (mean and percentiles). Pure
 * functions over caller-owned arrays. Percentiles interpolate linearly
 * between closest ranks (numpy's default). Callers: results.c, report.c. */
#ifndef CINFER_BENCHSERVE_STATS_H
#define CINFER_BENCHSERVE_STATS_H

#include <stddef.h>

typedef struct bs_summary {
    size_t n;
    double mean, p50, p90, p99, min, max;
} bs_summary;

/* Sorts v in place. */
void bs_sort(double *v, size_t n);
/* q in [0, 1] of a sorted sample; 0 when n == 0. */
double bs_percentile(const double *sorted, size_t n, double q);
/* Sorts v and summarizes it (all zeros when n == 0). */
bs_summary bs_summarize(double *v, size_t n);

#endif
