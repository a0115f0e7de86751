/* hf_dir.c - assembles a gguf_file from a Hugging Face model directory (see
 * hf_dir.h): key/values from hf_config.c and hf_vocab.c, tensors from the
 * safetensors set renamed by the family's rules ("{L}" = layer index),
 * shapes reversed into GGUF's ne[] order, F32/F16/BF16 kept as they are.
 *
 * Q and K of families with permute_qk are stored by llama.cpp with each
 * head's rows interleaved (HF's rotate-half order -> GGUF's pairwise rope):
 * out row h*hd + 2*i + j = in row h*hd + j*hd/2 + i. Those tensors are
 * copied once into buffers the hf_owner keeps; every other tensor points into
 * the mapping. The hf_owner (the shard set and the buffers) lives as long as
 * the gguf_file (gguf_open_parts' release hook). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/hf_dir.h"
#include "format/hf_internal.h"
#include "format/safetensors.h"
#include "tensor/dtype.h"
#include "tensor/kernels.h"

#define SCALE_SUFFIX "_scale_inv"

typedef struct hf_owner {
    st_set *set;
    void **bufs;
    size_t n_bufs;
} hf_owner;

static void owner_release(void *p) {
    hf_owner *o = p;
    if (!o) return;
    for (size_t i = 0; i < o->n_bufs; i++) free(o->bufs[i]);
    free(o->bufs);
    st_set_close(o->set);
    free(o);
}

bool hf_is_model_dir(const char *path) {
    struct stat st;
    char cfg[4096];
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return false;
    if ((size_t)snprintf(cfg, sizeof cfg, "%s/config.json", path) >= sizeof cfg) return false;
    return stat(cfg, &st) == 0 && S_ISREG(st.st_mode);
}

/* Matches `name` against a rule's HF pattern ("{L}" layer, "{E}" expert:
 * decimal numbers without leading zeros); writes the GGUF name. */
static bool match_rule(const hf_name_rule *r, const char *name, char *out, size_t cap, int64_t *layer,
                       int64_t *expert) {
    *layer = *expert = -1;
    const char *p = r->hf, *s = name;
    while (*p) {
        if (p[0] == '{' && (p[1] == 'L' || p[1] == 'E') && p[2] == '}') {
            const char *d = s;
            int64_t v = 0;
            while (*s >= '0' && *s <= '9' && s - d < 6) v = v * 10 + (*s++ - '0');
            if (s == d || (s - d > 1 && *d == '0')) return false;
            *(p[1] == 'L' ? layer : expert) = v;
            p += 3;
            continue;
        }
        if (*p++ != *s++) return false;
    }
    if (*s) return false;
    const char *gl = strstr(r->gguf, "{L}");
    if (!gl) snprintf(out, cap, "%s", r->gguf);
    else snprintf(out, cap, "%.*s%lld%s", (int)(gl - r->gguf), r->gguf, (long long)*layer, gl + 3);
    return true;
}

static bool gguf_name_for(const hf_family *fam, const char *name, char *out, size_t cap, int64_t *layer,
                          int64_t *expert) {
    for (const hf_name_rule *const *t = fam->rules; *t; t++)
        for (const hf_name_rule *r = *t; r->hf; r++)
            if (match_rule(r, name, out, cap, layer, expert)) return true;
    return false;
}

static int ggml_type_of(const st_tensor *t, const char *file, uint32_t *out, cf_err *err) {
    switch (t->dtype) {
    case ST_F32: *out = DT_F32; return 0;
    case ST_F16: *out = DT_F16; return 0;
    case ST_BF16: *out = DT_BF16; return 0;
    default:
        return cf_fail(err, "%s: tensor '%s': field dtype: %s is not supported (F32, F16, BF16)", file,
                       st_escape(t->name, (char[104]){0}, 104), st_dtype_name(t->dtype));
    }
}

/* The permuted copy of a Q/K weight or bias (ne[1] rows, or ne[0] for a bias). */
static int permute_rows(hf_owner *o, gguf_tensor *g, int64_t n_heads, const char *file, cf_err *err) {
    int64_t rows = g->n_dims == 1 ? g->ne[0] : g->ne[1];
    if (rows % n_heads || (rows / n_heads) % 2)
        return cf_fail(err, "%s: tensor '%s': %lld rows do not split into %lld heads of even size", file, g->name,
                       (long long)rows, (long long)n_heads);
    size_t row_bytes = g->nbytes / (size_t)rows;
    int64_t hd = rows / n_heads, half = hd / 2;
    void **grown = realloc(o->bufs, (o->n_bufs + 1) * sizeof *grown);
    if (!grown) return cf_fail(err, "%s: out of memory", file);
    o->bufs = grown;
    uint8_t *dst = malloc(g->nbytes ? g->nbytes : 1);
    if (!dst) return cf_fail(err, "%s: out of memory permuting %s", file, g->name);
    o->bufs[o->n_bufs++] = dst;
    const uint8_t *src = g->data;
    for (int64_t h = 0; h < n_heads; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < 2; j++)
                memcpy(dst + (size_t)(h * hd + 2 * i + j) * row_bytes,
                       src + (size_t)(h * hd + j * half + i) * row_bytes, row_bytes);
    g->data = dst;
    return 0;
}

/* 1-D tensors (norms, biases) widened to F32, as llama.cpp's converter stores
 * them (its kernels add only F32 vectors). */
static int widen_vector(hf_owner *o, gguf_tensor *g, const char *file, cf_err *err) {
    void **grown = realloc(o->bufs, (o->n_bufs + 1) * sizeof *grown);
    if (!grown) return cf_fail(err, "%s: out of memory", file);
    o->bufs = grown;
    float *dst = malloc((size_t)g->ne[0] * sizeof *dst);
    if (!dst) return cf_fail(err, "%s: out of memory", file);
    o->bufs[o->n_bufs++] = dst;
    dtype_dequantize_row((dtype)g->type, g->data, dst, g->ne[0]);
    g->type = DT_F32;
    g->data = dst;
    g->nbytes = (size_t)g->ne[0] * sizeof *dst;
    return 0;
}

/* An FP8 weight needs its "<name>_scale_inv": F32 [ceil(rows/128), ceil(cols/128)]. */
static int check_fp8(const hf_owner *o, const st_tensor *t, const char *file, cf_err *err) {
    char sname[300];
    const char *esc = st_escape(t->name, (char[104]){0}, 104);
    snprintf(sname, sizeof sname, "%s%s", t->name, SCALE_SUFFIX);
    const st_tensor *s = st_set_find(o->set, sname, NULL);
    if (t->n_dims != 2) return cf_fail(err, "%s: tensor '%s': FP8 weights must be 2-D", file, esc);
    if (!s) return cf_fail(err, "%s: tensor '%s': FP8 weight without its %s block scales", file, esc, SCALE_SUFFIX);
    if (s->dtype != ST_F32 || s->n_dims != 2 || s->shape[0] != (t->shape[0] + 127) / 128 ||
        s->shape[1] != (t->shape[1] + 127) / 128)
        return cf_fail(err, "%s: tensor '%s%s': must be F32 [%lld, %lld] (128 x 128 blocks of the weight)", file, esc,
                       SCALE_SUFFIX, (long long)(t->shape[0] + 127) / 128, (long long)(t->shape[1] + 127) / 128);
    return 0;
}

static bool ignored(const char *name) {
    size_t n = strlen(name);
    return n > 21 && !strcmp(name + n - 21, ".rotary_emb.inv_freq");
}

/* One safetensors tensor -> one GGUF tensor description (0), skipped (1),
 * expert `*expert` of the stack `name` (2, g filled as for one matrix), or an error. */
static int map_tensor(hf_owner *o, const hf_hparams *hp, const st_tensor *t, const char *file, gguf_tensor *g,
                      char *name, size_t cap, int64_t *expert, cf_err *err) {
    if (ignored(t->name)) return 1;
    int64_t layer;
    const char *esc = st_escape(t->name, (char[104]){0}, 104);
    char base[256];
    size_t tl = strlen(t->name), sl = strlen(SCALE_SUFFIX);
    bool is_scale = tl > sl && tl - sl < sizeof base && !strcmp(t->name + tl - sl, SCALE_SUFFIX);
    snprintf(base, sizeof base, "%.*s", (int)(is_scale ? tl - sl : tl), t->name);
    if (!gguf_name_for(hp->fam, base, name, cap - sl, &layer, expert))
        return cf_fail(err, "%s: tensor '%s': not a weight of a %s model", file, esc, hp->fam->model_type);
    if (is_scale) strcat(name, SCALE_SUFFIX);
    if (layer >= hp->n_layer && hp->fam->skip_extra_layers) return 1;
    if (*expert >= hp->n_expert && *expert >= 0)
        return cf_fail(err, "%s: tensor '%s': expert %lld, but config.json: field n_routed_experts is %lld", file, esc,
                       (long long)*expert, (long long)hp->n_expert);
    if (layer >= hp->n_layer)
        return cf_fail(err, "%s: tensor '%s': layer %lld, but config.json: field num_hidden_layers is %lld", file, esc,
                       (long long)layer, (long long)hp->n_layer);
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return cf_fail(err, "%s: tensor '%s': field shape: %d dimensions (1..4 supported)", file, esc, t->n_dims);
    memset(g, 0, sizeof *g);
    if (t->dtype == ST_F8_E4M3 && !is_scale) {
        if (check_fp8(o, t, file, err)) return -1;
        g->type = DT_F8_B128;
    } else if (is_scale && (t->dtype != ST_F32 || t->n_dims != 2)) {
        return cf_fail(err, "%s: tensor '%s': block scales must be 2-D F32", file, esc);
    } else if (ggml_type_of(t, file, &g->type, err)) {
        return -1;
    }
    g->name = name;
    g->n_dims = t->n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) g->ne[d] = d < t->n_dims ? t->shape[t->n_dims - 1 - d] : 1;
    g->data = t->data;
    g->nbytes = t->nbytes;
    if (*expert >= 0)
        return t->n_dims == 2 ? 2 : cf_fail(err, "%s: tensor '%s': an expert matrix must be 2-D", file, esc);
    if (g->n_dims == 1 && g->type != DT_F32 && widen_vector(o, g, file, err)) return -1;
    size_t n = strlen(name);
    bool is_q = strstr(name, ".attn_q.") != NULL, is_k = strstr(name, ".attn_k.") != NULL;
    if (hp->fam->permute_qk && (is_q || is_k) && (g->type == DT_F8_B128 || is_scale))
        return cf_fail(err, "%s: tensor '%s': FP8 Q/K weights of a %s model are not supported", file, esc,
                       hp->fam->model_type);
    if (hp->fam->permute_qk && (is_q || is_k) && n)
        return permute_rows(o, g, is_q ? hp->n_head : hp->n_head_kv, file, err);
    return 0;
}

/* Experts of one stack (one layer's gate, up or down matrices). */
typedef struct expert_stack {
    char name[128];
    gguf_tensor *parts; /* n_expert entries; data NULL until seen */
    const char *file;
} expert_stack;

static int stack_add(expert_stack **stacks, int64_t *n, const hf_hparams *hp, const gguf_tensor *g, int64_t e,
                     const char *name, const char *file, cf_err *err) {
    int64_t i = 0;
    while (i < *n && strcmp((*stacks)[i].name, name)) i++;
    if (i == *n) {
        expert_stack *grown = realloc(*stacks, (size_t)(*n + 1) * sizeof *grown);
        if (!grown) return cf_fail(err, "out of memory");
        *stacks = grown;
        memset(&grown[i], 0, sizeof grown[i]);
        snprintf(grown[i].name, sizeof grown[i].name, "%s", name);
        grown[i].file = file;
        grown[i].parts = calloc((size_t)hp->n_expert, sizeof *grown[i].parts);
        (*n)++;
        if (!grown[i].parts) return cf_fail(err, "out of memory");
    }
    (*stacks)[i].parts[e] = *g;
    return 0;
}

/* One [in, out, n_expert] tensor from a stack's experts (copied once: HF keeps one file entry per expert). */
static int stack_build(hf_owner *o, const hf_hparams *hp, const expert_stack *s, gguf_tensor *g, cf_err *err) {
    const gguf_tensor *p0 = &s->parts[0];
    for (int64_t e = 0; e < hp->n_expert; e++) {
        const gguf_tensor *p = &s->parts[e];
        if (!p->data)
            return cf_fail(err, "%s: expert %lld of %s is missing (config.json: field n_routed_experts is %lld)",
                           s->file, (long long)e, s->name, (long long)hp->n_expert);
        if (p->type != p0->type || p->ne[0] != p0->ne[0] || p->ne[1] != p0->ne[1])
            return cf_fail(err, "%s: expert %lld of %s differs in dtype or shape from expert 0", s->file, (long long)e,
                           s->name);
    }
    void **grown = realloc(o->bufs, (o->n_bufs + 1) * sizeof *grown);
    if (!grown) return cf_fail(err, "out of memory");
    o->bufs = grown;
    uint8_t *dst = malloc(p0->nbytes * (size_t)hp->n_expert);
    if (!dst) return cf_fail(err, "%s: out of memory stacking %s", s->file, s->name);
    o->bufs[o->n_bufs++] = dst;
    for (int64_t e = 0; e < hp->n_expert; e++) memcpy(dst + (size_t)e * p0->nbytes, s->parts[e].data, p0->nbytes);
    *g = *p0;
    g->name = s->name;
    g->n_dims = 3;
    g->ne[2] = hp->n_expert;
    g->data = dst;
    g->nbytes = p0->nbytes * (size_t)hp->n_expert;
    return 0;
}

static int collect_tensors(hf_owner *o, const hf_hparams *hp, gguf_tensor **out, char **names, int64_t *n_out,
                           cf_err *err) {
    int64_t n = st_set_count(o->set), n_stacks = 0;
    gguf_tensor *ts = calloc((size_t)(n ? n : 1), sizeof *ts);
    char *nm = calloc((size_t)(n ? n : 1), 128);
    expert_stack *stacks = NULL;
    *out = ts;
    *names = nm;
    *n_out = 0;
    int rc = ts && nm ? 0 : cf_fail(err, "out of memory");
    for (int64_t i = 0; !rc && i < n; i++) {
        const st_tensor *t = st_set_at(o->set, i);
        const char *file = "";
        st_set_find(o->set, t->name, &file);
        int64_t e;
        char *name = nm + *n_out * 128;
        int r = map_tensor(o, hp, t, file, &ts[*n_out], name, 128, &e, err);
        if (r < 0) rc = -1;
        else if (r == 2) rc = stack_add(&stacks, &n_stacks, hp, &ts[*n_out], e, name, file, err);
        else if (r == 0) ts[(*n_out)++].name = name;
    }
    for (int64_t i = 0; !rc && i < n_stacks; i++) { /* each stack replaces n_expert >= 1 entries: room is there */
        rc = stack_build(o, hp, &stacks[i], &ts[*n_out], err);
        if (!rc) {
            snprintf(nm + *n_out * 128, 128, "%s", stacks[i].name);
            ts[*n_out].name = nm + *n_out * 128;
            (*n_out)++;
        }
    }
    for (int64_t i = 0; i < n_stacks; i++) free(stacks[i].parts);
    free(stacks);
    return rc;
}

int hf_dir_open(const char *dir, gguf_file **out, cf_err *err) {
    *out = NULL;
    gguf_writer *w = gguf_writer_create();
    hf_owner *o = calloc(1, sizeof *o);
    hf_hparams hp;
    gguf_tensor *ts = NULL;
    char *names = NULL;
    int64_t n = 0;
    void *meta = NULL;
    size_t meta_n = 0;
    int rc = -1;
    if (!w || !o) {
        cf_fail(err, "out of memory");
    } else if (!hf_config_read(dir, w, &hp, err) && !hf_vocab_read(dir, hp.vocab_size, w, err) &&
               !st_set_open_dir(dir, &o->set, err) && !collect_tensors(o, &hp, &ts, &names, &n, err) &&
               !gguf_writer_meta_image(w, &meta, &meta_n, err)) {
        rc = gguf_open_parts(meta, meta_n, dir, ts, n, o, owner_release, out, err);
        o = NULL; /* owned by the file (or released) from here */
    }
    free(ts);
    free(names);
    owner_release(o);
    gguf_writer_free(w);
    return rc ? cf_prefix(err, "%s", dir) : 0;
}

/* llama.cpp has no FP8 type: an FP8 weight is written as BF16 (value x block
 * scale, as llama.cpp's converter does), experts slice by slice. */
static int add_fp8_as_bf16(gguf_writer *w, const gguf_file *f, const gguf_tensor *t, cf_err *err) {
    char sname[300];
    snprintf(sname, sizeof sname, "%s%s", t->name, SCALE_SUFFIX);
    const gguf_tensor *s = gguf_find_tensor(f, sname);
    int64_t k = t->ne[0], rows = t->ne[1] * t->ne[2], sc = (k + 127) / 128, rows_e = t->ne[1];
    int64_t sr = (rows_e + 127) / 128;
    if (!s) return cf_fail(err, "%s: missing %s", t->name, sname);
    uint16_t *out = malloc((size_t)(rows * k) * sizeof *out);
    if (!out) return cf_fail(err, "out of memory converting %s", t->name);
    const uint8_t *q = t->data;
    const float *scale = s->data;
    for (int64_t r = 0; r < rows; r++) {
        const float *srow = scale + ((r / rows_e) * sr + (r % rows_e) / 128) * sc;
        for (int64_t j = 0; j < k; j++)
            out[r * k + j] = f32_to_bf16(kern_fp8_e4m3_to_f32(q[r * k + j]) * srow[j / 128]);
    }
    int rc = gguf_writer_add_tensor(w, t->name, DT_BF16, t->n_dims, t->ne, out, true, err);
    free(out);
    return rc;
}

int hf_dir_convert(const char *dir, const char *out_path, cf_err *err) {
    gguf_file *f;
    if (hf_dir_open(dir, &f, err)) return -1;
    gguf_writer *w = gguf_writer_create();
    int rc = w ? gguf_writer_copy_kv(w, f, err) : cf_fail(err, "out of memory");
    for (int64_t i = 0; !rc && i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        size_t nl = strlen(t->name), sl = strlen(SCALE_SUFFIX);
        if (nl > sl && !strcmp(t->name + nl - sl, SCALE_SUFFIX)) continue; /* folded into its weight */
        if (t->type == DT_F8_B128) rc = add_fp8_as_bf16(w, f, t, err);
        else rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, false, err);
    }
    if (!rc) rc = gguf_writer_write(w, out_path, err);
    gguf_writer_free(w);
    gguf_close(f);
    return rc;
}
