/* html.h: report.md turned into a self-contained report.html: the little markdown the report
 * writes (headings, paragraphs, lists, tables, `code`, **bold**, links, images on their own line)
 * as HTML, every image inlined as a data: URI so that the one file is the whole report. */
#ifndef COLI_PROFILE_HTML_H
#define COLI_PROFILE_HTML_H

#include <stddef.h>

#include "error.h"

/* The HTML of md (NUL-terminated), images read from dir: malloc'd (caller frees), *len its
 * length; NULL with e when an image cannot be read or memory is short. */
char *prof_html(const char *md, const char *dir, const char *title, size_t *len, coli_err *e);

/* data[0..n) in base64 (RFC 4648, padded), NUL-terminated, malloc'd; NULL when out of memory. */
char *prof_base64(const unsigned char *data, size_t n);

#endif
