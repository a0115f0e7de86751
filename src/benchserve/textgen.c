/* textgen.c - see textgen.h. The word list is fixed forever: changing it
 * changes every generated workload (results stop being comparable). */
#include "benchserve/textgen.h"

#include <stdio.h>

static const char *const words[] = {
    "the",      "a",       "and",    "to",     "was",    "he",      "she",    "it",    "they",  "in",    "on",
    "with",     "of",      "for",    "big",    "little", "dog",     "cat",    "bird",  "tree",  "house", "ball",
    "girl",     "boy",     "mom",    "dad",    "friend", "day",     "sun",    "park",  "red",   "blue",  "green",
    "happy",    "sad",     "good",   "fun",    "play",   "run",     "jump",   "look",  "see",   "saw",   "went",
    "said",     "had",     "have",   "is",     "are",    "were",    "her",    "his",   "them",  "you",   "we",
    "all",      "so",      "very",   "time",   "once",   "upon",    "there",  "lived", "named", "loved", "wanted",
    "found",    "made",    "came",   "then",   "one",    "two",     "toy",    "box",   "car",   "boat",  "cake",
    "water",    "sky",     "flower", "garden", "walk",   "school",  "book",   "read",  "nice",  "kind",  "help",
    "together", "laughed", "smiled", "asked",  "shared", "learned", "new",    "old",   "small", "bear",  "fish",
    "duck",     "frog",    "rabbit", "mouse",  "lion",   "horse",   "cow",    "pig",   "star",  "moon",  "rain",
    "snow",     "wind",    "hill",   "river",  "road",   "door",    "window", "bed",   "chair", "table", "cup",
    "hat",      "shoe",    "bag",    "apple",  "bread",  "milk",    "cookie", "candy", "song",  "game",  "story",
    "idea",     "home",    "room",   "light",
};
#define N_WORDS (sizeof words / sizeof words[0])

uint64_t bs_rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t bs_rng_mix(uint64_t a, uint64_t b) {
    uint64_t s = a ^ (b * 0xd6e8feb86659fd93ull);
    return bs_rng_next(&s);
}

double bs_rng_unit(uint64_t *s) { return (double)(bs_rng_next(s) >> 11) * 0x1.0p-53; }

int textgen_words(bs_buf *b, uint64_t *rng, long n) {
    for (long i = 0; i < n; i++) {
        const char *w = words[bs_rng_next(rng) % N_WORDS];
        if (bs_buf_puts(b, w) || bs_buf_append(b, " ", 1)) return -1;
    }
    return 0;
}

int textgen_block_text(bs_buf *b, uint64_t hash_id, long n) {
    uint64_t s = bs_rng_mix(0x7472616365ull, hash_id);
    return textgen_words(b, &s, n);
}

void textgen_block_ids(int32_t *out, uint64_t hash_id, long n, int32_t lo, int32_t hi) {
    uint64_t s = bs_rng_mix(0x746f6b656eull, hash_id);
    uint64_t span = (uint64_t)(hi - lo);
    for (long i = 0; i < n; i++) out[i] = lo + (int32_t)(bs_rng_next(&s) % span);
}

/* Each template is a few lines of code; %s (first) is a name, %d a constant. The
 * word cost of one is roughly its whitespace-separated pieces. */
static const struct {
    const char *fmt;
    int words;
} code_templates[] = {
    {"def %s(x, y):\n    total = x + y * %d\n    return total\n\n", 13},
    {"for item in %s():\n    total += item * %d\n\n", 9},
    {"class %s:\n    def __init__(self):\n        self.value = %d\n\n", 8},
    {"if %s > %d:\n    print(\"done\")\nelse:\n    pass\n\n", 9},
    {"int %s(int n) {\n    return n * %d;\n}\n\n", 10},
};
#define N_TEMPLATES (sizeof code_templates / sizeof code_templates[0])

int textgen_code(bs_buf *b, uint64_t *rng, long n) {
    static const char *const names[] = {"compute", "update", "handle", "parse", "render", "load", "store", "check"};
    long done = 0;
    while (done < n) {
        size_t t = bs_rng_next(rng) % N_TEMPLATES;
        char name[48];
        snprintf(name, sizeof name, "%s_%u", names[bs_rng_next(rng) % 8], (unsigned)(bs_rng_next(rng) % 16));
        int k = (int)(bs_rng_next(rng) % 100);
        if (bs_buf_printf(b, code_templates[t].fmt, name, k)) return -1;
        done += code_templates[t].words;
    }
    return 0;
}
