/* sim_rng.h - the simulator's deterministic random numbers: xoshiro256**
 * seeded through splitmix64 from --seed, plus the distributions the workload
 * and speculative-acceptance models draw from. A generator is a value owned
 * by its user; nothing here reads a clock or global state, so one seed gives
 * one stream on every machine. */
#ifndef CINFER_SIM_SIM_RNG_H
#define CINFER_SIM_SIM_RNG_H

#include <stdint.h>

typedef struct sim_rng {
    uint64_t s[4];
} sim_rng;

void sim_rng_seed(sim_rng *r, uint64_t seed);
uint64_t sim_rng_next(sim_rng *r);
/* Uniform in [0, 1). */
double sim_rng_uniform(sim_rng *r);
/* Exponential with the given mean (> 0). */
double sim_rng_exp(sim_rng *r, double mean);
/* Log-normal with the given median (> 0) and log-space sigma (>= 0). */
double sim_rng_lognormal(sim_rng *r, double median, double sigma);
/* The splitmix64 finalizer: a bijective 64-bit mix (chain keys). */
uint64_t sim_mix64(uint64_t x);

#endif
