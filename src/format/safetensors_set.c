/* safetensors_set.c - one model's weights across safetensors shards: reads
 * model.safetensors.index.json (or takes a single model.safetensors), opens
 * every shard once (each validated by safetensors.c) and checks the index
 * against the shards (see safetensors.h).
 *
 * Invariants after a successful open: every tensor of every shard is named
 * exactly once in the index and sits in the shard the index names, so a name
 * is in at most one shard; shard file names are plain names inside the
 * directory (no '/', not "." or ".."). The set owns its shards. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/safetensors.h"

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define SAFE(s) st_escape((s), (char[104]){0}, 104)

struct st_set {
    st_file **shards;
    int64_t n_shards;
    int64_t n_tensors;
};

static int open_shard(st_set *s, const char *dir, const char *file, cf_err *err) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >= sizeof path)
        return cf_fail(err, "%s/%s: path too long", dir, file);
    st_file **grown = realloc(s->shards, (size_t)(s->n_shards + 1) * sizeof *grown);
    if (!grown) return cf_fail(err, "%s: out of memory", path);
    s->shards = grown;
    if (st_open(path, &s->shards[s->n_shards], err)) return -1;
    s->n_tensors += st_tensor_count(s->shards[s->n_shards]);
    s->n_shards++;
    return 0;
}

static bool plain_name(const char *f) { return *f && !strchr(f, '/') && strcmp(f, ".") && strcmp(f, ".."); }

static int64_t shard_index(const st_set *s, const char *dir, const char *file) {
    size_t dl = strlen(dir);
    for (int64_t i = 0; i < s->n_shards; i++) {
        const char *p = st_path(s->shards[i]);
        if (!strncmp(p, dir, dl) && p[dl] == '/' && !strcmp(p + dl + 1, file)) return i;
    }
    return -1;
}

/* Opens each distinct shard the weight map names, then checks every entry. */
static int open_indexed(st_set *s, const char *dir, const char *index_path, json_t *map, cf_err *err) {
    const char *name;
    json_t *v;
    json_object_foreach(map, name, v) {
        if (!json_is_string(v) || !plain_name(json_string_value(v)))
            return cf_fail(err, "%s: field weight_map.%s: not a file name in the directory", index_path, SAFE(name));
        if (shard_index(s, dir, json_string_value(v)) < 0 && open_shard(s, dir, json_string_value(v), err)) return -1;
    }
    json_object_foreach(map, name, v) {
        const st_file *sh = s->shards[shard_index(s, dir, json_string_value(v))];
        if (!st_find_tensor(sh, name))
            return cf_fail(err, "%s: field weight_map.%s: tensor not in %s", index_path, SAFE(name), st_path(sh));
    }
    if (s->n_tensors != (int64_t)json_object_size(map)) {
        for (int64_t i = 0; i < s->n_shards; i++)
            for (int64_t j = 0; j < st_tensor_count(s->shards[i]); j++) {
                const st_tensor *t = st_tensor_at(s->shards[i], j);
                json_t *where = json_object_get(map, t->name);
                if (!where || strcmp(json_string_value(where), strrchr(st_path(s->shards[i]), '/') + 1))
                    return cf_fail(err, "%s: tensor '%s' is in %s but weight_map %s", index_path, SAFE(t->name),
                                   st_path(s->shards[i]), where ? "names another shard" : "does not list it");
            }
    }
    return 0;
}

static int open_index(st_set *s, const char *dir, const char *index_path, cf_err *err) {
    json_error_t je;
    json_t *root = json_load_file(index_path, JSON_REJECT_DUPLICATES, &je);
    if (!root) return cf_fail(err, "%s: %s (line %d)", index_path, SAFE(je.text), je.line);
    json_t *map = json_object_get(root, "weight_map");
    int rc = json_is_object(map) ? open_indexed(s, dir, index_path, map, err)
                                 : cf_fail(err, "%s: field weight_map: missing or not an object", index_path);
    json_decref(root);
    return rc;
}

int st_set_open_dir(const char *dir, st_set **out, cf_err *err) {
    *out = NULL;
    st_set *s = calloc(1, sizeof *s);
    if (!s) return cf_fail(err, "%s: out of memory", dir);
    char index_path[4096];
    if ((size_t)snprintf(index_path, sizeof index_path, "%s/%s", dir, INDEX_NAME) >= sizeof index_path) {
        free(s);
        return cf_fail(err, "%s: path too long", dir);
    }
    struct stat st;
    int rc;
    if (stat(index_path, &st) == 0) rc = open_index(s, dir, index_path, err);
    else rc = open_shard(s, dir, SINGLE_NAME, err);
    if (rc) {
        st_set_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

void st_set_close(st_set *s) {
    if (!s) return;
    for (int64_t i = 0; i < s->n_shards; i++) st_close(s->shards[i]);
    free(s->shards);
    free(s);
}

int64_t st_set_count(const st_set *s) { return s->n_tensors; }

const st_tensor *st_set_at(const st_set *s, int64_t i) {
    for (int64_t k = 0; k < s->n_shards && i >= 0; k++) {
        int64_t n = st_tensor_count(s->shards[k]);
        if (i < n) return st_tensor_at(s->shards[k], i);
        i -= n;
    }
    return NULL;
}

const st_tensor *st_set_find(const st_set *s, const char *name, const char **file) {
    for (int64_t k = 0; k < s->n_shards; k++) {
        const st_tensor *t = st_find_tensor(s->shards[k], name);
        if (t) {
            if (file) *file = st_path(s->shards[k]);
            return t;
        }
    }
    return NULL;
}
