/* mkmodel.c - random-weight llama models (see mkmodel.h).
 *
 * Layout matches what llama.cpp writes for llama: token_embd, output_norm,
 * output (unless tied), then per block attn_norm, attn_q, attn_k, attn_v,
 * attn_output, ffn_norm, ffn_gate, ffn_down, ffn_up; ne = {in, out}.
 *
 * Speed: rows are generated in parallel batches (one thread per core, at most
 * 16) into one of two output buffers while the previous batch is appended to
 * the stream: a 1.1B-parameter model costs ~20 s of CPU in all, spread over
 * the cores. Each row's values depend only on (seed, tensor name, row index):
 * xoshiro256** seeded through splitmix64, normals by the polar Box-Muller
 * method. */
#include "model/mkmodel.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/quantize.h"

#define MAX_THREADS 16
#define BATCH_BYTES (16u << 20)

/* ---- random numbers ---- */

typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(rng *r, uint64_t seed, uint64_t tensor, uint64_t row) {
    uint64_t x = seed ^ (tensor * 0xd1b54a32d192ed03ull) ^ (row * 0x8cb92ba72f3d8dd7ull);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(rng *r) {
    uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return out;
}

/* n values mean + stddev * N(0,1): Marsaglia's polar form of Box-Muller in
 * float (no trig), both coordinates of a 64-bit draw, two normals per accept. */
static void fill_normal(rng *r, float *out, int64_t n, float mean, float stddev) {
    int64_t i = 0;
    while (i < n) {
        uint64_t a = rng_next(r);
        float u = (float)((int32_t)(a >> 40) - (1 << 23)) * 0x1p-23f;
        float v = (float)((int32_t)(a & 0xffffff) - (1 << 23)) * 0x1p-23f;
        float s = u * u + v * v;
        if (s >= 1.0f || s == 0.0f) continue;
        float m = stddev * sqrtf(-2.0f * logf(s) / s);
        out[i++] = mean + m * u;
        if (i < n) out[i++] = mean + m * v;
    }
}

/* ---- model description ---- */

typedef struct tdesc {
    char name[64];
    int n_dims;
    int64_t ne[2];
    dtype type;
    float mean; /* 1 for norms, 0 for matrices */
} tdesc;

static int validate(const mkmodel_opts *o, cf_err *err) {
    if (!o->arch || strcmp(o->arch, "llama"))
        return cf_fail(err, "unsupported --arch '%s' (supported: llama)", o->arch ? o->arch : "");
    if (o->dim <= 0 || o->layers <= 0 || o->heads <= 0 || o->kv_heads <= 0 || o->ffn <= 0 || o->ctx < 0)
        return cf_fail(err, "--dim, --layers, --heads, --kv-heads and --ffn must be positive");
    if (o->dim % o->heads || (o->dim / o->heads) % 2)
        return cf_fail(err, "--dim %d must be a multiple of --heads %d with an even head size", o->dim, o->heads);
    if (o->kv_heads > o->heads || o->heads % o->kv_heads)
        return cf_fail(err, "--heads %d must be a multiple of --kv-heads %d", o->heads, o->kv_heads);
    int64_t be = dtype_block_elems(o->type);
    if (o->dim % be || o->ffn % be)
        return cf_fail(err, "--dim %d and --ffn %d must be multiples of %d for %s", o->dim, o->ffn, (int)be,
                       dtype_name(o->type));
    return 0;
}

static tdesc mat(const char *name, int64_t in, int64_t out, dtype t) {
    tdesc d = {.n_dims = 2, .ne = {in, out}, .type = t, .mean = 0};
    snprintf(d.name, sizeof d.name, "%s", name);
    return d;
}
static tdesc norm(const char *name, int64_t n) {
    tdesc d = {.n_dims = 1, .ne = {n, 1}, .type = DT_F32, .mean = 1};
    snprintf(d.name, sizeof d.name, "%s", name);
    return d;
}

/* Fills the tensor list; returns the count (caller's array has room). */
static int describe(const mkmodel_opts *o, int64_t vocab, tdesc *t) {
    int n = 0;
    int64_t dim = o->dim, kv = (int64_t)o->dim / o->heads * o->kv_heads, ffn = o->ffn;
    t[n++] = mat("token_embd.weight", dim, vocab, o->type);
    t[n++] = norm("output_norm.weight", dim);
    if (!o->tied) t[n++] = mat("output.weight", dim, vocab, o->type);
    for (int l = 0; l < o->layers; l++) {
        char b[64];
#define NAME(part) (snprintf(b, sizeof b, "blk.%d.%s.weight", l, part), b)
        t[n++] = norm(NAME("attn_norm"), dim);
        t[n++] = mat(NAME("attn_q"), dim, dim, o->type);
        t[n++] = mat(NAME("attn_k"), dim, kv, o->type);
        t[n++] = mat(NAME("attn_v"), dim, kv, o->type);
        t[n++] = mat(NAME("attn_output"), dim, dim, o->type);
        t[n++] = norm(NAME("ffn_norm"), dim);
        t[n++] = mat(NAME("ffn_gate"), dim, ffn, o->type);
        t[n++] = mat(NAME("ffn_down"), ffn, dim, o->type);
        t[n++] = mat(NAME("ffn_up"), dim, ffn, o->type);
#undef NAME
    }
    return n;
}

/* Copies the vocab's tokenizer.* keys; returns the token count via *vocab. */
static int copy_vocab(gguf_writer *w, const char *path, int64_t *vocab, cf_err *err) {
    gguf_file *v;
    if (gguf_open(path, &v, err)) return -1;
    int64_t i = gguf_find_key(v, "tokenizer.ggml.tokens");
    if (i < 0 || gguf_arr_type(v, i) != GGUF_STRING || gguf_arr_len(v, i) == 0) {
        gguf_close(v);
        return cf_fail(err, "%s: no tokenizer.ggml.tokens string array (not a vocab GGUF?)", path);
    }
    *vocab = (int64_t)gguf_arr_len(v, i);
    int rc = gguf_writer_copy_kv(w, v, err);
    for (int64_t k = 0; rc == 0 && k < gguf_kv_count(v); k++) {
        const char *key = gguf_key_name(v, k);
        if (strncmp(key, "tokenizer.", 10)) gguf_writer_remove_key(w, key);
    }
    gguf_close(v);
    return rc;
}

static void set_hparams(gguf_writer *w, const mkmodel_opts *o, int64_t vocab) {
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_str(w, "general.name", "cinfer-mkmodel");
    gguf_set_u32(w, "general.file_type", quantize_file_type(o->type));
    gguf_set_u32(w, "llama.context_length", (uint32_t)(o->ctx ? o->ctx : 2048));
    gguf_set_u32(w, "llama.embedding_length", (uint32_t)o->dim);
    gguf_set_u32(w, "llama.feed_forward_length", (uint32_t)o->ffn);
    gguf_set_u32(w, "llama.block_count", (uint32_t)o->layers);
    gguf_set_u32(w, "llama.attention.head_count", (uint32_t)o->heads);
    gguf_set_u32(w, "llama.attention.head_count_kv", (uint32_t)o->kv_heads);
    gguf_set_u32(w, "llama.rope.dimension_count", (uint32_t)(o->dim / o->heads));
    gguf_set_f32(w, "llama.rope.freq_base", 10000.0f);
    gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_set_u32(w, "llama.vocab_size", (uint32_t)vocab);
}

/* ---- parallel row generation ---- */

typedef struct job {
    const tdesc *t;
    uint64_t seed, tensor;
    int64_t row0, nrows; /* rows of this batch */
    size_t row_bytes;
    uint8_t *out;
    int tid, nthreads;
} job;

static void *gen_rows(void *arg) {
    job *j = arg;
    int64_t n = j->t->ne[0];
    float *f = malloc((size_t)(n + 1) * sizeof *f);
    if (!f) return (void *)1;
    for (int64_t r = j->tid; r < j->nrows; r += j->nthreads) {
        rng g;
        rng_seed(&g, j->seed, j->tensor, (uint64_t)(j->row0 + r));
        fill_normal(&g, f, n, j->t->mean, 0.02f);
        dtype_quantize_row(j->t->type, f, j->out + (size_t)r * j->row_bytes, n);
    }
    free(f);
    return NULL;
}

/* The tensor's generator id: a hash of its name (independent of layout). */
static uint64_t tensor_id(const char *name) {
    uint64_t h = 1469598103934665603ull;
    for (; *name; name++) h = (h ^ (uint8_t)*name) * 1099511628211ull;
    return h;
}

/* Double-buffered output: workers fill buf[cur] while the caller's thread
 * writes the previous batch from buf[!cur]. */
typedef struct pipeline {
    uint8_t *buf[2];
    int cur;
    size_t pending; /* bytes of buf[!cur] not yet written */
    int nthreads;
} pipeline;

static int flush_pending(gguf_writer *w, pipeline *p, cf_err *err) {
    int rc = p->pending ? gguf_writer_write_data(w, p->buf[!p->cur], p->pending, err) : 0;
    p->pending = 0;
    return rc;
}

/* Generates rows [row0, row0+nrows) of t into buf[cur] on worker threads while
 * flushing the previous batch; then swaps buffers. */
static int run_batch(gguf_writer *w, pipeline *p, const job *proto, cf_err *err) {
    int nt = proto->nrows < p->nthreads ? (int)proto->nrows : p->nthreads;
    job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    bool started[MAX_THREADS] = {0};
    int failed = 0;
    for (int k = 0; k < nt; k++) {
        jobs[k] = *proto;
        jobs[k].out = p->buf[p->cur];
        jobs[k].tid = k;
        jobs[k].nthreads = nt;
        started[k] = pthread_create(&th[k], NULL, gen_rows, &jobs[k]) == 0;
    }
    int wrc = flush_pending(w, p, err);
    for (int k = 0; k < nt; k++) {
        void *ret = NULL;
        if (started[k])
            pthread_join(th[k], &ret);
        else
            ret = gen_rows(&jobs[k]); /* could not start a thread: do its share here */
        failed |= ret != NULL;
    }
    if (wrc) return -1;
    if (failed) return cf_fail(err, "out of memory generating '%s'", proto->t->name);
    p->pending = (size_t)proto->nrows * proto->row_bytes;
    p->cur ^= 1;
    return 0;
}

static int stream_tensor(gguf_writer *w, pipeline *p, const tdesc *t, uint64_t id, uint64_t seed, cf_err *err) {
    size_t row_bytes = dtype_row_bytes(t->type, t->ne[0]);
    int64_t per_batch = (int64_t)(BATCH_BYTES / row_bytes);
    if (per_batch < 1) per_batch = 1;
    for (int64_t row0 = 0; row0 < t->ne[1]; row0 += per_batch) {
        int64_t nrows = t->ne[1] - row0 < per_batch ? t->ne[1] - row0 : per_batch;
        job proto = {.t = t, .seed = seed, .tensor = id, .row0 = row0, .nrows = nrows, .row_bytes = row_bytes};
        if (run_batch(w, p, &proto, err)) return -1;
    }
    return 0;
}

int mkmodel_write(const mkmodel_opts *o, const char *out_path, cf_err *err) {
    if (validate(o, err)) return -1;
    if (o->layers > 100000) return cf_fail(err, "--layers %d is too many", o->layers);
    gguf_writer *w = gguf_writer_create();
    tdesc *t = calloc((size_t)o->layers * 9 + 3, sizeof *t);
    pipeline pipe = {0};
    int rc = -1;
    int64_t vocab = 0;
    if (!w || !t) {
        cf_fail(err, "out of memory");
        goto done;
    }
    if (copy_vocab(w, o->vocab_from, &vocab, err)) goto done;
    set_hparams(w, o, vocab);
    int n = describe(o, vocab, t);
    size_t max_row = 0;
    for (int i = 0; i < n; i++) {
        if (gguf_writer_add_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne, NULL, false, err)) goto done;
        size_t rb = dtype_row_bytes(t[i].type, t[i].ne[0]);
        if (rb > max_row) max_row = rb;
    }
    size_t cap = max_row > BATCH_BYTES ? max_row : BATCH_BYTES;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    pipe.nthreads = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (int)cpus;
    pipe.buf[0] = malloc(cap);
    pipe.buf[1] = malloc(cap);
    if (!pipe.buf[0] || !pipe.buf[1]) {
        cf_fail(err, "out of memory");
        goto done;
    }
    if (gguf_writer_begin(w, out_path, err)) goto done;
    for (int i = 0; i < n; i++)
        if (stream_tensor(w, &pipe, &t[i], tensor_id(t[i].name), o->seed, err)) goto done;
    if (flush_pending(w, &pipe, err)) goto done;
    rc = gguf_writer_finish(w, err);
done:
    free(pipe.buf[0]);
    free(pipe.buf[1]);
    free(t);
    gguf_writer_free(w);
    return rc;
}
