/* sim_profile.c - see sim_profile.h. */
#include "sim/sim_profile.h"

#include <stdio.h>
#include <string.h>

#include "sim/sim_json.h"

int sim_hw_from_json(json_t *j, const char *file, sim_hw *o, cf_err *err) {
    static const char *const known[] = {"name",
                                        "description",
                                        "flops_fp8",
                                        "flops_bf16",
                                        "hbm_bytes",
                                        "hbm_bw",
                                        "scaleup_bw",
                                        "scaleout_bw",
                                        "ssd_bw",
                                        "accel_per_node",
                                        "mfu",
                                        "mbu",
                                        "net_eff",
                                        "step_overhead_s",
                                        "request_overhead_s",
                                        "prompt_token_overhead_s",
                                        NULL};
    sim_jctx c = {.file = file, .section = "", .need_source = true};
    *o = (sim_hw){0};
    if (sim_jknown(&c, j, known, err)) return -1;
    sim_jctx plain = c;
    plain.need_source = false;
    if (sim_jstr(&plain, j, "name", o->name, sizeof o->name, err)) return -1;
    if (sim_jnum(&c, j, "flops_fp8", 1e9, 1e18, &o->flops_fp8, err) ||
        sim_jnum(&c, j, "flops_bf16", 1e9, 1e18, &o->flops_bf16, err) ||
        sim_jnum(&c, j, "hbm_bytes", 1e6, 1e14, &o->hbm_bytes, err) ||
        sim_jnum(&c, j, "hbm_bw", 1e6, 1e15, &o->hbm_bw, err) ||
        sim_jnum(&c, j, "scaleup_bw", 1e6, 1e14, &o->scaleup_bw, err) ||
        sim_jnum(&c, j, "scaleout_bw", 1e6, 1e14, &o->scaleout_bw, err) ||
        sim_jnum(&c, j, "ssd_bw", 1e6, 1e14, &o->ssd_bw, err) ||
        sim_jint(&c, j, "accel_per_node", 1, 1024, &o->accel_per_node, err) ||
        sim_jnum(&c, j, "mfu", 1e-4, 1, &o->mfu, err) || sim_jnum(&c, j, "mbu", 1e-4, 1, &o->mbu, err) ||
        sim_jnum(&c, j, "net_eff", 1e-4, 1, &o->net_eff, err) ||
        sim_jnum(&c, j, "step_overhead_s", 0, 10, &o->step_overhead_s, err) ||
        sim_jnum_opt(&c, j, "request_overhead_s", 0, 60, 0, &o->request_overhead_s, err) ||
        sim_jnum_opt(&c, j, "prompt_token_overhead_s", 0, 1, 0, &o->prompt_token_overhead_s, err))
        return -1;
    return 0;
}

static int read_kinds(const sim_jctx *c, json_t *arr, sim_model *o, cf_err *err) {
    static const char *const known[] = {"name", "bytes_per_token", "compression", "window", NULL};
    if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > SIM_MAX_CACHE_KINDS)
        return cf_fail(err, "%s: cache_kinds: must be an array of 1..%d objects", c->file, SIM_MAX_CACHE_KINDS);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *k = json_array_get(arr, i);
        char sec[48];
        snprintf(sec, sizeof sec, "cache_kinds[%zu]", i);
        sim_jctx kc = {.file = c->file, .section = sec, .need_source = true}, plain = kc;
        plain.need_source = false;
        if (!json_is_object(k)) return cf_fail(err, "%s: %s: must be an object", c->file, sec);
        sim_cache_kind *ck = &o->kinds[o->n_kinds++];
        if (sim_jknown(&kc, k, known, err) || sim_jstr(&plain, k, "name", ck->name, sizeof ck->name, err) ||
            sim_jnum(&kc, k, "bytes_per_token", 0, 1e9, &ck->bytes_per_token, err) ||
            sim_jnum_opt(&kc, k, "compression", 1, 1e6, 1, &ck->compression, err) ||
            sim_jint_opt(&kc, k, "window", 0, 1 << 24, 0, &ck->window, err))
            return -1;
        if (ck->window > 0) {
            o->window_state_bytes += (double)ck->window * ck->bytes_per_token;
            if (ck->window > o->window_tokens) o->window_tokens = ck->window;
        } else {
            o->kv_bytes_per_token += ck->bytes_per_token / ck->compression;
        }
    }
    if (o->kv_bytes_per_token <= 0) return cf_fail(err, "%s: cache_kinds: no per-token kind with bytes > 0", c->file);
    return 0;
}

int sim_model_from_json(json_t *j, const char *file, sim_model *o, cf_err *err) {
    static const char *const known[] = {"name",
                                        "description",
                                        "total_params",
                                        "active_params",
                                        "dense_params",
                                        "weight_bytes",
                                        "n_layer",
                                        "n_moe_layer",
                                        "n_embd",
                                        "n_expert",
                                        "n_expert_used",
                                        "attn_flops_per_ctx",
                                        "attn_flops_per_ctx_prefill",
                                        "act_bytes",
                                        "route_nodes",
                                        "cache_kinds",
                                        NULL};
    sim_jctx c = {.file = file, .section = "", .need_source = true}, plain = c;
    plain.need_source = false;
    *o = (sim_model){0};
    if (sim_jknown(&c, j, known, err) || sim_jstr(&plain, j, "name", o->name, sizeof o->name, err)) return -1;
    if (sim_jnum(&c, j, "total_params", 1e3, 1e14, &o->total_params, err) ||
        sim_jnum(&c, j, "active_params", 1e3, 1e14, &o->active_params, err) ||
        sim_jnum(&c, j, "dense_params", 1e3, 1e14, &o->dense_params, err) ||
        sim_jnum(&c, j, "weight_bytes", 0.25, 8, &o->weight_bytes, err) ||
        sim_jint(&c, j, "n_layer", 1, 10000, &o->n_layer, err) ||
        sim_jint(&c, j, "n_moe_layer", 0, 10000, &o->n_moe_layer, err) ||
        sim_jint(&c, j, "n_embd", 1, 1 << 20, &o->n_embd, err) ||
        sim_jint(&c, j, "n_expert", 0, 1 << 16, &o->n_expert, err) ||
        sim_jint(&c, j, "n_expert_used", 0, 1 << 16, &o->n_expert_used, err) ||
        sim_jnum(&c, j, "attn_flops_per_ctx", 0, 1e12, &o->attn_flops_per_ctx, err) ||
        sim_jnum_opt(&c, j, "attn_flops_per_ctx_prefill", 0, 1e12, o->attn_flops_per_ctx,
                     &o->attn_flops_per_ctx_prefill, err) ||
        sim_jnum(&c, j, "act_bytes", 0.5, 8, &o->act_bytes, err) ||
        sim_jint_opt(&c, j, "route_nodes", 0, 1 << 16, 0, &o->route_nodes, err))
        return -1;
    if (o->active_params > o->total_params || o->dense_params > o->active_params)
        return cf_fail(err, "%s: active_params: needs dense_params <= active_params <= total_params", file);
    if (o->n_moe_layer > o->n_layer || o->n_expert_used > o->n_expert)
        return cf_fail(err, "%s: n_moe_layer: needs n_moe_layer <= n_layer and n_expert_used <= n_expert", file);
    return read_kinds(&c, json_object_get(j, "cache_kinds"), o, err);
}

int sim_hw_load(const char *path, sim_hw *out, cf_err *err) {
    json_t *j = sim_jload(path, err);
    if (!j) return -1;
    int rc = sim_hw_from_json(j, path, out, err);
    json_decref(j);
    return rc;
}

int sim_model_load(const char *path, sim_model *out, cf_err *err) {
    json_t *j = sim_jload(path, err);
    if (!j) return -1;
    int rc = sim_model_from_json(j, path, out, err);
    json_decref(j);
    return rc;
}
