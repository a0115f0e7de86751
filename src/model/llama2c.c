/* llama2c.c - llama2.c checkpoint + tokenizer -> GGUF (see llama2c.h).
 *
 * Checkpoint (run.c "legacy" export): 7 int32 config, then float32 arrays in
 * this order (row-major, [out][in]):
 *   token_embedding_table [vocab][dim]     rms_att_weight [L][dim]
 *   wq [L][dim][dim]   wk [L][kv_dim][dim]   wv [L][kv_dim][dim]   wo [L][dim][dim]
 *   rms_ffn_weight [L][dim]   w1 [L][hidden][dim]   w2 [L][dim][hidden]   w3 [L][hidden][dim]
 *   rms_final_weight [dim]    freq_cis_real, freq_cis_imag [seq_len][head_size/2] (skipped)
 *   wcls [vocab][dim]  only if the header's vocab_size was negative
 * A row-major [out][in] matrix is a GGUF tensor with ne = {in, out}, so the
 * bytes are copied unchanged. The file size must match the config exactly.
 *
 * Tokenizer: int32 max_token_length, then per token {f32 score, int32 len,
 * len bytes}. Pieces become GGUF vocab entries the way llama.cpp's converter
 * does it: ids 0/1/2 are renamed "<unk>"/"<s>"/"</s>" (UNKNOWN/CONTROL), pieces
 * "<0xHH>" are BYTE tokens, every other piece has ' ' replaced by U+2581.
 *
 * Both inputs are mapped read-only; tensors reference the mapping, so memory
 * use is the vocab only. Called by `cinfer convert llama2c`. */
#include "model/llama2c.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/gguf.h"
#include "tensor/dtype.h"

enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_BYTE = 6 };

typedef struct mapped {
    const uint8_t *p;
    size_t size;
} mapped;

static int map_file(const char *path, mapped *m, cf_err *err) {
    m->p = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return cf_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return cf_fail(err, "%s: not a readable regular file", path);
    }
    m->size = (size_t)st.st_size;
    if (m->size == 0) {
        close(fd);
        return cf_fail(err, "%s: file is empty", path);
    }
    void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return cf_fail(err, "%s: cannot mmap: %s", path, strerror(e));
    m->p = p;
    return 0;
}

static void unmap_file(mapped *m) {
    if (m->p) munmap((void *)m->p, m->size);
    m->p = NULL;
}

/* ---- checkpoint ---- */

static int read_config(const char *path, const mapped *m, llama2c_config *c, cf_err *err) {
    if (m->size < 28) return cf_fail(err, "%s: too small for a llama2.c header (%zu bytes)", path, m->size);
    int32_t h[7];
    memcpy(h, m->p, sizeof h);
    *c = (llama2c_config){h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[5] > 0};
    if (c->vocab_size < 0) {
        if (c->vocab_size == INT32_MIN) return cf_fail(err, "%s: bad vocab_size %d", path, c->vocab_size);
        c->vocab_size = -c->vocab_size;
    }
    const int32_t lim = 1 << 20;
    if (c->dim <= 0 || c->hidden_dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
        c->vocab_size <= 0 || c->seq_len <= 0 || c->dim > lim || c->hidden_dim > lim || c->n_layers > 4096 ||
        c->n_heads > c->dim || c->vocab_size > (1 << 24) || c->seq_len > (1 << 24))
        return cf_fail(err,
                       "%s: implausible llama2.c config dim=%d hidden_dim=%d n_layers=%d n_heads=%d n_kv_heads=%d "
                       "vocab_size=%d seq_len=%d (not a llama2.c checkpoint?)",
                       path, h[0], h[1], h[2], h[3], h[4], h[5], h[6]);
    if (c->dim % c->n_heads || (c->dim / c->n_heads) % 2)
        return cf_fail(err, "%s: dim %d is not a multiple of n_heads %d with an even head size", path, c->dim,
                       c->n_heads);
    if (c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads)
        return cf_fail(err, "%s: n_heads %d is not a multiple of n_kv_heads %d", path, c->n_heads, c->n_kv_heads);
    return 0;
}

/* Float offsets of each weight array; all products fit in uint64 given the limits above. */
typedef struct layout {
    uint64_t embd, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls, total;
} layout;

static layout compute_layout(const llama2c_config *c) {
    uint64_t dim = (uint64_t)c->dim, hid = (uint64_t)c->hidden_dim, L = (uint64_t)c->n_layers;
    uint64_t kv_dim = dim / (uint64_t)c->n_heads * (uint64_t)c->n_kv_heads, head = dim / (uint64_t)c->n_heads;
    layout l;
    uint64_t o = 0;
    l.embd = o, o += (uint64_t)c->vocab_size * dim;
    l.rms_att = o, o += L * dim;
    l.wq = o, o += L * dim * dim;
    l.wk = o, o += L * kv_dim * dim;
    l.wv = o, o += L * kv_dim * dim;
    l.wo = o, o += L * dim * dim;
    l.rms_ffn = o, o += L * dim;
    l.w1 = o, o += L * hid * dim;
    l.w2 = o, o += L * dim * hid;
    l.w3 = o, o += L * hid * dim;
    l.rms_final = o, o += dim;
    o += (uint64_t)c->seq_len * head; /* freq_cis_real + imag, head/2 each */
    l.wcls = c->shared_classifier ? l.embd : o;
    if (!c->shared_classifier) o += (uint64_t)c->vocab_size * dim;
    l.total = o;
    return l;
}

/* ---- tokenizer ---- */

typedef struct vocab {
    gguf_str *tokens;
    float *scores;
    int32_t *types;
    int32_t n;
} vocab;

static void vocab_free(vocab *v) {
    for (int32_t i = 0; v->tokens && i < v->n; i++) free((void *)v->tokens[i].s);
    free(v->tokens);
    free(v->scores);
    free(v->types);
}

static bool is_hex(char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'); }

/* The GGUF form of piece i (malloc'd) and its token type. */
static char *convert_piece(int32_t i, const uint8_t *p, size_t len, uint64_t *out_len, int32_t *type) {
    static const char *special[3] = {"<unk>", "<s>", "</s>"};
    if (i < 3) {
        *type = i == 0 ? TOKEN_UNKNOWN : TOKEN_CONTROL;
        *out_len = strlen(special[i]);
        return strdup(special[i]);
    }
    if (len >= 4 && !memcmp(p, "<0x", 3) && is_hex((char)p[3])) {
        *type = TOKEN_BYTE;
    } else {
        *type = TOKEN_NORMAL;
    }
    size_t spaces = 0;
    if (*type == TOKEN_NORMAL)
        for (size_t j = 0; j < len; j++) spaces += p[j] == ' ';
    char *s = malloc(len + 2 * spaces + 1), *o = s;
    if (!s) return NULL;
    for (size_t j = 0; j < len; j++) {
        if (p[j] == ' ' && *type == TOKEN_NORMAL) {
            memcpy(o, "\xe2\x96\x81", 3); /* U+2581 LOWER ONE EIGHTH BLOCK */
            o += 3;
        } else {
            *o++ = (char)p[j];
        }
    }
    *o = 0;
    *out_len = (uint64_t)(o - s);
    return s;
}

static int read_vocab(const char *path, const mapped *m, int32_t n, vocab *v, cf_err *err) {
    memset(v, 0, sizeof *v);
    if (m->size < 4) return cf_fail(err, "%s: too small for a llama2.c tokenizer", path);
    if ((uint64_t)n > (m->size - 4) / 8)
        return cf_fail(err, "%s: %zu bytes cannot hold the %d tokens the checkpoint's vocab_size says", path, m->size,
                       n);
    v->tokens = calloc((size_t)n, sizeof *v->tokens);
    v->scores = calloc((size_t)n, sizeof *v->scores);
    v->types = calloc((size_t)n, sizeof *v->types);
    if (!v->tokens || !v->scores || !v->types) return cf_fail(err, "%s: out of memory", path);
    size_t pos = 4;
    for (int32_t i = 0; i < n; i++) {
        int32_t len;
        if (m->size - pos < 8) return cf_fail(err, "%s: truncated at token %d of %d (offset %zu)", path, i, n, pos);
        memcpy(&v->scores[i], m->p + pos, 4);
        memcpy(&len, m->p + pos + 4, 4);
        if (len < 0 || (size_t)len > m->size - pos - 8)
            return cf_fail(err, "%s: token %d has bad length %d (offset %zu)", path, i, len, pos + 4);
        pos += 8;
        char *s = convert_piece(i, m->p + pos, (size_t)len, &v->tokens[i].len, &v->types[i]);
        if (!s) return cf_fail(err, "%s: out of memory", path);
        v->tokens[i].s = s;
        v->n = i + 1;
        pos += (size_t)len;
    }
    if (pos != m->size)
        return cf_fail(err, "%s: %zu bytes after the %d tokens the checkpoint's vocab_size says (vocab mismatch?)",
                       path, m->size - pos, n);
    return 0;
}

/* ---- GGUF output ---- */

static void set_hparams(gguf_writer *w, const llama2c_config *c, const vocab *v) {
    gguf_set_arr_str_len(w, "tokenizer.ggml.tokens", v->tokens, (uint64_t)v->n);
    gguf_set_arr_f32(w, "tokenizer.ggml.scores", v->scores, (uint64_t)v->n);
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", v->types, (uint64_t)v->n);
    gguf_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_str(w, "general.name", "llama");
    gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_set_u32(w, "tokenizer.ggml.seperator_token_id", UINT32_MAX); /* sic: llama.cpp's key */
    gguf_set_u32(w, "tokenizer.ggml.padding_token_id", UINT32_MAX);
    gguf_set_u32(w, "llama.context_length", (uint32_t)c->seq_len);
    gguf_set_u32(w, "llama.embedding_length", (uint32_t)c->dim);
    gguf_set_u32(w, "llama.feed_forward_length", (uint32_t)c->hidden_dim);
    gguf_set_u32(w, "llama.attention.head_count", (uint32_t)c->n_heads);
    gguf_set_u32(w, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads);
    gguf_set_u32(w, "llama.block_count", (uint32_t)c->n_layers);
    gguf_set_u32(w, "llama.rope.dimension_count", (uint32_t)(c->dim / c->n_heads));
    gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
}

/* Adds a 1-D (rows == 0) or 2-D F32 tensor referencing the checkpoint at float offset `off`. */
static int add(gguf_writer *w, const uint8_t *base, const char *name, uint64_t off, int64_t cols, int64_t rows,
               cf_err *err) {
    int64_t ne[2] = {cols, rows};
    return gguf_writer_add_tensor(w, name, DT_F32, rows ? 2 : 1, ne, base + 28 + off * 4, false, err);
}

static int add_tensors(gguf_writer *w, const llama2c_config *c, const uint8_t *base, cf_err *err) {
    layout l = compute_layout(c);
    int64_t dim = c->dim, hid = c->hidden_dim, kv = (int64_t)c->dim / c->n_heads * c->n_kv_heads;
    if (add(w, base, "token_embd.weight", l.embd, dim, c->vocab_size, err) ||
        add(w, base, "output_norm.weight", l.rms_final, dim, 0, err) ||
        add(w, base, "output.weight", l.wcls, dim, c->vocab_size, err))
        return -1;
    for (int32_t i = 0; i < c->n_layers; i++) {
        char n[9][64];
        static const char *parts[9] = {"attn_q",   "attn_k",   "attn_v", "attn_output", "attn_norm",
                                       "ffn_gate", "ffn_down", "ffn_up", "ffn_norm"};
        for (int k = 0; k < 9; k++) snprintf(n[k], sizeof n[k], "blk.%d.%s.weight", i, parts[k]);
        uint64_t L = (uint64_t)i, d = (uint64_t)dim, h = (uint64_t)hid, kd = (uint64_t)kv;
        if (add(w, base, n[0], l.wq + L * d * d, dim, dim, err) ||
            add(w, base, n[1], l.wk + L * kd * d, dim, kv, err) ||
            add(w, base, n[2], l.wv + L * kd * d, dim, kv, err) ||
            add(w, base, n[3], l.wo + L * d * d, dim, dim, err) || add(w, base, n[4], l.rms_att + L * d, dim, 0, err) ||
            add(w, base, n[5], l.w1 + L * h * d, dim, hid, err) ||
            add(w, base, n[6], l.w2 + L * d * h, hid, dim, err) ||
            add(w, base, n[7], l.w3 + L * h * d, dim, hid, err) || add(w, base, n[8], l.rms_ffn + L * d, dim, 0, err))
            return -1;
    }
    return 0;
}

int llama2c_convert(const char *model_path, const char *tok_path, const char *out_path, cf_err *err) {
    mapped model = {0}, tok = {0};
    vocab v = {0};
    gguf_writer *w = NULL;
    int rc = -1;
    llama2c_config c;
    if (map_file(model_path, &model, err) || read_config(model_path, &model, &c, err)) goto done;
    layout l = compute_layout(&c);
    if (l.total != (model.size - 28) / 4 || (model.size - 28) % 4) {
        cf_fail(err,
                "%s: size %zu bytes does not match its config (dim=%d hidden=%d layers=%d heads=%d kv_heads=%d "
                "vocab=%d%s seq_len=%d needs %" PRIu64 " bytes)",
                model_path, model.size, c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size,
                c.shared_classifier ? "" : " unshared", c.seq_len, 28 + l.total * 4);
        goto done;
    }
    if (map_file(tok_path, &tok, err) || read_vocab(tok_path, &tok, c.vocab_size, &v, err)) goto done;
    w = gguf_writer_create();
    if (!w) {
        cf_fail(err, "out of memory");
        goto done;
    }
    set_hparams(w, &c, &v);
    if (add_tensors(w, &c, model.p, err)) goto done;
    rc = gguf_writer_write(w, out_path, err);
done:
    gguf_writer_free(w);
    vocab_free(&v);
    unmap_file(&tok);
    unmap_file(&model);
    return rc;
}
