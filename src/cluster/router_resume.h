/* router_resume.h - what the router keeps of a relayed stream so that another worker can resume it
 * (docs/router.md "Faults"): the worker marks each read of its stream with an SSE comment
 * `: cinfer {"id","created","n","t":[ids],"b":bytes}` (asked for with X-Cinfer-Stream-Ids; it
 * answers X-Cinfer-Resumable: 1). The router relays whole events only, and only once the comment
 * that follows them arrived (the events of one read are held until then), so at any moment the
 * client has exactly the events of the committed reads: the token ids kept here and `b` bytes of
 * their text. On a failure, the rest of the held events are dropped and the request goes to another
 * worker with `"cinfer":{"resume":{tokens, text_bytes, id, created}}`; that worker sends only new
 * events. Responses `sequence_number`s of a resumed stream are renumbered to continue the first.
 *
 * Ownership: a router_resume belongs to one proxy_req (router_proxy.c) and owns its buffers. */
#ifndef CINFER_CLUSTER_ROUTER_RESUME_H
#define CINFER_CLUSTER_ROUTER_RESUME_H

#include <event2/buffer.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct router_resume {
    struct evbuffer *raw; /* bytes of the current upstream not yet cut into events */
    struct evbuffer *held; /* whole events waiting for their comment */
    int32_t *ids; /* committed token ids */
    int32_t n_ids, cap_ids;
    int64_t text_bytes; /* output text bytes the client has */
    char id[64]; /* the response id (from the first comment) */
    int64_t created;
    int64_t seq, seq_held; /* Responses: last sequence_number sent / held */
    bool seq_seen;
    bool renumber; /* this upstream is a resume: rewrite sequence_number */
    bool commented; /* a comment arrived (the stream can be resumed) */
    int32_t resumes; /* resumed attempts so far */
} router_resume;

int router_resume_init(router_resume *s);
void router_resume_free(router_resume *s);
/* Cuts `in` (drained) into events; moves committed events to `out`. With `responses`, tracks and
 * (on a resumed upstream) renumbers sequence_number. -1: out of memory or a malformed comment. */
int router_resume_feed(router_resume *s, struct evbuffer *in, struct evbuffer *out, bool responses);
/* The upstream ended cleanly: everything left goes to `out`. */
void router_resume_flush(router_resume *s, struct evbuffer *out);
/* The upstream failed: drops what was not committed; the next upstream is a resume. */
void router_resume_rewind(router_resume *s);
/* The request body with cinfer.resume set (malloc'd, *len), or NULL (not a JSON object / OOM). */
char *router_resume_body(const router_resume *s, const char *body, size_t len, size_t *out_len);

#endif
