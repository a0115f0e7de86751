/* cmd_bench_replay.c - `cinfer bench replay`: how far bounded replay
 * (docs/engine.md "Bounded replay") moves the next-token distribution of a
 * model with sliding-window layers, as a function of the replay length W.
 *
 * For each prompt length L and each W, over --prompts random prompts: the
 * exact next-token logits after L tokens, and those after a replay as the
 * engine does it: the hit is the full 16-token blocks before the last token
 * (H = floor((L - 1) / 16) * 16), the replay starts at
 * R = floor((H - W) / 16) * 16 with window layers clamped to R and the cached
 * full-layer rows below H kept (fwd_seq.replay_from / keep_below). Printed:
 * mean and max KL(exact || replayed) in nats and the top-1 agreement. W with
 * R <= 0 is exact (no replay) and printed as such. One gen_session per prompt:
 * exact pass first, then each replay rewinds to R (rows the replay reads below
 * R are never attended; rows from R on are rewritten by the replay pass before
 * they are read). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli_opt.h"
#include "commands.h"
#include "engine/generate.h"
#include "engine/kv_pool.h"
#include "model/model.h"

#define REPLAY_MAX_LIST 16
#define REPLAY_BT 16

typedef struct replay_opts {
    const char *model, *lengths, *windows;
    long long prompts, threads, seed;
} replay_opts;

static int parse_list(const char *s, long long *out, int *n) {
    *n = 0;
    while (s && *s) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 1 || v > (1 << 20) || *n == REPLAY_MAX_LIST || (*end && *end != ',')) return -1;
        out[(*n)++] = v;
        s = *end ? end + 1 : end;
    }
    return *n > 0 ? 0 : -1;
}

/* log-softmax KL(p || q) over n logits, and whether both argmaxes agree. */
static double kl_logits(const float *p, const float *q, int32_t n, bool *same_top) {
    double mp = p[0], mq = q[0];
    int32_t ap = 0, aq = 0;
    for (int32_t i = 1; i < n; i++) {
        if (p[i] > mp) mp = p[i], ap = i;
        if (q[i] > mq) mq = q[i], aq = i;
    }
    double sp = 0, sq = 0;
    for (int32_t i = 0; i < n; i++) sp += exp(p[i] - mp), sq += exp(q[i] - mq);
    double lsp = log(sp), lsq = log(sq), kl = 0;
    for (int32_t i = 0; i < n; i++) {
        double lp = p[i] - mp - lsp, lq = q[i] - mq - lsq;
        kl += exp(lp) * (lp - lq);
    }
    *same_top = ap == aq;
    return kl > 0 ? kl : 0;
}

typedef struct replay_acc {
    double kl_sum, kl_max;
    int32_t top1, n;
} replay_acc;

/* One prompt of length len: exact logits, then one replay per window. */
static int replay_prompt(gen_session *g, const int32_t *prompt, int32_t len, const long long *w, int n_w,
                         replay_acc *acc, float *exact, int32_t n_vocab, cf_err *err) {
    g->n_past = 0;
    g->kv.seq.replay_from = g->kv.seq.keep_below = 0;
    if (gen_feed(g, prompt, len, NULL, err)) return -1;
    memcpy(exact, g->logits, (size_t)n_vocab * sizeof(float));
    int32_t hit = (len - 1) / REPLAY_BT * REPLAY_BT;
    for (int i = 0; i < n_w; i++) {
        int32_t from = hit - (int32_t)w[i] > 0 ? (hit - (int32_t)w[i]) / REPLAY_BT * REPLAY_BT : 0;
        if (from <= 0) continue; /* a replay from 0 is the exact computation */
        g->n_past = from;
        g->kv.seq.replay_from = from;
        g->kv.seq.keep_below = hit;
        if (gen_feed(g, prompt + from, len - from, NULL, err)) return -1;
        bool same;
        double kl = kl_logits(exact, g->logits, n_vocab, &same);
        acc[i].kl_sum += kl;
        if (kl > acc[i].kl_max) acc[i].kl_max = kl;
        acc[i].top1 += same;
        acc[i].n++;
    }
    return 0;
}

static int run_replay(const replay_opts *o, const model *m, thread_pool *tp, const long long *lens, int n_l,
                      const long long *w, int n_w) {
    kv_spec spec;
    cf_err err = {0};
    if (kv_spec_from_model(m, &spec, &err)) return cli_fail("%s", err.msg);
    if (kv_spec_max_window(&spec) == 0) return cli_fail("bench replay: %s has no sliding-window layers", o->model);
    int32_t n_vocab = model_get_hparams(m)->n_vocab, max_len = 0;
    for (int i = 0; i < n_l; i++) max_len = lens[i] > max_len ? (int32_t)lens[i] : max_len;
    int32_t *prompt = malloc((size_t)max_len * sizeof(int32_t));
    float *exact = malloc((size_t)n_vocab * sizeof(float));
    gen_session g;
    if (!prompt || !exact || gen_init(&g, m, tp, max_len, max_len, &err)) {
        free(prompt);
        free(exact);
        return cli_fail("bench replay: %s", err.msg[0] ? err.msg : "out of memory");
    }
    printf("# cinfer bench replay: %s (largest window %d), %lld prompts per length, seed %lld\n", o->model,
           kv_spec_max_window(&spec), o->prompts, o->seed);
    printf("%8s %8s %10s %12s %12s %8s\n", "prompt", "W", "replayed", "mean_KL", "max_KL", "top1");
    uint64_t x = (uint64_t)o->seed * 2654435761u + 1;
    int rc = 0;
    for (int li = 0; li < n_l && !rc; li++) {
        replay_acc acc[REPLAY_MAX_LIST] = {{0}};
        for (long long p = 0; p < o->prompts && !rc; p++) {
            for (int32_t j = 0; j < lens[li]; j++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                prompt[j] = 3 + (int32_t)((x >> 11) % (uint64_t)(n_vocab - 3));
            }
            rc = replay_prompt(&g, prompt, (int32_t)lens[li], w, n_w, acc, exact, n_vocab, &err);
        }
        int32_t hit = ((int32_t)lens[li] - 1) / REPLAY_BT * REPLAY_BT;
        for (int i = 0; i < n_w && !rc; i++) {
            int32_t from = hit - (int32_t)w[i] > 0 ? (hit - (int32_t)w[i]) / REPLAY_BT * REPLAY_BT : 0;
            if (acc[i].n == 0) printf("%8lld %8lld %10s %12s %12s %8s\n", lens[li], w[i], "exact", "0", "0", "1");
            else
                printf("%8lld %8lld %10d %12.4g %12.4g %8.3f\n", lens[li], w[i], hit - from, acc[i].kl_sum / acc[i].n,
                       acc[i].kl_max, (double)acc[i].top1 / acc[i].n);
        }
    }
    gen_release(&g);
    free(prompt);
    free(exact);
    return rc ? cli_fail("bench replay: %s", err.msg) : 0;
}

int bench_replay(int argc, char **argv) {
    replay_opts o = {.lengths = "64,256,1024", .windows = "16,32,64,128,256,512,1024", .prompts = 4, .seed = 1};
    const cli_opt t[] = {
        {"model", 'm', "FILE", "GGUF model with sliding-window layers (required)", CLI_STR(&o.model)},
        {"lengths", 0, "N,N,...", "prompt lengths (default 64,256,1024)", CLI_STR(&o.lengths)},
        {"windows", 0, "W,W,...", "replay lengths (default 16,32,64,128,256,512,1024)", CLI_STR(&o.windows)},
        {"prompts", 0, "N", "random prompts per length (default 4)", CLI_NUM(&o.prompts, 1, 1 << 16)},
        {"seed", 0, "N", "prompt seed (default 1)", CLI_NUM(&o.seed, 0, 1ll << 40)},
        {"threads", 't', "N", "compute threads (default: one per core)", CLI_NUM(&o.threads, 1, 1024)},
    };
    cli_cmd c = {.name = "bench replay",
                 .usage = "cinfer bench replay -m MODEL.gguf [options]",
                 .about = "Next-token KL divergence and top-1 agreement of bounded replay vs exact resumption.",
                 .opts = t,
                 .n_opts = sizeof t / sizeof t[0]};
    int pos, rc = cli_parse(&c, argc, argv, &pos);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    if (pos < argc) return cli_usage_error(&c, "unexpected argument '%s'", argv[pos]);
    if (!o.model) return cli_usage_error(&c, "-m MODEL.gguf is required");
    long long lens[REPLAY_MAX_LIST], w[REPLAY_MAX_LIST];
    int n_l, n_w;
    if (parse_list(o.lengths, lens, &n_l) || lens[0] < 2)
        return cli_usage_error(&c, "--lengths: up to %d comma-separated lengths >= 2", REPLAY_MAX_LIST);
    for (int i = 0; i < n_l; i++)
        if (lens[i] < 2) return cli_usage_error(&c, "--lengths: every length must be >= 2");
    if (parse_list(o.windows, w, &n_w))
        return cli_usage_error(&c, "--windows: up to %d comma-separated positive numbers", REPLAY_MAX_LIST);
    cf_err err = {0};
    model *m;
    if (model_load(o.model, &m, &err)) return cli_fail("%s", err.msg);
    thread_pool *tp = pool_create((int)o.threads);
    if (!tp) {
        model_free(m);
        return cli_fail("cannot start compute threads");
    }
    rc = run_replay(&o, m, tp, lens, n_l, w, n_w);
    pool_destroy(tp);
    model_free(m);
    return rc;
}
