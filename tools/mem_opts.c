/* mem_opts.c - see mem_opts.h: the available-memory start-up check and
 * --mlock for serve and run. */
#include "mem_opts.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"

int64_t mem_available_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    if (fclose(f) != 0) return -1;
    return kb >= 0 ? (int64_t)kb * 1024 : -1;
}

static double gib(int64_t b) { return (double)b / (double)(1ll << 30); }

int mem_check_fits(const char *cmd, const char *model_path, int64_t kv_bytes, const char *kv_opt,
                   bool weights_file_backed) {
    struct stat st;
    if (stat(model_path, &st) != 0) return 0; /* the load reports the file */
    int64_t avail = mem_available_bytes();
    if (avail < 0) return 0;
    if (weights_file_backed) { /* page cache: reclaimable, never an OOM kill; only the KV pool is anonymous */
        if ((int64_t)st.st_size + kv_bytes > avail)
            fprintf(stderr,
                    "%s: note: the weights (%.2f GiB, mapped from the weights cache) and the KV pool exceed "
                    "available memory (%.2f GiB): pages not resident are read from disk as needed\n",
                    cmd, gib((int64_t)st.st_size), gib(avail));
        if (kv_bytes <= avail) return 0;
        return cli_fail("%s: not enough memory: the KV pool needs %.2f GiB, but only %.2f GiB is available "
                        "(MemAvailable); lower %s or pass --no-memory-check",
                        cmd, gib(kv_bytes), gib(avail), kv_opt ? kv_opt : "");
    }
    int64_t need = (int64_t)st.st_size + kv_bytes;
    if (need <= avail) return 0;
    if (kv_bytes > 0)
        return cli_fail("%s: not enough memory: the weights (%.2f GiB) and the KV pool (%.2f GiB) need %.2f GiB, "
                        "but only %.2f GiB is available (MemAvailable); lower %s or pass --no-memory-check",
                        cmd, gib((int64_t)st.st_size), gib(kv_bytes), gib(need), gib(avail), kv_opt ? kv_opt : "");
    return cli_fail("%s: not enough memory: the weights need %.2f GiB, but only %.2f GiB is available "
                    "(MemAvailable); pass --no-memory-check to try anyway",
                    cmd, gib(need), gib(avail));
}

int mem_lock_model(const char *cmd, model *m) {
    cf_err err = {0};
    if (model_lock_memory(m, &err)) return cli_fail("%s: %s", cmd, err.msg);
    return 0;
}
