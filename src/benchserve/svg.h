/* svg.h - minimal SVG charts written as text: line charts (several series,
 * labelled axes with "nice" ticks, legend) and grouped bar panels. Output is
 * a standalone, well-formed SVG 1.1 document; every label is XML-escaped.
 * Callers: report.c. */
#ifndef CINFER_BENCHSERVE_SVG_H
#define CINFER_BENCHSERVE_SVG_H

#include <stddef.h>

#include "benchserve/bs_buf.h"

typedef struct svg_series {
    const char *name; /* legend text */
    const double *x, *y;
    size_t n;
} svg_series;

/* Axis labels should carry units, e.g. "time to first token (ms)". */
int svg_line_chart(bs_buf *out, const char *title, const char *xlabel, const char *ylabel, const svg_series *s,
                   size_t ns);

/* np panels side by side; panel p shows one bar per name with value
 * values[p * nn + i]; panel titles should carry units. */
int svg_bar_panels(bs_buf *out, const char *title, const char *const *panels, size_t np, const char *const *names,
                   size_t nn, const double *values);

/* Appends s with &, <, >, " and ' escaped. */
int svg_escape(bs_buf *out, const char *s);

#endif
