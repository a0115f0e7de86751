/* bench_attention.c - kern_attention throughput on one thread, TinyLlama
 * shapes (one GQA group: 8 query heads, head_dim 64, 16-token blocks),
 * against the measured one-thread f32 FMA peak:
 *   prefill: a chunk of 16 query tokens at the end of a context of C keys,
 *   decode:  one query token after C keys (the whole call, and the split
 *            form: one kern_attention_part per segment + the merge).
 * FLOPs = 4 x rows x head_dim x visible keys (QK and PV, one FMA = 2).
 * Usage: bench_attention [-c context] [-r reps] [-I avx512|avx2|scalar] [-P f32|bf16] [-X]
 * (-P: the dot products' precision, attn_prec; bf16 runs on AMX tiles where
 * usable, else with vdpbf16ps, else as f32; -X: no AMX. The header line says
 * which ran).
 * Best of `reps` timings, in this thread's CPU time (CLOCK_THREAD_CPUTIME_ID):
 * on a shared, oversubscribed machine a call longer than the scheduler's
 * time slice is otherwise charged the other processes' turns. Not a test:
 * numbers depend on the machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cpu.h"
#include "base/threadpool.h"
#include "bench_cli.h"
#include "tensor/attention.h"
#include "tensor/peak.h"

#define N_Q 8
#define HEAD_DIM 64
#define BT 16

static const char usage[] =
    "usage: bench_attention [-c context] [-r reps] [-I avx512|avx2|scalar] [-P f32|bf16] [-X]\n";

typedef struct fixture {
    float *mem, **blocks, *q, *out, *scratch, *parts;
    int32_t pos[ATTN_MAX_CHUNK];
} fixture;

static attn_args make_args(fixture *f, int n_tok, int ctx, attn_prec prec) {
    for (int t = 0; t < n_tok; t++) f->pos[t] = ctx - n_tok + t;
    return (attn_args){.q = f->q,
                       .q_stride = N_Q * HEAD_DIM,
                       .out = f->out,
                       .out_stride = N_Q * HEAD_DIM,
                       .pos = f->pos,
                       .n_tok = n_tok,
                       .n_q = N_Q,
                       .head_dim = HEAD_DIM,
                       .blocks = f->blocks,
                       .block_tokens = BT,
                       .k_off = 0,
                       .v_off = BT * HEAD_DIM,
                       .row_stride = HEAD_DIM,
                       .scale = 0.125f,
                       .prec = prec,
                       .scratch = f->scratch};
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double best_time(const attn_args *a, int reps, bool split, float *parts) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        if (split) {
            int first, end;
            attn_segments(a, &first, &end);
            int64_t pf = (int64_t)attn_part_floats(a->n_tok, a->n_q, a->head_dim);
            for (int g = first; g < end; g++) kern_attention_part(a, g, parts + (g - first) * pf);
            kern_attention_merge(a, parts, pf);
        } else {
            kern_attention(a);
        }
        double dt = cpu_now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv) {
    long ctx = 4096, reps = 5;
    attn_prec prec = ATTN_PREC_F32;
    int c;
    static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    while ((c = getopt_long(argc, argv, ":c:r:I:P:Xh", longopts, NULL)) != -1) {
        if (c == 'h') return fputs(usage, stdout), 0;
        if (c == 'c' && bench_parse_long("bench_attention", "-c", optarg, 16, 1 << 20, &ctx)) return 2;
        if (c == 'r' && bench_parse_long("bench_attention", "-r", optarg, 1, 1000, &reps)) return 2;
        if (c == 'I') {
            int isa = -1;
            for (int i = 0; i < CPU_ISA_COUNT; i++)
                if (!strcmp(optarg, cpu_isa_name((cpu_isa)i))) isa = i;
            if (isa < 0 || !cpu_isa_supported((cpu_isa)isa)) {
                fprintf(stderr, "bench_attention: ISA '%s' is unknown or unsupported here\n", optarg);
                return 2;
            }
            cpu_isa_force((cpu_isa)isa);
        }
        if (c == 'X') cpu_amx_allow(false);
        if (c == 'P' && attn_prec_parse(optarg, &prec) != 0) {
            fprintf(stderr, "bench_attention: -P wants f32 or bf16, not '%s'\n", optarg);
            return 2;
        }
        if (c == '?' || c == ':') return bench_bad_option("bench_attention", c, argv);
    }
    int n_blocks = (int)((ctx + BT - 1) / BT);
    size_t block_floats = 2 * BT * HEAD_DIM;
    fixture f = {.mem = malloc(sizeof(float) * block_floats * (size_t)n_blocks),
                 .blocks = malloc(sizeof(float *) * (size_t)n_blocks),
                 .q = malloc(sizeof(float) * ATTN_MAX_CHUNK * N_Q * HEAD_DIM),
                 .out = malloc(sizeof(float) * ATTN_MAX_CHUNK * N_Q * HEAD_DIM),
                 .scratch = malloc(sizeof(float) * attn_scratch_floats(ATTN_MAX_CHUNK, N_Q, HEAD_DIM)),
                 .parts = malloc(sizeof(float) * attn_part_floats(1, N_Q, HEAD_DIM) * (size_t)(ctx / ATTN_SEG + 1))};
    thread_pool *pool = pool_create(1);
    if (!f.mem || !f.blocks || !f.q || !f.out || !f.scratch || !f.parts || !pool) {
        fprintf(stderr, "bench_attention: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < block_floats * (size_t)n_blocks; i++)
        f.mem[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (int b = 0; b < n_blocks; b++) f.blocks[b] = f.mem + (size_t)b * block_floats;
    for (int i = 0; i < ATTN_MAX_CHUNK * N_Q * HEAD_DIM; i++) f.q[i] = (float)(i % 17) / 17.0f - 0.5f;
    peak_ops peak = kern_measure_peak(pool);
    printf("attention    1 thread, kernels %s, dot products %s, %d heads x head_dim %d per KV head, context %ld; peak "
           "f32 FMA "
           "%.1f GFLOP/s\n",
           cpu_isa_name(cpu_isa_active()),
           !attn_prec_native(prec) ? "f32"
           : prec == ATTN_PREC_F32 ? "f32"
           : cpu_has_amx_bf16()    ? "bf16 (AMX)"
                                   : "bf16 (vdpbf16ps)",
           N_Q, HEAD_DIM, ctx, peak.f32_flops / 1e9);
    attn_args pre = make_args(&f, ATTN_MAX_CHUNK, (int)ctx, prec);
    double keys = 0;
    for (int t = 0; t < ATTN_MAX_CHUNK; t++) keys += (double)pre.pos[t] + 1;
    double fl = 4.0 * N_Q * HEAD_DIM * keys, dt = best_time(&pre, (int)reps, false, NULL);
    printf("prefill      %d tokens:   %8.1f us  %6.1f GFLOP/s (%.0f%% of peak)\n", ATTN_MAX_CHUNK, dt * 1e6,
           fl / dt / 1e9, 100.0 * fl / dt / peak.f32_flops);
    attn_args dec = make_args(&f, 1, (int)ctx, prec);
    fl = 4.0 * N_Q * HEAD_DIM * (double)ctx;
    for (int split = 0; split < 2; split++) {
        dt = best_time(&dec, (int)reps, split, f.parts);
        printf("decode       %-12s %8.1f us  %6.1f GFLOP/s (%.0f%% of peak), KV read %.2f GB/s\n",
               split ? "split form:" : "1 token:", dt * 1e6, fl / dt / 1e9, 100.0 * fl / dt / peak.f32_flops,
               (double)ctx * 2 * HEAD_DIM * 4 / dt / 1e9);
    }
    pool_destroy(pool);
    free(f.mem);
    free(f.blocks);
    free(f.q);
    free(f.out);
    free(f.scratch);
    free(f.parts);
    return 0;
}
