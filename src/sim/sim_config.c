/* sim_config.c - see sim_config.h. */
#include "sim/sim_config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_json.h"
#include "store/store_gc.h"

/* A named profile (file under profiles/<dir>/) or an inline object. */
static json_t *profile_json(const sim_jctx *c, json_t *obj, const char *field, const char *dir, const char *profiles,
                            char *path, size_t cap, cf_err *err) {
    json_t *v = json_object_get(obj, field);
    if (!v) {
        cf_fail(err, "%s: %s%s%s: missing", c->file, c->section, c->section[0] ? "." : "", field);
        return NULL;
    }
    if (json_is_object(v)) {
        snprintf(path, cap, "%s", c->file);
        return json_incref(v);
    }
    const char *name = json_string_value(v);
    bool ok = name && name[0] && strlen(name) < SIM_NAME_MAX && strlen(name) == json_string_length(v);
    for (const char *p = name; ok && *p; p++)
        ok = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.';
    if (!ok || name[0] == '.') {
        cf_fail(err, "%s: %s%s%s: must be a profile name ([a-z0-9._-]) or an inline object", c->file, c->section,
                c->section[0] ? "." : "", field);
        return NULL;
    }
    if (!profiles) {
        cf_fail(err, "%s: %s%s%s: unknown %s '%s' (no profile directory)", c->file, c->section,
                c->section[0] ? "." : "", field, field, name);
        return NULL;
    }
    snprintf(path, cap, "%s/%s/%s.json", profiles, dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        cf_fail(err, "%s: %s%s%s: unknown %s '%s' (no %s)", c->file, c->section, c->section[0] ? "." : "", field, field,
                name, path);
        return NULL;
    }
    fclose(f);
    return sim_jload(path, err);
}

static int read_pool(const sim_jctx *top, json_t *root, const char *name, bool decode, const char *profiles,
                     const sim_model *m, sim_pool_cfg *p, cf_err *err) {
    static const char *const known[] = {"hardware",          "instances",
                                        "accelerators",      "dp",
                                        "max_batch_tokens",  "max_seqs",
                                        "block_tokens",      "min_prefill_chunk",
                                        "kv_fraction",       "prefix_cache_fraction",
                                        "spec_draft",        "spec_accept",
                                        "overlap_comm",      "eplb",
                                        "redundant_experts", "expert_skew",
                                        "async_scheduling",  NULL};
    sim_jctx c = {.file = top->file, .section = name};
    json_t *o;
    if (sim_jobj(top, root, name, !decode, &o, err)) return -1;
    *p = (sim_pool_cfg){0};
    if (!o) return 0; /* decode pool absent: colocated */
    if (sim_jknown(&c, o, known, err)) return -1;
    if (sim_jint(&c, o, "instances", decode ? 0 : 1, 1 << 20, &p->instances, err)) return -1;
    if (decode && p->instances == 0) return 0;
    char path[1024];
    json_t *hw = profile_json(&c, o, "hardware", "hw", profiles, path, sizeof path, err);
    if (!hw) return -1;
    int rc = sim_hw_from_json(hw, path, &p->hw, err);
    json_decref(hw);
    if (rc) return -1;
    long ov = 0, eplb = 1, async = 0;
    if (sim_jint(&c, o, "accelerators", 1, 1 << 16, &p->accels, err) ||
        sim_jint_opt(&c, o, "dp", 1, 1 << 16, p->accels, &p->dp, err) ||
        sim_jint_opt(&c, o, "max_batch_tokens", 1, 1 << 24, decode ? 256 : 8192, &p->max_batch_tokens, err) ||
        sim_jint_opt(&c, o, "max_seqs", 1, 1 << 20, decode ? 128 : 64, &p->max_seqs, err) ||
        sim_jint_opt(&c, o, "block_tokens", 1, 1 << 16, 64, &p->block_tokens, err) ||
        sim_jint_opt(&c, o, "min_prefill_chunk", 1, 1 << 20, 16, &p->min_prefill_chunk, err) ||
        sim_jnum_opt(&c, o, "kv_fraction", 0.001, 1, 0.9, &p->kv_fraction, err) ||
        sim_jnum_opt(&c, o, "prefix_cache_fraction", 0, 1, 0.5, &p->prefix_cache_fraction, err) ||
        sim_jint_opt(&c, o, "spec_draft", 0, 16, 0, &p->spec_draft, err) ||
        sim_jnum_opt(&c, o, "spec_accept", 0, 1, 0, &p->spec_accept, err) ||
        sim_jint_opt(&c, o, "overlap_comm", 0, 1, 1, &ov, err) || sim_jint_opt(&c, o, "eplb", 0, 1, 1, &eplb, err) ||
        sim_jint_opt(&c, o, "redundant_experts", 0, 1 << 16, 0, &p->redundant_experts, err) ||
        sim_jnum_opt(&c, o, "expert_skew", 0, 3, 0.5, &p->expert_skew, err) ||
        sim_jint_opt(&c, o, "async_scheduling", 0, 1, 0, &async, err))
        return -1;
    p->async_scheduling = async != 0;
    p->overlap_comm = ov != 0;
    p->eplb = eplb != 0;
    if (p->dp > p->accels)
        return cf_fail(err, "%s: %s.dp: %ld exceeds accelerators (%ld)", c.file, name, p->dp, p->accels);
    double weights = (m->dense_params * (double)p->dp + (m->total_params - m->dense_params)) * m->weight_bytes;
    double hbm = (double)p->accels * p->hw.hbm_bytes;
    double kv = (hbm - weights) * p->kv_fraction;
    p->kv_blocks = kv > 0 ? (int64_t)(kv / (m->kv_bytes_per_token * (double)p->block_tokens)) : 0;
    int64_t need = (p->max_batch_tokens * p->dp + p->block_tokens - 1) / p->block_tokens;
    if (p->kv_blocks < need)
        return cf_fail(err,
                       "%s: %s.accelerators: %ld x %s (%.0f GB) cannot hold %s (%.0f GB of weights) and %lld KV "
                       "blocks for one full batch; the pool is too small for the model",
                       c.file, name, p->accels, p->hw.name, hbm / 1e9, m->name, weights / 1e9, (long long)need);
    return 0;
}

static int read_store(const sim_jctx *top, json_t *root, sim_config *o, cf_err *err) {
    static const char *const known[] = {"capacity_tb", "read_gbps",     "write_gbps", "block_tokens",
                                        "retention",   "gc_interval_s", NULL};
    sim_jctx c = {.file = top->file, .section = "store"};
    json_t *s;
    store_retention_defaults(o->retention_s);
    o->store_block_tokens = 512;
    o->gc_interval_s = 60;
    if (sim_jobj(top, root, "store", false, &s, err)) return -1;
    if (!s) return 0;
    o->store_on = true;
    double tb, rd, wr;
    char ret[256];
    if (sim_jknown(&c, s, known, err) || sim_jnum(&c, s, "capacity_tb", 1e-9, 1e9, &tb, err) ||
        sim_jnum(&c, s, "read_gbps", 1e-3, 1e9, &rd, err) ||
        sim_jnum_opt(&c, s, "write_gbps", 1e-3, 1e9, rd, &wr, err) ||
        sim_jint_opt(&c, s, "block_tokens", 1, 1 << 20, 512, &o->store_block_tokens, err) ||
        sim_jnum_opt(&c, s, "gc_interval_s", 1e-3, 1e9, 60, &o->gc_interval_s, err) ||
        sim_jstr_opt(&c, s, "retention", "", ret, sizeof ret, err))
        return -1;
    o->store_capacity_bytes = tb * 1e12;
    o->store_read_bw = rd * 1e9;
    o->store_write_bw = wr * 1e9;
    int64_t swa_s = 0;
    if (ret[0] && store_retention_parse(ret, o->retention_s, &swa_s, err)) {
        cf_prefix(err, "%s: store.retention", top->file);
        return -1;
    }
    if (swa_s > 0) /* the simulated window-state tier is host memory only (its TTL is window_state's) */
        return cf_fail(err, "%s: store.retention: swa= (window-state snapshots in the store) is not simulated",
                       top->file);
    return 0;
}

static int read_misc(const sim_jctx *top, json_t *root, const char *profiles, sim_config *o, cf_err *err) {
    json_t *w, *n, *r;
    sim_jctx wc = {.file = top->file, .section = "window_state"}, nc = wc, rc = wc;
    nc.section = "network";
    rc.section = "router";
    static const char *const wk[] = {"capacity_gb", "bounded_replay", NULL}, *const nk[] = {"latency_us", NULL},
                             *const rk[] = {"prefill", "decode", NULL};
    double gb = 0, lat = 10;
    long replay = 1;
    if (sim_jobj(top, root, "window_state", false, &w, err) || sim_jobj(top, root, "network", false, &n, err) ||
        sim_jobj(top, root, "router", false, &r, err))
        return -1;
    if (w && (sim_jknown(&wc, w, wk, err) || sim_jnum_opt(&wc, w, "capacity_gb", 0, 1e9, 0, &gb, err) ||
              sim_jint_opt(&wc, w, "bounded_replay", 0, 1, 1, &replay, err)))
        return -1;
    if (n && (sim_jknown(&nc, n, nk, err) || sim_jnum_opt(&nc, n, "latency_us", 0, 1e7, 10, &lat, err))) return -1;
    o->window_state_bytes = gb * 1e9;
    o->bounded_replay = replay != 0;
    o->net_latency_s = lat * 1e-6;
    if (r && sim_jknown(&rc, r, rk, err)) return -1;
    const char *names[2] = {"prefill", "decode"}, *dflt[2] = {"prefill_compute", "decode_load"};
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s", dflt[i]);
        if (r && sim_jstr_opt(&rc, r, names[i], dflt[i], name, sizeof name, err)) return -1;
        if (route_policy_parse(name, &o->route_kind[i]))
            return cf_fail(err,
                           "%s: router.%s: unknown policy '%s' (round_robin, least_requests, cache_affinity, "
                           "prefill_compute, decode_load)",
                           top->file, names[i], name);
    }
    static const char *const pk[] = {
        "name",       "description",  "input_hit_per_mtok", "input_miss_per_mtok", "output_per_mtok",
        "accel_hour", "ssd_tb_month", "cpu_node_hour",      "network_node_hour",   "idle_reserve",
        NULL};
    char path[1024];
    json_t *pj = profile_json(top, root, "prices", "prices", profiles, path, sizeof path, err);
    if (!pj) return -1;
    sim_jctx pc = {.file = path, .section = "", .need_source = true}, plain = pc;
    plain.need_source = false;
    sim_price *p = &o->price;
    int bad = sim_jknown(&pc, pj, pk, err) || sim_jstr(&plain, pj, "name", p->name, sizeof p->name, err) ||
              sim_jnum(&pc, pj, "input_hit_per_mtok", 0, 1e6, &p->input_hit_per_mtok, err) ||
              sim_jnum(&pc, pj, "input_miss_per_mtok", 0, 1e6, &p->input_miss_per_mtok, err) ||
              sim_jnum(&pc, pj, "output_per_mtok", 0, 1e6, &p->output_per_mtok, err) ||
              sim_jnum(&pc, pj, "accel_hour", 0, 1e6, &p->accel_hour, err) ||
              sim_jnum(&pc, pj, "ssd_tb_month", 0, 1e6, &p->ssd_tb_month, err) ||
              sim_jnum(&pc, pj, "cpu_node_hour", 0, 1e6, &p->cpu_node_hour, err) ||
              sim_jnum(&pc, pj, "network_node_hour", 0, 1e6, &p->network_node_hour, err) ||
              sim_jnum(&pc, pj, "idle_reserve", 0, 10, &p->idle_reserve, err);
    json_decref(pj);
    return bad ? -1 : 0;
}

int sim_config_parse(const char *file, const char *text, size_t len, const char *profiles, sim_config *o, cf_err *err) {
    static const char *const known[] = {"description",  "model",   "prefill", "decode", "store",
                                        "window_state", "network", "router",  "prices", NULL};
    *o = (sim_config){0};
    snprintf(o->file, sizeof o->file, "%s", file);
    json_t *root = sim_jparse(file, text, len, err);
    if (!root) return -1;
    sim_jctx c = {.file = file, .section = ""};
    char path[1024];
    int rc = sim_jknown(&c, root, known, err);
    json_t *mj = rc ? NULL : profile_json(&c, root, "model", "model", profiles, path, sizeof path, err);
    if (!rc && !mj) rc = -1;
    if (!rc) rc = sim_model_from_json(mj, path, &o->model, err);
    json_decref(mj);
    if (!rc) rc = read_pool(&c, root, "prefill", false, profiles, &o->model, &o->prefill, err);
    if (!rc) rc = read_pool(&c, root, "decode", true, profiles, &o->model, &o->decode, err);
    if (!rc) rc = read_store(&c, root, o, err);
    if (!rc) rc = read_misc(&c, root, profiles, o, err);
    json_decref(root);
    return rc;
}

int sim_config_load(const char *path, const char *profiles, sim_config *out, cf_err *err) {
    size_t n;
    char *text = sim_jread(path, &n, err);
    if (!text) return -1;
    int rc = sim_config_parse(path, text, n, profiles, out, err);
    free(text);
    return rc;
}
