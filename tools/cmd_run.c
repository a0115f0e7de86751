/* cmd_run.c - `cinfer run`: load a model, encode the prompt (BOS per the
 * model), prefill it in chunks, then sample and stream tokens to stdout until
 * -n tokens, an end-of-generation token (unless --ignore-eos) or the end of
 * the context. Speeds and warnings (-n cut short by the context, --ctx beyond
 * the trained context) go to stderr. Exit 0 ok, 1 runtime error, 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli_opt.h"
#include "base/cpu.h"
#include "base/timeutil.h"
#include "cinfer/engine.h"
#include "commands.h"
#include "engine/generate.h"
#include "engine/sampler.h"
#include "mem_opts.h"
#include "model/model.h"
#include "text/tokenizer.h"

typedef struct run_opts {
    const char *model, *prompt, *prompt_file, *weights_cache, *kv_dtype_name, *attn_precision;
    kv_dtype kv_dt;
    attn_prec prec; /* parsed --attn-precision */
    long long n_predict, ctx, batch, threads;
    sampler_params sp;
    unsigned long seed;
    int ignore_eos, echo, mlock, no_mem_check;
} run_opts;

/* CLI_OK, CLI_HELP or CLI_USAGE (message printed). */
static int parse_run(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->batch = 512;
    o->echo = 1;
    o->sp = sampler_default_params();
    o->sp.temperature = 0.8f;
    o->sp.top_k = 40;
    o->sp.top_p = 0.95f;
    o->sp.min_p = 0.05f;
    sampler_params *sp = &o->sp;
    const cli_opt t[] = {
        {"model", 'm', "PATH", "GGUF model, or a Hugging Face model directory (required)", CLI_STR(&o->model)},
        {"prompt", 'p', "TEXT", "prompt (default: empty, generation starts after BOS)", CLI_STR(&o->prompt)},
        {"file", 'f', "FILE", "read the prompt from a file", CLI_STR(&o->prompt_file)},
        {"n-predict", 'n', "N", "tokens to generate (default 128; fewer when the context ends first)",
         CLI_NUM(&o->n_predict, 0, 1 << 30)},
        {"ctx", 'c', "N", "context length (default: the model's context_length)", CLI_NUM(&o->ctx, 1, 1 << 24)},
        {"batch", 'b', "N", "prompt tokens per forward pass (default 512)", CLI_NUM(&o->batch, 1, 1 << 16)},
        {"threads", 't', "N", "compute threads (default: one per core)", CLI_NUM(&o->threads, 1, 1024)},
        {"temp", 0, "T", "temperature, 0 = greedy (default 0.8)", CLI_NUM(&sp->temperature, 0, 100)},
        {"top-k", 0, "K", "top-k, 0 = off (default 40)", CLI_NUM(&sp->top_k, 0, 1 << 30)},
        {"top-p", 0, "P", "top-p, 1 = off (default 0.95)", CLI_NUM(&sp->top_p, 0, 1)},
        {"min-p", 0, "P", "min-p, 0 = off (default 0.05)", CLI_NUM(&sp->min_p, 0, 1)},
        {"repeat-penalty", 0, "R", "repetition penalty, 1 = off (default 1)",
         CLI_NUM(&sp->repetition_penalty, 0.01, 100)},
        {"presence-penalty", 0, "P", "presence penalty (default 0)", CLI_NUM(&sp->presence_penalty, -2, 2)},
        {"frequency-penalty", 0, "F", "frequency penalty (default 0)", CLI_NUM(&sp->frequency_penalty, -2, 2)},
        {"seed", 0, "S", "sampling seed (default 0)", CLI_NUM(&o->seed, 0, 0)},
        {"ignore-eos", 0, NULL, "keep generating after an end-of-generation token", CLI_SET(&o->ignore_eos, 1)},
        {"no-echo", 0, NULL, "do not print the prompt before the output", CLI_SET(&o->echo, 0)},
        {"mlock", 0, NULL, "lock the weights in memory (never paged out; needs RLIMIT_MEMLOCK)", CLI_SET(&o->mlock, 1)},
        {"no-memory-check", 0, NULL, "start even when the weights exceed available memory (MemAvailable)",
         CLI_SET(&o->no_mem_check, 1)},
        {"weights-cache", 0, "DIR", "repacked-weights cache directory (see `cinfer serve --help`)",
         CLI_STR(&o->weights_cache)},
        {"kv-dtype", 0, "TYPE", "KV cache element type: f32, bf16, f16 or q8_0 (default: as `cinfer serve`)",
         CLI_STR(&o->kv_dtype_name)},
        {"attn-precision", 0, "f32|bf16",
         "attention dot products: f32 or bf16 (AMX tiles or AVX-512\n"
         "BF16; default: bf16 where the CPU has them, else f32; docs/runtime.md)",
         CLI_STR(&o->attn_precision)},
    };
    cli_cmd c = {.name = "run",
                 .usage = "cinfer run -m MODEL.gguf [options]",
                 .about = "Generates text from a prompt; the text goes to stdout, speeds and warnings to stderr.",
                 .opts = t,
                 .n_opts = sizeof t / sizeof t[0]};
    int pos, rc = cli_parse(&c, argc, argv, &pos);
    if (rc) return rc;
    o->sp.seed = o->seed;
    if (pos < argc) return cli_usage_error(&c, "unexpected argument '%s'", argv[pos]);
    if (!o->model) return cli_usage_error(&c, "-m MODEL.gguf is required");
    if (o->prompt && o->prompt_file) return cli_usage_error(&c, "give -p or -f, not both");
    if (kv_dtype_parse(o->kv_dtype_name ? o->kv_dtype_name : cinfer_kv_dtype_name(CINFER_KV_DTYPE_DEFAULT), &o->kv_dt))
        return cli_usage_error(&c, "--kv-dtype '%s': expected f32, bf16, f16 or q8_0", o->kv_dtype_name);
    o->prec = attn_prec_default();
    if (o->attn_precision && attn_prec_parse(o->attn_precision, &o->prec))
        return cli_usage_error(&c, "--attn-precision: '%s' (f32 or bf16)", o->attn_precision);
    return CLI_OK;
}

static char *load_prompt(const run_opts *o) {
    if (!o->prompt_file) return strdup(o->prompt ? o->prompt : "");
    FILE *f = fopen(o->prompt_file, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n < 2) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            } else buf = nb;
        }
    }
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

static int generate(const run_opts *o, model *m, const tokenizer *tok, thread_pool *pool) {
    cf_err err = {0};
    const model_hparams *hp = model_get_hparams(m);
    int32_t ctx = o->ctx ? (int32_t)o->ctx : hp->n_ctx_train;
    if (hp->n_ctx_train > 0 && ctx > hp->n_ctx_train)
        fprintf(stderr,
                "cinfer: warning: --ctx %d exceeds the model's trained context of %d tokens; output past %d "
                "tokens may degrade\n",
                ctx, hp->n_ctx_train, hp->n_ctx_train);
    char *prompt = load_prompt(o);
    if (!prompt) return cli_fail("run: cannot read prompt file %s", o->prompt_file);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (tokenizer_encode(tok, prompt, strlen(prompt), true, false, &ids, &n_ids, &err)) {
        free(prompt);
        return cli_fail("run: %s", err.msg);
    }
    if (n_ids == 0) {
        free(prompt);
        free(ids);
        return cli_fail("run: the prompt is empty and the model adds no BOS token; give -p");
    }
    if ((long long)n_ids > ctx) {
        free(prompt);
        free(ids);
        return cli_fail("run: the prompt has %zu tokens but the context is %d (use --ctx)", n_ids, ctx);
    }
    long long room = (long long)ctx - (long long)n_ids + 1; /* tokens that fit after the prompt */
    if (o->n_predict > room)
        fprintf(stderr,
                "cinfer: warning: -n %lld is cut short by the context: the prompt has %zu tokens and the "
                "context is %d, so at most %lld tokens will be generated (use --ctx)\n",
                o->n_predict, n_ids, ctx, room);
    gen_session g;
    sampler *smp = sampler_create(&o->sp, hp->n_vocab);
    if (!smp || gen_init_as(&g, m, o->kv_dt, pool, ctx, (int32_t)o->batch, &err)) {
        sampler_free(smp);
        free(prompt);
        free(ids);
        return cli_fail("run: %s", smp ? err.msg : "out of memory");
    }
    fwd_ctx_set_attn_prec(g.fc, o->prec);
    char kv_words[160];
    model_kv_describe(m, kv_words, sizeof kv_words);
    if (o->kv_dt == KV_DTYPE_F32)
        fprintf(stderr, "cinfer: KV cache %.6g bytes per token %s\n", model_kv_token_bytes(m), kv_words);
    else
        fprintf(stderr, "cinfer: KV cache %.6g bytes per token (%s; as f32: %.6g bytes %s)\n",
                model_kv_token_bytes_as(m, o->kv_dt), kv_dtype_name(o->kv_dt), model_kv_token_bytes(m), kv_words);
    if (g.kv.ring_bytes > 0) { /* sliding-window layers: their last rows, per sequence (docs/engine.md) */
        kv_spec spec;
        model_kv_layout_as(m, o->kv_dt, &spec);
        fprintf(stderr,
                "cinfer: KV window ring %lld bytes per sequence (%lld rows: window %d + batch %d - 1, of %lld bytes; "
                "%lld bytes at full window)\n",
                (long long)g.kv.ring_bytes, (long long)g.kv.ring_tokens, kv_spec_max_window(&spec), (int)g.batch,
                (long long)kv_spec_ring_row_floats(&spec) * 4,
                (long long)kv_spec_ring_row_floats(&spec) * 4 * kv_spec_max_window(&spec));
    }
    if (o->echo) {
        fputs(prompt, stdout);
        fflush(stdout);
    }
    bool prompt_is_bos_only = n_ids == 1 && ids[0] == tokenizer_bos(tok);
    detok_stream ds;
    detok_init(&ds, tok, prompt_is_bos_only, false);
    for (size_t i = 0; i < n_ids; i++) sampler_accept(smp, ids[i]);

    int rc = 0;
    double t0 = time_now();
    if (gen_feed(&g, ids, (int32_t)n_ids, NULL, &err)) {
        rc = cli_fail("run: %s", err.msg);
        goto done;
    }
    double t1 = time_now(), t_decode = 0;
    long long n_gen = 0;
    char out[1024];
    while (n_gen < o->n_predict) {
        int32_t next = sampler_sample(smp, g.logits);
        n_gen++;
        sampler_accept(smp, next);
        if (!o->ignore_eos && tokenizer_is_eog(tok, next)) break;
        size_t nb = detok_push(&ds, next, out, sizeof out);
        fwrite(out, 1, nb, stdout);
        fflush(stdout);
        if (n_gen == o->n_predict) break;
        if (g.n_past >= g.ctx) {
            fprintf(stderr, "\ncinfer: context full (%d tokens); stopping\n", g.ctx);
            break;
        }
        double ts = time_now();
        if (gen_feed(&g, &next, 1, NULL, &err)) {
            rc = cli_fail("run: %s", err.msg);
            goto done;
        }
        t_decode += time_now() - ts;
    }
    size_t nb = detok_flush(&ds, out, sizeof out);
    fwrite(out, 1, nb, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    fprintf(
        stderr,
        "cinfer: prompt %zu tokens in %.3f s (%.1f tok/s); generated %lld tokens, decode %.1f tok/s [%s, %d threads]\n",
        n_ids, t1 - t0, (double)n_ids / (t1 - t0), n_gen, n_gen > 1 ? (double)(n_gen - 1) / t_decode : 0.0,
        cpu_isa_name(cpu_isa_active()), pool_size(pool));
done:
    gen_release(&g);
    sampler_free(smp);
    free(prompt);
    free(ids);
    return rc;
}

int cmd_run(int argc, char **argv) {
    run_opts o;
    int r = parse_run(argc, argv, &o);
    if (r) return r == CLI_HELP ? 0 : r;
    cpu_isa_active();
    cf_err err = {0};
    model *m;
    if (!o.no_mem_check && mem_check_fits("run", o.model, 0, NULL, o.weights_cache != NULL)) return 1;
    model_load_opts lo = {.weights_cache_dir = o.weights_cache};
    if (model_load_with(o.model, &lo, &m, &err)) return cli_fail("%s", err.msg);
    if (o.mlock && mem_lock_model("run", m)) {
        model_free(m);
        return 1;
    }
    tokenizer *tok = NULL;
    if (tokenizer_load_gguf(model_get_gguf(m), &tok, &err)) {
        model_free(m);
        return cli_fail("%s: %s", o.model, err.msg);
    }
    thread_pool *pool = pool_create((int)o.threads);
    if (!pool) {
        tokenizer_free(tok);
        model_free(m);
        return cli_fail("cannot start compute threads");
    }
    int rc = generate(&o, m, tok, pool);
    pool_destroy(pool);
    tokenizer_free(tok);
    model_free(m);
    return rc;
}
