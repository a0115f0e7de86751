/* model_names.h - the model ids a server answers to (`--served-model-name`,
 * repeatable and comma-separated). Owns copies of the names; order is the
 * order given, names[0] is the default echoed in responses. Invariant: no
 * name is empty, longer than 256 bytes or given twice. The server reads a
 * serve_names only after start-up (no locking). */
#ifndef CINFER_SERVE_MODEL_NAMES_H
#define CINFER_SERVE_MODEL_NAMES_H

#include <jansson.h>
#include <stddef.h>

typedef struct serve_names {
    char **v; /* owned */
    int n;
} serve_names;

/* Adds every comma-separated name of spec. Returns 0, or -1 with a reason in
 * msg (empty name, too long, duplicate, out of memory); names added before
 * the bad one stay. */
int serve_names_add(serve_names *s, const char *spec, char *msg, size_t cap);
/* Index of `name` among s's names, -1 when absent. */
int serve_names_find(const serve_names *s, const char *name);
/* The name a request's `model` field selects: the matching configured name
 * (vLLM echoes the requested name), names[0] when the request names none
 * (NULL or ""), NULL when it names a model this server does not serve. The
 * result points into s and lives as long as s. */
const char *serve_names_pick(const serve_names *s, const char *requested);
/* GET /v1/models: {"object":"list","data":[{"id":NAME,...} per name]}
 * (malloc'd JSON text, NULL when out of memory). The fields of `extra` (an
 * object, borrowed; NULL: none) are added to every model entry. */
char *serve_names_models_json(const serve_names *s, long long created, json_t *extra);
/* The names as "a, b, c" into buf (for messages). */
void serve_names_join(const serve_names *s, char *buf, size_t cap);
void serve_names_free(serve_names *s);

#endif
