/* bench_ep_comm.c - expert-parallel communication cost, run under mpirun
 * (e.g. `mpirun -n 2 build/bench_ep_comm -m tiny-deepseek2.gguf`):
 *
 *  1. MPI point-to-point between ranks 0 and 1 (osu_latency / osu_bw style):
 *     ping-pong round trip and one-way bandwidth for 1 KiB .. 16 MiB messages;
 *     this is the physical limit the dispatch/combine is measured against;
 *  2. the real EP runtime (src/ep) on a MoE model: every rank calls the
 *     executor with T tokens x experts_used rows of one MoE layer at once
 *     (experts drawn uniformly, so (N-1)/N of the rows cross ranks), for T
 *     from 1 to --max-tokens; per call: wall time, per token, the bytes that
 *     crossed ranks (rows out + results back) and their effective bandwidth
 *     (median call time; bytes and the phase split are means over the calls),
 *     and the split between all-to-all and expert compute from the runtime's
 *     own counters (rank 0's view).
 * Rank 0 prints; every line names the rank count. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "bench_cli.h"
#include "ep/ep.h"
#include "model/model.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of t[0..n) (sorts t). The machine is shared: medians, not means. */
static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static void p2p(int rank, int reps) {
    if (rank == 0) printf("# p2p ranks 0<->1 (median of %d): bytes  round_trip_us  one_way_GB/s\n", reps);
    char *buf = malloc(16 << 20);
    double *t = malloc(sizeof(double) * (size_t)reps);
    memset(buf, 1, 16 << 20);
    for (int sz = 1024; sz <= (16 << 20); sz *= 4) {
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < reps && rank < 2; i++) {
            double t0 = MPI_Wtime();
            if (rank == 0) {
                MPI_Send(buf, sz, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, sz, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, sz, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, sz, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
            }
            t[i] = MPI_Wtime() - t0;
        }
        double rt = rank < 2 ? median(t, reps) : 1.0;
        if (rank == 0) printf("p2p %9d %12.1f %10.3f\n", sz, rt * 1e6, 2.0 * sz / rt / 1e9);
    }
    free(t);
    free(buf);
}

static int ep_calls(model *m, int rank, int n_ranks, int max_tokens, int reps) {
    const model_hparams *hp = model_get_hparams(m);
    int k = hp->n_expert_used;
    int64_t E = hp->n_embd;
    ep_options o = {.threads = 1, .max_rows = max_tokens * k};
    ep_runtime *r = NULL;
    cf_err err = {0};
    if (ep_runtime_start(m, &o, &r, &err)) {
        fprintf(stderr, "bench_ep_comm: %s\n", err.msg);
        return 1;
    }
    int32_t layer = hp->n_dense_lead; /* the first MoE layer */
    int32_t *expert = malloc(sizeof(int32_t) * (size_t)max_tokens * (size_t)k);
    float *x = malloc(sizeof(float) * (size_t)max_tokens * (size_t)k * (size_t)E);
    float *y = malloc(sizeof(float) * (size_t)max_tokens * (size_t)k * (size_t)E);
    double *times = malloc(sizeof(double) * (size_t)reps);
    for (int64_t i = 0; i < (int64_t)max_tokens * k * E; i++) x[i] = (float)((i * 7 + rank) % 13) * 0.01f;
    uint32_t seed = 12345u + (uint32_t)rank;
    const cinfer_moe_executor *ex = ep_runtime_executor(r);
    if (rank == 0)
        printf("# ep ranks %d, n_embd %lld, experts %d (top-%d): tokens rows bytes_per_rank_call us_per_call "
               "us_per_token crossed_GB/s alltoall_share compute_share\n",
               n_ranks, (long long)E, hp->n_expert, k);
    for (int T = 1; T <= max_tokens; T *= 4) {
        int n = T * k;
        for (int i = 0; i < n; i++) { /* grouped by expert, as the engine sends them */
            seed = seed * 1103515245u + 12345u;
            expert[i] = (int32_t)((seed >> 16) % (uint32_t)hp->n_expert);
        }
        for (int i = 1; i < n; i++) /* insertion sort: pairs come grouped by expert */
            for (int j = i; j > 0 && expert[j - 1] > expert[j]; j--) {
                int32_t t = expert[j];
                expert[j] = expert[j - 1], expert[j - 1] = t;
            }
        char msg[256];
        /* no MPI call here: the round thread is the only MPI caller now; one warm-up call lines the ranks up */
        if (ex->run(ex->self, layer, n, expert, x, E, y, msg, sizeof msg)) {
            fprintf(stderr, "bench_ep_comm: %s\n", msg);
            return 1;
        }
        ep_stats s0 = ep_runtime_get_stats(r);
        for (int i = 0; i < reps; i++) {
            double t0 = time_now();
            if (ex->run(ex->self, layer, n, expert, x, E, y, msg, sizeof msg)) {
                fprintf(stderr, "bench_ep_comm: %s\n", msg);
                return 1;
            }
            times[i] = time_now() - t0;
        }
        double dt = median(times, reps);
        ep_stats s1 = ep_runtime_get_stats(r);
        double bytes = (double)(s1.bytes_sent - s0.bytes_sent) / reps;
        double busy = (s1.t_comm - s0.t_comm) + (s1.t_compute - s0.t_compute);
        if (rank == 0)
            printf("ep %d %6d %6d %10.0f %10.1f %8.2f %8.3f %6.2f %6.2f\n", n_ranks, T, n, bytes, dt * 1e6,
                   dt * 1e6 / T, bytes / dt / 1e9, busy > 0 ? (s1.t_comm - s0.t_comm) / busy : 0,
                   busy > 0 ? (s1.t_compute - s0.t_compute) / busy : 0);
    }
    free(expert), free(x), free(y), free(times);
    ep_runtime_stop(r);
    return 0;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    long max_tokens = 1024, reps = 50;
    static const struct option lo[] = {
        {"model", 1, 0, 'm'}, {"max-tokens", 1, 0, 'T'}, {"reps", 1, 0, 'r'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, ":m:T:r:h", lo, NULL)) != -1) {
        if (c == 'm') path = optarg;
        else if (c == 'T') {
            if (bench_parse_long("bench_ep_comm", "--max-tokens", optarg, 1, 1 << 16, &max_tokens)) return 2;
        } else if (c == 'r') {
            if (bench_parse_long("bench_ep_comm", "--reps", optarg, 1, 1 << 20, &reps)) return 2;
        } else if (c == 'h') {
            printf("usage: mpirun -n N bench_ep_comm -m MOE.gguf [-T MAX_TOKENS (1024)] [-r REPS (50)]\n");
            return 0;
        } else return bench_bad_option("bench_ep_comm", c, argv);
    }
    if (!path) {
        fprintf(stderr, "bench_ep_comm: -m MOE.gguf is required (see --help)\n");
        return 2;
    }
    int rank = 0, n_ranks = 1;
    cf_err err = {0};
    if (ep_mpi_init(&argc, &argv, &rank, &n_ranks, &err)) {
        fprintf(stderr, "bench_ep_comm: %s\n", err.msg);
        return 1;
    }
    model *m = NULL;
    if (model_load(path, &m, &err)) {
        fprintf(stderr, "bench_ep_comm: %s\n", err.msg);
        ep_mpi_abort(1);
    }
    if (n_ranks >= 2) p2p(rank, (int)reps * 4);
    int rc = ep_calls(m, rank, n_ranks, (int)max_tokens, (int)reps);
    model_free(m);
    ep_mpi_finalize();
    return rc;
}
