/* xfer_host.h - which peers share this host's memory, and whether a local
 * peer process is still alive (docs/pd.md, "one host").
 *
 * UCX's shared-memory transports (sysv/posix FIFOs, CMA rendezvous) cannot
 * report a dead peer, so xfer_ucx.h uses them only for "shm:" peers, created
 * without UCX's peer-failure detection. The caller decides that a peer is
 * local by comparing host ids and watches its liveness with
 * xfer_process_alive instead.
 *
 * A host id names a kernel boot plus the network, IPC and PID namespaces:
 * two processes with equal ids can map each other's memory (CMA, /proc/PID)
 * and are on the same network. A process in another network namespace counts
 * as another host on purpose: namespaces stand for hosts in the tests, and a
 * firewalled namespace must not be bypassed through shared memory. */
#ifndef CINFER_XFER_XFER_HOST_H
#define CINFER_XFER_XFER_HOST_H

#include <stddef.h>
#include <stdint.h>

#define XFER_HOST_ID_MAX 128

/* This process's host id into out (cap >= XFER_HOST_ID_MAX). 0, or -1 when the kernel does not tell
 * (no /proc): then no peer is treated as local. */
int xfer_host_id(char *out, size_t cap);

/* This process: pid and its start time (clock ticks since boot, /proc/PID/stat field 22); together
 * they name a process across pid reuse. 0, or -1 without /proc. */
int xfer_process_self(int64_t *pid, uint64_t *start_ticks);

/* 1: the process (pid, start_ticks) of this host runs; 0: it has exited (or the pid was reused);
 * -1: cannot tell. */
int xfer_process_alive(int64_t pid, uint64_t start_ticks);

#endif
