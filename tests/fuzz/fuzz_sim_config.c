/* fuzz_sim_config.c - libFuzzer harness for the cluster simulator's config
 * reader (sim_config_parse, with the profile and price readers it calls for
 * inline objects; no profile directory, so names are errors). Checks: never
 * crashes, leaks or reads out of bounds; an error is one line naming the
 * file; an accepted config satisfies the reader's promises (pools that hold
 * the model, positive sizes, dp <= accelerators, per-token KV > 0, per-request
 * overheads >= 0). Seeds:
 * tests/fuzz/corpus/sim_config/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_config.h"

static void check_pool(const sim_pool_cfg *p, int may_be_empty) {
    if (may_be_empty && p->instances == 0) return;
    if (p->instances < 1 || p->accels < 1 || p->dp < 1 || p->dp > p->accels || p->kv_blocks < 1 ||
        p->block_tokens < 1 || p->max_seqs < 1 || p->max_batch_tokens < 1 || p->hw.flops_fp8 <= 0 ||
        p->hw.hbm_bw <= 0 || p->hw.mfu <= 0 || p->hw.request_overhead_s < 0 || p->hw.prompt_token_overhead_s < 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sim_config c;
    cf_err err = {0};
    if (sim_config_parse("fuzz.json", (const char *)data, size, NULL, &c, &err)) {
        if (strncmp(err.msg, "fuzz.json", 9) || strchr(err.msg, '\n')) abort();
        return 0;
    }
    check_pool(&c.prefill, 0);
    check_pool(&c.decode, 1);
    if (c.model.kv_bytes_per_token <= 0 || c.model.active_params > c.model.total_params) abort();
    if (c.store_on && (c.store_capacity_bytes <= 0 || c.store_read_bw <= 0 || c.store_block_tokens < 1)) abort();
    return 0;
}
