/* peak.h - measured compute peaks of this machine, for roofline reporting in
 * benchmarks: the throughput of independent f32 FMAs and (where the CPU has
 * AVX512-VNNI) int8 dot-product instructions, on all threads of a pool.
 * Reported as operations per second (one FMA = 2 ops, one int8 MAC = 2 ops). */
#ifndef CINFER_TENSOR_PEAK_H
#define CINFER_TENSOR_PEAK_H

#include "base/threadpool.h"

typedef struct peak_ops {
    double f32_flops; /* with the active ISA's widest FMA */
    double int8_ops; /* AVX512-VNNI vpdpbusd; 0 if the active ISA has none */
} peak_ops;

peak_ops kern_measure_peak(thread_pool *pool);

#endif
