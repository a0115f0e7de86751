/* bench_store.c - persistent KV store load throughput into pool blocks.
 *
 * Writes N objects of a block shape into a fresh store directory, then loads
 * them into kv_pool blocks and reports GB/s of payload:
 *   sync/block  store_fs_load per object on this thread (open, fstat, preadv
 *               header + payload straight into the pool block, XXH3 verify)
 *   async       the engine path: one chain of N blocks through the store's
 *               I/O threads (lookup, then load), submit to completion
 *   sync/run8   a file per run of 8 consecutive blocks (one open + one preadv
 *               into 8 pool blocks + one XXH3 over all): the alternative layout
 * each page-cache warm (best of 3) and cold (posix_fadvise DONTNEED on every
 * file first). Limits printed alongside: memcpy and XXH3 bandwidth of one
 * thread (a warm load is one copy from the page cache plus one checksum pass).
 *
 * Usage: bench_store [DIR] [n_blocks] [shape]
 *   shape: tinyllama (22 layers x 4 KV heads x 64 dims, F32 KV, 16-token blocks:
 *          704 KiB per block; default) or stories (5 x 4 x 8: 20 KiB per block).
 * Not a test: numbers depend on the machine and its load. */
#define XXH_STATIC_LINKING_ONLY
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/timeutil.h"
#include "engine/kv_pool.h"
#include "store/store.h"
#include "store/store_fs.h"

#define BT 16
#define RUN 8

static uint8_t g_fp[32];

static void key_of(int i, uint8_t *k) {
    memset(k, 0, 32);
    memcpy(k, &i, sizeof i);
    k[31] = 0xA5;
}

static void drop_cache_file(const char *p) {
    int fd = open(p, O_RDONLY);
    if (fd < 0) return;
    if (fdatasync(fd)) { /* best effort */ }
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

static void drop_cache_dir(const char *dir, int n, bool runs) {
    char p[4096];
    for (int i = 0; i < n; i++) {
        uint8_t k[32];
        key_of(i, k);
        if (runs) {
            if (i % RUN) continue;
            snprintf(p, sizeof p, "%s/run-%d", dir, i / RUN);
        } else {
            store_object_path(dir, k, p, sizeof p);
        }
        drop_cache_file(p);
    }
}

static double bw(double bytes, double s) { return bytes / s / 1e9; }

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp/cinfer-bench-store";
    int n = argc > 2 ? atoi(argv[2]) : 128;
    bool tiny = !(argc > 3 && !strcmp(argv[3], "stories"));
    if (n < RUN) n = RUN;
    n = n / RUN * RUN;
    kv_spec spec = {.n_groups = 1, .groups = {{.kind = KV_LAYER_FULL, .n_layers = tiny ? 22 : 5,
                                              .token_floats = tiny ? 2 * 4 * 64 : 2 * 4 * 8}}};
    int64_t floats = kv_spec_block_floats(&spec, BT), bytes = floats * 4;
    kv_pool *pool;
    cf_err err;
    if (kv_pool_create(&spec, BT, (int64_t)(n + 4) * (bytes + 256), &pool, &err)) {
        fprintf(stderr, "bench_store: %s\n", err.msg);
        return 1;
    }
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    float **dst = malloc((size_t)n * sizeof *dst);
    uint8_t *src = malloc((size_t)bytes * RUN);
    int32_t toks[BT];
    if (!ids || !dst || !src || kv_pool_alloc_n(pool, n, ids, &err)) {
        fprintf(stderr, "bench_store: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n; i++) dst[i] = kv_pool_block(pool, ids[i]);
    for (int64_t i = 0; i < bytes * RUN; i++) src[i] = (uint8_t)(i * 2654435761u >> 13);
    for (int t = 0; t < BT; t++) toks[t] = t + 3;
    memset(g_fp, 0x5F, sizeof g_fp);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) { /* fresh dir below */ }
    if (store_fs_prepare(dir, &err)) {
        fprintf(stderr, "bench_store: %s\n", err.msg);
        return 1;
    }
    int64_t now = time(NULL);
    /* per-block objects: the chain's parents are the previous keys */
    for (int i = 0; i < n; i++) {
        store_obj_hdr h = {.n_tokens = BT, .created = now, .expires = now + 3600, .payload_len = (uint64_t)bytes};
        memcpy(h.fingerprint, g_fp, 32);
        key_of(i, h.key);
        if (i) key_of(i - 1, h.parent);
        int e;
        if (store_fs_publish(dir, &h, toks, src + (size_t)(i % RUN) * bytes, NULL, false, now, &e, &err) != STORE_PUB_WRITTEN) {
            fprintf(stderr, "bench_store: %s\n", err.msg);
            return 1;
        }
    }
    /* runs of RUN blocks: one header (checksum over the whole run) + RUN payloads */
    uint32_t hl = store_header_len(BT * RUN);
    uint8_t *hdr = calloc(1, hl > 65536 ? hl : 65536);
    for (int r = 0; r < n / RUN; r++) {
        store_obj_hdr h = {.n_tokens = BT * RUN, .created = now, .expires = now + 3600,
                           .payload_len = (uint64_t)bytes * RUN};
        int32_t rt[BT * RUN];
        for (int t = 0; t < BT * RUN; t++) rt[t] = t;
        store_encode(&h, rt, src, hdr, hl);
        char p[4200];
        snprintf(p, sizeof p, "%s/run-%d", dir, r);
        FILE *f = fopen(p, "wb");
        if (!f || fwrite(hdr, 1, hl, f) != hl || fwrite(src, 1, (size_t)bytes * RUN, f) != (size_t)bytes * RUN) {
            fprintf(stderr, "bench_store: cannot write %s\n", p);
            return 1;
        }
        fclose(f);
    }
    double total = (double)bytes * n;
    printf("bench_store: %d blocks of %lld bytes (%s shape, %d tokens, F32 KV), %.1f MiB, dir %s\n", n,
           (long long)bytes, tiny ? "TinyLlama-1.1B" : "stories260K", BT, total / (1 << 20), dir);

    /* limits: memcpy and XXH3 over the same bytes, one thread (second pass: pool pages already faulted in) */
    double t0 = 0, t_cpy = 0;
    for (int pass = 0; pass < 2; pass++) {
        t0 = time_now();
        for (int i = 0; i < n; i++) memcpy(dst[i], src + (size_t)(i % RUN) * bytes, (size_t)bytes);
        t_cpy = time_now() - t0;
    }
    t0 = time_now();
    uint64_t acc = 0;
    for (int i = 0; i < n; i++) acc += XXH3_64bits(dst[i], (size_t)bytes);
    double t_xxh = time_now() - t0;
    printf("limits (1 thread): memcpy %.2f GB/s, XXH3 %.2f GB/s, copy+hash %.2f GB/s  [%llx]\n", bw(total, t_cpy),
           bw(total, t_xxh), bw(total, t_cpy + t_xxh), (unsigned long long)(acc & 0xff));

    uint8_t *hbuf = malloc(65536);
    for (int cold = 0; cold < 2; cold++) {
        /* sync per block */
        double best = 1e9;
        for (int rep = 0; rep < (cold ? 1 : 3); rep++) {
            if (cold) drop_cache_dir(dir, n, false);
            t0 = time_now();
            for (int i = 0; i < n; i++) {
                uint8_t k[32], par[32];
                key_of(i, k);
                if (i) key_of(i - 1, par);
                store_expect x = {.fingerprint = g_fp, .key = k, .parent = i ? par : NULL, .tokens = toks,
                                  .n_tokens = BT, .payload_len = (uint64_t)bytes};
                uint64_t got;
                if (store_fs_load(dir, &x, hbuf, dst[i], now, 600, &got, &err) != STORE_LOAD_HIT) {
                    fprintf(stderr, "bench_store: load %d failed: %s\n", i, err.msg);
                    return 1;
                }
            }
            double t = time_now() - t0;
            if (t < best) best = t;
        }
        printf("%s sync/block: %.2f GB/s (%.1f us per object)\n", cold ? "cold" : "warm", bw(total, best),
               best / n * 1e6);

        /* async: one chain through the store's I/O threads */
        store_config c = {.dir = dir, .block_tokens = BT, .payload_bytes = (uint64_t)bytes, .gc_interval_s = -1};
        memcpy(c.fingerprint, g_fp, 32);
        store *s;
        if (store_open(&c, &s, &err)) {
            fprintf(stderr, "bench_store: %s\n", err.msg);
            return 1;
        }
        best = 1e9;
        int loaded = 0;
        for (int rep = 0; rep < (cold ? 1 : 3); rep++) {
            if (cold) drop_cache_dir(dir, n, false);
            store_chain *ch = store_chain_new(s, n);
            for (int i = 0; i < n; i++) {
                key_of(i, ch->keys[i]);
                memcpy(ch->tokens + (size_t)i * BT, toks, sizeof toks);
                ch->dst[i] = dst[i];
            }
            t0 = time_now();
            store_submit_lookup(s, ch);
            store_event ev;
            while (store_poll(s, &ev, 1) == 0) usleep(20);
            store_submit_load(s, ch, ch->n_found);
            while (store_poll(s, &ev, 1) == 0) usleep(20);
            double t = time_now() - t0;
            loaded = ch->n_loaded;
            store_chain_free(ch);
            if (t < best) best = t;
        }
        store_close(s);
        printf("%s async chain: %.2f GB/s (%d of %d blocks, lookup + load, submit to completion)\n",
               cold ? "cold" : "warm", bw(total, best), loaded, n);

        /* runs of RUN blocks per file */
        best = 1e9;
        for (int rep = 0; rep < (cold ? 1 : 3); rep++) {
            if (cold) drop_cache_dir(dir, n, true);
            t0 = time_now();
            for (int r = 0; r < n / RUN; r++) {
                char p[4200];
                snprintf(p, sizeof p, "%s/run-%d", dir, r);
                int fd = open(p, O_RDONLY | O_NOATIME);
                struct stat sb;
                struct iovec iov[RUN + 1];
                iov[0] = (struct iovec){hdr, hl};
                for (int b = 0; b < RUN; b++) iov[b + 1] = (struct iovec){dst[r * RUN + b], (size_t)bytes};
                if (fd < 0 || fstat(fd, &sb) || preadv(fd, iov, RUN + 1, 0) != (ssize_t)sb.st_size) {
                    fprintf(stderr, "bench_store: cannot read %s\n", p);
                    return 1;
                }
                XXH3_state_t st;
                XXH3_64bits_reset(&st);
                XXH3_64bits_update(&st, hdr, hl);
                for (int b = 0; b < RUN; b++) XXH3_64bits_update(&st, dst[r * RUN + b], (size_t)bytes);
                acc += XXH3_64bits_digest(&st);
                close(fd);
            }
            double t = time_now() - t0;
            if (t < best) best = t;
        }
        printf("%s sync/run%d: %.2f GB/s (%.1f us per block)\n", cold ? "cold" : "warm", RUN, bw(total, best),
               best / n * 1e6);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) { /* leave it */ }
    free(hbuf);
    free(hdr);
    free(src);
    free(dst);
    free(ids);
    kv_pool_free(pool);
    return 0;
}
