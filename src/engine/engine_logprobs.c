/* engine_logprobs.c - top-k log-probabilities of a logits row, for requests
 * with top_logprobs (cinfer_request). Runs on the engine thread, only for
 * such requests: O(n_vocab * k) with k <= CINFER_MAX_TOP_LOGPROBS, no
 * allocation. Log-probabilities are under the raw logits (before sampling
 * penalties, temperature or bias), like the chosen token's logprob. Ties keep
 * the lower token id first. */
#include <math.h>

#include "engine/engine_internal.h"

void eng_top_logprobs(const float *row, int32_t n, int32_t k, int32_t *ids, float *lps) {
    if (k > n) k = n;
    float mx = row[0];
    for (int32_t i = 1; i < n; i++) mx = row[i] > mx ? row[i] : mx;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)(row[i] - mx));
    double lse = log(sum);
    /* insertion into a sorted list of the k best so far */
    int32_t have = 0;
    for (int32_t i = 0; i < n; i++) {
        float v = row[i];
        if (have == k && v <= row[ids[k - 1]]) continue;
        int32_t at = have < k ? have++ : k - 1;
        while (at > 0 && row[ids[at - 1]] < v) {
            ids[at] = ids[at - 1];
            at--;
        }
        ids[at] = i;
    }
    for (int32_t j = 0; j < k; j++) lps[j] = (float)((double)(row[ids[j]] - mx) - lse);
}
