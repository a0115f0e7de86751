/* test_ep_stats_text.c - the expert-parallel /metrics rows (src/ep/
 * ep_stats_text.c): what the renderer writes reads back to the same
 * counters, also inside a full /metrics page with model_name labels and
 * other series; text without EP rows, truncated or garbled lines parse to
 * "not found" or zeros, never a crash. */
#include <stdlib.h>
#include <string.h>

#include "ep/ep_stats_text.h"
#include "testutil.h"

int main(void) {
    ep_stats s = {.rank = 3,
                  .n_ranks = 4,
                  .n_moe = 26,
                  .n_expert = 64,
                  .n_physical = 72,
                  .rounds = 123456,
                  .busy_rounds = 4567,
                  .rebalances = 7,
                  .rows_sent = 1000000,
                  .rows_received = 987654,
                  .bytes_sent = 1ull << 40,
                  .bytes_received = 12345,
                  .t_comm = 1.5,
                  .t_compute = 2.25,
                  .t_wait = 0.125,
                  .imbalance_before = 1.75,
                  .imbalance_after = 1.0625,
                  .replica_bytes = 1ll << 33,
                  .expert_bytes = 3ull << 30,
                  .experts_held = 480,
                  .weight_loads = 91,
                  .weight_releases = 77,
                  .weight_load_bytes = 5ull << 28,
                  .t_weight_load = 0.375};
    char *txt = NULL;
    size_t len = 0;
    CHECK(ep_stats_render(&s, &txt, &len) == 0 && txt && len == strlen(txt));
    ep_stats b;
    CHECK(ep_stats_parse(txt, len, &b));
    CHECK(b.rank == 3 && b.n_ranks == 4 && b.n_moe == 26 && b.n_expert == 64 && b.n_physical == 72);
    CHECK(b.rounds == s.rounds && b.busy_rounds == s.busy_rounds && b.rebalances == 7);
    CHECK(b.rows_sent == s.rows_sent && b.rows_received == s.rows_received);
    CHECK(b.bytes_sent == s.bytes_sent && b.bytes_received == s.bytes_received);
    CHECK(b.t_comm == 1.5 && b.t_compute == 2.25 && b.t_wait == 0.125);
    CHECK(b.imbalance_before == 1.75 && b.imbalance_after == 1.0625 && b.replica_bytes == s.replica_bytes);
    CHECK(b.expert_bytes == s.expert_bytes && b.experts_held == 480 && b.weight_loads == 91);
    CHECK(b.weight_releases == 77 && b.weight_load_bytes == s.weight_load_bytes && b.t_weight_load == 0.375);

    /* inside a /metrics page: labels first (model_name), other series around */
    const char *page = "cinfer_requests_total{model_name=\"m\",status=\"200\"} 5\n"
                       "cinfer_ep_info{model_name=\"m\",rank=\"1\",ranks=\"2\",experts=\"8\",slots=\"10\","
                       "moe_layers=\"3\"} 1\n"
                       "cinfer_ep_rows_computed_total{model_name=\"m\",rank=\"1\"} 77\n"
                       "cinfer_ep_seconds_total{model_name=\"m\",rank=\"1\",phase=\"compute\"} 0.5\n"
                       "cinfer_ep_epsilon 9\n";
    CHECK(ep_stats_parse(page, strlen(page), &b));
    CHECK(b.rank == 1 && b.n_ranks == 2 && b.n_physical == 10 && b.rows_received == 77 && b.t_compute == 0.5);
    CHECK(b.t_comm == 0 && b.rows_sent == 0);

    /* no EP rows; every truncation of the rendered text; garbage */
    const char *plain = "cinfer_requests_total{status=\"200\"} 5\n";
    CHECK(!ep_stats_parse(plain, strlen(plain), &b));
    for (size_t cut = 0; cut < len; cut += 7) ep_stats_parse(txt, cut, &b);
    const char *bad[] = {"cinfer_ep_info{rank=\"x\"} 1",
                         "cinfer_ep_info{",
                         "cinfer_ep_rows_sent_total 1e400\n",
                         "cinfer_ep_rows_sent_total{rank=\"0\"} -5\n",
                         "cinfer_ep_",
                         "\n\n\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) ep_stats_parse(bad[i], strlen(bad[i]), &b);
    CHECK(ep_stats_parse(bad[0], strlen(bad[0]), &b) && b.rank == -1);
    CHECK(ep_stats_parse(bad[2], strlen(bad[2]), &b) == false && b.rows_sent == 0);
    free(txt);
    return test_finish();
}
