/* test_swa_state.c - the window-state tier: slot count from the budget (never
 * exceeded), put/find round trip, duplicate puts, LRU eviction order, TTL
 * expiry (find and put), pins protect entries from both, a zero-slot tier,
 * bad sizes rejected, the checker after every phase. */
#include <stdint.h>
#include <string.h>

#include "engine/swa_state.h"
#include "testutil.h"

static void key_of(int n, uint8_t k[SWA_KEY_BYTES]) {
    memset(k, 0, SWA_KEY_BYTES);
    for (int i = 0; i < SWA_KEY_BYTES; i++) k[i] = (uint8_t)(n * 37 + i * 11);
}

static int check_ok(const swa_state *s) {
    char why[200];
    return swa_state_check(s, why, sizeof why) == 0;
}

int main(void) {
    cf_err err = {{0}};
    swa_state *s = NULL;
    uint8_t k[SWA_KEY_BYTES];

    CHECK(swa_state_create(1 << 20, 0, 10, &s, &err) == -1);
    CHECK(swa_state_create(-1, 16, 10, &s, &err) == -1);
    CHECK(swa_state_create(1 << 20, 16, 0, &s, &err) == -1);

    /* zero slots: puts fail quietly, lookups miss */
    CHECK(swa_state_create(100, 1024, 10, &s, &err) == 0);
    key_of(1, k);
    CHECK(swa_state_get_stats(s).slots == 0);
    CHECK(swa_state_put(s, k, 0) == NULL);
    CHECK(swa_state_find(s, k, 0) == -1);
    CHECK(check_ok(s));
    swa_state_free(s);

    /* 4 slots of 1000 floats (4032 bytes each with metadata): budget 4 * 4200 */
    CHECK(swa_state_create(4 * 4200, 1000, 60, &s, &err) == 0);
    swa_state_stats st = swa_state_get_stats(s);
    CHECK(st.slots == 4);
    CHECK(st.slot_bytes >= 4000 && (int64_t)st.slots * st.slot_bytes <= st.budget);
    for (int n = 0; n < 4; n++) {
        key_of(n, k);
        float *d = swa_state_put(s, k, (double)n);
        CHECK(d != NULL);
        for (int i = 0; d && i < 1000; i++) d[i] = (float)(n * 1000 + i);
    }
    CHECK(check_ok(s));
    st = swa_state_get_stats(s);
    CHECK(st.used == 4 && st.bytes == 4 * st.slot_bytes && st.inserts == 4);
    key_of(2, k);
    CHECK(swa_state_put(s, k, 4) == NULL); /* duplicate: refreshed, no slot */
    int32_t slot = swa_state_find(s, k, 5);
    CHECK(slot >= 0 && swa_state_data(s, slot)[999] == 2999.0f);
    CHECK(swa_state_has(s, k, 5));
    /* LRU order now 0,1,3,2: a new entry evicts 0, the next 1 */
    key_of(4, k);
    CHECK(swa_state_put(s, k, 6) != NULL);
    key_of(0, k);
    CHECK(!swa_state_has(s, k, 6));
    CHECK(swa_state_find(s, k, 6) == -1);
    /* pin 1 and make it the oldest: the next put skips it and evicts 3 */
    key_of(1, k);
    int32_t s1 = swa_state_find(s, k, 7);
    CHECK(s1 >= 0);
    swa_state_pin(s, s1);
    CHECK(swa_state_get_stats(s).pinned == 1);
    for (int n = 3; n >= 2; n--) { /* touch 3, 2, 4: LRU 1 (pinned), 3, 2, 4 */
        key_of(n, k);
        CHECK(swa_state_find(s, k, 7.5) >= 0);
    }
    key_of(4, k);
    CHECK(swa_state_find(s, k, 7.5) >= 0);
    key_of(5, k);
    CHECK(swa_state_put(s, k, 8) != NULL);
    key_of(3, k);
    CHECK(!swa_state_has(s, k, 8));
    key_of(1, k);
    CHECK(swa_state_has(s, k, 8));
    CHECK(check_ok(s));
    st = swa_state_get_stats(s);
    CHECK(st.evictions == 2 && st.hits == 5 && st.misses == 1);

    /* TTL 60: at t = 100 everything is stale except the pinned entry */
    key_of(2, k);
    CHECK(!swa_state_has(s, k, 100));
    CHECK(swa_state_find(s, k, 100) == -1);
    CHECK(swa_state_get_stats(s).expirations == 1);
    key_of(1, k);
    CHECK(swa_state_has(s, k, 100)); /* pinned: never expires */
    for (int n = 10; n < 13; n++) { /* 3 free slots after expiring the stale ones */
        key_of(n, k);
        CHECK(swa_state_put(s, k, 100) != NULL);
    }
    CHECK(check_ok(s));
    key_of(20, k); /* all slots young or pinned: evict the oldest unpinned (10) */
    CHECK(swa_state_put(s, k, 101) != NULL);
    key_of(10, k);
    CHECK(!swa_state_has(s, k, 101));
    swa_state_unpin(s, s1);
    CHECK(swa_state_get_stats(s).pinned == 0);
    key_of(1, k);
    CHECK(!swa_state_has(s, k, 101)); /* stale once unpinned */
    CHECK(check_ok(s));
    st = swa_state_get_stats(s);
    CHECK(st.used <= st.slots && st.bytes <= st.budget);

    /* all pinned: a put gets no slot */
    for (int n = 30; n < 34; n++) {
        key_of(n, k);
        CHECK(swa_state_put(s, k, 200) != NULL);
        swa_state_pin(s, swa_state_find(s, k, 200));
    }
    key_of(40, k);
    CHECK(swa_state_put(s, k, 201) == NULL);
    CHECK(check_ok(s));
    swa_state_free(s);
    return test_finish();
}
