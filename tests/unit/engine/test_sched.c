/* test_sched.c - the scheduler policy on hand-made states (decodes never
 * starved by a 10k-token prompt, chunks shrinking with attention cost, limits,
 * preemption victims, FCFS admission within a priority, input validation),
 * then a randomized simulation of 1000 requests driving scheduler + KV pool +
 * prefix cache to completion with random cancels, checking after every step
 * that no block leaks, the budget holds and every plan's blocks are
 * allocatable; at the end the pool is all free or cached. */
#include <stdlib.h>
#include <string.h>

#include "engine/kv_pool.h"
#include "engine/prefix_cache.h"
#include "engine/sched.h"
#include "testutil.h"

#define BT 16
#define MAXR 1024

static sched_item items[MAXR];
static int32_t preempted[MAXR], scratch[2 * MAXR];

static sched_plan new_plan(void) { return (sched_plan){.items = items, .preempted = preempted, .scratch = scratch}; }

static sched_limits limits(int32_t max_batch, int32_t max_seqs, double attn) {
    return (sched_limits){.max_batch_tokens = max_batch,
                          .max_seqs = max_seqs,
                          .linear_cost = 1.0,
                          .attn_cost = attn,
                          .min_prefill_chunk = 16};
}

static sched_req running_decode(int32_t prompt, int32_t gen, int32_t prio, uint64_t arrival) {
    int32_t computed = prompt + gen - 1;
    int32_t nb = (computed + BT - 1) / BT;
    return (sched_req){.state = SCHED_RUNNING,
                       .priority = prio,
                       .arrival = arrival,
                       .prompt_len = prompt,
                       .n_generated = gen,
                       .max_tokens = 1000,
                       .n_computed = computed,
                       .n_blocks = nb,
                       .n_reclaimable = nb};
}

static sched_req waiting(int32_t prompt, int32_t prio, uint64_t arrival) {
    return (sched_req){
        .state = SCHED_WAITING, .priority = prio, .arrival = arrival, .prompt_len = prompt, .max_tokens = 10};
}

static const sched_item *find_item(const sched_plan *p, int32_t req) {
    for (int32_t i = 0; i < p->n_items; i++)
        if (p->items[i].req == req) return &p->items[i];
    return NULL;
}

/* Applies a plan to request states as the engine would (no real KV). */
static void apply(sched_req *r, const sched_plan *p) {
    for (int32_t i = 0; i < p->n_preempted; i++) {
        sched_req *q = &r[p->preempted[i]];
        q->state = SCHED_PREEMPTED;
        q->n_computed = q->n_blocks = q->n_reclaimable = 0;
    }
    for (int32_t i = 0; i < p->n_items; i++) {
        const sched_item *it = &p->items[i];
        sched_req *q = &r[it->req];
        if (it->admitted) {
            q->state = SCHED_RUNNING;
            q->n_computed = it->start;
        }
        q->n_blocks += it->new_blocks;
        q->n_reclaimable = q->n_blocks;
        q->n_computed += it->n_tokens;
        if (it->sample) q->n_generated++;
    }
}

static void test_decodes_first_and_chunking(void) {
    sched_req r[4];
    for (int i = 0; i < 3; i++) r[i] = running_decode(100, 1, 0, (uint64_t)i);
    r[3] = waiting(10000, 0, 3);
    /* the long prompt even has a more urgent priority: decodes still come first */
    r[3].priority = -5;
    sched_input in = {
        .reqs = r, .n_reqs = 4, .free_blocks = 100000, .block_tokens = BT, .limits = limits(512, 16, 1.0 / 1024)};
    int32_t chunks[200], n_chunks = 0, steps = 0;
    cf_err err;
    while (r[3].n_generated == 0 && steps < 200) {
        sched_plan p = new_plan();
        CHECK(sched_plan_step(&in, &p, &err) == 0);
        for (int i = 0; i < 3; i++) {
            const sched_item *it = find_item(&p, i);
            CHECKF(it && it->kind == SCHED_DECODE && it->n_tokens == 1 && it->sample, "step %d req %d", steps, i);
        }
        CHECK(p.n_items == 4 && p.items[3].req == 3 && p.items[3].kind == SCHED_PREFILL);
        CHECK(p.n_tokens <= 512);
        CHECK(p.items[3].start == r[3].n_computed);
        chunks[n_chunks++] = p.items[3].n_tokens;
        apply(r, &p);
        steps++;
    }
    CHECK(r[3].n_computed == 10000 && r[3].n_generated == 1);
    CHECK(n_chunks > 20);
    /* chunks never grow (but the last remainder), and later ones are much smaller */
    for (int i = 1; i + 1 < n_chunks; i++)
        CHECKF(chunks[i] <= chunks[i - 1], "chunk %d: %d > %d", i, chunks[i], chunks[i - 1]);
    CHECKF(chunks[n_chunks - 2] * 2 < chunks[0], "first %d, late %d", chunks[0], chunks[n_chunks - 2]);

    /* with no attention cost the chunks are the token budget left by decodes */
    CHECK(sched_chunk_cost(&in.limits, 10, 4) == 4 + (4.0 * 10 + 10) / 1024);
    sched_limits flat = limits(512, 16, 0);
    CHECK(sched_chunk_cost(&flat, 5000, 100) == 100);
    r[3] = waiting(10000, 0, 3);
    in.limits = flat;
    sched_plan p = new_plan();
    CHECK(sched_plan_step(&in, &p, &err) == 0);
    CHECK(p.n_items == 4 && p.items[3].n_tokens == 509 && p.n_tokens == 512);

    /* decodes alone blow the compute budget: the first prefill still gets min_prefill_chunk */
    in.limits = limits(512, 16, 1.0);
    for (int i = 0; i < 3; i++) r[i] = running_decode(100000, 1, 0, (uint64_t)i);
    p = new_plan();
    CHECK(sched_plan_step(&in, &p, &err) == 0);
    CHECK(p.n_items == 4 && p.items[3].n_tokens == 16);
}

static void test_limits(void) {
    static sched_req r[100];
    for (int i = 0; i < 100; i++) r[i] = waiting(50, 0, (uint64_t)i);
    sched_input in = {.reqs = r, .n_reqs = 100, .free_blocks = 100000, .block_tokens = BT, .limits = limits(256, 8, 0)};
    cf_err err;
    for (int step = 0; step < 40; step++) {
        sched_plan p = new_plan();
        CHECK(sched_plan_step(&in, &p, &err) == 0);
        CHECK(p.n_items <= 8 && p.n_running <= 8 && p.n_tokens <= 256);
        int32_t tok = 0, running = 0;
        for (int i = 0; i < p.n_items; i++) tok += p.items[i].n_tokens;
        CHECK(tok == p.n_tokens);
        apply(r, &p);
        for (int i = 0; i < 100; i++) {
            if (r[i].state == SCHED_RUNNING && r[i].n_generated >= r[i].max_tokens)
                r[i].state = SCHED_PREEMPTED, r[i].max_tokens = 0;
            running += r[i].state == SCHED_RUNNING;
        }
        CHECK(running <= 8);
    }
}

static void test_preemption(void) {
    /* four decoders, each at a block boundary (needs one new block) */
    sched_req r[4];
    r[0] = running_decode(32, 1, 0, 0);
    r[1] = running_decode(32, 1, 1, 1);
    r[2] = running_decode(32, 1, 1, 2);
    r[3] = running_decode(32, 1, 0, 3);
    for (int i = 0; i < 4; i++) CHECK(r[i].n_blocks == 2 && r[i].n_computed == 32);
    sched_input in = {.reqs = r, .n_reqs = 4, .free_blocks = 2, .block_tokens = BT, .limits = limits(512, 16, 0)};
    cf_err err;
    sched_plan p = new_plan();
    CHECK(sched_plan_step(&in, &p, &err) == 0);
    /* rank: 0, 3 (priority 0), 1, 2 (priority 1): the victim is 2 (lowest priority, latest arrival) */
    CHECK(p.n_preempted == 1 && p.preempted[0] == 2);
    CHECK(p.n_items == 3 && p.items[0].req == 0 && p.items[1].req == 3 && p.items[2].req == 1);
    CHECK(p.new_blocks == 3 && p.n_running == 3);
    /* no free blocks: 2 goes first, then 1 preempts itself rather than a higher-ranked request */
    in.free_blocks = 0;
    p = new_plan();
    CHECK(sched_plan_step(&in, &p, &err) == 0);
    CHECK(p.n_preempted == 2 && p.preempted[0] == 2 && p.preempted[1] == 1);
    CHECK(p.n_items == 2 && p.items[0].req == 0 && p.items[1].req == 3);
    /* shared blocks reclaim nothing: more victims are needed */
    in.free_blocks = 1;
    r[2].n_reclaimable = 0;
    p = new_plan();
    CHECK(sched_plan_step(&in, &p, &err) == 0);
    CHECK(p.n_preempted == 2 && p.preempted[0] == 2 && p.preempted[1] == 1);
    CHECK(p.n_items == 2);
    /* a prefilling running request shrinks its chunk to the blocks it can get */
    sched_req pf[1] = {{.state = SCHED_RUNNING,
                        .prompt_len = 200,
                        .max_tokens = 5,
                        .n_computed = 20,
                        .n_blocks = 2,
                        .n_reclaimable = 2}};
    in = (sched_input){.reqs = pf, .n_reqs = 1, .free_blocks = 1, .block_tokens = BT, .limits = limits(512, 16, 0)};
    p = new_plan();
    CHECK(sched_plan_step(&in, &p, &err) == 0);
    CHECK(p.n_items == 1 && p.items[0].start == 20 && p.items[0].n_tokens == 28 && p.items[0].new_blocks == 1);
}

static void test_admission(void) {
    sched_req r[4];
    r[0] = waiting(20, 1, 5);
    r[1] = waiting(20, 1, 3);
    r[2] = waiting(20, 1, 4);
    r[3] = waiting(20, 0, 9);
    sched_input in = {.reqs = r, .n_reqs = 4, .free_blocks = 4, .block_tokens = BT, .limits = limits(512, 16, 0)};
    cf_err err;
    sched_plan p = new_plan();
    CHECK(sched_plan_step(&in, &p, &err) == 0);
    /* priority 0 first, then FCFS: arrival 3 (req 1); 2 blocks each */
    CHECK(p.n_items == 2 && p.items[0].req == 3 && p.items[1].req == 1);
    CHECK(p.items[0].admitted && p.items[0].new_blocks == 2 && p.items[0].sample);
    /* the head does not fit: nobody behind it overtakes */
    r[3].n_cached = 16;
    r[3].prompt_len = 40;
    in.free_blocks = 1;
    p = new_plan();
    CHECK(sched_plan_step(&in, &p, &err) == 0);
    CHECK(p.n_items == 0);
    /* cached prefix: start at the cached block boundary, charged for all blocks */
    in.free_blocks = 3;
    p = new_plan();
    CHECK(sched_plan_step(&in, &p, &err) == 0);
    CHECK(p.n_items >= 1 && p.items[0].req == 3 && p.items[0].start == 16 && p.items[0].n_tokens == 24 &&
          p.items[0].new_blocks == 3);
    /* a fully cached prompt still computes its last token */
    r[3].n_cached = 40;
    r[3].prompt_len = 32;
    p = new_plan();
    CHECK(sched_plan_step(&in, &p, &err) == 0);
    CHECK(p.items[0].req == 3 && p.items[0].start == 16 && p.items[0].n_tokens == 16 && p.items[0].sample);
    /* max_seqs bounds admission */
    in.limits.max_seqs = 1;
    in.free_blocks = 100;
    p = new_plan();
    CHECK(sched_plan_step(&in, &p, &err) == 0);
    CHECK(p.n_items == 1 && p.n_running == 1);
    /* invalid input is an error, not a crash */
    in.limits.max_seqs = 0;
    CHECK(sched_plan_step(&in, &p, &err) == -1);
    in.limits.max_seqs = 4;
    r[0].prompt_len = 0;
    CHECK(sched_plan_step(&in, &p, &err) == -1);
    r[0].prompt_len = 5;
    r[0].state = SCHED_RUNNING;
    r[0].n_computed = 5;
    r[0].n_blocks = 0;
    CHECK(sched_plan_step(&in, &p, &err) == -1);
}

/* ---- randomized simulation ---- */

#define SIM_N 1000
#define SIM_MAX_PROMPT 400
#define SIM_MAX_GEN 48
#define SIM_MAX_TOK (SIM_MAX_PROMPT + SIM_MAX_GEN)
#define SIM_MAX_BLOCKS ((SIM_MAX_TOK + BT - 1) / BT)

typedef struct sim_req {
    int32_t tokens[SIM_MAX_TOK];
    int32_t blocks[SIM_MAX_BLOCKS];
    int32_t prompt_len, n_gen, max_gen, n_computed, n_blocks, n_registered, prio;
    uint8_t last_key[PREFIX_KEY_BYTES];
    const char *salt;
    sched_state state;
    int64_t arrive_step;
    int done;
} sim_req;

static sim_req sim[SIM_N];
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static prefix_salt sim_salt(const sim_req *q) { return (prefix_salt){q->salt, q->salt ? strlen(q->salt) : 0}; }

static void sim_release(kv_pool *pool, sim_req *q) {
    for (int32_t i = 0; i < q->n_blocks; i++) kv_pool_unref(pool, q->blocks[i]);
    q->n_blocks = q->n_computed = q->n_registered = 0;
}

/* Registers the blocks that became full; duplicates are replaced by the cached copy. */
static int sim_register(prefix_cache *pc, kv_pool *pool, sim_req *q) {
    cf_err err;
    for (; q->n_registered < q->n_computed / BT; q->n_registered++) {
        int32_t i = q->n_registered;
        uint8_t key[PREFIX_KEY_BYTES];
        int32_t got =
            prefix_cache_insert(pc, i ? q->last_key : NULL, q->tokens + i * BT, sim_salt(q), q->blocks[i], key, &err);
        if (got < 0) return -1;
        if (got != q->blocks[i]) {
            kv_pool_unref(pool, q->blocks[i]);
            q->blocks[i] = got;
        }
        memcpy(q->last_key, key, sizeof key);
    }
    return 0;
}

static int sim_check_pool(kv_pool *pool, prefix_cache *pc) {
    kv_pool_stats st = kv_pool_get_stats(pool);
    int ok = st.total == st.free + st.used + st.cached && st.bytes <= st.budget;
    int64_t refs = 0, held = 0, cached = 0;
    for (int32_t b = 0; b < st.total; b++) {
        refs += kv_pool_refs(pool, b);
        cached += kv_pool_is_cached(pool, b);
    }
    for (int i = 0; i < SIM_N; i++) held += sim[i].n_blocks;
    ok = ok && refs == held && cached == prefix_cache_get_stats(pc).entries;
    return ok;
}

static void sim_init(void) {
    static int32_t prefixes[4][256];
    static const char *salts[] = {NULL, NULL, "tenant-a", "tenant-b"};
    for (int s = 0; s < 4; s++)
        for (int i = 0; i < 256; i++) prefixes[s][i] = (int32_t)(rnd() % 50000);
    int64_t t = 0;
    for (int i = 0; i < SIM_N; i++) {
        sim_req *q = &sim[i];
        memset(q, 0, sizeof *q);
        q->prompt_len = 1 + (int32_t)(rnd() % SIM_MAX_PROMPT);
        int32_t shared = (int32_t)(rnd() % 257);
        if (shared > q->prompt_len) shared = q->prompt_len;
        int p = (int)(rnd() % 4);
        for (int32_t k = 0; k < q->prompt_len; k++)
            q->tokens[k] = k < shared ? prefixes[p][k] : (int32_t)(rnd() % 50000);
        q->max_gen = 1 + (int32_t)(rnd() % SIM_MAX_GEN);
        q->prio = (int32_t)(rnd() % 3);
        q->salt = salts[rnd() % 4];
        t += rnd() % 3;
        q->arrive_step = t;
        q->state = SCHED_WAITING;
    }
}

static int items_equal(const sched_item *a, const sched_item *b) {
    return a->req == b->req && a->kind == b->kind && a->start == b->start && a->n_tokens == b->n_tokens &&
           a->new_blocks == b->new_blocks && a->admitted == b->admitted && a->sample == b->sample;
}

static void test_simulation(uint64_t seed, int64_t budget, sched_limits lim) {
    kv_spec spec = {.n_groups = 1};
    spec.groups[0] = (kv_group_spec){.kind = KV_LAYER_FULL, .n_layers = 2, .token_floats = 4};
    kv_pool *pool = NULL;
    prefix_cache *pc = NULL;
    cf_err err;
    uint8_t fp[PREFIX_KEY_BYTES] = {42};
    CHECK(kv_pool_create(&spec, BT, budget, &pool, &err) == 0);
    rng_state = seed;
    CHECK(prefix_cache_create(pool, fp, &pc, &err) == 0);
    int32_t total_blocks = kv_pool_n_blocks(pool);
    CHECK(total_blocks > 2 * SIM_MAX_BLOCKS);
    sim_init();
    static sched_req reqs[SIM_N];
    static int32_t map[SIM_N];
    int n_done = 0, steps = 0, bad_steps = 0, cancels = 0;
    int64_t preemptions = 0, cached_tokens = 0;
    while (n_done < SIM_N && steps < 100000) {
        /* visible requests */
        int32_t n = 0;
        for (int i = 0; i < SIM_N; i++) {
            sim_req *q = &sim[i];
            if (q->done || q->arrive_step > steps) continue;
            sched_req *r = &reqs[n];
            *r = (sched_req){.state = q->state,
                             .priority = q->prio,
                             .arrival = (uint64_t)i,
                             .prompt_len = q->prompt_len,
                             .n_generated = q->n_gen,
                             .max_tokens = q->max_gen};
            if (q->state == SCHED_RUNNING) {
                r->n_computed = q->n_computed;
                r->n_blocks = q->n_blocks;
                for (int32_t b = 0; b < q->n_blocks; b++) r->n_reclaimable += kv_pool_refs(pool, q->blocks[b]) == 1;
            } else {
                r->n_cached = prefix_cache_peek(pc, q->tokens, q->prompt_len + q->n_gen - 1, sim_salt(q));
            }
            map[n++] = i;
        }
        sched_input in = {
            .reqs = reqs, .n_reqs = n, .free_blocks = kv_pool_available(pool), .block_tokens = BT, .limits = lim};
        sched_plan p = new_plan();
        if (sched_plan_step(&in, &p, &err)) {
            CHECKF(0, "plan failed: %s", err.msg);
            break;
        }
        if (steps % 50 == 0) { /* deterministic: the same input gives the same plan */
            static sched_item items2[MAXR];
            static int32_t pre2[MAXR], scratch2[2 * MAXR];
            sched_plan p2 = {.items = items2, .preempted = pre2, .scratch = scratch2};
            CHECK(sched_plan_step(&in, &p2, &err) == 0);
            CHECK(p2.n_items == p.n_items && p2.n_preempted == p.n_preempted && p2.cost == p.cost);
            for (int32_t k = 0; k < p.n_items; k++) CHECK(items_equal(&items2[k], &items[k]));
            CHECK(memcmp(pre2, preempted, (size_t)p.n_preempted * sizeof *preempted) == 0);
        }
        int ok = p.n_tokens <= lim.max_batch_tokens && p.n_items <= lim.max_seqs && p.n_running <= lim.max_seqs;
        /* execute: preemptions, then items */
        for (int32_t k = 0; k < p.n_preempted; k++) {
            sim_req *q = &sim[map[p.preempted[k]]];
            ok = ok && q->state == SCHED_RUNNING;
            sim_release(pool, q);
            q->state = SCHED_PREEMPTED;
            preemptions++;
        }
        for (int32_t k = 0; k < p.n_items; k++) {
            const sched_item *it = &p.items[k];
            sim_req *q = &sim[map[it->req]];
            int32_t seq_len = q->prompt_len + q->n_gen;
            if (it->admitted) {
                prefix_match m;
                ok = ok && q->state != SCHED_RUNNING && q->n_blocks == 0;
                if (prefix_cache_match(pc, q->tokens, it->start, sim_salt(q), q->blocks, SIM_MAX_BLOCKS, &m, &err))
                    ok = 0;
                q->n_blocks = q->n_registered = m.n_blocks;
                q->n_computed = m.n_tokens;
                memcpy(q->last_key, m.last_key, sizeof m.last_key);
                cached_tokens += m.n_tokens;
                q->state = SCHED_RUNNING;
            } else {
                ok = ok && q->state == SCHED_RUNNING && it->start == q->n_computed;
            }
            int32_t end = q->n_computed + it->n_tokens;
            ok = ok && end <= seq_len && it->n_tokens >= 1;
            int32_t need = (end + BT - 1) / BT - q->n_blocks;
            ok = ok && need <= it->new_blocks;
            if (need > 0) {
                if (kv_pool_alloc_n(pool, need, q->blocks + q->n_blocks, &err)) {
                    CHECKF(0, "step %d: plan promised %d blocks, pool has %d: %s", steps, it->new_blocks,
                           kv_pool_available(pool), err.msg);
                    ok = 0;
                    continue;
                }
                q->n_blocks += need;
            }
            q->n_computed = end; /* "forward pass" */
            if (sim_register(pc, pool, q)) ok = 0;
            if (end == seq_len) { /* sample */
                q->tokens[seq_len] = (int32_t)(rnd() % 50000);
                if (++q->n_gen == q->max_gen) {
                    sim_release(pool, q);
                    q->done = 1;
                    n_done++;
                }
            }
        }
        /* random cancels */
        if (n > 0 && rnd() % 20 == 0) {
            int i = map[rnd() % (uint32_t)n];
            if (!sim[i].done) {
                sim_release(pool, &sim[i]);
                sim[i].done = 1;
                n_done++;
                cancels++;
            }
        }
        ok = ok && sim_check_pool(pool, pc);
        if (!ok && bad_steps++ < 5) CHECKF(0, "simulation step %d broke an invariant", steps);
        steps++;
    }
    CHECKF(n_done == SIM_N, "%d of %d requests finished in %d steps", n_done, SIM_N, steps);
    kv_pool_stats st = kv_pool_get_stats(pool);
    CHECK(st.used == 0 && st.free + st.cached == st.total);
    CHECK(sim_check_pool(pool, pc));
    CHECK(cancels > 10 && cached_tokens > 0);
    if (budget <= 60 * 1024) CHECK(preemptions > 0);
    fprintf(stderr,
            "simulation: %d steps, %d cancels, %lld preemptions, %lld cached tokens reused, %llu evictions, "
            "%d blocks\n",
            steps, cancels, (long long)preemptions, (long long)cached_tokens, (unsigned long long)st.evictions,
            st.total);
    prefix_cache_free(pc);
    st = kv_pool_get_stats(pool);
    CHECK(st.free == st.total);
    kv_pool_free(pool);
}

/* Speculative decoding: a decode with n_draft is a verify item of 1 + n_draft tokens that still
 * samples; drafts shrink to the blocks, tokens and budget left and never preempt anyone. */
static void test_drafts(void) {
    cf_err err;
    sched_req r[3];
    r[0] = running_decode(40, 1, 0, 0); /* n_computed 40: 8 slots left in its 3 blocks */
    r[0].n_draft = 6;
    r[1] = running_decode(40, 1, 0, 1);
    r[1].n_draft = 12; /* needs a new block beyond slot 47 */
    r[2] = running_decode(32, 1, 0, 2); /* at a block boundary: its own token needs a block */
    sched_input in = {.reqs = r, .n_reqs = 3, .free_blocks = 1, .block_tokens = BT, .limits = limits(512, 16, 0)};
    sched_plan p = new_plan();
    CHECK(sched_plan_step(&in, &p, &err) == 0);
    const sched_item *a = find_item(&p, 0), *b = find_item(&p, 1), *c = find_item(&p, 2);
    CHECK(a && a->kind == SCHED_DECODE && a->n_tokens == 7 && a->sample && a->new_blocks == 0);
    /* r1 takes the one free block for its drafts (it is planned before r2); r2's own token then
     * needs a block: the lowest-ranked running request not yet scheduled, r2 itself, is preempted
     * - never a request for drafts */
    CHECK(b && b->n_tokens == 13 && b->new_blocks == 1);
    CHECK(!c && p.n_preempted == 1 && p.preempted[0] == 2);
    /* the token budget caps drafts: 8 tokens for three decodes */
    r[2].n_draft = 0;
    in.free_blocks = 100;
    in.limits = limits(8, 16, 0);
    p = new_plan();
    CHECK(sched_plan_step(&in, &p, &err) == 0);
    CHECK(p.n_tokens <= 8 && p.n_items == 3 && p.n_preempted == 0);
    CHECK(find_item(&p, 0)->n_tokens == 6 && find_item(&p, 1)->n_tokens == 1 && find_item(&p, 2)->n_tokens == 1);
    /* a negative n_draft is invalid input */
    r[0].n_draft = -1;
    p = new_plan();
    CHECK(sched_plan_step(&in, &p, &err) != 0);
}

int main(void) {
    test_decodes_first_and_chunking();
    test_drafts();
    test_limits();
    test_preemption();
    test_admission();
    test_simulation(0x9e3779b97f4a7c15ull, 60 * 1024, limits(256, 24, 1.0 / 512));
    test_simulation(12345, 40 * 1024, limits(128, 8, 1.0 / 256));
    test_simulation(777, 200 * 1024, limits(512, 64, 0));
    return test_finish();
}
