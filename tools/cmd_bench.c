/* cmd_bench.c - `cinfer bench latency` (here) and `cinfer bench throughput`
 * (cmd_bench_throughput.c, the serving engine). Latency: single-sequence prefill and decode
 * speed of a model, printed next to the physical limits of this machine:
 *   decode roofline  = measured read bandwidth (best of a probe before and
 *                      one after the timed runs) / bytes streamed per token
 *                      (weights + the KV cache read at the mean position,
 *                      DEPTH + prompt + gen/2; MoE: only the experts one
 *                      token uses),
 *   prefill          = achieved matmul FLOP/s (2 x active params x tokens / time).
 * The "cpu" line repeats both in process CPU seconds per thread (the pool's
 * workers spin briefly before sleeping, which counts too): the rates with
 * every thread on its own core, and decode against the same probe timed in
 * CPU seconds, which on a shared machine do not count other processes' turns.
 * -d DEPTH (like llama-bench -d) first fills DEPTH positions, untimed and
 * once (with --depth-attn-precision's attention arithmetic, by default
 * --attn-precision's; the timed runs always use --attn-precision); every
 * repetition then prefills the prompt and decodes after them, and is
 * rolled back to DEPTH (gen_truncate) before the next.
 * The prompt is pseudo-random token ids (deterministic), so no tokenizer
 * cost is included. `bench serve`, `bench report` and `bench trace-stats` live in
 * cmd_bench_serve.c and cmd_bench_report.c, `bench replay` in cmd_bench_replay.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cli_opt.h"
#include "base/cpu.h"
#include "base/timeutil.h"
#include "cinfer/engine.h"
#include "commands.h"
#include "engine/generate.h"
#include "model/model.h"
#include "tensor/kernels.h"
#include "tensor/peak.h"

static const char bench_usage[] = "cinfer bench latency -m MODEL.gguf [options]\n"
                                  "cinfer bench throughput -m MODEL.gguf [options]  (see bench throughput --help)\n"
                                  "cinfer bench serve --base-url URL [options]      (see bench serve --help)\n"
                                  "cinfer bench report RESULTS.json... [--svg DIR]  (see bench report --help)\n"
                                  "cinfer bench trace-stats TRACE.jsonl [--block-scale K]\n"
                                  "cinfer bench replay -m MODEL.gguf [options]      (see bench replay --help)";

typedef struct bench_opts {
    const char *model, *weights_cache, *kv_dtype_name, *attn_precision, *depth_precision;
    long long prompt, gen, threads, reps, bw_mib, depth, batch;
    kv_dtype kv_dt;
    attn_prec prec; /* parsed --attn-precision */
    attn_prec depth_prec; /* parsed --depth-attn-precision (default: prec) */
} bench_opts;

/* argv[0] is "latency". CLI_OK, CLI_HELP or CLI_USAGE. */
static int parse_bench(int argc, char **argv, bench_opts *o) {
    *o = (bench_opts){.prompt = 512, .gen = 128, .reps = 3, .bw_mib = 1024, .batch = 4096};
    const cli_opt t[] = {
        {"model", 'm', "FILE", "GGUF model (required)", CLI_STR(&o->model)},
        {"prompt", 'p', "N", "prompt tokens to prefill (default 512; 0 = decode only)",
         CLI_NUM(&o->prompt, 0, 1 << 20)},
        {"depth", 'd', "N", "cached tokens before the prompt (default 0)", CLI_NUM(&o->depth, 0, 1 << 20)},
        {"batch", 'b', "N", "most tokens per forward call in prefill (default 4096)", CLI_NUM(&o->batch, 1, 1 << 16)},
        {"gen", 'n', "N", "tokens to decode (default 128)", CLI_NUM(&o->gen, 1, 1 << 20)},
        {"threads", 't', "N", "compute threads (default: one per core)", CLI_NUM(&o->threads, 1, 1024)},
        {"reps", 'r', "N", "repetitions; the best is reported (default 3)", CLI_NUM(&o->reps, 1, 1000)},
        {"bw-mib", 0, "N", "buffer for the bandwidth measurement (default 1024 MiB)", CLI_NUM(&o->bw_mib, 16, 1 << 20)},
        {"weights-cache", 0, "DIR", "repacked-weights cache directory (see `cinfer serve --help`)",
         CLI_STR(&o->weights_cache)},
        {"kv-dtype", 0, "TYPE", "KV cache element type: f32, bf16, f16 or q8_0 (default: as `cinfer serve`)",
         CLI_STR(&o->kv_dtype_name)},
        {"attn-precision", 0, "f32|bf16",
         "attention dot products: f32 or bf16 (AMX tiles or AVX-512\n"
         "BF16; default: bf16 where the CPU has them, else f32; docs/runtime.md)",
         CLI_STR(&o->attn_precision)},
        {"depth-attn-precision", 0, "f32|bf16",
         "attention dot products of the untimed -d fill only (default:\n"
         "--attn-precision; bf16 fills faster where it runs natively)",
         CLI_STR(&o->depth_precision)},
    };
    cli_cmd c = {.name = "bench latency",
                 .usage = bench_usage,
                 .about = "Single-sequence prefill and decode speed next to this machine's roofline.",
                 .opts = t,
                 .n_opts = sizeof t / sizeof t[0]};
    int pos, rc = cli_parse(&c, argc, argv, &pos);
    if (rc) return rc;
    if (pos < argc) return cli_usage_error(&c, "unexpected argument '%s'", argv[pos]);
    if (!o->model) return cli_usage_error(&c, "-m MODEL.gguf is required");
    if (kv_dtype_parse(o->kv_dtype_name ? o->kv_dtype_name : cinfer_kv_dtype_name(CINFER_KV_DTYPE_DEFAULT), &o->kv_dt))
        return cli_usage_error(&c, "--kv-dtype '%s': expected f32, bf16, f16 or q8_0", o->kv_dtype_name);
    o->prec = attn_prec_default();
    if (o->attn_precision && attn_prec_parse(o->attn_precision, &o->prec))
        return cli_usage_error(&c, "--attn-precision: '%s' (f32 or bf16)", o->attn_precision);
    o->depth_prec = o->prec;
    if (o->depth_precision && attn_prec_parse(o->depth_precision, &o->depth_prec))
        return cli_usage_error(&c, "--depth-attn-precision: '%s' (f32 or bf16)", o->depth_precision);
    return CLI_OK;
}

/* Whether the model's big matrices are int8-multiplied (Q8_0/Q4_0 weights). */
static int hp_is_int8(const model *m) {
    const gguf_tensor *t = gguf_find_tensor(model_get_gguf(m), "blk.0.ffn_up.weight");
    return t && (t->type == DT_Q8_0 || t->type == DT_Q4_0);
}

/* Pseudo-random (deterministic) token ids. */
static void fill_tokens(int32_t *t, long long n, int32_t n_vocab) {
    uint64_t x = 12345;
    for (long long i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = (int32_t)((x >> 33) % (uint64_t)n_vocab);
    }
}

/* The repetitions: best prefill and decode seconds into *pp_s / *tg_s,
 * and the least process CPU seconds of each into *pp_cpu / *tg_cpu. */
static int timed_reps(const bench_opts *o, gen_session *g, const int32_t *tokens, double *pp_s, double *tg_s,
                      double *pp_cpu, double *tg_cpu) {
    cf_err err = {0};
    *pp_s = *tg_s = *pp_cpu = *tg_cpu = 1e30;
    for (long long r = 0; r < o->reps; r++) {
        gen_truncate(g, (int32_t)o->depth);
        double t0 = time_now(), c0 = time_process_cpu();
        if (o->prompt > 0 && gen_feed(g, tokens + o->depth, (int32_t)o->prompt, NULL, &err))
            return cli_fail("bench: %s", err.msg);
        double t1 = time_now(), c1 = time_process_cpu();
        int32_t tok = tokens[0];
        for (long long i = 0; i < o->gen; i++)
            if (gen_feed(g, &tok, 1, NULL, &err)) return cli_fail("bench: %s", err.msg);
        double t2 = time_now(), c2 = time_process_cpu();
        if (t1 - t0 < *pp_s) *pp_s = t1 - t0;
        if (t2 - t1 < *tg_s) *tg_s = t2 - t1;
        if (c1 - c0 < *pp_cpu) *pp_cpu = c1 - c0;
        if (c2 - c1 < *tg_cpu) *tg_cpu = c2 - c1;
    }
    return 0;
}

static void print_latency(const bench_opts *o, const model *m, thread_pool *pool, kern_bandwidth probe, peak_ops peak,
                          double pp_s, double tg_s, double pp_cpu, double tg_cpu) {
    double bw = probe.wall;
    const model_hparams *hp = model_get_hparams(m);
    double wbytes = (double)model_active_weight_bytes(m); /* MoE: the experts one token uses */
    /* KV read per decode token at the mean context: every row of the paged layers, at most the window of
     * the window layers (their ring) */
    double mean_ctx = (double)o->depth + (double)o->prompt + (double)o->gen / 2;
    kv_spec spec;
    model_kv_layout_as(m, o->kv_dt, &spec);
    double win = kv_spec_max_window(&spec) < mean_ctx ? kv_spec_max_window(&spec) : mean_ctx;
    double kv_bytes =
        model_kv_token_bytes_as(m, o->kv_dt) * mean_ctx + (double)kv_spec_ring_row_floats(&spec) * 4.0 * win;
    double roof = bw / (wbytes + kv_bytes);
    double pp = (double)o->prompt / pp_s, tg = (double)o->gen / tg_s;
    double flops_tok = 2.0 * (double)model_active_params(m);
    printf("model        %s (%s, %.1fM params, %.1fM active per token, %.1f MiB streamed per token)\n", o->model,
           hp->arch, (double)model_n_params(m) / 1e6, (double)model_active_params(m) / 1e6, wbytes / (1 << 20));
    printf("machine      %d threads, kernels %s, attention %s, read bandwidth %.2f GB/s, peak f32 FMA %.0f GFLOP/s, "
           "int8 VNNI %.0f GOP/s\n",
           pool_size(pool), cpu_isa_name(cpu_isa_active()), attn_prec_describe(o->prec), bw / 1e9, peak.f32_flops / 1e9,
           peak.int8_ops / 1e9);
    double peak_w = (hp_is_int8(m) && peak.int8_ops > 0) ? peak.int8_ops : peak.f32_flops;
    if (o->prompt > 0)
        printf(
            "prefill      %lld tokens at depth %lld: %8.1f tok/s  (%.1f GFLOP/s in matmuls, %.0f%% of the %s peak)\n",
            o->prompt, o->depth, pp, pp * flops_tok / 1e9, 100.0 * pp * flops_tok / peak_w,
            peak_w == peak.int8_ops ? "int8" : "f32");
    printf("decode       %lld tokens at depth %lld: %8.2f tok/s  roofline %.2f tok/s (%.0f%% of bandwidth limit; "
           "%.1f MiB weights + %.1f MiB KV (%s) per token)\n",
           o->gen, o->depth + o->prompt, tg, roof, 100.0 * tg / roof, wbytes / (1 << 20), kv_bytes / (1 << 20),
           kv_dtype_name(o->kv_dt));
    if (tg > roof * 1.05)
        printf("note         decode above the roofline: the bandwidth probe read less than decode streamed (other "
               "processes during the probe, or weights partly cache-resident), not a faster-than-memory decode\n");
    /* on a shared machine the wall clock counts other processes' turns: the same work per CPU-second, as
     * tok/s with every thread on its own core */
    double nt = (double)pool_size(pool);
    double tg_c = (double)o->gen / (tg_cpu / nt), roof_c = probe.cpu / (wbytes + kv_bytes);
    printf("cpu          prefill %.2f s -> %.1f tok/s, decode %.2f s -> %.2f tok/s (process CPU time / %d threads); "
           "read bandwidth %.2f GB/s -> decode roofline %.2f tok/s (%.0f%% of bandwidth limit)\n",
           pp_cpu, o->prompt > 0 ? (double)o->prompt / (pp_cpu / nt) : 0.0, tg_cpu, tg_c, pool_size(pool),
           probe.cpu / 1e9, roof_c, roof_c > 0 ? 100.0 * tg_c / roof_c : 0.0);
}

static int bench_latency(const bench_opts *o) {
    cf_err err = {0};
    model *m;
    model_load_opts lo = {.weights_cache_dir = o->weights_cache};
    if (model_load_with(o->model, &lo, &m, &err)) return cli_fail("%s", err.msg);
    thread_pool *pool = pool_create((int)o->threads);
    int32_t *tokens = malloc((size_t)(o->depth + o->prompt + 1) * sizeof(int32_t));
    if (!pool || !tokens) {
        free(tokens);
        if (pool) pool_destroy(pool);
        model_free(m);
        return cli_fail("out of memory starting the benchmark");
    }
    fill_tokens(tokens, o->depth + o->prompt + 1, model_get_hparams(m)->n_vocab);
    long long ctx = o->depth + o->prompt + o->gen;
    long long batch = o->depth + o->prompt < o->batch ? o->depth + o->prompt : o->batch;
    kern_bandwidth bw = kern_measure_read_bandwidth_both(pool, (size_t)o->bw_mib << 20);
    peak_ops peak = kern_measure_peak(pool);
    double pp_s = 0, tg_s = 0, pp_cpu = 0, tg_cpu = 0;
    int rc = 0;
    gen_session g;
    if (ctx > INT32_MAX / 2) rc = cli_fail("bench: a context of %lld positions is too long", ctx);
    else if (gen_init_as(&g, m, o->kv_dt, pool, (int32_t)ctx, (int32_t)(batch > 0 ? batch : 1), &err))
        rc = cli_fail("bench: %s", err.msg);
    else {
        fwd_ctx_set_attn_prec(g.fc, o->depth_prec);
        if (o->depth > 0 && gen_feed(&g, tokens, (int32_t)o->depth, NULL, &err)) rc = cli_fail("bench: %s", err.msg);
        fwd_ctx_set_attn_prec(g.fc, o->prec);
        if (!rc) rc = timed_reps(o, &g, tokens, &pp_s, &tg_s, &pp_cpu, &tg_cpu);
        gen_release(&g);
    }
    /* The probe varies run to run on a shared VM: take the best of a probe
     * before and one after the timed runs (the conservative roofline). */
    kern_bandwidth bw_after = kern_measure_read_bandwidth_both(pool, (size_t)o->bw_mib << 20);
    if (bw_after.wall > bw.wall) bw.wall = bw_after.wall;
    if (bw_after.cpu > bw.cpu) bw.cpu = bw_after.cpu;
    if (!rc) print_latency(o, m, pool, bw, peak, pp_s, tg_s, pp_cpu, tg_cpu);
    free(tokens);
    pool_destroy(pool);
    model_free(m);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } subs[] = {{"throughput", bench_throughput},
                {"serve", bench_serve},
                {"report", bench_report},
                {"trace-stats", bench_trace_stats},
                {"replay", bench_replay}};
    const cli_cmd c = {.name = "bench",
                       .usage = bench_usage,
                       .about = "`cinfer bench <benchmark> --help` describes a benchmark's options."};
    if (argc < 2)
        return cli_usage_error(&c, "a benchmark is required (latency, throughput, serve, report, trace-stats, replay)");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return cli_help(&c, stdout), 0;
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (!strcmp(argv[1], subs[i].name)) return subs[i].fn(argc - 1, argv + 1);
    if (strcmp(argv[1], "latency") != 0)
        return cli_usage_error(&c, "unknown benchmark '%s' (latency, throughput, serve, report, trace-stats, replay)",
                               argv[1]);
    bench_opts o;
    int r = parse_bench(argc - 1, argv + 1, &o);
    if (r) return r == CLI_HELP ? 0 : r;
    return bench_latency(&o);
}
