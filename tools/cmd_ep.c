/* cmd_ep.c - `cinfer ep stats HOST:PORT...`: the expert-parallel view of a
 * running `mpirun ... cinfer serve --ep` job. Reads each rank's /metrics
 * (plain HTTP GET, one connection per rank, a timeout per rank) and prints
 * one row per rank: rows its engine dispatched, rows it computed (its expert
 * load and share), cross-rank bytes per dispatched row, round-thread time in
 * all-to-all / expert compute / idle, rebalances and the imbalance
 * before/after the last one; then the job's load imbalance (max/mean rows
 * computed). --ranks N expands one HOST:PORT to N consecutive ports. A rank
 * that does not answer, or answers without EP rows: one line, exit 1. */
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/cli_opt.h"
#include "commands.h"
#include "ep/ep_stats_text.h"

#define EP_MAX_RANKS 256
#define EP_MAX_BODY (1 << 22)

/* Reads until EOF or cap bytes with a poll timeout; -1 on timeout or error. */
static ssize_t read_all(int fd, char *buf, size_t cap, int timeout_ms) {
    size_t n = 0;
    while (n < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) <= 0) return -1;
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0) return -1;
        if (r == 0) break;
        n += (size_t)r;
    }
    return (ssize_t)n;
}

/* GET /metrics from host:port into a malloc'd body; NULL with msg set. */
static char *get_metrics(const char *host, const char *port, size_t *len, char *msg, size_t cap) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc) {
        snprintf(msg, cap, "%s:%s: %s", host, port, gai_strerror(rc));
        return NULL;
    }
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) {
        snprintf(msg, cap, "%s:%s: cannot connect (is the rank running?)", host, port);
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return NULL;
    }
    freeaddrinfo(ai);
    char req[512];
    int n = snprintf(req, sizeof req, "GET /metrics HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n", host, port);
    char *buf = malloc(EP_MAX_BODY + 1);
    ssize_t got = buf && n > 0 && (size_t)n < sizeof req && write(fd, req, (size_t)n) == n
                      ? read_all(fd, buf, EP_MAX_BODY, 10000)
                      : -1;
    close(fd);
    if (got < 0) {
        snprintf(msg, cap, "%s:%s: no answer to GET /metrics within 10 s", host, port);
        free(buf);
        return NULL;
    }
    buf[got] = 0;
    if (strncmp(buf, "HTTP/1.1 200", 12) && strncmp(buf, "HTTP/1.0 200", 12)) {
        snprintf(msg, cap, "%s:%s: GET /metrics: %.40s", host, port, buf);
        free(buf);
        return NULL;
    }
    char *body = strstr(buf, "\r\n\r\n");
    *len = body ? (size_t)got - (size_t)(body + 4 - buf) : 0;
    if (body) memmove(buf, body + 4, *len + 1);
    return buf;
}

/* Splits HOST:PORT (the last colon; [v6]:port accepted) into host and port. */
static int split_target(const char *t, char *host, size_t hcap, char *port, size_t pcap) {
    const char *c = strrchr(t, ':');
    if (!c || c == t || !c[1] || strlen(c + 1) >= pcap) return -1;
    size_t hl = (size_t)(c - t);
    if (t[0] == '[' && hl >= 2 && t[hl - 1] == ']') t++, hl -= 2;
    if (hl >= hcap) return -1;
    memcpy(host, t, hl);
    host[hl] = 0;
    snprintf(port, pcap, "%s", c + 1);
    char *end;
    long p = strtol(port, &end, 10);
    return *end || p < 1 || p > 65535 ? -1 : 0;
}

static void print_table(const ep_stats *s, int n) {
    uint64_t total = 0, max = 0;
    for (int i = 0; i < n; i++) total += s[i].rows_received, max = s[i].rows_received > max ? s[i].rows_received : max;
    printf("rank  rows_sent  rows_computed  share  bytes/row  alltoall_s  compute_s  idle_s  rebalances  "
           "imbalance before->after  experts_held  expert_MiB  moved_in\n");
    for (int i = 0; i < n; i++)
        printf("%4d %10llu %14llu %5.1f%% %10.0f %11.3f %10.3f %7.3f %11llu  %.3f -> %.3f %13d %11.1f %9llu\n",
               s[i].rank, (unsigned long long)s[i].rows_sent, (unsigned long long)s[i].rows_received,
               total ? 100.0 * (double)s[i].rows_received / (double)total : 0.0,
               s[i].rows_sent ? (double)s[i].bytes_sent / (double)s[i].rows_sent : 0.0, s[i].t_comm, s[i].t_compute,
               s[i].t_wait, (unsigned long long)s[i].rebalances, s[i].imbalance_before, s[i].imbalance_after,
               s[i].experts_held, (double)s[i].expert_bytes / (1 << 20), (unsigned long long)s[i].weight_loads);
    printf("ranks %d, experts %d, slots per MoE layer %d, MoE layers %d, replica bytes %lld; expert load "
           "imbalance (max/mean rows computed) %.3f\n",
           s[0].n_ranks, s[0].n_expert, s[0].n_physical, s[0].n_moe, (long long)s[0].replica_bytes,
           total ? (double)max * n / (double)total : 1.0);
}

static int ep_stats_cmd(int argc, char **argv) {
    long long ranks = 0;
    const cli_opt t[] = {
        {"ranks", 'n', "N", "read N consecutive ports starting at the one given (default: one per argument)",
         CLI_NUM(&ranks, 1, EP_MAX_RANKS)},
    };
    cli_cmd c = {.name = "ep stats",
                 .usage = "cinfer ep stats HOST:PORT [HOST:PORT...] [--ranks N]",
                 .about = "\nThe expert-parallel counters of every rank of a `cinfer serve --ep` job\n"
                          "(from each rank's /metrics; docs/ep.md).",
                 .opts = t,
                 .n_opts = sizeof t / sizeof t[0]};
    int pos, rc = cli_parse(&c, argc, argv, &pos);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    int n_args = argc - pos;
    if (n_args < 1) return cli_usage_error(&c, "HOST:PORT is required");
    if (ranks && n_args != 1) return cli_usage_error(&c, "--ranks takes exactly one HOST:PORT");
    int n = ranks ? (int)ranks : n_args;
    if (n > EP_MAX_RANKS) return cli_usage_error(&c, "at most %d ranks", EP_MAX_RANKS);
    ep_stats *st = calloc((size_t)n, sizeof *st);
    if (!st) return cli_fail("ep stats: out of memory");
    for (int i = 0; i < n; i++) {
        char host[256], port[16], msg[400];
        if (split_target(argv[pos + (ranks ? 0 : i)], host, sizeof host, port, sizeof port)) {
            free(st);
            return cli_usage_error(&c, "'%s' is not HOST:PORT", argv[pos + (ranks ? 0 : i)]);
        }
        if (ranks) snprintf(port, sizeof port, "%ld", strtol(port, NULL, 10) + i);
        size_t len = 0;
        char *body = get_metrics(host, port, &len, msg, sizeof msg);
        if (!body) {
            free(st);
            return cli_fail("ep stats: %s", msg);
        }
        bool ok = ep_stats_parse(body, len, &st[i]);
        free(body);
        if (!ok) {
            free(st);
            return cli_fail("ep stats: %s:%s serves no expert-parallel rows (not started with --ep?)", host, port);
        }
    }
    print_table(st, n);
    free(st);
    return 0;
}

int cmd_ep(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "stats")) return ep_stats_cmd(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: cinfer ep stats HOST:PORT [HOST:PORT...] [--ranks N]\n\nExpert parallelism (docs/ep.md): "
               "`mpirun -n N cinfer serve MODEL --ep` serves; `cinfer ep stats`\nshows its per-rank expert "
               "load, traffic and time split.\n");
        return 0;
    }
    fprintf(stderr, "cinfer ep: expected 'stats' (see cinfer ep --help)\n");
    return 2;
}
