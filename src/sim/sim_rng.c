/* sim_rng.c - see sim_rng.h. */
#include "sim/sim_rng.h"

#include <math.h>

uint64_t sim_mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void sim_rng_seed(sim_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) {
        x += 0x9E3779B97F4A7C15ull;
        r->s[i] = sim_mix64(x);
    }
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sim_rng_next(sim_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double sim_rng_uniform(sim_rng *r) { return (double)(sim_rng_next(r) >> 11) * 0x1.0p-53; }

double sim_rng_exp(sim_rng *r, double mean) { return -mean * log1p(-sim_rng_uniform(r)); }

double sim_rng_lognormal(sim_rng *r, double median, double sigma) {
    double u1 = sim_rng_uniform(r), u2 = sim_rng_uniform(r);
    double z = sqrt(-2.0 * log1p(-u1)) * cos(2.0 * M_PI * u2);
    return median * exp(sigma * z);
}
