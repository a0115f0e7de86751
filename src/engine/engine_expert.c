/* engine_expert.c - cinfer_engine_expert_load (cinfer/engine.h): the MoE
 * expert load counters of the engine's forward context. The counters are
 * atomics updated by the thread that runs the forward passes
 * (model/arch/deepseek2_moe.c for deepseek2), so this reads them without the engine lock. Callers:
 * the server's /metrics and expert-parallel rebalancing. A model without
 * experts answers 0 (the architecture has no expert_load hook). */
#include "engine/engine_internal.h"

int cinfer_engine_expert_load(cinfer_engine *e, int32_t layer, uint64_t *counts, int32_t cap) {
    if (!e || !e->fc || (cap > 0 && !counts)) return -1;
    return fwd_ctx_expert_load(e->fc, layer, counts, cap < 0 ? 0 : cap);
}
