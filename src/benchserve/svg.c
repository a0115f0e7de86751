/* svg.c - see svg.h. Layout constants are fixed (800x480 charts); ticks are
 * 1/2/5 x 10^k steps giving about five intervals. */
#include "benchserve/svg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                     "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
#define N_COLORS (sizeof colors / sizeof colors[0])

int svg_escape(bs_buf *b, const char *s) {
    int rc = 0;
    for (; *s && !rc; s++) {
        switch (*s) {
        case '&': rc = bs_buf_puts(b, "&amp;"); break;
        case '<': rc = bs_buf_puts(b, "&lt;"); break;
        case '>': rc = bs_buf_puts(b, "&gt;"); break;
        case '"': rc = bs_buf_puts(b, "&quot;"); break;
        case '\'': rc = bs_buf_puts(b, "&apos;"); break;
        default:
            /* Control characters are not allowed in XML 1.0 text. */
            rc = bs_buf_append(b, (unsigned char)*s < 0x20 ? " " : s, 1);
        }
    }
    return rc;
}

static int text(bs_buf *b, double x, double y, const char *anchor, const char *extra, const char *s) {
    int rc = bs_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" %s>", x, y, anchor, extra);
    return rc || svg_escape(b, s) || bs_buf_puts(b, "</text>\n");
}

static int header(bs_buf *b, int w, int h, const char *title) {
    int rc = bs_buf_printf(b,
                           "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                           "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
                           "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
                           "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                           w, h, w, h);
    return rc || text(b, w / 2.0, 22, "middle", "font-size=\"15\" font-weight=\"bold\"", title);
}

/* A tick step of 1, 2 or 5 x 10^k giving about 5 intervals over span. */
static double nice_step(double span) {
    if (!(span > 0)) return 1;
    double raw = span / 5, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void fmt_num(char *out, size_t cap, double v) {
    if (fabs(v) < 1e-12) v = 0;
    snprintf(out, cap, "%g", v);
}

enum { W = 860, H = 480, ML = 80, MR = 250, MT = 40, MB = 60 };

static int legend(bs_buf *b, const char *const *names, size_t n, int x0, int y0) {
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        double y = y0 + 20.0 * (double)i;
        rc = bs_buf_printf(b, "<rect x=\"%d\" y=\"%.1f\" width=\"14\" height=\"10\" fill=\"%s\"/>\n", x0, y - 9,
                           colors[i % N_COLORS]) ||
             text(b, x0 + 20, y, "start", "", names[i]);
    }
    return rc;
}

int svg_line_chart(bs_buf *b, const char *title, const char *xlabel, const char *ylabel, const svg_series *s,
                   size_t ns) {
    double x0 = INFINITY, x1 = -INFINITY, y0 = 0, y1 = -INFINITY;
    for (size_t k = 0; k < ns; k++)
        for (size_t i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].x[i]) || !isfinite(s[k].y[i])) continue;
            x0 = fmin(x0, s[k].x[i]), x1 = fmax(x1, s[k].x[i]);
            y0 = fmin(y0, s[k].y[i]), y1 = fmax(y1, s[k].y[i]);
        }
    if (!isfinite(x0)) x0 = 0, x1 = 1, y1 = 1;
    if (x0 > 0) x0 = 0;
    if (x1 <= x0) x1 = x0 + 1;
    if (y1 <= y0) y1 = y0 + 1;
    double xs = nice_step(x1 - x0), ys = nice_step(y1 - y0);
    x0 = floor(x0 / xs) * xs, x1 = ceil(x1 / xs) * xs;
    y0 = floor(y0 / ys) * ys, y1 = ceil(y1 / ys) * ys;
    double pw = W - ML - MR, ph = H - MT - MB;
#define PX(v) (ML + ((v)-x0) / (x1 - x0) * pw)
#define PY(v) (MT + ph - ((v)-y0) / (y1 - y0) * ph)
    int rc = header(b, W, H, title);
    rc = rc ||
         bs_buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n",
                       ML, MT, pw, ph);
    char num[32];
    for (int t = 0; t <= 100 && !rc; t++) { /* counted: a step lost to rounding cannot loop forever */
        double v = x0 + t * xs;
        if (v > x1 + xs * 1e-6) break;
        fmt_num(num, sizeof num, v);
        rc = bs_buf_printf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", PX(v), MT,
                           PX(v), MT + ph) ||
             text(b, PX(v), MT + ph + 16, "middle", "", num);
    }
    for (int t = 0; t <= 100 && !rc; t++) {
        double v = y0 + t * ys;
        if (v > y1 + ys * 1e-6) break;
        fmt_num(num, sizeof num, v);
        rc = bs_buf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", ML, PY(v),
                           ML + pw, PY(v)) ||
             text(b, ML - 6, PY(v) + 4, "end", "", num);
    }
    rc = rc || text(b, ML + pw / 2, H - 15, "middle", "class=\"xlabel\"", xlabel);
    char rot[96];
    snprintf(rot, sizeof rot, "class=\"ylabel\" transform=\"rotate(-90 20 %.1f)\"", MT + ph / 2);
    rc = rc || text(b, 20, MT + ph / 2, "middle", rot, ylabel);
    const char *names[64];
    for (size_t k = 0; k < ns && !rc; k++) {
        if (k < 64) names[k] = s[k].name;
        rc = bs_buf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
                           colors[k % N_COLORS]);
        for (size_t i = 0; i < s[k].n && !rc; i++)
            if (isfinite(s[k].x[i]) && isfinite(s[k].y[i]))
                rc = bs_buf_printf(b, "%.1f,%.1f ", PX(s[k].x[i]), PY(s[k].y[i]));
        rc = rc || bs_buf_puts(b, "\"/>\n");
        /* Markers on short series, so a lone point is visible too. */
        for (size_t i = 0; s[k].n <= 80 && i < s[k].n && !rc; i++)
            if (isfinite(s[k].x[i]) && isfinite(s[k].y[i]))
                rc = bs_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", PX(s[k].x[i]),
                                   PY(s[k].y[i]), colors[k % N_COLORS]);
    }
#undef PX
#undef PY
    rc = rc || bs_buf_puts(b, "<g class=\"legend\">\n") || legend(b, names, ns < 64 ? ns : 64, W - MR + 15, MT + 12) ||
         bs_buf_puts(b, "</g>\n</svg>\n");
    return rc;
}

int svg_bar_panels(bs_buf *b, const char *title, const char *const *panels, size_t np, const char *const *names,
                   size_t nn, const double *values) {
    int rc = header(b, W, H, title);
    double area = W - 40 - MR, gap = 30, pw = np ? (area - gap * (double)(np - 1)) / (double)np : area;
    double ph = H - MT - MB - 20, base_y = MT + 20 + ph;
    char num[32];
    for (size_t p = 0; p < np && !rc; p++) {
        double x = 40 + (double)p * (pw + gap), vmax = 0;
        for (size_t i = 0; i < nn; i++) vmax = fmax(vmax, values[p * nn + i]);
        double step = nice_step(vmax > 0 ? vmax : 1), top = ceil((vmax > 0 ? vmax : 1) / step) * step;
        rc = text(b, x + pw / 2, MT + 10, "middle", "class=\"ylabel\" font-weight=\"bold\"", panels[p]) ||
             bs_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", x, base_y,
                           x + pw, base_y);
        double bw = pw / (double)(nn ? nn : 1);
        for (size_t i = 0; i < nn && !rc; i++) {
            double v = values[p * nn + i], h = v > 0 ? v / top * ph : 0;
            fmt_num(num, sizeof num, round(v * 100) / 100);
            rc = bs_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                               x + bw * (double)i + 3, base_y - h, bw - 6, h, colors[i % N_COLORS]) ||
                 text(b, x + bw * ((double)i + 0.5), base_y - h - 4, "middle", "font-size=\"10\"", num);
        }
    }
    rc = rc || text(b, (W - MR) / 2.0, H - 15, "middle", "class=\"xlabel\"", "result file (one bar each, see legend)");
    rc = rc || bs_buf_puts(b, "<g class=\"legend\">\n") || legend(b, names, nn, W - MR + 15, MT + 12) ||
         bs_buf_puts(b, "</g>\n</svg>\n");
    return rc;
}
