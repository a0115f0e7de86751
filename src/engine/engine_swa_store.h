/* engine_swa_store.h - window-state snapshots in the persistent store
 * (engine_swa_store.c): written beside the KV blocks under a short retention
 * (`cinfer_engine_options.kv_store_swa_retention_s`, `--retention swa=...`),
 * looked up when a store load finds blocks whose boundary has no snapshot in
 * host memory, checked (swa_format.h) and put into the window-state tier
 * before the blocks are adopted. Every hook is a no-op without it (no store,
 * no window-state tier, or retention 0). Engine thread only. */
#ifndef CINFER_ENGINE_ENGINE_SWA_STORE_H
#define CINFER_ENGINE_ENGINE_SWA_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "store/store.h"

struct cinfer_engine;
struct eng_req;

/* From eng_store_open, after the KV store opened: group_desc / model_fp as
 * that store's fingerprint used them, key its HMAC key (copied) or NULL. A
 * directory that cannot be used is logged and left out (0). */
int eng_swa_store_open(struct cinfer_engine *e, const int32_t *group_desc, int n_desc, const uint8_t model_fp[32],
                       const store_mac_key *key, cf_err *err);
/* From eng_store_close, before the KV store closes: finishes queued writes,
 * frees chains (and the block chains parked behind them). */
void eng_swa_store_close(struct cinfer_engine *e);
/* A snapshot was just taken into tier slot `slot` (data: its floats, header
 * included) at boundary block `boundary_block` of r: seal it and queue it. */
void eng_swa_store_write(struct cinfer_engine *e, struct eng_req *r, int32_t slot, float *data, int32_t boundary_block);
/* r's block chain LOOKUP found k loadable blocks: true when it now waits for
 * the snapshot at their end (the block chain is parked; eng_store_continue
 * resumes it), false to load the blocks at once. */
bool eng_swa_store_lookup(struct cinfer_engine *e, struct eng_req *r, store_chain *blocks, int32_t k);
/* Completions: loads checked and put into the tier, write pins dropped. */
void eng_swa_store_poll(struct cinfer_engine *e);
/* Forgets r's snapshot chain (its completion frees it); the caller frees the parked block chain. */
void eng_swa_store_detach(struct cinfer_engine *e, struct eng_req *r);
/* Snapshot writes in flight (each pins its tier slot). */
int32_t eng_swa_store_writing(const struct cinfer_engine *e);

#endif
