/* bench_grammar.c - per-token mask time of the grammar engine (src/grammar/) on real schemas and a
 * real vocabulary, single thread, in the MaskBench method: for each schema, compile it; for each
 * of its valid instances, tokenize the instance text with the model's tokenizer, then per token
 * compute the mask (timed), check the token is in it, and accept it. Reports per vocabulary:
 * schemas compiled per subset, mean / p50 / p99 / max mask time, compile time and time to first
 * mask (compile + first mask), and tokens rejected (instances the engine is stricter on, e.g.
 * property order). Instances are tokenized greedily (longest vocabulary match at each byte), the
 * same for every engine: the model tokenizer's own leading-space handling (SentencePiece's "▁")
 * would make the first token start with a space that JSON engines need not allow.
 * Input (--cases): JSON lines {"subset": S, "id": ID, "schema": {...}, "instances": ["text", ...]}
 * made by bench/grammar_cases.py. --dump DIR writes the vocabulary (vocab.txt: hex bytes per
 * token, special flag), the EOS ids (eos.txt) and the token sequences (tokens.jsonl) so bench/grammar_peers.py can run
 * llguidance and xgrammar on exactly the same tokens, plus cinfer-samples.tsv (each schema's
 * compile result, each mask time, each instance's outcome) for bench/grammar_compare.py.
 * Usage: bench_grammar --vocab V.gguf --cases cases.jsonl [--dump DIR] [--max-tokens N] [--errors] */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <xxhash.h>

#include "bench_cli.h"
#include "cinfer/grammar.h"
#include "format/gguf.h"
#include "text/tokenizer.h"

static double now_us(clockid_t clk) {
    struct timespec ts;
    clock_gettime(clk, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct samples {
    double *v;
    size_t n, cap;
} samples;

static void add_sample(samples *s, double x) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4096;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        if (!s->v) abort();
    }
    s->v[s->n++] = x;
}

static void report(const char *what, samples *s) {
    if (!s->n) {
        printf("  %-22s (none)\n", what);
        return;
    }
    qsort(s->v, s->n, sizeof *s->v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < s->n; i++) sum += s->v[i];
    printf("  %-22s n=%zu mean=%.1fus p50=%.1fus p99=%.1fus max=%.1fus\n", what, s->n, sum / s->n, s->v[s->n / 2],
           s->v[(size_t)(s->n * 0.99)], s->v[s->n - 1]);
}

/* Greedy longest-match tokenization over the non-special tokens (open-addressing map of bytes). */
typedef struct greedy {
    uint64_t *keys;
    int32_t *ids;
    uint32_t cap;
    size_t maxlen;
} greedy;

static void greedy_add(greedy *gt, const char *b, uint32_t len, int32_t id) {
    uint64_t h = XXH3_64bits(b, len) | 1;
    uint32_t i = (uint32_t)h & (gt->cap - 1);
    while (gt->keys[i]) {
        if (gt->keys[i] == h) return; /* first id wins */
        i = (i + 1) & (gt->cap - 1);
    }
    gt->keys[i] = h;
    gt->ids[i] = id;
    if (len > gt->maxlen) gt->maxlen = len;
}

static int32_t greedy_find(const greedy *gt, const char *b, size_t len) {
    uint64_t h = XXH3_64bits(b, len) | 1;
    for (uint32_t i = (uint32_t)h & (gt->cap - 1); gt->keys[i]; i = (i + 1) & (gt->cap - 1))
        if (gt->keys[i] == h) return gt->ids[i];
    return -1;
}

/* Returns the number of ids written (0 if some byte has no token). */
static size_t greedy_encode(const greedy *gt, const char *text, int32_t *ids, size_t cap) {
    size_t n = 0, len = strlen(text);
    for (size_t i = 0; i < len && n < cap;) {
        size_t k = len - i < gt->maxlen ? len - i : gt->maxlen;
        int32_t id = -1;
        for (; k > 0 && (id = greedy_find(gt, text + i, k)) < 0; k--) {}
        if (id < 0) return 0;
        ids[n++] = id;
        i += k;
    }
    return n;
}

/* The grammar vocabulary of a tokenizer: every token's bytes, specials flagged, EOG ids as EOS. */
static cinfer_grammar_vocab *make_vocab(const tokenizer *t, FILE *dump, greedy *gt) {
    int32_t n = tokenizer_n_vocab(t);
    cinfer_grammar_token *toks = calloc((size_t)n, sizeof *toks);
    uint32_t *eos = calloc((size_t)n, sizeof *eos);
    uint32_t n_eos = 0;
    size_t cap = tokenizer_max_token_len(t) * 4 + 16;
    char *buf = malloc(cap);
    if (!toks || !eos || !buf) abort();
    for (int32_t i = 0; i < n; i++) {
        int type = tokenizer_token_type(t, i);
        size_t len = tokenizer_token_bytes(t, i, false, buf, cap);
        if (len > cap) len = cap;
        uint8_t *b = malloc(len ? len : 1);
        if (!b) abort();
        memcpy(b, buf, len);
        int special = type == 2 || type == 3 || type == 5 || type == 0 || len == 0;
        toks[i] = (cinfer_grammar_token){.bytes = b, .len = (uint32_t)len, .special = (uint8_t)special};
        if (tokenizer_is_eog(t, i)) eos[n_eos++] = (uint32_t)i;
        if (!special && gt) greedy_add(gt, buf, (uint32_t)len, i);
        if (dump) {
            fprintf(dump, "%d ", special);
            for (size_t k = 0; k < len; k++) fprintf(dump, "%02x", b[k]);
            fputc('\n', dump);
        }
    }
    cinfer_grammar_error err;
    cinfer_grammar_vocab *v = cinfer_grammar_vocab_new(toks, (uint32_t)n, eos, n_eos, &err);
    if (!v) fprintf(stderr, "bench_grammar: vocab: %s\n", err.msg);
    for (int32_t i = 0; i < n; i++) free((void *)toks[i].bytes);
    free(toks);
    free(eos);
    free(buf);
    return v;
}

typedef struct subset_tally {
    char name[64];
    int schemas, compiled;
} subset_tally;

typedef struct run {
    const tokenizer *tok;
    const cinfer_grammar_vocab *v;
    uint32_t *mask;
    size_t words;
    long max_tokens;
    samples mask_us, compile_us, ttfm_us;
    long tokens, rejected_tokens, instances, instances_ok;
    subset_tally subsets[32];
    int n_subsets;
    FILE *tokens_out;
    FILE *samples; /* with --dump: DIR/cinfer-samples.tsv, per schema/token/instance (grammar_compare.py) */
    greedy gt;
    int errors; /* print why each schema did not compile */
    double slow_us; /* print masks slower than this (0: none) */
    clockid_t clock; /* --clock: CLOCK_THREAD_CPUTIME_ID (cpu, default) or CLOCK_MONOTONIC (wall) */
} run;

static subset_tally *subset_of(run *r, const char *name) {
    for (int i = 0; i < r->n_subsets; i++)
        if (!strcmp(r->subsets[i].name, name)) return &r->subsets[i];
    if (r->n_subsets == 32) return &r->subsets[31];
    subset_tally *s = &r->subsets[r->n_subsets++];
    snprintf(s->name, sizeof s->name, "%s", name);
    return s;
}

static void run_instance(run *r, cinfer_grammar *g, const char *text, double compile_us, const char *id) {
    size_t cap = strlen(text) + 1;
    int32_t *ids = malloc(cap * sizeof *ids);
    size_t n_ids = ids ? greedy_encode(&r->gt, text, ids, cap) : 0;
    if (!n_ids) {
        free(ids);
        return;
    }
    if (r->tokens_out) {
        fprintf(r->tokens_out, "{\"id\":\"%s\",\"tokens\":[", id);
        for (size_t i = 0; i < n_ids; i++) fprintf(r->tokens_out, "%s%d", i ? "," : "", ids[i]);
        fprintf(r->tokens_out, "]}\n");
    }
    cinfer_grammar_matcher *m = cinfer_grammar_matcher_new(g, r->v, NULL);
    int ok = m != NULL;
    r->instances++;
    for (size_t i = 0; ok && i < n_ids && (long)i < r->max_tokens; i++) {
        double t0 = now_us(r->clock);
        cinfer_grammar_matcher_fill_mask(m, r->mask, r->words);
        double dt = now_us(r->clock) - t0;
        if (r->slow_us > 0 && dt > r->slow_us) printf("  slow mask: %s token %zu: %.0fus\n", id, i, dt);
        if (r->samples) fprintf(r->samples, "token\t%s\t%zu\t%.3f\n", id, i, dt);
        add_sample(&r->mask_us, dt);
        if (i == 0) add_sample(&r->ttfm_us, compile_us + dt);
        r->tokens++;
        uint32_t t = (uint32_t)ids[i];
        if (!(r->mask[t / 32] >> (t % 32) & 1) || cinfer_grammar_matcher_accept(m, t, NULL)) {
            r->rejected_tokens++;
            ok = 0;
        }
    }
    if (ok) r->instances_ok++;
    if (r->samples) fprintf(r->samples, "instance\t%s\t%d\n", id, ok);
    cinfer_grammar_matcher_free(m);
    free(ids);
}

static void run_case(run *r, const json_t *c) {
    const char *subset = json_string_value(json_object_get(c, "subset"));
    const char *id = json_string_value(json_object_get(c, "id"));
    subset_tally *st = subset_of(r, subset ? subset : "?");
    st->schemas++;
    char *schema = json_dumps(json_object_get(c, "schema"), JSON_COMPACT);
    if (!schema) return;
    cinfer_grammar_spec spec = {.kind = CINFER_GRAMMAR_JSON_SCHEMA, .text = schema, .len = strlen(schema)};
    double t0 = now_us(r->clock);
    cinfer_grammar_error err;
    cinfer_grammar *g = cinfer_grammar_compile(&spec, NULL, &err);
    double compile_us = now_us(r->clock) - t0;
    free(schema);
    if (r->samples)
        fprintf(r->samples, "schema\t%s\t%s\t%d\t%.3f\t%s\n", id ? id : "?", subset ? subset : "?", g != NULL,
                compile_us, g ? "" : (err.keyword[0] ? err.keyword : "(limit)"));
    if (!g) {
        if (r->errors) printf("  not compiled: %s [%s] %s\n", id ? id : "?", err.keyword, err.msg);
        return;
    }
    st->compiled++;
    add_sample(&r->compile_us, compile_us);
    size_t i;
    json_t *inst;
    json_array_foreach(json_object_get(c, "instances"), i, inst) {
        char iid[256];
        snprintf(iid, sizeof iid, "%s#%zu", id ? id : "?", i);
        run_instance(r, g, json_string_value(inst), compile_us, iid);
    }
    cinfer_grammar_release(g);
}

static const char usage[] =
    "usage: bench_grammar --vocab V.gguf --cases cases.jsonl [--dump DIR] [--max-tokens N] [--errors]\n"
    "                     [--slow-ms MS] [--clock cpu|wall]\n"
    "  --clock: time masks and compiles in this thread's CPU time (cpu, default: a loaded shared\n"
    "  machine does not inflate it) or in wall time (wall)\n";

int main(int argc, char **argv) {
    const char *vocab_path = NULL, *cases_path = NULL, *dump = NULL;
    long max_tokens = 1000000;
    static const struct option opts[] = {{"vocab", 1, 0, 'v'},      {"cases", 1, 0, 'c'},  {"dump", 1, 0, 'd'},
                                         {"max-tokens", 1, 0, 'm'}, {"errors", 0, 0, 'e'}, {"help", 0, 0, 'h'},
                                         {"slow-ms", 1, 0, 's'},    {"clock", 1, 0, 'k'},  {0, 0, 0, 0}};
    int errors = 0;
    double slow_ms = 0;
    clockid_t clk = CLOCK_THREAD_CPUTIME_ID;
    for (int c; (c = getopt_long(argc, argv, ":v:c:d:m:s:k:eh", opts, NULL)) != -1;) {
        if (c == 'v') vocab_path = optarg;
        else if (c == 'c') cases_path = optarg;
        else if (c == 'd') dump = optarg;
        else if (c == 'e') errors = 1;
        else if (c == 'k' && (!strcmp(optarg, "cpu") || !strcmp(optarg, "wall")))
            clk = strcmp(optarg, "cpu") ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID;
        else if (c == 'k') return fprintf(stderr, "bench_grammar: --clock must be cpu or wall, not '%s'\n", optarg), 2;
        else if (c == 's') {
            if (bench_parse_double("bench_grammar", "--slow-ms", optarg, 0, 1e9, &slow_ms)) return 2;
        } else if (c == 'm') {
            if (bench_parse_long("bench_grammar", "--max-tokens", optarg, 1, 100000000, &max_tokens)) return 2;
        } else if (c == 'h') return fputs(usage, stdout), 0;
        else return bench_bad_option("bench_grammar", c, argv);
    }
    if (!vocab_path || !cases_path) return fputs(usage, stderr), 2;
    cf_err err;
    gguf_file *f;
    tokenizer *tok;
    if (gguf_open(vocab_path, &f, &err) || tokenizer_load_gguf(f, &tok, &err)) {
        fprintf(stderr, "bench_grammar: %s\n", err.msg);
        return 1;
    }
    FILE *vocab_dump = NULL;
    run r = {.tok = tok, .max_tokens = max_tokens, .errors = errors, .slow_us = slow_ms * 1000, .clock = clk};
    if (dump) {
        char p[1024];
        mkdir(dump, 0755);
        snprintf(p, sizeof p, "%s/vocab.txt", dump);
        vocab_dump = fopen(p, "w");
        snprintf(p, sizeof p, "%s/tokens.jsonl", dump);
        r.tokens_out = fopen(p, "w");
        snprintf(p, sizeof p, "%s/cinfer-samples.tsv", dump);
        r.samples = fopen(p, "w");
        if (!vocab_dump || !r.tokens_out || !r.samples)
            return fprintf(stderr, "bench_grammar: cannot write %s\n", dump), 1;
    }
    uint32_t map_cap = 1;
    while (map_cap < 4u * (uint32_t)tokenizer_n_vocab(tok)) map_cap *= 2;
    r.gt = (greedy){.keys = calloc(map_cap, 8), .ids = calloc(map_cap, 4), .cap = map_cap};
    if (!r.gt.keys || !r.gt.ids) return 1;
    double t0 = now_us(r.clock);
    cinfer_grammar_vocab *v = make_vocab(tok, vocab_dump, &r.gt);
    double vocab_ms = (now_us(r.clock) - t0) / 1000;
    if (vocab_dump) fclose(vocab_dump);
    if (dump) { /* the EOS ids, for grammar_peers.py --eos */
        char p[1024];
        snprintf(p, sizeof p, "%s/eos.txt", dump);
        FILE *ef = fopen(p, "w");
        for (int32_t i = 0, first = 1; ef && i < tokenizer_n_vocab(tok); i++)
            if (tokenizer_is_eog(tok, i)) fprintf(ef, "%s%d", first ? "" : ",", i), first = 0;
        if (ef) fclose(ef);
    }
    if (!v) return 1;
    r.v = v;
    r.words = cinfer_grammar_mask_words(v);
    r.mask = malloc(r.words * sizeof *r.mask);
    FILE *cf = fopen(cases_path, "r");
    if (!cf || !r.mask) return fprintf(stderr, "bench_grammar: cannot read %s\n", cases_path), 1;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, cf) > 0) {
        json_t *c = json_loads(line, 0, NULL);
        if (c) run_case(&r, c);
        json_decref(c);
    }
    free(line);
    fclose(cf);
    if (r.tokens_out) fclose(r.tokens_out);
    if (r.samples) fclose(r.samples);
    printf("engine=cinfer vocab=%s n_vocab=%u trie_build=%.0fms clock=%s\n", vocab_path, cinfer_grammar_vocab_size(v),
           vocab_ms, clk == CLOCK_MONOTONIC ? "wall" : "cpu");
    for (int i = 0; i < r.n_subsets; i++)
        printf("  subset %-16s compiled %d/%d\n", r.subsets[i].name, r.subsets[i].compiled, r.subsets[i].schemas);
    printf("  instances %ld (fully accepted %ld), tokens %ld, rejected tokens %ld\n", r.instances, r.instances_ok,
           r.tokens, r.rejected_tokens);
    report("mask", &r.mask_us);
    report("compile", &r.compile_us);
    report("time-to-first-mask", &r.ttfm_us);
    cinfer_grammar_vocab_free(v);
    tokenizer_free(tok);
    gguf_close(f);
    free(r.mask);
    free(r.gt.keys);
    free(r.gt.ids);
    free(r.mask_us.v);
    free(r.compile_us.v);
    free(r.ttfm_us.v);
    return 0;
}
