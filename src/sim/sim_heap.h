/* sim_heap.h - the discrete-event queue: a binary min-heap of events ordered
 * by (time, insertion sequence), so events at equal times pop in the order
 * they were pushed and a run is deterministic. The heap owns its array
 * (grown by doubling; a push fails only on no memory). */
#ifndef CINFER_SIM_SIM_HEAP_H
#define CINFER_SIM_SIM_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum sim_ev_kind {
    SIM_EV_ARRIVAL = 0, /* a: request */
    SIM_EV_LOAD_DONE, /* a: request; its store blocks reached its prefill instance */
    SIM_EV_STEP_END, /* a: instance */
    SIM_EV_XFER_DONE, /* a: request; its KV reached its decode instance */
    SIM_EV_GC, /* a store GC pass */
    SIM_EV_READY, /* a: request; the server's per-request work before admission is done (sim_hw) */
} sim_ev_kind;

typedef struct sim_event {
    double t;
    uint64_t seq;
    int32_t kind, a;
} sim_event;

typedef struct sim_heap {
    sim_event *v;
    size_t n, cap;
    uint64_t next_seq;
} sim_heap;

int sim_heap_push(sim_heap *h, double t, sim_ev_kind kind, int32_t a);
bool sim_heap_pop(sim_heap *h, sim_event *out);
void sim_heap_free(sim_heap *h);

#endif
