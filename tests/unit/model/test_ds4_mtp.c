/* test_ds4_mtp.c - the deepseek4 MTP block is loaded and callable: on an
 * mkmodel model with one MTP block (ratio 4: its own compressor and
 * indexer), the main pass's residual streams feed ds4_mtp_forward for the
 * shifted tokens; all logits are finite and differ from the main head's;
 * the prompt in one MTP batch and token by token (its own KV blocks) give
 * the same logits (1e-5) and argmax, so the block can run incrementally for
 * speculative decoding; a bad MTP index is an error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/seq_kv.h"
#include "model/arch/deepseek4.h"
#include "model/mkmodel.h"
#include "testutil.h"
#include "testutil_ds4.h"

#define T 40
#define BT 128 /* a multiple of the ratios */

static int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

static float *blocks_for(int64_t floats, int n, float **ptrs) {
    float *mem = calloc((size_t)(floats * n), sizeof(float));
    for (int i = 0; mem && i < n; i++) ptrs[i] = mem + floats * i;
    return mem;
}

int main(void) {
    if (access(shared_path("models/stories260K.gguf"), R_OK)) return tu_missing_fixture("models/stories260K.gguf");
    mkmodel_opts o = tu_ds4_tiny(2, "4,128,4", 9);
    o.index_topk = 3;
    o.experts = 4;
    o.mtp_layers = 1;
    char path[256];
    temp_path(path, sizeof path, "ds4-mtp.gguf");
    cf_err err = {0};
    model *m = NULL;
    int rc = mkmodel_write(&o, path, &err);
    if (rc == 0) rc = model_load(path, &m, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc) return test_finish();
    const model_hparams *hp = model_get_hparams(m);
    CHECK(hp->n_layer == 2 && hp->ds4_n_mtp == 1 && hp->ds4_ratio[2] == 4);
    int nv = hp->n_vocab, nblk = (T + BT - 1) / BT;
    int64_t W = (int64_t)hp->ds4_hc * hp->n_embd;
    thread_pool *pool = pool_create(2);
    ds4_fwd *c = ds4_fwd_create(m, pool, T, T, BT, &err);
    CHECKF(c != NULL, "%s", err.msg);
    float *mtp_ptr[8], *mtp2_ptr[8];
    seq_kv kv;
    CHECKF(seq_kv_init(&kv, m, T, BT, T, &err) == 0, "%s", err.msg);
    float *mkv = blocks_for(ds4_mtp_block_floats(m, 0, BT), nblk, mtp_ptr);
    float *mkv2 = blocks_for(ds4_mtp_block_floats(m, 0, BT), nblk, mtp2_ptr);
    int32_t tok[T], pos[T], seq[T] = {0}, rows[T];
    for (int i = 0; i < T; i++) tok[i] = 3 + (i * 37) % 500, pos[i] = i, rows[i] = i;
    float *main_logits = malloc(sizeof(float) * T * nv), *h = malloc(sizeof(float) * (size_t)(T * W));
    float *all = malloc(sizeof(float) * T * nv), *one = malloc(sizeof(float) * nv);
    fwd_batch b = {.n_tokens = T,
                   .tokens = tok,
                   .pos = pos,
                   .seq = seq,
                   .seqs = &kv.seq,
                   .n_seqs = 1,
                   .n_out = T,
                   .out_rows = rows};
    CHECK(c && ds4_forward(c, &b, main_logits, &err) == 0);
    if (c) memcpy(h, ds4_fwd_streams(c), sizeof(float) * (size_t)(T * W));
    /* MTP: position p predicts token p + 2 from h[p] and token p + 1 */
    fwd_seq ms = {.blocks = mtp_ptr, .n_blocks = nblk};
    fwd_batch mb = {.n_tokens = T - 1,
                    .tokens = tok + 1,
                    .pos = pos,
                    .seq = seq,
                    .seqs = &ms,
                    .n_seqs = 1,
                    .n_out = T - 1,
                    .out_rows = rows};
    CHECK(c && ds4_mtp_forward(c, 0, &mb, h, all, &err) == 0);
    int finite = 1, differs = 0;
    for (int i = 0; i < (T - 1) * nv; i++) finite &= isfinite(all[i]) != 0;
    for (int i = 0; i < (T - 1) * nv; i++) differs |= fabsf(all[i] - main_logits[i]) > 1e-3f;
    CHECK(finite && differs);
    fwd_seq ms2 = {.blocks = mtp2_ptr, .n_blocks = nblk};
    double worst = 0;
    int same_argmax = 1;
    for (int p = 0; c && p < T - 1; p++) {
        int32_t zero = 0;
        fwd_batch ob = {.n_tokens = 1,
                        .tokens = tok + 1 + p,
                        .pos = pos + p,
                        .seq = seq,
                        .seqs = &ms2,
                        .n_seqs = 1,
                        .n_out = 1,
                        .out_rows = &zero};
        CHECK(ds4_mtp_forward(c, 0, &ob, h + p * W, one, &err) == 0);
        for (int v = 0; v < nv; v++) worst = fmax(worst, fabs(one[v] - all[(int64_t)p * nv + v]));
        same_argmax &= argmax(one, nv) == argmax(all + (int64_t)p * nv, nv);
    }
    CHECKF(worst < 1e-5 && same_argmax, "MTP token by token vs batch: %g, argmax same %d", worst, same_argmax);
    fprintf(stderr, "MTP incremental vs batch: max |diff| %.2e\n", worst);
    CHECK(c && ds4_mtp_forward(c, 1, &mb, h, all, &err) != 0 && strstr(err.msg, "MTP block 1"));
    ds4_fwd_free(c);
    seq_kv_release(&kv);
    free(mkv), free(mkv2), free(main_logits), free(h), free(all), free(one);
    pool_destroy(pool);
    model_free(m);
    unlink(path);
    return test_finish();
}
