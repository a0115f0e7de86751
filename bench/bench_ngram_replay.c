/* bench_ngram_replay.c - the n-gram drafter and the draft-length policy
 * replayed over recorded greedy sequences (not a test). Input: JSON lines
 * {"prompt": ids, "output": ids} (bench_spec -o). A greedy verify accepts a
 * draft exactly while it equals the recorded output, so replaying the
 * engine's own drafter (spec_ngram.c) and policy (spec_drafter.c) over the
 * recorded output gives the acceptance a live run would get, without the
 * model: drafted / accepted tokens, verifies and the acceptance length
 * (tokens per verify). Given a bench_verify_cost output (-c: its "cpu vs 1
 * row" column), it also prints the decode speed-up the replay implies:
 * output tokens / the summed cost of the forwards that produced them (a
 * forward of 1 + k rows costs cost[1 + k]; a plain step 1). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cli.h"
#include "cinfer/engine.h"
#include "engine/spec_drafter.h"

static const char *usage =
    "usage: bench_ngram_replay -s SEQS.jsonl [-k K] [-c VERIFY_COST.txt]\n"
    "Replays the n-gram drafter and draft-length policy over recorded greedy sequences\n"
    "(bench_spec -o): drafted / accepted tokens, acceptance length, and with -c (bench_verify_cost\n"
    "output) the implied decode speed-up.\n"
    "  -k N       the requests' k (default 8, at most 16)\n"
    "  -h, --help this text\n";

#define MAX_ROWS (CINFER_SPEC_MAX_K + 1)

typedef struct replay_stat {
    int64_t tokens, verifies, drafted, accepted, plain_steps;
    int64_t len_hist[MAX_ROWS]; /* verifies that accepted a drafts */
    int64_t novel; /* output tokens after the first that occur nowhere earlier in the sequence */
    double cost; /* summed forward cost, in one-row units */
} replay_stat;

/* cost[r]: a forward of r rows relative to one row (r = 1..MAX_ROWS); 0: unknown. */
static int load_cost(const char *path, double *cost) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        int rows;
        double wall, wall_rel, cpu, cpu_rel;
        if (sscanf(line, "%d %lf %lf %lf %lf", &rows, &wall, &wall_rel, &cpu, &cpu_rel) == 5 && rows >= 1 &&
            rows <= MAX_ROWS && cost[rows] == 0) {
            cost[rows] = cpu_rel;
            n++;
        }
    }
    fclose(f);
    return n > 0 ? 0 : -1;
}

/* One sequence: prompt seq[0..n_prompt), output seq[n_prompt..n). The first output token comes
 * from the prefill; every later step is a plain decode or a verify. */
static int replay_one(const int32_t *seq, int32_t n_prompt, int32_t n, int32_t k, const double *cost, replay_stat *st) {
    spec_drafter d;
    cf_err err;
    if (spec_drafter_create(CINFER_SPEC_NGRAM, n + MAX_ROWS, &d, &err)) return -1;
    spec_policy pol;
    spec_policy_init(&pol, k, true);
    int32_t *buf = malloc((size_t)(n + MAX_ROWS) * sizeof(int32_t));
    if (!buf) {
        spec_drafter_free(&d);
        return -1;
    }
    memcpy(buf, seq, (size_t)n * sizeof(int32_t));
    for (int32_t i = n_prompt + 1; i < n; i++) {
        int32_t j = 0;
        while (j < i && seq[j] != seq[i]) j++;
        st->novel += j == i;
    }
    int32_t len = n_prompt + 1;
    while (len < n) {
        int32_t room = n - len - 1; /* the bonus token counts too */
        int32_t want = room > 0 ? spec_policy_want(&pol, room, true) : 0, got = 0;
        if (want > 0) {
            bool has_q = false;
            int32_t *out = buf + n; /* scratch past the recorded sequence */
            got = d.ops->propose(d.state, buf, len, want, out, NULL, &has_q);
            if (got < 0) got = 0;
            int32_t a = 0;
            while (a < got && out[a] == seq[len + a]) a++;
            spec_policy_update(&pol, got, a);
            if (got > 0) {
                st->verifies++;
                st->drafted += got;
                st->accepted += a;
                st->len_hist[a]++;
                st->cost += cost[1 + got] > 0 ? cost[1 + got] : 1.0;
                st->tokens += a + 1;
                len += a + 1;
                continue;
            }
        }
        st->plain_steps++;
        st->cost += 1.0;
        st->tokens++;
        len++;
    }
    free(buf);
    spec_drafter_free(&d);
    return 0;
}

static int32_t *ids_of(json_t *arr, int32_t *out) {
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) out[i] = (int32_t)json_integer_value(v);
    return out;
}

int main(int argc, char **argv) {
    const char *spath = NULL, *cpath = NULL;
    long k = 8;
    static const struct option lo[] = {{"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, ":s:k:c:h", lo, NULL)) != -1) {
        switch (c) {
        case 's': spath = optarg; break;
        case 'c': cpath = optarg; break;
        case 'k':
            if (bench_parse_long("bench_ngram_replay", "-k", optarg, 1, CINFER_SPEC_MAX_K, &k)) return 2;
            break;
        case 'h': fputs(usage, stdout); return 0;
        default: return bench_bad_option("bench_ngram_replay", c, argv);
        }
    }
    if (!spath) {
        fprintf(stderr, "bench_ngram_replay: -s SEQS is required (see --help)\n");
        return 2;
    }
    double cost[MAX_ROWS + 1] = {0};
    if (cpath && load_cost(cpath, cost)) {
        fprintf(stderr, "bench_ngram_replay: no cost rows in %s\n", cpath);
        return 1;
    }
    FILE *f = fopen(spath, "r");
    if (!f) {
        fprintf(stderr, "bench_ngram_replay: cannot read %s\n", spath);
        return 1;
    }
    replay_stat st = {0};
    char *line = NULL;
    size_t cap = 0;
    int n_seq = 0, rc = 0;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        json_t *p = json_object_get(j, "prompt"), *o = json_object_get(j, "output");
        size_t np = json_array_size(p), no = json_array_size(o);
        int32_t *seq = np + no > 0 ? malloc((np + no) * sizeof(int32_t)) : NULL;
        if (!j || np == 0 || no == 0 || !seq) {
            fprintf(stderr, "bench_ngram_replay: %s: a line without prompt and output ids\n", spath);
            rc = 1;
        } else {
            ids_of(p, seq);
            ids_of(o, seq + np);
            if (replay_one(seq, (int32_t)np, (int32_t)(np + no), (int32_t)k, cost, &st)) rc = 1;
            n_seq++;
        }
        free(seq);
        json_decref(j);
    }
    free(line);
    fclose(f);
    if (rc) return rc;
    printf("# bench_ngram_replay -s %s -k %ld%s%s (%d sequences)\n", spath, k, cpath ? " -c " : "", cpath ? cpath : "",
           n_seq);
    double v = st.verifies > 0 ? (double)st.verifies : 1.0;
    printf("tokens %lld  steps %lld (verifies %lld, plain %lld)  drafted %lld  accepted %lld (%.0f%%)\n",
           (long long)st.tokens, (long long)(st.verifies + st.plain_steps), (long long)st.verifies,
           (long long)st.plain_steps, (long long)st.drafted, (long long)st.accepted,
           st.drafted ? 100.0 * (double)st.accepted / (double)st.drafted : 0.0);
    printf("per verify: %.2f drafted, %.2f accepted; acceptance length %.2f; tokens per step %.2f\n",
           (double)st.drafted / v, (double)st.accepted / v, (double)st.accepted / v + 1.0,
           (double)st.tokens / (double)(st.verifies + st.plain_steps));
    printf("accepted drafts per verify:");
    for (int a = 0; a < MAX_ROWS; a++)
        if (st.len_hist[a]) printf(" %d:%lld", a, (long long)st.len_hist[a]);
    printf("\n");
    /* A drafter that proposes only tokens of the sequence cannot draft a novel token: each needs a
     * step of its own (as its correction or bonus token). */
    int64_t bound = st.novel > 0 ? st.novel : 1;
    printf("novel tokens %lld: at most %.2f tokens per step for any drafter over the sequence itself\n",
           (long long)st.novel, (double)st.tokens / (double)bound);
    if (cpath) printf("implied decode speed-up (cost table): %.2fx\n", (double)st.tokens / st.cost);
    return 0;
}
