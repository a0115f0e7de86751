/* ep_stats_text.h - the expert-parallel counters as Prometheus text (the
 * rows `cinfer serve --ep` adds to /metrics) and back: `cinfer ep stats`
 * reads them from each rank. The parser takes untrusted text (whatever a
 * URL answered): it reads only lines starting with cinfer_ep_, tolerates any
 * other line and extra labels (model_name), and never fails on garbage, it
 * just finds nothing (fuzzed: tests/fuzz/fuzz_ep_stats.c). Depends on base
 * and ep.h's ep_stats only. */
#ifndef CINFER_EP_STATS_TEXT_H
#define CINFER_EP_STATS_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "ep/ep.h"

/* Renders s (malloc'd text into *out, *len bytes): 0, or -1 out of memory. */
int ep_stats_render(const ep_stats *s, char **out, size_t *len);

/* Parses the cinfer_ep_ rows of one rank's /metrics into *s (zeroed first);
 * true if a cinfer_ep_info row was found (the server runs --ep). */
bool ep_stats_parse(const char *text, size_t len, ep_stats *s);

#endif
