/* bench_tokenize.c - byte-level BPE encode throughput on one core.
 *
 * Generates a deterministic mixed corpus (English prose, C/Python-like code,
 * CJK text, some digits and emoji; about 4 MB, xorshift-driven) and encodes
 * it with each vocabulary given (default: the deepseek-llm and gpt-2 vocabs
 * under $CINFER_SHARED/fixtures/vocab), in 64 KB documents, best of 3 runs.
 * Prints MB/s (10^6 bytes of input per second of this thread's CPU time, so
 * other load on the machine does not count; wall time too) and tokens/s.
 * Usage: bench_tokenize [vocab.gguf ...]   (CINFER_SHARED defaults to ../shared; see --help) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_cli.h"
#include "format/gguf.h"
#include "text/tokenizer.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *s) {
    size_t k = strlen(s);
    if (b->n + k > b->cap) {
        b->cap = 2 * (b->n + k);
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, s, k);
    b->n += k;
}

static const char *const words[] = {
    "the",    "of",   "and",    "a",        "to",         "in",        "is",        "you",          "that",
    "it",     "he",   "was",    "for",      "on",         "are",       "as",        "with",         "his",
    "they",   "I",    "at",     "be",       "this",       "have",      "from",      "or",           "one",
    "had",    "by",   "word",   "but",      "not",        "what",      "all",       "were",         "we",
    "when",   "your", "can",    "said",     "there",      "use",       "an",        "each",         "which",
    "she",    "do",   "how",    "their",    "if",         "will",      "up",        "other",        "about",
    "out",    "many", "then",   "them",     "these",      "so",        "some",      "her",          "would",
    "make",   "like", "him",    "into",     "time",       "has",       "look",      "two",          "more",
    "write",  "go",   "see",    "number",   "lighthouse", "tokenizer", "inference", "quantization", "throughput",
    "don't",  "it's", "we'll",  "Margaret", "London",     "September", "1984",      "3.14159",      "42",
    "e-mail", "(see", "below)", "U.S.",     "well-known"};
static const char *const code[] = {"for (int i = 0; i < n; i++) {\n",
                                   "    sum += a[i] * b[i];\n",
                                   "}\n",
                                   "def encode(self, text):\n",
                                   "    return [self.vocab[t] for t in text.split()]\n",
                                   "#include <stdio.h>\n",
                                   "    if (x == NULL) return -1;\n",
                                   "\tprintf(\"%d\\n\", value);\n",
                                   "class Tokenizer:\n",
                                   "    # TODO: handle unicode\n",
                                   "x = {'a': 1, 'b': [2, 3]}\n",
                                   "    while (lo < hi) { size_t mid = (lo + hi) / 2; }\n",
                                   "        self.cache = {}\n",
                                   "\n"};
static const char *const cjk[] = {"我想在",   "工作",   "中文", "的", "是", "一个",     "分词器",   "测试", "日本語の",
                                  "テキスト", "한국어", "문장", "。", "，", "天气很好", "人工智能", "😁",    "🦙"};

static sbuf make_corpus(size_t target) {
    sbuf b = {0};
    while (b.n < target) {
        uint32_t kind = rnd(10);
        if (kind < 6) { /* a paragraph of English */
            int n = 20 + (int)rnd(60);
            for (int i = 0; i < n; i++) {
                if (i) put(&b, rnd(12) ? " " : ", ");
                put(&b, words[rnd(sizeof words / sizeof words[0])]);
            }
            put(&b, ".\n\n");
        } else if (kind < 9) { /* code */
            int n = 3 + (int)rnd(12);
            for (int i = 0; i < n; i++) put(&b, code[rnd(sizeof code / sizeof code[0])]);
        } else { /* CJK */
            int n = 10 + (int)rnd(40);
            for (int i = 0; i < n; i++) put(&b, cjk[rnd(sizeof cjk / sizeof cjk[0])]);
            put(&b, "\n");
        }
    }
    return b;
}

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int bench_vocab(const char *path, const sbuf *c) {
    gguf_file *f = NULL;
    tokenizer *t = NULL;
    cf_err err = {{0}};
    if (gguf_open(path, &f, &err) != 0 || tokenizer_load_gguf(f, &t, &err) != 0) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        gguf_close(f);
        return 1;
    }
    gguf_close(f);
    const size_t doc = 64 * 1024;
    double best = 1e30, best_wall = 1e30;
    size_t tokens = 0;
    for (int run = 0; run < 3; run++) {
        double t0 = clock_s(CLOCK_THREAD_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
        tokens = 0;
        for (size_t off = 0; off < c->n; off += doc) {
            size_t len = c->n - off < doc ? c->n - off : doc;
            int32_t *ids = NULL;
            size_t n = 0;
            if (tokenizer_encode(t, c->p + off, len, false, false, &ids, &n, &err) != 0) {
                fprintf(stderr, "encode: %s\n", err.msg);
                return 1;
            }
            tokens += n;
            free(ids);
        }
        double dt = clock_s(CLOCK_THREAD_CPUTIME_ID) - t0, dw = clock_s(CLOCK_MONOTONIC) - w0;
        if (dt < best) best = dt;
        if (dw < best_wall) best_wall = dw;
    }
    const char *name = strrchr(path, '/');
    printf("%-30s %5.2f MB in %.3f s CPU: %6.1f MB/s/core, %5.2f M tokens/s (wall %.3f s: %.1f MB/s; %zu tokens, "
           "%.2f bytes/token)\n",
           name ? name + 1 : path, (double)c->n / 1e6, best, (double)c->n / 1e6 / best, (double)tokens / 1e6 / best,
           best_wall, (double)c->n / 1e6 / best_wall, tokens, (double)c->n / (double)tokens);
    tokenizer_free(t);
    return 0;
}

static const char k_usage[] =
    "usage: bench_tokenize [VOCAB.gguf ...]\n"
    "Tokenizer encode throughput on one core over a ~4 MB mixed corpus (prose, code, CJK, emoji),\n"
    "64 KB documents, best of 3: MB/s and tokens/s per vocabulary. Default vocabularies:\n"
    "$CINFER_SHARED/fixtures/vocab/ggml-vocab-{deepseek-llm,gpt-2}.gguf (CINFER_SHARED defaults to ../shared).\n"
    "Not a test: numbers depend on the machine.\n"
    "  -h, --help   this text\n";

/* Checks the command line (options: only --help). Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv) {
    static const struct option longs[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
        if (c != 'h') return bench_bad_option("bench_tokenize", c, argv);
        fputs(k_usage, stdout);
        return 0;
    }
    return -1;
}

int main(int argc, char **argv) {
    int prc = parse_args(argc, argv);
    if (prc >= 0) return prc;
    sbuf c = make_corpus(4u << 20);
    const char *shared = getenv("CINFER_SHARED") ? getenv("CINFER_SHARED") : "../shared";
    int rc = 0;
    printf("corpus: %zu bytes (English / code / CJK mix, deterministic), 64 KB documents, best of 3, 1 thread\n", c.n);
    if (optind < argc) {
        for (int i = optind; i < argc; i++) rc |= bench_vocab(argv[i], &c);
    } else {
        static const char *const defaults[] = {"ggml-vocab-deepseek-llm.gguf", "ggml-vocab-gpt-2.gguf"};
        for (size_t i = 0; i < 2; i++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/fixtures/vocab/%s", shared, defaults[i]);
            rc |= bench_vocab(path, &c);
        }
    }
    free(c.p);
    return rc;
}
