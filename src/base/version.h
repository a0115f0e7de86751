/* version.h - the cinfer release version (`cinfer --version`, the
 * cinfer_build_info metric). One definition; change it here only. */
#ifndef CINFER_BASE_VERSION_H
#define CINFER_BASE_VERSION_H

#define CINFER_VERSION "0.1.0"

#endif
