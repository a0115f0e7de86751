/* bench_mtp_cost.c - what one MTP draft step costs against one target
 * decode step (not a test): after a prompt of P tokens (target and MTP KV
 * filled), the time of a one-token target forward (hidden state exported,
 * as the engine asks for MTP requests) and of a one-token pass of MTP block 0
 * (logits and its own state, as a chained draft step), alternating, best of
 * REPS. Wall and process CPU time (all threads); on a shared machine the CPU
 * time is the closer proxy for an unloaded machine. A chain of k drafts costs
 * k MTP steps; the catch-up after a verify is one more MTP pass of the
 * accepted rows.
 * With -k K it also times, alternating with the above, a chain of K MTP
 * steps (each a one-token pass on the previous step's own state, as
 * engine_mtp.c drafts) and, on a model with DSpark tensors, one DSpark block
 * of K rows (one K-row pass of the stage plus the Markov and confidence
 * heads of each row, as engine_dspark.c drafts; the same stage weights, so
 * the two differ only in passes vs rows). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/threadpool.h"
#include "base/timeutil.h"
#include "bench_cli.h"
#include "engine/seq_kv.h"
#include "model/model.h"

static const char *usage = "usage: bench_mtp_cost -m MODEL.gguf [-t THREADS] [-p PROMPT] [-r REPS] [-k K]\n"
                           "One-token target forward vs one-token MTP step after a PROMPT-token context\n"
                           "(default 256); best of REPS (default 10), alternating. The model needs an MTP block.\n"
                           "  -k K         also a chain of K MTP steps and (DSpark models) one K-row DSpark block\n"
                           "               (2..16)\n"
                           "  -h, --help   this text\n";

#define BT 128 /* a multiple of every compress ratio */
#define KMAX 16

static double cpu_now(void) {
    struct timespec c;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
    return (double)c.tv_sec + 1e-9 * (double)c.tv_nsec;
}

typedef struct bench_state {
    fwd_ctx *fc;
    seq_kv kv;
    float **mtab, *mkv, *h, *hout, *logits;
    int32_t *toks, *pos, *seq, *rows, plen;
    int64_t hw;
} bench_state;

static int bench_setup(bench_state *s, const model *m, thread_pool *tp, int32_t plen, cf_err *err) {
    const model_hparams *hp = model_get_hparams(m);
    model_mtp_info mi;
    model_mtp_info_get(m, BT, &mi);
    if (mi.n_blocks <= 0) return cf_fail(err, "the model has no MTP block");
    int32_t ctx = plen + KMAX + 1, nb = (ctx + BT - 1) / BT;
    s->plen = plen;
    s->hw = mi.hidden_floats;
    s->fc = fwd_ctx_create(m, tp, plen, ctx, BT, err);
    if (!s->fc || seq_kv_init(&s->kv, m, ctx, BT, plen, err)) return -1;
    s->mkv = calloc((size_t)(mi.block_floats * nb), sizeof(float));
    s->mtab = malloc((size_t)nb * sizeof(float *));
    s->h = calloc((size_t)(plen * s->hw), sizeof(float));
    s->hout = malloc((size_t)(plen * s->hw) * sizeof(float));
    s->logits = malloc((size_t)KMAX * (size_t)hp->n_vocab * sizeof(float));
    s->toks = malloc((size_t)ctx * sizeof(int32_t));
    s->pos = malloc((size_t)ctx * sizeof(int32_t));
    s->seq = calloc((size_t)ctx, sizeof(int32_t));
    s->rows = malloc((size_t)ctx * sizeof(int32_t));
    if (!s->mkv || !s->mtab || !s->h || !s->hout || !s->logits || !s->toks || !s->pos || !s->seq || !s->rows)
        return cf_fail(err, "out of memory");
    for (int32_t i = 0; i < nb; i++) s->mtab[i] = s->mkv + mi.block_floats * i;
    for (int32_t i = 0; i < ctx; i++) {
        s->toks[i] = 3 + (int32_t)((i * 2654435761u) % (uint32_t)(hp->n_vocab - 3));
        s->pos[i] = i;
        s->rows[i] = i;
    }
    /* the prompt: the target exports every state, the MTP block takes them shifted by one */
    int32_t last = plen - 1;
    fwd_batch b = {.n_tokens = plen,
                   .tokens = s->toks,
                   .pos = s->pos,
                   .seq = s->seq,
                   .seqs = &s->kv.seq,
                   .n_seqs = 1,
                   .n_out = 1,
                   .out_rows = &last,
                   .n_hidden = plen,
                   .hidden_rows = s->rows,
                   .hidden = s->hout};
    if (model_forward(s->fc, &b, s->logits, err)) return -1;
    memcpy(s->h + s->hw, s->hout, (size_t)((plen - 1) * s->hw) * sizeof(float));
    fwd_seq ms = {.blocks = s->mtab, .n_blocks = nb};
    b.seqs = &ms;
    b.n_hidden = 0;
    return model_mtp_forward(s->fc, 0, &b, s->h, s->logits, err);
}

/* One-token pass at position plen: the target's (state exported) or MTP block 0's. */
/* A one-token batch at position plen + at of sequence table seqs (row 0: logits and state exported). */
static fwd_batch one_row(bench_state *s, int32_t at, fwd_seq *seqs, int32_t *r0) {
    return (fwd_batch){.n_tokens = 1,
                       .tokens = s->toks + s->plen + at,
                       .pos = s->pos + s->plen + at,
                       .seq = s->seq,
                       .seqs = seqs,
                       .n_seqs = 1,
                       .n_out = 1,
                       .out_rows = r0,
                       .n_hidden = 1,
                       .hidden_rows = r0,
                       .hidden = s->hout};
}

static int bench_step(bench_state *s, bool mtp, cf_err *err) {
    int32_t r0 = 0, nb = (s->plen + KMAX + 1 + BT - 1) / BT;
    fwd_seq ms = {.blocks = s->mtab, .n_blocks = nb};
    fwd_batch b = one_row(s, 0, mtp ? &ms : &s->kv.seq, &r0);
    return mtp ? model_mtp_forward(s->fc, 0, &b, s->h, s->logits, err) : model_forward(s->fc, &b, s->logits, err);
}

/* A chain of k one-token MTP passes at plen .. plen + k - 1, each on the previous pass's own state. */
static int bench_chain(bench_state *s, int32_t k, cf_err *err) {
    int32_t r0 = 0, nb = (s->plen + KMAX + 1 + BT - 1) / BT;
    fwd_seq ms = {.blocks = s->mtab, .n_blocks = nb};
    for (int32_t j = 0; j < k; j++) {
        fwd_batch b = one_row(s, j, &ms, &r0);
        if (model_mtp_forward(s->fc, 0, &b, j ? s->hout : s->h, s->logits, err)) return -1;
    }
    return 0;
}

/* One DSpark block of k rows at plen .. plen + k - 1 (all on the same context state), then its heads. */
static int bench_block(bench_state *s, int64_t V, int32_t k, cf_err *err) {
    int32_t nb = (s->plen + KMAX + 1 + BT - 1) / BT;
    fwd_seq ms = {.blocks = s->mtab, .n_blocks = nb};
    fwd_batch b = {.n_tokens = k,
                   .tokens = s->toks + s->plen,
                   .pos = s->pos + s->plen,
                   .seq = s->seq,
                   .seqs = &ms,
                   .n_seqs = 1,
                   .n_out = k,
                   .out_rows = s->rows,
                   .n_hidden = k,
                   .hidden_rows = s->rows,
                   .hidden = s->hout};
    for (int32_t j = 1; j < k; j++) memcpy(s->h + j * s->hw, s->h, (size_t)s->hw * sizeof(float));
    if (model_mtp_forward(s->fc, 0, &b, s->h, s->logits, err)) return -1;
    int32_t prev = s->toks[s->plen];
    for (int32_t j = 0; j < k; j++) {
        float c;
        if (model_dspark_head(s->fc, s->hout + j * s->hw, prev, s->logits + j * V, &c, err)) return -1;
        prev = s->toks[s->plen + j + 1];
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *mpath = NULL;
    long threads = 2, plen = 256, reps = 10, kb = 0;
    static const struct option lo[] = {{"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, ":m:t:p:r:k:h", lo, NULL)) != -1) {
        switch (c) {
        case 'm': mpath = optarg; break;
        case 't':
            if (bench_parse_long("bench_mtp_cost", "-t", optarg, 1, 256, &threads)) return 2;
            break;
        case 'p':
            if (bench_parse_long("bench_mtp_cost", "-p", optarg, 2, 8192, &plen)) return 2;
            break;
        case 'r':
            if (bench_parse_long("bench_mtp_cost", "-r", optarg, 1, 1000, &reps)) return 2;
            break;
        case 'k':
            if (bench_parse_long("bench_mtp_cost", "-k", optarg, 2, KMAX, &kb)) return 2;
            break;
        case 'h': fputs(usage, stdout); return 0;
        default: return bench_bad_option("bench_mtp_cost", c, argv);
        }
    }
    if (!mpath) {
        fprintf(stderr, "bench_mtp_cost: -m MODEL is required (see bench_mtp_cost --help)\n");
        return 2;
    }
    model *m = NULL;
    cf_err err;
    if (model_load(mpath, &m, &err)) {
        fprintf(stderr, "bench_mtp_cost: %s\n", err.msg);
        return 1;
    }
    thread_pool *tp = pool_create((int)threads);
    bench_state s = {0};
    if (!tp || bench_setup(&s, m, tp, (int32_t)plen, &err)) {
        fprintf(stderr, "bench_mtp_cost: %s\n", tp ? err.msg : "no thread pool");
        return 1;
    }
    model_dspark_info di;
    model_dspark_info_get(m, &di);
    int n_pass = kb == 0 ? 2 : di.block_size > 0 ? 4 : 3;
    double best[4] = {1e30, 1e30, 1e30, 1e30}, best_cpu[4] = {1e30, 1e30, 1e30, 1e30};
    for (long r = 0; r < reps; r++)
        for (int k = 0; k < n_pass; k++) {
            double c0 = cpu_now(), t0 = time_now();
            int rc = k < 2    ? bench_step(&s, k == 1, &err)
                     : k == 2 ? bench_chain(&s, (int32_t)kb, &err)
                              : bench_block(&s, model_get_hparams(m)->n_vocab, (int32_t)kb, &err);
            if (rc) {
                fprintf(stderr, "bench_mtp_cost: %s\n", err.msg);
                return 1;
            }
            double dt = time_now() - t0, dc = cpu_now() - c0;
            if (dt < best[k]) best[k] = dt;
            if (dc < best_cpu[k]) best_cpu[k] = dc;
        }
    printf("# bench_mtp_cost -m %s -t %ld -p %ld -r %ld", mpath, threads, plen, reps);
    if (kb) printf(" -k %ld%s", kb, di.block_size > 0 ? " (DSpark model)" : "");
    printf("\n");
    printf("pass           wall ms  cpu ms\n");
    printf("target step    %7.3f  %6.3f\n", best[0] * 1e3, best_cpu[0] * 1e3);
    printf("MTP step       %7.3f  %6.3f\n", best[1] * 1e3, best_cpu[1] * 1e3);
    printf("MTP / target   %7.2f  %6.2f\n", best[1] / best[0], best_cpu[1] / best_cpu[0]);
    if (n_pass > 2)
        printf("MTP chain k=%-2ld %7.3f  %6.3f  (%.2f target steps)\n", kb, best[2] * 1e3, best_cpu[2] * 1e3,
               best_cpu[2] / best_cpu[0]);
    if (n_pass > 3) {
        printf("DSpark blk k=%-2ld%7.3f  %6.3f  (%.2f target steps)\n", kb, best[3] * 1e3, best_cpu[3] * 1e3,
               best_cpu[3] / best_cpu[0]);
        printf("block / chain  %7.2f  %6.2f\n", best[3] / best[2], best_cpu[3] / best_cpu[2]);
    }
    seq_kv_release(&s.kv);
    fwd_ctx_free(s.fc);
    free(s.mkv), free(s.mtab), free(s.h), free(s.hout), free(s.logits);
    free(s.toks), free(s.pos), free(s.seq), free(s.rows);
    pool_destroy(tp);
    model_free(m);
    return 0;
}
