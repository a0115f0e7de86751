/* serve_summary.h - what `cinfer serve` prints to stderr while it starts:
 * model-load progress (only when loading takes over a second) and, once the
 * engine exists, a start-up summary (architecture, parameters total/active,
 * weight dtypes, KV capacity, memory footprint and where the weights come from,
 * threads and kernel ISA, store, API keys, URL).
 * Borrows everything it prints; owns nothing. */
#ifndef CINFER_TOOLS_SERVE_SUMMARY_H
#define CINFER_TOOLS_SERVE_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/threadpool.h"
#include "cinfer/engine.h"
#include "model/model.h"
#include "serve/model_names.h"

typedef struct load_progress {
    const char *path;
    double t0;
    int last_pct; /* last percentage printed; -1: none yet */
    int last_phase; /* phase of that percentage */
    bool tty; /* stderr is a terminal: one line rewritten in place */
} load_progress;

void load_progress_init(load_progress *lp, const char *path);
/* model_progress_fn: prints "loading PATH: 42% (11/26 layers, 1.3 s)" (or, while
 * a weights cache is verified, "verifying the weights cache of PATH: 42% (...)")
 * once the load has taken a second, then at every further 10% (every 1% on a TTY). */
void load_progress_cb(void *ctx, model_load_phase phase, int64_t done, int64_t total);
/* Ends the progress line (and says how long the load took when it was shown). */
void load_progress_end(load_progress *lp, bool ok);

typedef struct serve_summary {
    const model *m;
    cinfer_engine *eng;
    const thread_pool *pool;
    int32_t ctx;
    const char *host;
    int port;
    const serve_names *names;
    int n_keys;
    const char *store_dir; /* NULL: no store */
    const int64_t *retention; /* [CINFER_TRAFFIC_N] seconds, 0: the default */
    int64_t swa_retention; /* window-state snapshots in the store: seconds; 0: not stored */
} serve_summary;

void serve_summary_print(FILE *out, const serve_summary *s);

#endif
