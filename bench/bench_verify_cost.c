/* bench_verify_cost.c - what one verify forward costs (not a test): the time
 * of a forward pass over 1 + k tokens of one sequence after a prompt of P
 * tokens, relative to a one-token decode, for k = 0..16, alternating in
 * every repetition (best of REPS). Speculative decoding pays when
 * (accepted + 1) / (1 + k) tokens per verify outweigh cost(1 + k) / cost(1):
 * on a memory-bound decode the weights are read once for all rows, so the
 * ratio stays near 1 until the rows' arithmetic catches up with the reads.
 * Both wall time and process CPU time (all threads) are reported: on a
 * machine shared with other busy processes the wall time follows the CPU
 * share the scheduler gives, so CPU time (which includes memory stalls) is
 * the closer proxy for an unloaded machine's wall time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/threadpool.h"
#include "base/timeutil.h"
#include "bench_cli.h"
#include "engine/generate.h"
#include "model/model.h"

static const char *usage = "usage: bench_verify_cost -m MODEL.gguf [-t THREADS] [-p PROMPT] [-r REPS] [-R ROWS]\n"
                           "Forward time of 1 + k tokens (k = 0..16) after a PROMPT-token context (default 512),\n"
                           "relative to one token; best of REPS (default 5), alternating.\n"
                           "  -R ROWS      only forwards of ROWS tokens, REPS times (for a profiler: perf record)\n"
                           "  -h, --help   this text\n";

int main(int argc, char **argv) {
    const char *mpath = NULL;
    long threads = 2, plen = 512, reps = 5, only_rows = 0;
    static const struct option lo[] = {{"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, ":m:t:p:r:R:h", lo, NULL)) != -1) {
        switch (c) {
        case 'm': mpath = optarg; break;
        case 't':
            if (bench_parse_long("bench_verify_cost", "-t", optarg, 1, 256, &threads)) return 2;
            break;
        case 'p':
            if (bench_parse_long("bench_verify_cost", "-p", optarg, 1, 65536, &plen)) return 2;
            break;
        case 'r':
            if (bench_parse_long("bench_verify_cost", "-r", optarg, 1, 1000, &reps)) return 2;
            break;
        case 'R':
            if (bench_parse_long("bench_verify_cost", "-R", optarg, 1, 17, &only_rows)) return 2;
            break;
        case 'h': fputs(usage, stdout); return 0;
        default: return bench_bad_option("bench_verify_cost", c, argv);
        }
    }
    if (!mpath) {
        fprintf(stderr, "bench_verify_cost: -m MODEL is required (see bench_verify_cost --help)\n");
        return 2;
    }
    model *m = NULL;
    cf_err err;
    if (model_load(mpath, &m, &err)) {
        fprintf(stderr, "bench_verify_cost: %s\n", err.msg);
        return 1;
    }
    thread_pool *tp = pool_create((int)threads);
    gen_session g;
    int32_t ctx = (int32_t)plen + 32;
    if (!tp || gen_init(&g, m, tp, ctx, 512, &err)) {
        fprintf(stderr, "bench_verify_cost: %s\n", tp ? err.msg : "no thread pool");
        return 1;
    }
    int32_t n_vocab = model_get_hparams(m)->n_vocab, *toks = malloc((size_t)ctx * sizeof(int32_t));
    float *logits = malloc((size_t)17 * (size_t)n_vocab * sizeof(float));
    if (!toks || !logits) return 1;
    for (int32_t i = 0; i < ctx; i++) toks[i] = 3 + (int32_t)((i * 2654435761u) % (uint32_t)(n_vocab - 3));
    if (gen_feed(&g, toks, (int32_t)plen, NULL, &err)) {
        fprintf(stderr, "bench_verify_cost: %s\n", err.msg);
        return 1;
    }
    double best[17], best_cpu[17];
    for (int k = 0; k <= 16; k++) best[k] = best_cpu[k] = 1e30;
    for (long r = 0; r < reps; r++)
        for (int k = only_rows ? (int)only_rows - 1 : 0; k <= (only_rows ? only_rows - 1 : 16); k++) {
            g.n_past = (int32_t)plen; /* the verify's KV is overwritten by the next one (a rollback) */
            struct timespec c0, c1;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
            double t0 = time_now();
            if (gen_feed(&g, toks + plen, k + 1, logits, &err)) {
                fprintf(stderr, "bench_verify_cost: %s\n", err.msg);
                return 1;
            }
            double dt = time_now() - t0;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
            double dc = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
            if (dt < best[k]) best[k] = dt;
            if (dc < best_cpu[k]) best_cpu[k] = dc;
        }
    printf("# bench_verify_cost -m %s -t %ld -p %ld -r %ld\n", mpath, threads, plen, reps);
    printf("rows  wall ms  wall vs 1 row  cpu ms  cpu vs 1 row (= tokens per verify needed to break even)\n");
    for (int k = 0; k <= 16; k++)
        if (best[k] < 1e30)
            printf("%4d  %7.2f  %13.2f  %6.2f  %12.2f\n", k + 1, best[k] * 1e3, best[k] / best[0], best_cpu[k] * 1e3,
                   best_cpu[k] / best_cpu[0]);
    gen_release(&g);
    free(toks);
    free(logits);
    pool_destroy(tp);
    model_free(m);
    return 0;
}
