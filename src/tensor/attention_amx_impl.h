/* attention_amx_impl.h - one segment of ATTN_PREC_BF16 attention on AMX
 * tiles (TDPBF16PS), for the AVX-512 build compiled with AMX-BF16; included
 * by attention_impl.h after attention_bf16_impl.h, whose packing it shares
 * (the layouts are the tiles' own: a K tile of 16 keys x 16 dim pairs is a
 * B tile, a V run of 16 key pairs x 16 dims is a B tile). The caller checks
 * cpu_has_amx_bf16().
 *
 * Every tile is 16 rows x 64 bytes (configured per call on this thread).
 * Q.K: rows in groups of 16 (A: bf16 Q rows padded with zeros to a multiple
 * of 32 dims), 16 keys at a time, f32 scores out. P.V: weights as A (16 rows
 * x 32 keys, blocks of 32 keys aligned to the segment start, zero outside
 * each row's [lo, hi)), V as B, up to 4 output tiles of 16 dims. A row's
 * products and their order depend only on its own query, lo and hi: blocks
 * are at fixed positions and weights of 0 add exact zeros (V outside the
 * keys the call may see is zero), so results do not depend on the other
 * rows of the call (batch invariance). Rows past the last of a partial group
 * compute garbage that is never stored. */

typedef struct attn_tilecfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} attn_tilecfg;

static void attn_amx_configure(void) {
    attn_tilecfg cfg __attribute__((aligned(64)));
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    _tile_loadconfig(&cfg);
}

/* Tile 0 (16 x 16 f32) to rows [0, nr) of out (stride floats apart), n
 * columns each. */
static inline void attn_amx_store(float *out, int64_t stride, int nr, int n, float *tmp) {
    if (nr == 16 && n == 16) {
        _tile_stored(0, out, stride * 4);
        return;
    }
    _tile_stored(0, tmp, 64);
    for (int i = 0; i < nr; i++) memcpy(out + i * stride, tmp + i * 16, sizeof(float) * (size_t)n);
}

/* Scores of every row for keys [k0, s1) into sc (as attn_scores). q: bf16
 * rows of hd32 elements; kb: K tiles of hd32 / 2 pairs. Tile use: 0 scores,
 * 1 K, 2 Q (reloaded per K tile: tile loads from L1 cost less than the
 * dot product they feed). */
static void attn_amx_scores(const attn_args *a, const uint16_t *qb, int hd32, const uint16_t *kb, int s0, int k0,
                            int s1, float *sc) {
    const int n_rows = a->n_tok * a->n_q;
    float tmp[256] __attribute__((aligned(64)));
    for (int r0 = 0; r0 < n_rows; r0 += 16) {
        int nr = n_rows - r0 < 16 ? n_rows - r0 : 16;
        const uint16_t *q = qb + (int64_t)r0 * hd32;
        for (int j0 = k0; j0 < s1; j0 += 16) {
            const uint16_t *kt = kb + (int64_t)(j0 - k0) * hd32;
            _tile_zero(0);
            for (int d = 0; d < hd32; d += 32) {
                _tile_loadd(2, q + d, hd32 * 2);
                _tile_loadd(1, kt + d * 16, 64);
                _tile_dpbf16ps(0, 2, 1);
            }
            attn_amx_store(sc + (int64_t)r0 * ATTN_SROW + (j0 - s0), ATTN_SROW, nr, 16, tmp);
        }
    }
}

/* acc tiles 0..nc-1 += P (tile 4, reloaded per block) . V over the 32-key
 * blocks [b0, b1) (relative to the segment start) for dims d0.. . */
#define ATTN_AMX_PV_STEP(c)                  \
    do {                                     \
        _tile_loadd(5, v + (c)*32, vstride); \
        _tile_dpbf16ps(c, 4, 5);             \
    } while (0)

static inline __attribute__((always_inline)) void attn_amx_pv_blocks(const uint16_t *p, int64_t pstride,
                                                                     const uint16_t *vb, int64_t vstride, int hd16,
                                                                     int d0, int b0, int b1, int nc) {
    for (int b = b0; b < b1; b += 32) {
        _tile_loadd(4, p + b, pstride);
        const uint16_t *v = vb + (int64_t)b / 2 * hd16 * 2 + d0 * 2;
        ATTN_AMX_PV_STEP(0);
        if (nc > 1) ATTN_AMX_PV_STEP(1);
        if (nc > 2) ATTN_AMX_PV_STEP(2);
        if (nc > 3) ATTN_AMX_PV_STEP(3);
    }
}

/* P.V of rows [r0, r0 + nr) over blocks [b0, b1) into the part's acc rows. */
static void attn_amx_pv(const attn_args *a, int r0, int nr, int b0, int b1, const uint16_t *pb, const uint16_t *vb,
                        int hd16, float *acc) {
    const int hd = a->head_dim;
    const uint16_t *p = pb + (int64_t)r0 * ATTN_SEG;
    const int64_t pstride = ATTN_SEG * 2, vstride = (int64_t)hd16 * 4;
    float tmp[256] __attribute__((aligned(64)));
    for (int d0 = 0; d0 < hd16; d0 += 64) {
        int nc = (hd16 - d0) / 16 < 4 ? (hd16 - d0) / 16 : 4;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        switch (nc) {
        case 4: attn_amx_pv_blocks(p, pstride, vb, vstride, hd16, d0, b0, b1, 4); break;
        case 3: attn_amx_pv_blocks(p, pstride, vb, vstride, hd16, d0, b0, b1, 3); break;
        case 2: attn_amx_pv_blocks(p, pstride, vb, vstride, hd16, d0, b0, b1, 2); break;
        default: attn_amx_pv_blocks(p, pstride, vb, vstride, hd16, d0, b0, b1, 1); break;
        }
        /* tile c to dims d0 + 16c (through tmp for a partial group or dims past head_dim) */
        float *o = acc + (int64_t)r0 * hd + d0;
        for (int c = 0; c < nc; c++) {
            int n = hd - (d0 + 16 * c) < 16 ? hd - (d0 + 16 * c) : 16;
            float *oc = o + 16 * c;
            bool direct = nr == 16 && n == 16;
            float *dst = direct ? oc : tmp;
            int64_t ds = direct ? (int64_t)hd * 4 : 64;
            switch (c) {
            case 0: _tile_stored(0, dst, ds); break;
            case 1: _tile_stored(1, dst, ds); break;
            case 2: _tile_stored(2, dst, ds); break;
            default: _tile_stored(3, dst, ds); break;
            }
            if (!direct)
                for (int i = 0; i < nr; i++) memcpy(oc + (int64_t)i * hd, tmp + i * 16, sizeof(float) * (size_t)n);
        }
    }
}

/* Segment seg's partial state of every row into part (as attn_segment), on
 * AMX. Scratch as attn_segment_bf16. */
static __attribute__((noinline)) void attn_segment_amx(const attn_args *a, int seg, float *part, float *sc) {
    const int hd = a->head_dim, nq = a->n_q, nt = a->n_tok, n_rows = nt * nq;
    const int hd32 = (hd + 31) / 32 * 32, hd16 = (hd + 15) / 16 * 16, rows16 = (n_rows + 15) / 16 * 16;
    float *acc = part, *m = part + (int64_t)n_rows * hd, *l = m + n_rows;
    const int s0 = seg * ATTN_SEG, j_end = a->pos[nt - 1] + 1;
    const int s1 = s0 + ATTN_SEG < j_end ? s0 + ATTN_SEG : j_end;
    int lo0 = attn_lo(a, 0) > s0 ? attn_lo(a, 0) : s0, k0 = lo0 / 16 * 16;
    /* the call's 32-key blocks, relative to s0 */
    const int blk0 = (lo0 - s0) / 32 * 32, blk1 = (s1 - s0 + 31) / 32 * 32;
    uint16_t *qb = (uint16_t *)(sc + (int64_t)n_rows * (ATTN_SROW + 2));
    uint16_t *kb = (uint16_t *)((float *)qb + (int64_t)rows16 * (hd + 16));
    uint16_t *vb = kb + (int64_t)ATTN_SEG * hd32, *pb = vb + (int64_t)ATTN_SEG * hd16;
    attn_amx_configure();
    attn_bf16_pack_q(a, qb, hd32);
    attn_bf16_pack_k(a, k0, s1, kb, hd32 / 2);
    attn_bf16_pack_v(a, s0, s0 + blk0, s0 + blk1, lo0, s1, vb, hd16);
    attn_amx_scores(a, qb, hd32, kb, s0, k0, s1, sc);
    for (int t = 0; t < nt; t++) {
        int lo = attn_lo(a, t), hi = a->pos[t] + 1;
        if (lo < s0) lo = s0;
        if (hi > s1) hi = s1;
        for (int h = 0; h < nq; h++) {
            int r = t * nq + h;
            uint16_t *w = pb + (int64_t)r * ATTN_SEG;
            if (lo >= hi) { /* the empty state; zero weights for the group's P.V */
                m[r] = -INFINITY;
                l[r] = 0.0f;
                memset(w + blk0, 0, sizeof(uint16_t) * (size_t)(blk1 - blk0));
                continue;
            }
            float *srow = sc + (int64_t)r * ATTN_SROW, *s = srow + (lo - s0);
            if (a->softcap > 0.0f)
                for (int j = 0; j < hi - lo; j++) s[j] = a->softcap * tanhf(s[j] / a->softcap);
            l[r] = attn_bf16_softmax_fast(srow, s0, lo, hi, s0 + blk0, s0 + blk1, w, &m[r]);
        }
    }
    for (int r0 = 0; r0 < n_rows; r0 += 16) {
        int nr = n_rows - r0 < 16 ? n_rows - r0 : 16;
        /* blocks the group's rows see: from its first row's lo to its last row's hi */
        int t0 = r0 / nq, t1 = (r0 + nr - 1) / nq;
        int lo = attn_lo(a, t0) > s0 ? attn_lo(a, t0) : s0, hi = a->pos[t1] + 1 < s1 ? a->pos[t1] + 1 : s1;
        int b0 = (lo - s0) / 32 * 32, b1 = hi > lo ? (hi - s0 + 31) / 32 * 32 : b0;
        attn_amx_pv(a, r0, nr, b0, b1, pb, vb, hd16, acc);
    }
}
