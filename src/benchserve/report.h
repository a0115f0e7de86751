/* report.h - `cinfer bench report`: reads results files written by `bench
 * serve --out` (layout in results.h), prints each one's table plus a
 * comparison line per file, and with an SVG directory writes
 *   ttft_cdf.svg, tpot_cdf.svg, e2e_cdf.svg   latency CDFs, one line per file
 *   throughput.svg                            output tok/s over time
 *   cache_hit.svg                             cache hit % over time (by send time)
 *   summary.svg                               side-by-side bars: TTFT p50/p99,
 *                                             output tok/s, cache hit %
 * Callers: cmd_bench_report.c. */
#ifndef CINFER_BENCHSERVE_REPORT_H
#define CINFER_BENCHSERVE_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "base/error.h"

int bs_report(const char *const *files, size_t n, const char *svg_dir, FILE *out, cf_err *err);

#endif
