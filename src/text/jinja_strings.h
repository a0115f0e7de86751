/* jinja_strings.h - Python str operations on UTF-8 strings (jinja_strings.c). */
#ifndef CINFER_TEXT_JINJA_STRINGS_H
#define CINFER_TEXT_JINJA_STRINGS_H

#include "text/jinja.h"

enum { JCASE_UPPER, JCASE_LOWER, JCASE_CAPITALIZE, JCASE_PYTITLE, JCASE_JTITLE };

size_t jstr_ws_at(const char *s, size_t n, size_t i);
/* str.strip/lstrip/rstrip; chars NULL = whitespace. v must be a string. */
jv jstr_strip(jjob *j, jv v, jstr *chars, bool left, bool right);
jv jstr_case(jjob *j, jv v, int mode);
/* str.replace(old, new, count) (count < 0: all) */
jv jstr_replace(jctx *c, int line, jv v, jv old, jv new_, int64_t count);
/* str.split(sep=None, maxsplit=-1) */
jv jstr_split(jctx *c, int line, jv v, jv sep, int64_t maxsplit);
/* str.startswith / endswith (a: str or tuple of str) */
bool jstr_affix(jctx *c, int line, jv s, jv a, bool start);
jv jstr_format(jctx *c, int line, jv fmt, jv *args, int nargs, const char **kwn, jv *kwv, int nkw);

#endif
