/* le_bytes.h - little-endian integer reads and writes of byte buffers, for the
 * binary formats (store objects, window-state snapshots, handoff frames). Any
 * alignment; no allocation. */
#ifndef CINFER_BASE_LE_BYTES_H
#define CINFER_BASE_LE_BYTES_H

#include <stdint.h>

static inline void le_put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void le_put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t le_get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static inline uint64_t le_get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif
