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
 * Usage: bench_store [-n BLOCKS] [-s SHAPE] [PARENT_DIR [BLOCKS [SHAPE]]] (see --help).
 * The objects go into a fresh scratch directory made with mkdtemp under
 * PARENT_DIR (default $TMPDIR or /tmp); only that directory is removed at the
 * end, never PARENT_DIR or anything else in it.
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

#include "base/fsutil.h"
#include "base/timeutil.h"
#include "bench_cli.h"
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
    if (fdatasync(fd)) { /* best effort */
    }
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

static const char k_usage[] =
    "usage: bench_store [-n BLOCKS] [-s tinyllama|stories] [PARENT_DIR [BLOCKS [SHAPE]]]\n"
    "Persistent KV store load throughput into pool blocks: sync per block, async chain through the\n"
    "store's I/O threads, and one file per run of 8 blocks; page cache warm and cold. The objects are\n"
    "written to a fresh scratch directory bench_store-XXXXXX made under PARENT_DIR (default $TMPDIR\n"
    "or /tmp) and only that directory is removed afterwards; nothing else in PARENT_DIR is touched.\n"
    "Not a test: numbers depend on the machine and its load.\n"
    "  -n, --blocks N   blocks, 8..1000000, rounded down to a multiple of 8 (default 128)\n"
    "  -s, --shape S    tinyllama: 704 KiB per block (default); stories: 20 KiB per block\n"
    "  -h, --help       this text\n";

typedef struct bs_opts {
    const char *parent;
    int n;
    bool tiny;
} bs_opts;

static int set_shape(const char *v, bs_opts *o) {
    if (!strcmp(v, "tinyllama") || !strcmp(v, "stories")) {
        o->tiny = !strcmp(v, "tinyllama");
        return 0;
    }
    fprintf(stderr, "bench_store: unknown shape '%s' (tinyllama or stories)\n", v);
    return -1;
}

/* Parses the command line into o. Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, bs_opts *o) {
    static const struct option longs[] = {{"blocks", required_argument, NULL, 'n'},
                                          {"shape", required_argument, NULL, 's'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    const char *n_arg = NULL;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":n:s:h", longs, NULL)) != -1) {
        if (c == 'h') {
            fputs(k_usage, stdout);
            return 0;
        }
        if (c == 'n') n_arg = optarg;
        else if (c == 's') {
            if (set_shape(optarg, o)) return BENCH_USAGE_ERROR;
        } else return bench_bad_option("bench_store", c, argv);
    }
    if (optind < argc) o->parent = argv[optind++];
    if (optind < argc) n_arg = argv[optind++];
    if (optind < argc && set_shape(argv[optind++], o)) return BENCH_USAGE_ERROR;
    if (optind < argc) {
        fprintf(stderr, "bench_store: unexpected argument '%s' (see bench_store --help)\n", argv[optind]);
        return BENCH_USAGE_ERROR;
    }
    long n = 128;
    if (n_arg && bench_parse_long("bench_store", "BLOCKS", n_arg, RUN, 1000000, &n)) return BENCH_USAGE_ERROR;
    o->n = (int)(n / RUN * RUN);
    return -1;
}

/* What the measurements share: the scratch directory, the pool blocks, one run of source payloads. */
typedef struct bs_ctx {
    const char *dir;
    int n;
    int64_t bytes, now;
    float **dst;
    uint8_t *src, *hdr, *hbuf;
    uint32_t hl;
    int32_t toks[BT];
    uint64_t acc;
} bs_ctx;

/* Writes the per-block objects (a chain: each one's parent is the previous key) and the run files. */
static int write_objects(bs_ctx *c) {
    cf_err err;
    for (int i = 0; i < c->n; i++) {
        store_obj_hdr h = {
            .n_tokens = BT, .created = c->now, .expires = c->now + 3600, .payload_len = (uint64_t)c->bytes};
        memcpy(h.fingerprint, g_fp, 32);
        key_of(i, h.key);
        if (i) key_of(i - 1, h.parent);
        int e;
        if (store_fs_publish(c->dir, &h, c->toks, c->src + (size_t)(i % RUN) * c->bytes, NULL, false, c->now, &e,
                             &err) != STORE_PUB_WRITTEN) {
            fprintf(stderr, "bench_store: %s\n", err.msg);
            return -1;
        }
    }
    /* runs of RUN blocks: one header (checksum over the whole run) + RUN payloads */
    for (int r = 0; r < c->n / RUN; r++) {
        store_obj_hdr h = {
            .n_tokens = BT * RUN, .created = c->now, .expires = c->now + 3600, .payload_len = (uint64_t)c->bytes * RUN};
        int32_t rt[BT * RUN];
        for (int t = 0; t < BT * RUN; t++) rt[t] = t;
        store_encode(&h, rt, c->src, c->hdr, c->hl);
        char p[4200];
        snprintf(p, sizeof p, "%s/run-%d", c->dir, r);
        FILE *f = fopen(p, "wb");
        bool ok = f && fwrite(c->hdr, 1, c->hl, f) == c->hl &&
                  fwrite(c->src, 1, (size_t)c->bytes * RUN, f) == (size_t)c->bytes * RUN;
        if ((f && fclose(f) != 0) || !ok) {
            fprintf(stderr, "bench_store: cannot write %s\n", p);
            return -1;
        }
    }
    return 0;
}

/* memcpy and XXH3 over the same bytes, one thread (second pass: pool pages already faulted in). */
static void print_limits(bs_ctx *c, double total) {
    double t0 = 0, t_cpy = 0;
    for (int pass = 0; pass < 2; pass++) {
        t0 = time_now();
        for (int i = 0; i < c->n; i++) memcpy(c->dst[i], c->src + (size_t)(i % RUN) * c->bytes, (size_t)c->bytes);
        t_cpy = time_now() - t0;
    }
    t0 = time_now();
    for (int i = 0; i < c->n; i++) c->acc += XXH3_64bits(c->dst[i], (size_t)c->bytes);
    double t_xxh = time_now() - t0;
    printf("limits (1 thread): memcpy %.2f GB/s, XXH3 %.2f GB/s, copy+hash %.2f GB/s  [%llx]\n", bw(total, t_cpy),
           bw(total, t_xxh), bw(total, t_cpy + t_xxh), (unsigned long long)(c->acc & 0xff));
}

/* store_fs_load per object on this thread; best time of the reps, or -1 on a failed load. */
static double time_sync_block(bs_ctx *c, int cold) {
    double best = 1e9;
    cf_err err;
    for (int rep = 0; rep < (cold ? 1 : 3); rep++) {
        if (cold) drop_cache_dir(c->dir, c->n, false);
        double t0 = time_now();
        for (int i = 0; i < c->n; i++) {
            uint8_t k[32], par[32];
            key_of(i, k);
            if (i) key_of(i - 1, par);
            store_expect x = {.fingerprint = g_fp,
                              .key = k,
                              .parent = i ? par : NULL,
                              .tokens = c->toks,
                              .n_tokens = BT,
                              .payload_len = (uint64_t)c->bytes};
            uint64_t got;
            if (store_fs_load(c->dir, &x, c->hbuf, c->dst[i], c->now, 600, &got, &err) != STORE_LOAD_HIT) {
                fprintf(stderr, "bench_store: load %d failed: %s\n", i, err.msg);
                return -1;
            }
        }
        double t = time_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* One chain of n blocks through the store's I/O threads; best time, blocks loaded into *loaded; -1 on error. */
static double time_async(bs_ctx *c, int cold, int *loaded) {
    store_config cfg = {.dir = c->dir, .block_tokens = BT, .payload_bytes = (uint64_t)c->bytes, .gc_interval_s = -1};
    memcpy(cfg.fingerprint, g_fp, 32);
    store *s;
    cf_err err;
    if (store_open(&cfg, &s, &err)) {
        fprintf(stderr, "bench_store: %s\n", err.msg);
        return -1;
    }
    double best = 1e9;
    for (int rep = 0; rep < (cold ? 1 : 3); rep++) {
        if (cold) drop_cache_dir(c->dir, c->n, false);
        store_chain *ch = store_chain_new(s, c->n);
        if (!ch) {
            store_close(s);
            return -1;
        }
        for (int i = 0; i < c->n; i++) {
            key_of(i, ch->keys[i]);
            memcpy(ch->tokens + (size_t)i * BT, c->toks, sizeof c->toks);
            ch->dst[i] = c->dst[i];
        }
        double t0 = time_now();
        store_submit_lookup(s, ch);
        store_event ev;
        while (store_poll(s, &ev, 1) == 0) usleep(20);
        store_submit_load(s, ch, ch->n_found);
        while (store_poll(s, &ev, 1) == 0) usleep(20);
        double t = time_now() - t0;
        *loaded = ch->n_loaded;
        store_chain_free(ch);
        if (t < best) best = t;
    }
    store_close(s);
    return best;
}

/* One open + one preadv + one XXH3 per run file of RUN blocks; best time, -1 on a failed read. */
static double time_runs(bs_ctx *c, int cold) {
    double best = 1e9;
    for (int rep = 0; rep < (cold ? 1 : 3); rep++) {
        if (cold) drop_cache_dir(c->dir, c->n, true);
        double t0 = time_now();
        for (int r = 0; r < c->n / RUN; r++) {
            char p[4200];
            snprintf(p, sizeof p, "%s/run-%d", c->dir, r);
            int fd = open(p, O_RDONLY | O_NOATIME);
            struct stat sb;
            struct iovec iov[RUN + 1];
            iov[0] = (struct iovec){c->hdr, c->hl};
            for (int b = 0; b < RUN; b++) iov[b + 1] = (struct iovec){c->dst[r * RUN + b], (size_t)c->bytes};
            if (fd < 0 || fstat(fd, &sb) || preadv(fd, iov, RUN + 1, 0) != (ssize_t)sb.st_size) {
                fprintf(stderr, "bench_store: cannot read %s\n", p);
                if (fd >= 0) close(fd);
                return -1;
            }
            XXH3_state_t st;
            XXH3_64bits_reset(&st);
            XXH3_64bits_update(&st, c->hdr, c->hl);
            for (int b = 0; b < RUN; b++) XXH3_64bits_update(&st, c->dst[r * RUN + b], (size_t)c->bytes);
            c->acc += XXH3_64bits_digest(&st);
            close(fd);
        }
        double t = time_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* Writes the objects into c->dir, then measures and prints. 0 ok, -1 on an error (printed). */
static int run_bench(bs_ctx *c, bool tiny) {
    if (write_objects(c)) return -1;
    double total = (double)c->bytes * c->n;
    printf("bench_store: %d blocks of %lld bytes (%s shape, %d tokens, F32 KV), %.1f MiB, dir %s\n", c->n,
           (long long)c->bytes, tiny ? "TinyLlama-1.1B" : "stories260K", BT, total / (1 << 20), c->dir);
    print_limits(c, total);
    for (int cold = 0; cold < 2; cold++) {
        const char *what = cold ? "cold" : "warm";
        double best = time_sync_block(c, cold);
        if (best < 0) return -1;
        printf("%s sync/block: %.2f GB/s (%.1f us per object)\n", what, bw(total, best), best / c->n * 1e6);
        int loaded = 0;
        best = time_async(c, cold, &loaded);
        if (best < 0) return -1;
        printf("%s async chain: %.2f GB/s (%d of %d blocks, lookup + load, submit to completion)\n", what,
               bw(total, best), loaded, c->n);
        best = time_runs(c, cold);
        if (best < 0) return -1;
        printf("%s sync/run%d: %.2f GB/s (%.1f us per block)\n", what, RUN, bw(total, best), best / c->n * 1e6);
    }
    return 0;
}

int main(int argc, char **argv) {
    bs_opts o = {.parent = NULL, .n = 128, .tiny = true};
    int prc = parse_args(argc, argv, &o);
    if (prc >= 0) return prc;
    kv_spec spec = {
        .n_groups = 1,
        .groups = {
            {.kind = KV_LAYER_FULL, .n_layers = o.tiny ? 22 : 5, .token_floats = o.tiny ? 2 * 4 * 64 : 2 * 4 * 8}}};
    bs_ctx c = {.n = o.n, .now = time(NULL)};
    c.bytes = kv_spec_block_floats(&spec, BT) * 4;
    kv_pool *pool;
    cf_err err;
    if (kv_pool_create(&spec, BT, (int64_t)(c.n + 4) * (c.bytes + 256), &pool, &err)) {
        fprintf(stderr, "bench_store: %s\n", err.msg);
        return 1;
    }
    c.hl = store_header_len(BT * RUN);
    int32_t *ids = malloc((size_t)c.n * sizeof *ids);
    c.dst = malloc((size_t)c.n * sizeof *c.dst);
    c.src = malloc((size_t)c.bytes * RUN);
    c.hdr = calloc(1, c.hl > 65536 ? c.hl : 65536);
    c.hbuf = malloc(65536);
    int rc = 1;
    char dir[4096] = "";
    if (!ids || !c.dst || !c.src || !c.hdr || !c.hbuf || kv_pool_alloc_n(pool, c.n, ids, &err)) {
        fprintf(stderr, "bench_store: out of memory\n");
    } else if (fs_make_scratch_dir(o.parent, "bench_store-", dir, sizeof dir, &err) || store_fs_prepare(dir, &err)) {
        fprintf(stderr, "bench_store: %s\n", err.msg);
        if (*dir && fs_remove_tree_created(dir, NULL)) { /* not made, or removal failed: nothing more to do */
        }
    } else {
        c.dir = dir;
        for (int i = 0; i < c.n; i++) c.dst[i] = kv_pool_block(pool, ids[i]);
        for (int64_t i = 0; i < c.bytes * RUN; i++) c.src[i] = (uint8_t)(i * 2654435761u >> 13);
        for (int t = 0; t < BT; t++) c.toks[t] = t + 3;
        memset(g_fp, 0x5F, sizeof g_fp);
        rc = run_bench(&c, o.tiny) ? 1 : 0;
        if (fs_remove_tree_created(dir, &err)) {
            fprintf(stderr, "bench_store: %s\n", err.msg);
            rc = 1;
        }
    }
    free(c.hbuf);
    free(c.hdr);
    free(c.src);
    free(c.dst);
    free(ids);
    kv_pool_free(pool);
    return rc;
}
