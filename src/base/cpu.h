/* cpu.h - CPU feature detection and the kernel ISA choice.
 *
 * The active ISA is chosen once from cpuid (best supported of avx512 > avx2 >
 * scalar) unless CINFER_CPU=avx512|avx2|scalar forces one (forcing an ISA the
 * CPU lacks falls back to the best supported one with a warning). Tests call
 * cpu_isa_force() to run every kernel on every path the machine supports.
 * "avx512" means F+BW+VL+DQ+VNNI (+BF16 used where present); "avx2" means
 * AVX2+FMA+F16C. */
#ifndef CINFER_BASE_CPU_H
#define CINFER_BASE_CPU_H

#include <stdbool.h>

typedef enum { CPU_ISA_SCALAR = 0, CPU_ISA_AVX2 = 1, CPU_ISA_AVX512 = 2, CPU_ISA_COUNT } cpu_isa;

bool cpu_isa_supported(cpu_isa isa);
/* AVX-512 (as above) plus VBMI and BF16: the extra extensions some kernels
 * use where present (kernels_fp8_avx512.c). */
bool cpu_has_avx512_vbmi_bf16(void);
/* The ISA kernels use now. */
cpu_isa cpu_isa_active(void);
/* Forces an ISA (must be supported); used by tests and benchmarks. */
void cpu_isa_force(cpu_isa isa);
const char *cpu_isa_name(cpu_isa isa);
/* Whether the CPU has AVX-512 BF16 (vdpbf16ps, vcvtne2ps2bf16). */
bool cpu_has_avx512_bf16(void);
/* Whether AMX-BF16 tiles are usable: the CPU has them, the OS saves their
 * state, Linux granted this process permission (arch_prctl
 * ARCH_REQ_XCOMP_PERM, asked once at detection; process-wide), and
 * cpu_amx_allow(false) has not turned them off (tests and benchmarks use it to
 * run the AVX-512 BF16 path on a machine with AMX). */
bool cpu_has_amx_bf16(void);
void cpu_amx_allow(bool allow);
/* Parses "avx512|avx2|scalar"; returns -1 if unknown. */
int cpu_isa_parse(const char *s, cpu_isa *out);

/* AMX-INT8 tile multiplies (Sapphire Rapids and later), an addition to the avx512 ISA: supported
 * when cpuid reports AMX-TILE and AMX-INT8, the OS enables the tile state (XCR0 bits 17 and 18)
 * and grants this process tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked once, at CPU
 * detection). Active (the avx512 kernels multiply Q8_0 / Q4_0 weights by more than 6 activation
 * rows with tiles) when supported, avx512 is the active ISA and CINFER_AMX is not "0". Tests and
 * benchmarks switch it with cpu_amx_force (on only if supported). */
bool cpu_amx_supported(void);
bool cpu_amx_active(void);
void cpu_amx_force(bool on);

#endif
