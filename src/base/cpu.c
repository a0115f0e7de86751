/* cpu.c - cpuid-based feature detection and ISA selection (see cpu.h).
 * The detected features and the active ISA are process-wide singletons,
 * initialised on first use. */
#include "base/cpu.h"

#include <cpuid.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "base/log.h"

typedef struct cpu_features {
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avx512vbmi;
    /* AMX-TILE with AMX-BF16 / AMX-INT8, tile state saved by the OS and Linux's
     * per-process permission granted (asked once, at detection) */
    bool amx_bf16, amx_int8;
} cpu_features;

static cpu_features g_features;
static int g_detected;
static int g_active = -1;
static bool g_amx_allowed = true; /* cpu_amx_allow: the bf16 attention tiles */
static int g_amx_on = -1; /* int8 matmul tiles: -1 not decided yet (CINFER_AMX), cpu_amx_force */

static unsigned long long read_xcr0(void) {
    unsigned int eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

#ifdef __linux__
#define CPU_ARCH_REQ_XCOMP_PERM 0x1023
#define CPU_XFEATURE_XTILEDATA 18
static bool amx_request_permission(void) {
    return syscall(SYS_arch_prctl, CPU_ARCH_REQ_XCOMP_PERM, CPU_XFEATURE_XTILEDATA) == 0;
}
#else
static bool amx_request_permission(void) { return false; }
#endif

static void detect(void) {
    if (g_detected) return;
    unsigned int a, b, c, d;
    memset(&g_features, 0, sizeof g_features);
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        bool osxsave = (c >> 27) & 1;
        bool avx = (c >> 28) & 1;
        unsigned long long xcr0 = osxsave ? read_xcr0() : 0;
        bool ymm_ok = avx && (xcr0 & 0x6) == 0x6;
        bool zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0;
        g_features.fma = ymm_ok && ((c >> 12) & 1);
        g_features.f16c = ymm_ok && ((c >> 29) & 1);
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
            g_features.avx2 = ymm_ok && ((b >> 5) & 1);
            g_features.avx512f = zmm_ok && ((b >> 16) & 1);
            g_features.avx512dq = zmm_ok && ((b >> 17) & 1);
            g_features.avx512bw = zmm_ok && ((b >> 30) & 1);
            g_features.avx512vl = zmm_ok && ((b >> 31) & 1);
            g_features.avx512vnni = zmm_ok && ((c >> 11) & 1);
            g_features.avx512vbmi = zmm_ok && ((c >> 1) & 1);
            /* AMX-BF16 (edx 22) + AMX-TILE (24), the OS saving tile state
             * (XCR0 17, 18), and Linux's per-process permission to use it */
            bool amx_tiles = (xcr0 & 0x60000) == 0x60000 && ((d >> 24) & 1);
            bool amx_perm = amx_tiles && (((d >> 22) & 1) || ((d >> 25) & 1)) && amx_request_permission();
            g_features.amx_bf16 = amx_perm && ((d >> 22) & 1);
            g_features.amx_int8 = amx_perm && ((d >> 25) & 1); /* AMX-INT8: edx 25 */
        }
        if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) g_features.avx512bf16 = zmm_ok && ((a >> 5) & 1);
    }
    g_detected = 1;
}

bool cpu_has_avx512_vbmi_bf16(void) {
    detect();
    return cpu_isa_supported(CPU_ISA_AVX512) && g_features.avx512vbmi && g_features.avx512bf16;
}

bool cpu_isa_supported(cpu_isa isa) {
    detect();
    const cpu_features *f = &g_features;
    switch (isa) {
    case CPU_ISA_SCALAR: return true;
    case CPU_ISA_AVX2: return f->avx2 && f->fma && f->f16c;
    case CPU_ISA_AVX512:
        return f->avx2 && f->fma && f->f16c && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512vnni;
    default: return false;
    }
}

bool cpu_has_avx512_bf16(void) {
    detect();
    return cpu_isa_supported(CPU_ISA_AVX512) && g_features.avx512bf16;
}

bool cpu_has_amx_bf16(void) {
    detect();
    const char *env = getenv("CINFER_AMX");
    return g_amx_allowed && !(env && !strcmp(env, "0")) && cpu_has_avx512_bf16() && g_features.amx_bf16;
}

void cpu_amx_allow(bool allow) { g_amx_allowed = allow; }

static const char *const isa_names[] = {"scalar", "avx2", "avx512"};

const char *cpu_isa_name(cpu_isa isa) { return (unsigned)isa < CPU_ISA_COUNT ? isa_names[isa] : "?"; }

int cpu_isa_parse(const char *s, cpu_isa *out) {
    for (int i = 0; i < CPU_ISA_COUNT; i++)
        if (strcmp(s, isa_names[i]) == 0) {
            *out = (cpu_isa)i;
            return 0;
        }
    return -1;
}

static cpu_isa best_supported(void) {
    for (int i = CPU_ISA_COUNT - 1; i > 0; i--)
        if (cpu_isa_supported((cpu_isa)i)) return (cpu_isa)i;
    return CPU_ISA_SCALAR;
}

cpu_isa cpu_isa_active(void) {
    if (g_active >= 0) return (cpu_isa)g_active;
    cpu_isa isa = best_supported();
    const char *env = getenv("CINFER_CPU");
    if (env && *env) {
        cpu_isa want;
        if (cpu_isa_parse(env, &want) != 0)
            LOG_WARN("CINFER_CPU=%s is not one of avx512|avx2|scalar; using %s", env, cpu_isa_name(isa));
        else if (!cpu_isa_supported(want))
            LOG_WARN("CINFER_CPU=%s is not supported by this CPU; using %s", env, cpu_isa_name(isa));
        else isa = want;
    }
    g_active = (int)isa;
    return isa;
}

void cpu_isa_force(cpu_isa isa) {
    if (cpu_isa_supported(isa)) g_active = (int)isa;
}

bool cpu_amx_supported(void) {
    detect();
    return g_features.amx_int8 && cpu_isa_supported(CPU_ISA_AVX512);
}

bool cpu_amx_active(void) {
    if (g_amx_on < 0) {
        const char *env = getenv("CINFER_AMX");
        g_amx_on = cpu_amx_supported() && !(env && !strcmp(env, "0"));
    }
    return g_amx_on == 1 && cpu_isa_active() == CPU_ISA_AVX512;
}

void cpu_amx_force(bool on) { g_amx_on = on && cpu_amx_supported(); }
