/* bench_matmul.c - kern_matmul throughput on TinyLlama-1.1B-like shapes.
 *
 * For each weight type and shape (k x n = 2048x2048, 2048x5632, 2048x256, 5632x2048):
 *   decode  (m = 1): weight bytes streamed per second, with enough copies of the
 *                    matrix rotated through to exceed the last-level cache,
 *                    compared with kern_measure_read_bandwidth on the same pool;
 *   prefill (m = 512 by default): effective GFLOP/s = 2 m n k / time.
 * Usage: bench_matmul [-t threads] [-m prefill_rows (0: skip)] [-w working_set_MiB (0: skip decode)] [-r reps]
 *                     [-T f32,f16,bf16,q8_0,q4_0] [-S shape_index,...] [-I avx512|avx2|scalar]
 * Best of `reps` timings is reported. Not a test: numbers depend on the machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "base/timeutil.h"
#include "tensor/kernels.h"

typedef struct {
    int64_t k, n;
} shape;

static const shape shapes[] = {{2048, 2048}, {2048, 5632}, {2048, 256}, {5632, 2048}};
#define NSHAPES 4

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

static void *make_weights(dtype t, int64_t n, int64_t k) {
    size_t rb = dtype_row_bytes(t, k);
    char *w = malloc(rb * (size_t)n);
    float *row = malloc(sizeof(float) * (size_t)k);
    for (int64_t o = 0; o < n; o++) {
        for (int64_t j = 0; j < k; j++) row[j] = frand() * 0.05f;
        dtype_quantize_row(t, row, w + rb * (size_t)o, k);
    }
    free(row);
    return w;
}

static double bench_decode(kern_ctx *ctx, dtype t, shape s, size_t ws_bytes, int reps, double *gbs) {
    size_t wbytes = dtype_row_bytes(t, s.k) * (size_t)s.n;
    int copies = (int)((ws_bytes + wbytes - 1) / wbytes);
    if (copies < 1) copies = 1;
    void *src = make_weights(t, s.n, s.k);
    kern_weight *ws = calloc((size_t)copies, sizeof *ws);
    for (int c = 0; c < copies; c++) {
        cf_err err;
        if (kern_weight_prepare(&ws[c], t, src, s.n, s.k, &err) != 0) {
            fprintf(stderr, "prepare: %s\n", err.msg);
            exit(1);
        }
    }
    float *x = malloc(sizeof(float) * (size_t)s.k), *y = malloc(sizeof(float) * (size_t)s.n);
    for (int64_t j = 0; j < s.k; j++) x[j] = frand();
    double best = 1e30;
    for (int c = 0; c < copies; c++) kern_matmul(ctx, &ws[c], x, 1, y); /* warm-up pass */
    for (int r = 0; r < reps; r++) {
        double t0 = time_now();
        for (int c = 0; c < copies; c++) kern_matmul(ctx, &ws[c], x, 1, y);
        double dt = (time_now() - t0) / copies;
        if (dt < best) best = dt;
    }
    *gbs = (double)wbytes / best / 1e9;
    for (int c = 0; c < copies; c++) kern_weight_release(&ws[c]);
    free(ws), free(src), free(x), free(y);
    return best;
}

static double bench_prefill(kern_ctx *ctx, dtype t, shape s, int64_t m, int reps, double *gflops) {
    void *src = make_weights(t, s.n, s.k);
    kern_weight w;
    cf_err err;
    if (kern_weight_prepare(&w, t, src, s.n, s.k, &err) != 0) {
        fprintf(stderr, "prepare: %s\n", err.msg);
        exit(1);
    }
    float *x = malloc(sizeof(float) * (size_t)(m * s.k)), *y = malloc(sizeof(float) * (size_t)(m * s.n));
    for (int64_t j = 0; j < m * s.k; j++) x[j] = frand();
    kern_matmul(ctx, &w, x, m, y);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = time_now();
        kern_matmul(ctx, &w, x, m, y);
        double dt = time_now() - t0;
        if (dt < best) best = dt;
    }
    *gflops = 2.0 * (double)m * (double)s.n * (double)s.k / best / 1e9;
    kern_weight_release(&w);
    free(src), free(x), free(y);
    return best;
}

int main(int argc, char **argv) {
    int threads = 2, reps = 5;
    int64_t m = 512;
    size_t ws_mib = 1024;
    const char *types_arg = "f32,f16,bf16,q8_0,q4_0", *shapes_arg = "0,1,2,3";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-m")) m = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-w")) ws_mib = (size_t)atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-T")) types_arg = argv[i + 1];
        else if (!strcmp(argv[i], "-S")) shapes_arg = argv[i + 1];
        else if (!strcmp(argv[i], "-I")) {
            cpu_isa isa;
            if (cpu_isa_parse(argv[i + 1], &isa) == 0) cpu_isa_force(isa);
        } else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    thread_pool *pool = pool_create(threads);
    kern_ctx *ctx = kern_ctx_create(pool, m > 1 ? m : 1, 5632);
    if (!pool || !ctx) return 1;
    /* The best of 3 probes: on a VM, fresh allocations of the same size have
     * been seen to differ ~2x in bandwidth (page placement), so one probe can
     * under-report; the decode runs below use fresh allocations too. */
    double bw = 0;
    for (int r = 0; ws_mib > 0 && r < 3; r++) {
        double b = kern_measure_read_bandwidth(pool, ws_mib << 20) / 1e9;
        if (b > bw) bw = b;
    }
    printf("isa %s, threads %d, decode working set %zu MiB, prefill m=%lld, best of %d\n",
           cpu_isa_name(cpu_isa_active()), pool_size(pool), ws_mib, (long long)m, reps);
    printf("measured read bandwidth: %.2f GB/s\n\n", bw);
    printf("%-5s %-11s | %9s %9s %7s | %9s %9s\n", "type", "k x n", "dec us", "dec GB/s", "%bw", "pre ms", "GFLOP/s");
    char types_buf[128];
    snprintf(types_buf, sizeof types_buf, "%s", types_arg);
    for (char *tok = strtok(types_buf, ","); tok; tok = strtok(NULL, ",")) {
        dtype t;
        if (dtype_parse(tok, &t) != 0) {
            fprintf(stderr, "unknown type %s\n", tok);
            return 2;
        }
        for (const char *sp = shapes_arg; *sp; sp++) {
            if (*sp < '0' || *sp >= '0' + NSHAPES) continue;
            shape s = shapes[*sp - '0'];
            double gbs, gfl;
            double td = 0;
            gbs = 0;
            if (ws_mib > 0) td = bench_decode(ctx, t, s, ws_mib << 20, reps, &gbs);
            double tp = m > 0 ? bench_prefill(ctx, t, s, m, reps, &gfl) : 0;
            char sh[32];
            snprintf(sh, sizeof sh, "%lldx%lld", (long long)s.k, (long long)s.n);
            printf("%-5s %-11s | %9.1f %9.2f %6.1f%% | %9.2f %9.1f\n", dtype_name(t), sh, td * 1e6, gbs,
                   bw > 0 ? 100.0 * gbs / bw : 0.0, tp * 1e3, m > 0 ? gfl : 0.0);
            fflush(stdout);
        }
    }
    kern_ctx_destroy(ctx);
    pool_destroy(pool);
    return 0;
}
