/* cmd_bench_throughput.c - `cinfer bench throughput`: offline serving
 * throughput of the engine. N requests with pseudo-random token prompts of
 * input-len tokens (the first prefix-len of them shared by all requests, so
 * the prefix cache can serve them) are submitted at once, greedy, ignoring
 * EOS, each generating exactly output-len tokens. Prints wall time, aggregate
 * input and output tokens per second over the wall time, the decode-phase
 * rate (output tokens after every request has its first token, over that
 * time), the time until every request had its first token, and the engine's
 * counters (prompt tokens computed vs served from cache, steps, preemptions).
 * --long-context is the 16 streams x 4k context case: decode steps of 16
 * sequences each attending over ~4,100 cached positions.
 * Prefill and decode share steps (the scheduler mixes them), so the input and
 * output rates are both over the same wall time, not separate phases.
 * Called from cmd_bench.c. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli_opt.h"
#include "base/threadpool.h"
#include "base/timeutil.h"
#include "cinfer/engine.h"
#include "commands.h"
#include "model/model.h"

typedef struct tput_opts {
    const char *model, *weights_cache, *kv_dtype_name, *attn_precision;
    int32_t kv_dtype; /* cinfer_kv_dtype */
    attn_prec prec; /* parsed --attn-precision */
    long long requests, input_len, output_len, prefix_len, threads, max_batch, max_seqs;
    double kv_gib;
    bool sync_scheduling, long_context;
} tput_opts;

/* argv[0] is "throughput". CLI_OK, CLI_HELP or CLI_USAGE. */
static int parse_tput(int argc, char **argv, tput_opts *o) {
    *o =
        (tput_opts){.requests = 64, .input_len = 256, .output_len = 64, .kv_gib = 1, .max_batch = 2048, .max_seqs = 64};
    const cli_opt t[] = {
        {"model", 'm', "FILE", "GGUF model (required)", CLI_STR(&o->model)},
        {"requests", 0, "N", "requests submitted at once (default 64)", CLI_NUM(&o->requests, 1, 1 << 20)},
        {"input-len", 0, "N", "prompt tokens per request (default 256)", CLI_NUM(&o->input_len, 1, 1 << 20)},
        {"output-len", 0, "N", "generated tokens per request (default 64)", CLI_NUM(&o->output_len, 1, 1 << 20)},
        {"prefix-len", 0, "N", "leading prompt tokens shared by all requests (default 0)",
         CLI_NUM(&o->prefix_len, 0, 1 << 20)},
        {"threads", 't', "N", "compute threads (default: one per core)", CLI_NUM(&o->threads, 1, 1024)},
        {"kv-memory", 0, "GIB", "KV cache budget (default 1)", CLI_NUM(&o->kv_gib, 0.0001, 4096)},
        {"kv-dtype", 0, "TYPE", "KV cache element type: f32, bf16, f16 or q8_0 (default: as `cinfer serve`)",
         CLI_STR(&o->kv_dtype_name)},
        {"max-batch-tokens", 0, "N", "tokens per step (default 2048)", CLI_NUM(&o->max_batch, 1, 1 << 20)},
        {"max-seqs", 0, "N", "running requests (default 64)", CLI_NUM(&o->max_seqs, 1, 1 << 16)},
        {"sync-scheduling", 0, NULL,
         "plan, compute and process outputs one after another\n"
         "(default: plan step N+1 while step N computes)",
         CLI_SET(&o->sync_scheduling, true)},
        {"weights-cache", 0, "DIR", "repacked-weights cache directory (see `cinfer serve --help`)",
         CLI_STR(&o->weights_cache)},
        {"long-context", 0, NULL,
         "the long-context case: 16 requests x 4096 prompt tokens (the\n"
         "first 4064 shared) + 64 generated; replaces those four options",
         CLI_SET(&o->long_context, true)},
        {"attn-precision", 0, "f32|bf16",
         "attention dot products: f32 or bf16 (AMX tiles or AVX-512\n"
         "BF16; default: bf16 where the CPU has them, else f32; docs/runtime.md)",
         CLI_STR(&o->attn_precision)},
    };
    cli_cmd c = {.name = "bench throughput",
                 .usage = "cinfer bench throughput -m MODEL.gguf [options]",
                 .about = "Offline serving throughput of the engine (greedy, EOS ignored).",
                 .opts = t,
                 .n_opts = sizeof t / sizeof t[0]};
    int pos, rc = cli_parse(&c, argc, argv, &pos);
    if (rc) return rc;
    if (pos < argc) return cli_usage_error(&c, "unexpected argument '%s'", argv[pos]);
    if (!o->model) return cli_usage_error(&c, "-m MODEL.gguf is required");
    if (o->long_context) {
        o->requests = 16;
        o->input_len = 4096;
        o->prefix_len = 4064;
        o->output_len = 64;
    }
    if (o->prefix_len > o->input_len) return cli_usage_error(&c, "--prefix-len exceeds --input-len");
    if (o->kv_dtype_name && (o->kv_dtype = cinfer_kv_dtype_parse(o->kv_dtype_name)) < 0)
        return cli_usage_error(&c, "--kv-dtype '%s': expected f32, bf16, f16 or q8_0", o->kv_dtype_name);
    o->prec = attn_prec_default();
    if (o->attn_precision && attn_prec_parse(o->attn_precision, &o->prec))
        return cli_usage_error(&c, "--attn-precision: '%s' (f32 or bf16)", o->attn_precision);
    return CLI_OK;
}

/* Prompts: request r's tokens; the first prefix_len are the same for all. */
static int32_t *make_prompts(const tput_opts *o, int32_t n_vocab) {
    size_t n = (size_t)o->requests * (size_t)o->input_len;
    int32_t *p = malloc(n * sizeof(int32_t));
    if (!p) return NULL;
    uint64_t x = 12345;
    for (long long r = 0; r < o->requests; r++)
        for (long long i = 0; i < o->input_len; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            int32_t t = 3 + (int32_t)((x >> 33) % (uint64_t)(n_vocab - 3));
            p[r * o->input_len + i] = i < o->prefix_len ? p[i] : t;
        }
    return p;
}

typedef struct tput_run {
    uint64_t *ids;
    bool *got_first, *done;
    double t_first_all, t_end;
    long long generated;
} tput_run;

/* Drains outputs through the engine's eventfd until every request is done. */
static int drain_all(cinfer_engine *e, const tput_opts *o, tput_run *run, double t0) {
    cinfer_output out;
    memset(&out, 0, sizeof out);
    long long done = 0, first = 0;
    int rc = 0;
    while (done < o->requests && !rc) {
        struct pollfd pfd = {.fd = cinfer_engine_fd(e), .events = POLLIN};
        poll(&pfd, 1, 1000);
        uint64_t ids[256];
        int n;
        while ((n = cinfer_engine_ready(e, ids, 256)) > 0)
            for (int k = 0; k < n; k++) {
                long long r = (long long)(ids[k] - run->ids[0]);
                if (r < 0 || r >= o->requests || run->done[r]) continue;
                while (cinfer_engine_read(e, ids[k], &out, 0) == 1) {
                    run->generated += out.n_tokens;
                    if (!run->got_first[r] && out.n_tokens > 0 && ++first == o->requests)
                        run->t_first_all = time_now() - t0;
                    if (out.n_tokens > 0) run->got_first[r] = true;
                    if (out.finish == CINFER_FINISH_ERROR) rc = cli_fail("bench throughput: %s", out.error);
                    if (out.finish != CINFER_FINISH_NONE) {
                        run->done[r] = true;
                        done++;
                        break;
                    }
                }
            }
    }
    run->t_end = time_now() - t0;
    cinfer_output_release(&out);
    return rc;
}

static int run_tput(const tput_opts *o, const model *m, thread_pool *tp) {
    const model_hparams *hp = model_get_hparams(m);
    cinfer_engine_options eo = {.block_tokens = 16,
                                .kv_memory_bytes = (int64_t)(o->kv_gib * (double)(1 << 30)),
                                .max_batch_tokens = (int32_t)o->max_batch,
                                .max_seqs = (int32_t)o->max_seqs,
                                .max_ctx = (int32_t)(o->input_len + o->output_len),
                                .sync_scheduling = o->sync_scheduling,
                                .kv_dtype = o->kv_dtype,
                                .attn_precision = o->prec == ATTN_PREC_BF16 ? CINFER_ATTN_BF16 : CINFER_ATTN_F32};
    char err[512];
    cinfer_engine *e;
    if (cinfer_engine_create(m, tp, &eo, &e, err, sizeof err)) return cli_fail("bench throughput: %s", err);
    int32_t *prompts = make_prompts(o, hp->n_vocab);
    tput_run run = {.ids = calloc((size_t)o->requests, sizeof(uint64_t)),
                    .got_first = calloc((size_t)o->requests, sizeof(bool)),
                    .done = calloc((size_t)o->requests, sizeof(bool))};
    int rc = 0;
    if (!prompts || !run.ids || !run.got_first || !run.done) rc = cli_fail("bench throughput: out of memory");
    double t0 = time_now();
    for (long long r = 0; r < o->requests && !rc; r++) {
        cinfer_request q = cinfer_request_default();
        q.prompt = prompts + r * o->input_len;
        q.n_prompt = (int32_t)o->input_len;
        q.max_tokens = (int32_t)o->output_len;
        q.ignore_eos = true;
        run.ids[r] = cinfer_engine_submit(e, &q, err, sizeof err);
        if (!run.ids[r]) rc = cli_fail("bench throughput: %s", err);
    }
    if (!rc) rc = drain_all(e, o, &run, t0);
    if (!rc) {
        cinfer_engine_stats s = cinfer_engine_get_stats(e);
        double in_tok = (double)o->requests * (double)o->input_len;
        printf("model        %s (%s), %d compute threads\n", o->model, hp->arch, pool_size(tp));
        printf("workload     %lld requests x (%lld prompt [%lld shared] + %lld generated) tokens, greedy, "
               "ignore EOS\n",
               o->requests, o->input_len, o->prefix_len, o->output_len);
        printf("wall         %.3f s  (all first tokens after %.3f s)\n", run.t_end, run.t_first_all);
        printf("input        %10.1f tok/s over the wall time (%.0f prompt tokens: %llu computed, %llu from the "
               "prefix cache)\n",
               in_tok / run.t_end, in_tok, (unsigned long long)s.prompt_tokens_computed,
               (unsigned long long)s.cached_tokens);
        printf("output       %10.1f tok/s over the wall time (%lld generated tokens)\n",
               (double)run.generated / run.t_end, run.generated);
        /* decode phase: after every request has its first token only decodes run */
        double t_dec = run.t_end - run.t_first_all;
        long long dec_tokens = run.generated - o->requests;
        if (t_dec > 0 && dec_tokens > 0)
            printf("decode phase %10.1f tok/s  (%lld tokens after all first tokens, %.3f s)\n",
                   (double)dec_tokens / t_dec, dec_tokens, t_dec);
        printf("engine       %llu steps, %.1f tokens/step, %llu preemptions (%llu tokens recomputed), "
               "peak %d of %d KV blocks\n",
               (unsigned long long)s.steps, s.steps ? (double)s.forward_tokens / (double)s.steps : 0.0,
               (unsigned long long)s.preemptions, (unsigned long long)s.recomputed_tokens, s.kv_blocks_used_peak,
               s.kv_blocks_total);
        printf("scheduling   %s: forward %.3f s; engine thread: plan %.3f s, waiting for the forward %.3f s, "
               "commit+assemble %.3f s, outputs %.3f s\n",
               o->sync_scheduling ? "sync" : "async (plan and outputs overlap the forward)", s.t_forward, s.t_plan,
               s.t_wait, s.t_commit, s.t_output);
    }
    free(prompts);
    free(run.ids);
    free(run.got_first);
    free(run.done);
    cinfer_engine_destroy(e);
    return rc;
}

int bench_throughput(int argc, char **argv) {
    tput_opts o;
    int r = parse_tput(argc, argv, &o);
    if (r) return r == CLI_HELP ? 0 : r;
    cf_err err = {0};
    model *m;
    model_load_opts lo = {.weights_cache_dir = o.weights_cache};
    if (model_load_with(o.model, &lo, &m, &err)) return cli_fail("%s", err.msg);
    thread_pool *tp = pool_create((int)o.threads);
    if (!tp) {
        model_free(m);
        return cli_fail("cannot start compute threads");
    }
    int rc = run_tput(&o, m, tp);
    pool_destroy(tp);
    model_free(m);
    return rc;
}
