/* bench_matmul.c - kern_matmul throughput on TinyLlama-1.1B-like shapes.
 *
 * For each weight type and shape (k x n = 2048x2048, 2048x5632, 2048x256, 5632x2048):
 *   decode  (m = 1): weight bytes streamed per second, with enough copies of the
 *                    matrix rotated through to exceed the last-level cache,
 *                    compared with kern_measure_read_bandwidth on the same pool;
 *   prefill (m = 512 by default): effective GFLOP/s = 2 m n k / time.
 * Usage: bench_matmul [-t threads] [-m prefill_rows (0: skip)] [-w working_set_MiB (0: skip decode)] [-r reps]
 *                     [-T f32,f16,bf16,q8_0,q4_0,q4_k,q5_k,q6_k,f8] [-S shape_index,...] [-I avx512|avx2|scalar]  (see --help)
 * Best of `reps` timings is reported, by wall clock and as work per process
 * CPU-second (decode "cpu GB/s", prefill "cpu GF/s" and CPU microseconds per
 * activation row, flat across m when a kernel scales),
 * Not a test: numbers depend on the machine. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/cpu.h"
#include "base/timeutil.h"
#include "bench_cli.h"
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

/* "f8": FP8 e4m3 with 128 x 128 block scales (DT_F8_B128); else dtype_parse. */
static int parse_type(const char *s, dtype *out) {
    if (!strcmp(s, "f8")) {
        *out = DT_F8_B128;
        return 0;
    }
    if (dtype_parse(s, out) == 0) return 0;
    for (uint32_t t = 0; t < 64; t++) /* the computable types without a quantizer: random blocks */
        if (dtype_computable(t) && !strcasecmp(s, dtype_name(t))) {
            *out = (dtype)t;
            return 0;
        }
    return -1;
}

/* Random blocks of a type cinfer has no quantizer for, with sane scale fields
 * (fp16 d at the block start; MXFP4 an E8M0 exponent byte): speed does not
 * depend on the values. */
static bool random_blocks(dtype t, uint8_t *dst, int64_t nb) {
    size_t bb = dtype_block_bytes(t);
    if (t != DT_IQ4_NL && t != DT_MXFP4) return false;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = dst + (size_t)b * bb;
        for (size_t i = 0; i < bb; i++) blk[i] = (uint8_t)(frand() * 128.0f + 128.0f);
        if (t == DT_MXFP4) blk[0] = (uint8_t)(118 + (int)(frand() * 4.0f + 4.0f));
        else blk[0] = 0x00, blk[1] = 0x20; /* fp16 2^-7 */
    }
    return true;
}

static size_t scale_count(int64_t n, int64_t k) { return (size_t)((n + 127) / 128 * ((k + 127) / 128)); }

/* Weights (and, for f8, their block scales after the data: one allocation). */
static void *make_weights(dtype t, int64_t n, int64_t k) {
    if (t == DT_F8_B128) {
        uint8_t *w = malloc((size_t)(n * k) + sizeof(float) * scale_count(n, k));
        for (int64_t i = 0; i < n * k; i++) {
            uint8_t v = (uint8_t)(frand() * 127.0f + 128.0f);
            w[i] = (v & 0x7f) == 0x7f ? (uint8_t)(v ^ 1) : v;
        }
        float *sc = (float *)(w + n * k);
        for (size_t i = 0; i < scale_count(n, k); i++) sc[i] = 1e-3f;
        return w;
    }
    size_t rb = dtype_row_bytes(t, k);
    char *w = malloc(rb * (size_t)n);
    if (random_blocks(t, (uint8_t *)w, (int64_t)(rb * (size_t)n / dtype_block_bytes(t)))) return w;
    float *row = malloc(sizeof(float) * (size_t)k);
    for (int64_t o = 0; o < n; o++) {
        for (int64_t j = 0; j < k; j++) row[j] = frand() * 0.05f;
        dtype_quantize_row(t, row, w + rb * (size_t)o, k);
    }
    free(row);
    return w;
}

static int prepare(kern_weight *w, dtype t, const void *src, int64_t n, int64_t k, cf_err *err) {
    if (t == DT_F8_B128)
        return kern_weight_prepare_fp8(w, src, (const float *)((const uint8_t *)src + n * k), n, k, err);
    return kern_weight_prepare(w, t, src, n, k, err);
}

/* Bytes decode streams per matrix: weights, plus f8's block scales. */
static size_t weight_bytes(dtype t, shape s) {
    if (t == DT_F8_B128) return (size_t)(s.n * s.k) + sizeof(float) * scale_count(s.n, s.k);
    return dtype_row_bytes(t, s.k) * (size_t)s.n;
}

/* Process CPU seconds: on a shared machine, bytes per CPU-second of the
 * benchmark's own threads is the figure other processes disturb least (for
 * one thread; with more, the pool's brief spin-waits count too). */
static double process_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double bench_decode(kern_ctx *ctx, dtype t, shape s, size_t ws_bytes, int reps, double *gbs, double *cpu_gbs) {
    size_t wbytes = weight_bytes(t, s);
    int copies = (int)((ws_bytes + wbytes - 1) / wbytes);
    if (copies < 1) copies = 1;
    void *src = make_weights(t, s.n, s.k);
    kern_weight *ws = calloc((size_t)copies, sizeof *ws);
    /* f8 is multiplied in place (not repacked): give each copy its own bytes so
     * the working set really exceeds the cache */
    void **own = calloc((size_t)copies, sizeof *own);
    for (int c = 0; c < copies; c++) {
        cf_err err;
        const void *data = src;
        if (t == DT_F8_B128) {
            own[c] = kern_alloc_stream(wbytes, NULL); /* like the repacked types: 2 MiB pages where available */
            memcpy(own[c], src, wbytes);
            data = own[c];
        }
        if (prepare(&ws[c], t, data, s.n, s.k, &err) != 0) {
            fprintf(stderr, "prepare: %s\n", err.msg);
            exit(1);
        }
    }
    float *x = malloc(sizeof(float) * (size_t)s.k), *y = malloc(sizeof(float) * (size_t)s.n);
    for (int64_t j = 0; j < s.k; j++) x[j] = frand();
    double best = 1e30, best_cpu = 1e30;
    for (int c = 0; c < copies; c++) kern_matmul(ctx, &ws[c], x, 1, y); /* warm-up pass */
    for (int r = 0; r < reps; r++) {
        double t0 = time_now(), c0 = process_cpu_seconds();
        for (int c = 0; c < copies; c++) kern_matmul(ctx, &ws[c], x, 1, y);
        double dt = (time_now() - t0) / copies, dc = (process_cpu_seconds() - c0) / copies;
        if (dt < best) best = dt;
        if (dc < best_cpu) best_cpu = dc;
    }
    *gbs = (double)wbytes / best / 1e9;
    *cpu_gbs = best_cpu > 0 ? (double)wbytes / best_cpu / 1e9 : 0;
    for (int c = 0; c < copies; c++) kern_weight_release(&ws[c]), free(own[c]);
    free(ws), free(own), free(src), free(x), free(y);
    return best;
}

static double bench_prefill(kern_ctx *ctx, dtype t, shape s, int64_t m, int reps, double *gflops, double *cpu_gflops) {
    void *src = make_weights(t, s.n, s.k);
    kern_weight w;
    cf_err err;
    if (prepare(&w, t, src, s.n, s.k, &err) != 0) {
        fprintf(stderr, "prepare: %s\n", err.msg);
        exit(1);
    }
    float *x = malloc(sizeof(float) * (size_t)(m * s.k)), *y = malloc(sizeof(float) * (size_t)(m * s.n));
    for (int64_t j = 0; j < m * s.k; j++) x[j] = frand();
    kern_matmul(ctx, &w, x, m, y);
    double best = 1e30, best_cpu = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = time_now(), c0 = process_cpu_seconds();
        kern_matmul(ctx, &w, x, m, y);
        double dt = time_now() - t0, dc = process_cpu_seconds() - c0;
        if (dt < best) best = dt;
        if (dc < best_cpu) best_cpu = dc;
    }
    double flop = 2.0 * (double)m * (double)s.n * (double)s.k;
    *gflops = flop / best / 1e9;
    *cpu_gflops = best_cpu > 0 ? flop / best_cpu / 1e9 : 0;
    kern_weight_release(&w);
    free(src), free(x), free(y);
    return best;
}

static const char k_usage[] =
    "usage: bench_matmul [-t THREADS] [-m ROWS] [-w MIB] [-r REPS] [-T TYPES] [-S SHAPES] [-I ISA]\n"
    "kern_matmul throughput on TinyLlama-1.1B-like shapes (k x n: 0 = 2048x2048, 1 = 2048x5632,\n"
    "2 = 2048x256, 3 = 5632x2048): decode (m = 1) GB/s of weights against the measured read\n"
    "bandwidth, prefill GFLOP/s. Best of REPS. Not a test: numbers depend on the machine.\n"
    "  -t, --threads N      threads (default 2)\n"
    "  -m, --rows M         prefill rows, 0 skips prefill (default 512)\n"
    "  -w, --working-set N  decode working set in MiB, 0 skips decode (default 1024)\n"
    "  -r, --reps N         repetitions (default 5)\n"
    "  -T, --types LIST     comma-separated of f32,f16,bf16,q8_0,q4_0,q4_k,q5_k,q6_k,f8,iq4_nl,iq4_xs,mxfp4 (default:\n"
    "                       the first five; f8 = FP8 e4m3 with 128x128 block scales, GB/s counts the scales\n"
    "                       too; iq4_nl/mxfp4 are random blocks: cinfer has no quantizer for them)\n"
    "  -S, --shapes LIST    comma-separated shape indexes 0-3 (default 0,1,2,3)\n"
    "  -I, --isa ISA        force avx512, avx2 or scalar kernels\n"
    "  -h, --help           this text\n";

typedef struct mm_opts {
    int threads, reps;
    int64_t m;
    size_t ws_mib;
    const char *types, *shapes;
} mm_opts;

/* Checks TYPES and SHAPES lists; prints one line and returns -1 on a bad entry. */
static int check_lists(const mm_opts *o) {
    char buf[128];
    if (snprintf(buf, sizeof buf, "%s", o->types) >= (int)sizeof buf) buf[0] = 0;
    bool any = false;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        dtype t;
        if (parse_type(tok, &t) != 0) {
            fprintf(stderr, "bench_matmul: unknown type '%s' (see bench_matmul --help)\n", tok);
            return -1;
        }
        any = true;
    }
    for (const char *sp = o->shapes; *sp; sp++)
        if (*sp != ',' && (*sp < '0' || *sp >= '0' + NSHAPES)) any = false;
    if (!any || !*o->shapes) {
        fprintf(stderr, "bench_matmul: bad -T '%s' or -S '%s' (see bench_matmul --help)\n", o->types, o->shapes);
        return -1;
    }
    return 0;
}

/* Parses one option's value into o. Returns 0, or -1 after a one-line message. */
static int set_option(mm_opts *o, int c, const char *v) {
    const char *P = "bench_matmul";
    long x = 0;
    cpu_isa isa;
    switch (c) {
    case 'T': o->types = v; return 0;
    case 'S': o->shapes = v; return 0;
    case 'I':
        if (cpu_isa_parse(v, &isa) != 0) {
            fprintf(stderr, "%s: unknown ISA '%s' (avx512, avx2 or scalar)\n", P, v);
            return -1;
        }
        cpu_isa_force(isa);
        return 0;
    case 't':
    case 'r':
        if (bench_parse_long(P, c == 't' ? "-t" : "-r", v, 1, c == 't' ? 1024 : 1000, &x)) return -1;
        *(c == 't' ? &o->threads : &o->reps) = (int)x;
        return 0;
    case 'm':
    case 'w':
        if (bench_parse_long(P, c == 'm' ? "-m" : "-w", v, 0, 1 << 20, &x)) return -1;
        if (c == 'm') o->m = x;
        else o->ws_mib = (size_t)x;
        return 0;
    default: return -1;
    }
}

/* Parses the command line into o. Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, mm_opts *o) {
    static const struct option longs[] = {{"threads", required_argument, NULL, 't'},
                                          {"rows", required_argument, NULL, 'm'},
                                          {"working-set", required_argument, NULL, 'w'},
                                          {"reps", required_argument, NULL, 'r'},
                                          {"types", required_argument, NULL, 'T'},
                                          {"shapes", required_argument, NULL, 'S'},
                                          {"isa", required_argument, NULL, 'I'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":t:m:w:r:T:S:I:h", longs, NULL)) != -1) {
        if (c == 'h') {
            fputs(k_usage, stdout);
            return 0;
        }
        if (c == '?' || c == ':') return bench_bad_option("bench_matmul", c, argv);
        if (set_option(o, c, optarg)) return BENCH_USAGE_ERROR;
    }
    if (optind < argc) {
        fprintf(stderr, "bench_matmul: unexpected argument '%s' (see bench_matmul --help)\n", argv[optind]);
        return BENCH_USAGE_ERROR;
    }
    return check_lists(o) ? BENCH_USAGE_ERROR : -1;
}

int main(int argc, char **argv) {
    mm_opts o = {
        .threads = 2, .reps = 5, .m = 512, .ws_mib = 1024, .types = "f32,f16,bf16,q8_0,q4_0", .shapes = "0,1,2,3"};
    int prc = parse_args(argc, argv, &o);
    if (prc >= 0) return prc;
    int threads = o.threads, reps = o.reps;
    int64_t m = o.m;
    size_t ws_mib = o.ws_mib;
    const char *types_arg = o.types, *shapes_arg = o.shapes;
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
    printf("%-12s %-9s | %9s %9s %7s %9s | %9s %9s %9s %9s\n", "type", "k x n", "dec us", "dec GB/s", "%bw", "cpu GB/s",
           "pre ms", "GFLOP/s", "cpu GF/s", "cpu us/row");
    char types_buf[128];
    snprintf(types_buf, sizeof types_buf, "%s", types_arg);
    for (char *tok = strtok(types_buf, ","); tok; tok = strtok(NULL, ",")) {
        dtype t;
        if (parse_type(tok, &t) != 0) {
            fprintf(stderr, "unknown type %s\n", tok);
            return 2;
        }
        for (const char *sp = shapes_arg; *sp; sp++) {
            if (*sp < '0' || *sp >= '0' + NSHAPES) continue;
            shape s = shapes[*sp - '0'];
            double gbs = 0, cpu_gbs = 0, gfl = 0, cpu_gfl = 0, td = 0;
            if (ws_mib > 0) td = bench_decode(ctx, t, s, ws_mib << 20, reps, &gbs, &cpu_gbs);
            double tp = m > 0 ? bench_prefill(ctx, t, s, m, reps, &gfl, &cpu_gfl) : 0;
            char sh[32];
            snprintf(sh, sizeof sh, "%lldx%lld", (long long)s.k, (long long)s.n);
            /* CPU microseconds per activation row: flat across m when the kernel scales */
            double us_row = cpu_gfl > 0 ? 2.0 * (double)s.n * (double)s.k / cpu_gfl / 1e3 : 0.0;
            printf("%-12s %-9s | %9.1f %9.2f %6.1f%% %9.2f | %9.2f %9.1f %9.1f %9.2f\n", dtype_name(t), sh, td * 1e6,
                   gbs, bw > 0 ? 100.0 * gbs / bw : 0.0, cpu_gbs, tp * 1e3, gfl, cpu_gfl, us_row);
            fflush(stdout);
        }
    }
    kern_ctx_destroy(ctx);
    pool_destroy(pool);
    return 0;
}
