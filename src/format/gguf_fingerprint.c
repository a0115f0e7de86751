/* gguf_fingerprint.c - gguf_fingerprint (gguf.h): a cheap 128-bit identity of
 * a GGUF image for caches derived from it (the weights cache). It covers
 * the header, metadata and tensor table byte for byte and samples each
 * tensor's data at three places, so a different file of the same shape is a
 * different identity unless it differs only between the samples (the same
 * trade the prefix cache's model fingerprint makes). */
#include <string.h>
#include <xxhash.h>

#include "format/gguf.h"

#define FP_SAMPLE 64

int gguf_fingerprint(const gguf_file *f, uint8_t out[16]) {
    XXH3_state_t *st = XXH3_createState();
    if (!st || XXH3_128bits_reset(st) != XXH_OK) {
        XXH3_freeState(st);
        return -1;
    }
    static const char tag[] = "cinfer-gguf-fp-v1";
    XXH3_128bits_update(st, tag, sizeof tag);
    uint64_t size = gguf_image_size(f), head = gguf_data_offset(f);
    XXH3_128bits_update(st, &size, sizeof size);
    if (head > size) head = size;
    XXH3_128bits_update(st, gguf_image(f), (size_t)head);
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (!t->data || t->nbytes == 0) continue;
        size_t n = t->nbytes < FP_SAMPLE ? t->nbytes : FP_SAMPLE;
        size_t at[3] = {0, (t->nbytes - n) / 2, t->nbytes - n};
        for (int k = 0; k < 3; k++) XXH3_128bits_update(st, (const uint8_t *)t->data + at[k], n);
    }
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
    XXH3_freeState(st);
    memcpy(out, c.digest, 16);
    return 0;
}
