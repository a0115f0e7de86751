/* cmd_run.c - `cinfer run`: load a model, encode the prompt (BOS per the
 * model), prefill it in chunks, then sample and stream tokens to stdout until
 * -n tokens, an end-of-generation token (unless --ignore-eos) or the end of
 * the context. Speeds go to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "base/timeutil.h"
#include "cli_util.h"
#include "commands.h"
#include "engine/generate.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "text/tokenizer.h"

static void run_usage(FILE *out) {
    fprintf(out,
            "usage: cinfer run -m MODEL.gguf [options]\n"
            "  -m, --model FILE        GGUF model (required)\n"
            "  -p, --prompt TEXT       prompt (default: empty, generation starts after BOS)\n"
            "  -f, --file FILE         read the prompt from a file\n"
            "  -n, --n-predict N       tokens to generate (default 128)\n"
            "  -c, --ctx N             context length (default: the model's context_length)\n"
            "  -b, --batch N           prompt tokens per forward pass (default 512)\n"
            "  -t, --threads N         compute threads (default: one per core)\n"
            "      --temp T            temperature, 0 = greedy (default 0.8)\n"
            "      --top-k K           top-k, 0 = off (default 40)\n"
            "      --top-p P           top-p, 1 = off (default 0.95)\n"
            "      --min-p P           min-p, 0 = off (default 0.05)\n"
            "      --repeat-penalty R  repetition penalty, 1 = off (default 1)\n"
            "      --presence-penalty P, --frequency-penalty F   (default 0)\n"
            "      --seed S            sampling seed (default 0)\n"
            "      --ignore-eos        keep generating after an end-of-generation token\n"
            "      --no-echo           do not print the prompt before the output\n");
}

typedef struct run_opts {
    const char *model, *prompt, *prompt_file;
    long long n_predict, ctx, batch, threads;
    sampler_params sp;
    int ignore_eos, echo;
} run_opts;

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
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        long long iv;
        double fv;
#define VAL() if (!(v = cli_value(argc, argv, &i))) return 1
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { run_usage(stdout); return -1; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VAL(); o->model = v; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { VAL(); o->prompt = v; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { VAL(); o->prompt_file = v; }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { VAL(); if (cli_int(a, v, 0, 1 << 30, &o->n_predict)) return 1; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) { VAL(); if (cli_int(a, v, 1, 1 << 24, &o->ctx)) return 1; }
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) { VAL(); if (cli_int(a, v, 1, 1 << 16, &o->batch)) return 1; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { VAL(); if (cli_int(a, v, 1, 1024, &o->threads)) return 1; }
        else if (!strcmp(a, "--temp")) { VAL(); if (cli_float(a, v, 0, 100, &fv)) return 1; o->sp.temperature = (float)fv; }
        else if (!strcmp(a, "--top-k")) { VAL(); if (cli_int(a, v, 0, 1 << 30, &iv)) return 1; o->sp.top_k = (int32_t)iv; }
        else if (!strcmp(a, "--top-p")) { VAL(); if (cli_float(a, v, 0, 1, &fv)) return 1; o->sp.top_p = (float)fv; }
        else if (!strcmp(a, "--min-p")) { VAL(); if (cli_float(a, v, 0, 1, &fv)) return 1; o->sp.min_p = (float)fv; }
        else if (!strcmp(a, "--repeat-penalty")) { VAL(); if (cli_float(a, v, 0.01, 100, &fv)) return 1; o->sp.repetition_penalty = (float)fv; }
        else if (!strcmp(a, "--presence-penalty")) { VAL(); if (cli_float(a, v, -2, 2, &fv)) return 1; o->sp.presence_penalty = (float)fv; }
        else if (!strcmp(a, "--frequency-penalty")) { VAL(); if (cli_float(a, v, -2, 2, &fv)) return 1; o->sp.frequency_penalty = (float)fv; }
        else if (!strcmp(a, "--seed")) { VAL(); if (cli_int(a, v, 0, (long long)INT64_MAX, &iv)) return 1; o->sp.seed = (uint64_t)iv; }
        else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = 1;
        else if (!strcmp(a, "--no-echo")) o->echo = 0;
        else return cli_fail("run: unknown option '%s' (see cinfer run --help)", a);
#undef VAL
    }
    if (!o->model) return cli_fail("run: -m MODEL.gguf is required (see cinfer run --help)");
    if (o->prompt && o->prompt_file) return cli_fail("run: give -p or -f, not both");
    return 0;
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
            if (!nb) { free(buf); buf = NULL; }
            else buf = nb;
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
    gen_session g;
    sampler *smp = sampler_create(&o->sp, hp->n_vocab);
    if (!smp || gen_init(&g, m, pool, ctx, (int32_t)o->batch, &err)) {
        sampler_free(smp);
        free(prompt);
        free(ids);
        return cli_fail("run: %s", smp ? err.msg : "out of memory");
    }
    char kv_words[160];
    model_kv_describe(m, kv_words, sizeof kv_words);
    fprintf(stderr, "cinfer: KV cache %lld bytes per token %s\n", (long long)model_kv_block_floats(m, 1) * 4, kv_words);
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
    fprintf(stderr, "cinfer: prompt %zu tokens in %.3f s (%.1f tok/s); generated %lld tokens, decode %.1f tok/s [%s, %d threads]\n",
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
    if (r) return r < 0 ? 0 : r;
    cpu_isa_active();
    cf_err err = {0};
    model *m;
    if (model_load(o.model, &m, &err)) return cli_fail("%s", err.msg);
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
