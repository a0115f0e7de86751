/* xfer_host.c - see xfer_host.h. Reads /proc only; no state. */
#include "xfer/xfer_host.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int ns_inode(const char *name, unsigned long long *ino) {
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/self/ns/%s", name);
    if (stat(path, &st)) return -1;
    *ino = (unsigned long long)st.st_ino;
    return 0;
}

int xfer_host_id(char *out, size_t cap) {
    char boot[64] = {0};
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) return -1;
    int ok = fgets(boot, sizeof boot, f) != NULL;
    fclose(f);
    boot[strcspn(boot, "\n")] = 0;
    unsigned long long net, ipc, pid;
    if (!ok || !boot[0] || ns_inode("net", &net) || ns_inode("ipc", &ipc) || ns_inode("pid", &pid)) return -1;
    int n = snprintf(out, cap, "%s/%llu/%llu/%llu", boot, net, ipc, pid);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* Field 22 (starttime) of /proc/PID/stat and the state (field 3); the command name (field 2) may hold
 * spaces and ')'. */
static int stat_of(int64_t pid, char *state, uint64_t *out) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    unsigned long long v = 0;
    /* after ')': state(3) ppid(4) ... starttime(22): skip 18 fields after the state */
    if (sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", state, &v) !=
        2)
        return -1;
    *out = v;
    return 0;
}

int xfer_process_self(int64_t *pid, uint64_t *start_ticks) {
    char state;
    *pid = (int64_t)getpid();
    return stat_of(*pid, &state, start_ticks);
}

int xfer_process_alive(int64_t pid, uint64_t start_ticks) {
    if (pid <= 0) return -1;
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%lld", (long long)pid);
    if (stat("/proc/self", &st)) return -1; /* no /proc: cannot tell */
    uint64_t t;
    char state;
    if (stat(path, &st) || stat_of(pid, &state, &t)) return 0;
    return t == start_ticks && state != 'Z' && state != 'X' ? 1 : 0; /* a zombie has exited */
}
