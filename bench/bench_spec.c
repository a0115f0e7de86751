/* bench_spec.c - speculative decoding benchmark on the engine (not a test).
 * Reads prompts from a `cinfer bench serve --dry-run --dump` file (the `code`
 * workload: one JSON line per request, body.prompt text), and in ROUNDS
 * alternating rounds runs every prompt alone (single stream, greedy, ignoring
 * EOS, N tokens) without speculation, with the n-gram drafter and, given
 * --draft-model, with the draft model; then the same at each batch size of
 * --batch (B prompts at once). Reports decode tok/s per stream (tokens after
 * the first / time after the first, so prefill is excluded), drafted and
 * accepted tokens per verify (acceptance length), and the ratio to plain
 * decoding measured in the same round. Also in process CPU time (all threads,
 * memory stalls included), from the first stream's first token to the last
 * token: on a machine shared with other busy processes wall time follows the
 * CPU share the scheduler gives, and CPU time is the closer proxy for an
 * unloaded machine (bench/README.md). */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/threadpool.h"
#include "base/timeutil.h"
#include "bench_cli.h"
#include "cinfer/engine.h"
#include "engine/engine_tok.h"
#include "model/model.h"

#define MAXP 64
#define MAXB 16

static const char *usage =
    "usage: bench_spec -m MODEL.gguf -p PROMPTS.jsonl [-d DRAFT.gguf] [-t THREADS] [-n TOKENS] [-r ROUNDS]\n"
    "                  [-k K] [-b B1,B2,...]\n"
    "Speculative decoding on the engine: decode tok/s per stream without drafts, with the n-gram drafter\n"
    "and (-d) a draft model, single stream and at each batch size, alternating in every round.\n"
    "PROMPTS: `cinfer bench serve --workload code --api completions --text --dry-run --dump FILE`.\n"
    "  -m FILE    target model          -p FILE   prompts (JSON lines with body.prompt)\n"
    "  -d FILE    draft model           -t N      threads (default 2)\n"
    "  -n N       tokens per request (default 64)   -r N  rounds (default 2)\n"
    "  -k N       draft tokens (default 8)           -b L  batch sizes (default 2,4,8)\n"
    "  -o FILE    write the plain single-stream sequences (prompt and output token ids, JSON lines;\n"
    "             first round only) for bench_ngram_replay\n"
    "  -h, --help this text\n";

typedef struct run_stat {
    double tok, secs; /* decode tokens and seconds, summed over streams */
    double btok, cpu; /* decode tokens of all streams, and the process CPU seconds of the decode window */
    uint64_t drafted, accepted, verifies;
} run_stat;

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char *g_prompts[MAXP];
static int g_np;
static FILE *g_dump; /* -o: plain single-stream sequences, one JSON line each ({"prompt": ids, "output": ids}) */

static int load_prompts(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    while (g_np < MAXP && getline(&line, &cap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        const char *p = json_string_value(json_object_get(json_object_get(j, "body"), "prompt"));
        if (p) g_prompts[g_np++] = strdup(p);
        json_decref(j);
    }
    free(line);
    fclose(f);
    return g_np > 0 ? 0 : -1;
}

/* B streams at once (prompts first..first+B), drafter d; adds to *s. */
static int run_batch(cinfer_engine *e, int first, int B, int32_t d, int32_t k, int32_t n, run_stat *s) {
    const tokenizer *tok = cinfer_engine_tokenizer(e);
    uint64_t ids[MAXB];
    double t_first[MAXB], t_last[MAXB];
    int32_t got[MAXB];
    json_t *dump_prompt[MAXB] = {0}, *dump_out[MAXB] = {0};
    bool dumping = g_dump && B == 1 && d == CINFER_SPEC_OFF;
    cinfer_engine_stats s0 = cinfer_engine_get_stats(e);
    for (int i = 0; i < B; i++) {
        const char *p = g_prompts[(first + i) % g_np];
        int32_t *pid = NULL;
        size_t np = 0;
        cf_err err;
        if (tokenizer_encode(tok, p, strlen(p), true, false, &pid, &np, &err)) return -1;
        cinfer_request r = cinfer_request_default();
        r.prompt = pid;
        r.n_prompt = (int32_t)np;
        r.max_tokens = n;
        r.ignore_eos = true;
        r.speculative.drafter = d;
        r.speculative.k = k;
        if (dumping) {
            dump_prompt[i] = json_array();
            dump_out[i] = json_array();
            for (size_t t = 0; t < np; t++) json_array_append_new(dump_prompt[i], json_integer(pid[t]));
        }
        char msg[200];
        ids[i] = cinfer_engine_submit(e, &r, msg, sizeof msg);
        free(pid);
        if (!ids[i]) {
            fprintf(stderr, "bench_spec: submit: %s\n", msg);
            return -1;
        }
        got[i] = 0;
    }
    cinfer_output o;
    memset(&o, 0, sizeof o);
    double cpu0 = -1;
    for (int i = 0; i < B; i++)
        for (;;) {
            if (cinfer_engine_read(e, ids[i], &o, -1) < 0) return -1;
            double now = time_now();
            if (o.n_tokens > 0 && cpu0 < 0) cpu0 = cpu_now(); /* streams start together: prefill is done */
            if (o.n_tokens > 0 && got[i] == 0) t_first[i] = now;
            if (dumping)
                for (int32_t t = 0; t < o.n_tokens; t++) json_array_append_new(dump_out[i], json_integer(o.tokens[t]));
            if (o.n_tokens > 0) {
                got[i] += o.n_tokens;
                t_last[i] = now;
            }
            if (o.finish != CINFER_FINISH_NONE) break;
        }
    s->cpu += cpu_now() - cpu0;
    cinfer_output_release(&o);
    for (int i = 0; dumping && i < B; i++) {
        json_t *line = json_pack("{s:o,s:o}", "prompt", dump_prompt[i], "output", dump_out[i]);
        if (!line || json_dumpf(line, g_dump, JSON_COMPACT) || fputc('\n', g_dump) == EOF) {
            json_decref(line);
            return -1;
        }
        json_decref(line);
    }
    cinfer_engine_stats s1 = cinfer_engine_get_stats(e);
    for (int i = 0; i < B; i++) {
        s->tok += got[i] - 1;
        s->secs += t_last[i] - t_first[i];
        s->btok += got[i] - 1;
    }
    for (int x = CINFER_SPEC_NGRAM; x < CINFER_SPEC_N; x++) {
        s->drafted += s1.spec_drafted[x] - s0.spec_drafted[x];
        s->accepted += s1.spec_accepted[x] - s0.spec_accepted[x];
        s->verifies += s1.spec_verifies[x] - s0.spec_verifies[x];
    }
    return 0;
}

static void report(const char *what, int B, const char *name, const run_stat *s, const run_stat *plain) {
    double tps = s->secs > 0 ? s->tok / s->secs : 0, base = plain->secs > 0 ? plain->tok / plain->secs : 0;
    double ctps = s->cpu > 0 ? s->btok / s->cpu : 0, cbase = plain->cpu > 0 ? plain->btok / plain->cpu : 0;
    printf("%-6s B=%-2d %-6s wall %7.2f tok/s/stream x%.2f | cpu %7.2f tok/cpu-s (all streams) x%.2f", what, B, name,
           tps, base > 0 ? tps / base : 0, ctps, cbase > 0 ? ctps / cbase : 0);
    if (s->verifies)
        printf("  | %.2f drafted, %.2f accepted per verify (%.0f%%)", (double)s->drafted / (double)s->verifies,
               (double)s->accepted / (double)s->verifies, 100.0 * (double)s->accepted / (double)s->drafted);
    printf("\n");
}

int main(int argc, char **argv) {
    const char *mpath = NULL, *ppath = NULL, *dpath = NULL, *blist = "2,4,8", *dpath_out = NULL;
    long threads = 2, n = 64, rounds = 2, k = 8;
    static const struct option lo[] = {{"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, ":m:p:d:t:n:r:k:b:o:h", lo, NULL)) != -1) {
        switch (c) {
        case 'm': mpath = optarg; break;
        case 'p': ppath = optarg; break;
        case 'd': dpath = optarg; break;
        case 'b': blist = optarg; break;
        case 'o': dpath_out = optarg; break;
        case 't':
            if (bench_parse_long("bench_spec", "-t", optarg, 1, 256, &threads)) return 2;
            break;
        case 'n':
            if (bench_parse_long("bench_spec", "-n", optarg, 2, 4096, &n)) return 2;
            break;
        case 'r':
            if (bench_parse_long("bench_spec", "-r", optarg, 1, 100, &rounds)) return 2;
            break;
        case 'k':
            if (bench_parse_long("bench_spec", "-k", optarg, 1, CINFER_SPEC_MAX_K, &k)) return 2;
            break;
        case 'h': fputs(usage, stdout); return 0;
        default: return bench_bad_option("bench_spec", c, argv);
        }
    }
    if (!mpath || !ppath) {
        fprintf(stderr, "bench_spec: -m MODEL and -p PROMPTS are required (see bench_spec --help)\n");
        return 2;
    }
    if (load_prompts(ppath)) {
        fprintf(stderr, "bench_spec: no prompts in %s\n", ppath);
        return 1;
    }
    if (dpath_out && !(g_dump = fopen(dpath_out, "w"))) {
        fprintf(stderr, "bench_spec: cannot write %s\n", dpath_out);
        return 1;
    }
    model *m = NULL, *dm = NULL;
    cf_err err;
    if (model_load(mpath, &m, &err) || (dpath && model_load(dpath, &dm, &err))) {
        fprintf(stderr, "bench_spec: %s\n", err.msg);
        return 1;
    }
    thread_pool *tp = pool_create((int)threads);
    cinfer_engine_options eo = {.max_ctx = 4096, .spec_max_batch = 64, .draft_model = dm};
    cinfer_engine *e = NULL;
    char msg[256];
    if (!tp || cinfer_engine_create(m, tp, &eo, &e, msg, sizeof msg)) {
        fprintf(stderr, "bench_spec: %s\n", tp ? msg : "no thread pool");
        return 1;
    }
    int32_t drafters[3] = {CINFER_SPEC_OFF, CINFER_SPEC_NGRAM, CINFER_SPEC_DRAFT};
    const char *names[3] = {"plain", "ngram", "draft"};
    int nd = dm ? 3 : 2;
    int batches[8], nb = 1;
    batches[0] = 1;
    for (const char *q = blist; *q && nb < 8;) {
        int b = atoi(q);
        if (b >= 1 && b <= MAXB) batches[nb++] = b;
        const char *comma = strchr(q, ',');
        if (!comma) break;
        q = comma + 1;
    }
    printf("# bench_spec -m %s -p %s%s%s -t %ld -n %ld -r %ld -k %ld -b %s (%d prompts)\n", mpath, ppath,
           dpath ? " -d " : "", dpath ? dpath : "", threads, n, rounds, k, blist, g_np);
    for (int bi = 0; bi < nb; bi++) {
        int B = batches[bi];
        run_stat st[3];
        memset(st, 0, sizeof st);
        for (long r = 0; r < rounds; r++) {
            for (int d = 0; d < nd; d++)
                for (int first = 0; first < g_np; first += B)
                    if (run_batch(e, first, B, drafters[d], (int32_t)k, (int32_t)n, &st[d])) {
                        fprintf(stderr, "bench_spec: a request failed\n");
                        return 1;
                    }
            if (g_dump && fclose(g_dump)) fprintf(stderr, "bench_spec: writing %s failed\n", dpath_out);
            g_dump = NULL; /* the first round's plain single streams only */
        }
        for (int d = 0; d < nd; d++) report(B == 1 ? "single" : "batch", B, names[d], &st[d], &st[0]);
        fflush(stdout);
    }
    cinfer_engine_destroy(e);
    pool_destroy(tp);
    model_free(m);
    if (dm) model_free(dm);
    for (int i = 0; i < g_np; i++) free(g_prompts[i]);
    return 0;
}
