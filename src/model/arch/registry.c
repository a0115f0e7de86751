/* registry.c - the list of architecture families (arch.h). Adding a family
 * is one line here plus its file; the order only decides the order of names
 * in error messages. Const data, no state. */
#include <stdio.h>
#include <string.h>

#include "model/arch/arch.h"

static const model_arch *const registry[] = {
    &model_arch_llama,
    &model_arch_deepseek2,
    &model_arch_gemma2,
    &model_arch_deepseek4,
};

#define N_ARCH (sizeof registry / sizeof registry[0])

const model_arch *model_arch_find(const char *name) {
    for (size_t i = 0; i < N_ARCH; i++)
        for (const char *const *n = registry[i]->names; *n; n++)
            if (!strcmp(*n, name)) return registry[i];
    return NULL;
}

void model_arch_list(char *buf, size_t n) {
    size_t at = 0;
    if (n) buf[0] = 0;
    for (size_t i = 0; i < N_ARCH; i++)
        for (const char *const *a = registry[i]->names; *a && at < n; a++) {
            int w = snprintf(buf + at, n - at, "%s%s", at ? ", " : "", *a);
            if (w < 0) return;
            at += (size_t)w;
        }
}
