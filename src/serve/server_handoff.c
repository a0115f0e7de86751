/* server_handoff.c - the HTTP server's side of disaggregated prefill/decode
 * (serve/handoff.h, docs/pd.md): GET /handoff/info, the handoff headers of a
 * generation request, a decode worker's wait for a handoff before submit,
 * and a prefill worker's answer, which replaces the API response of a
 * prefill-only run. Loop thread only; the job structures are server.c's. */
#include <string.h>

#include "base/log.h"
#include "serve/routes.h"
#include "serve/server_internal.h"

bool sv_hand_route(server *s, struct evhttp_request *req, const char *path, bool get, const char *id, double t0) {
    if (strcmp(path, "/handoff/info")) return false;
    serve_error e = {0};
    char *body = get ? handoff_info_json(s->hand) : NULL;
    if (body) {
        sv_send_json(s, req, 200, body);
        return true;
    }
    if (!get)
        serve_fail(&e, 405, "invalid_request_error", "method_not_allowed", NULL, "%s is not allowed on %s",
                   http_method_name(req), path);
    else
        serve_fail(&e, 404, "invalid_request_error", "not_found", NULL,
                   "this worker takes no KV handoffs (--role %s, no --handoff-listen)",
                   handoff_role_name(s->cfg->handoff.role));
    int status;
    sv_send_json(s, req, e.status, api_error_json(RECIPE_API_CHAT, &e, id, &status));
    (void)t0;
    return true;
}

int sv_hand_admit(server *s, struct evhttp_request *req, handoff_req *h, gen_params *p, serve_error *e) {
    if (handoff_read_headers(s->hand, req, h, e)) return -1;
    if (h->to_present) handoff_prefill_params(p);
    return 0;
}

static void on_ready(void *ctx) {
    sv_job *j = ctx;
    if (j->s->closing) j->task.ran = false; /* shutting down: answered 503 */
    sv_prep_done(j);
}

bool sv_hand_park(sv_job *j) {
    if (!j->hreq.present || j->hreq.to_present || j->hand_waited) return false;
    j->hand_waited = true;
    if (j->gone || !j->task.ran || j->prep_rc || j->s->closing) return false;
    return handoff_wait(j->s->hand, j->hreq.id, on_ready, j);
}

int sv_hand_attach(sv_job *j, serve_error *e) {
    if (!j->hreq.present) return 0;
    if (!j->hreq.to_present) {
        handoff_claim(j->s->hand, j->hreq.id, &j->g);
        return 0;
    }
    j->push = handoff_push_start(j->s->hand, &j->hreq, &j->g, e);
    return j->push ? 0 : -1;
}

static void on_answer(void *ctx, int status, char *json) {
    sv_job *j = ctx;
    j->push = NULL; /* it frees itself */
    if (!json) {
        serve_error e;
        int st;
        serve_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        json = api_error_json(j->api, &e, j->id, &st);
    }
    sv_job_reply(j, status, json);
}

bool sv_hand_complete(sv_job *j) {
    if (!j->push) return false;
    const gen_choice *c = &j->g.choices[0];
    if (c->finish == CINFER_FINISH_ERROR || c->finish == CINFER_FINISH_CANCELLED) {
        handoff_push_detach(j->push); /* the API's error answer follows */
        j->push = NULL;
        return false;
    }
    handoff_push_finish(j->push, &j->g.usage, on_answer, j);
    return true;
}

void sv_hand_detach(sv_job *j) {
    if (!j->push) return;
    handoff_push_detach(j->push);
    j->push = NULL;
}
