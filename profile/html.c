/* html.c: report.md as a self-contained report.html, images inlined (html.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "html.h"

char *prof_base64(const unsigned char *d, size_t n)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)d[i] << 16 | (i + 1 < n ? (unsigned)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
		*o++ = abc[v >> 18 & 63], *o++ = abc[v >> 12 & 63];
		*o++ = i + 1 < n ? abc[v >> 6 & 63] : '=';
		*o++ = i + 2 < n ? abc[v & 63] : '=';
	}
	*o = 0;
	return out;
}

static void escaped(FILE *f, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == '<')
			fputs("&lt;", f);
		else if (s[i] == '>')
			fputs("&gt;", f);
		else if (s[i] == '&')
			fputs("&amp;", f);
		else if (s[i] == '"')
			fputs("&quot;", f);
		else
			fputc(s[i], f);
}

/* A link [text](url) at s: its length, 0 when s holds none. */
static size_t link_at(FILE *f, const char *s, size_t n)
{
	const char *mid = memchr(s, ']', n), *end;
	if (!mid || (size_t)(mid - s) + 1 >= n || mid[1] != '(' || !(end = memchr(mid, ')', n - (size_t)(mid - s))))
		return 0;
	fputs("<a href=\"", f);
	escaped(f, mid + 2, (size_t)(end - mid - 2));
	fputs("\">", f);
	escaped(f, s + 1, (size_t)(mid - s - 1));
	fputs("</a>", f);
	return (size_t)(end - s) + 1;
}

/* Inline markup of one line: `code`, **bold**, [links](url); the rest escaped. */
static void inline_md(FILE *f, const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		const char *end;
		size_t k;
		if (s[i] == '`' && (end = memchr(s + i + 1, '`', n - i - 1))) {
			fputs("<code>", f), escaped(f, s + i + 1, (size_t)(end - s - i - 1)), fputs("</code>", f);
			i = (size_t)(end - s) + 1;
		} else if (s[i] == '*' && i + 1 < n && s[i + 1] == '*' && (end = strstr(s + i + 2, "**")) &&
			   end < s + n) {
			fputs("<strong>", f), escaped(f, s + i + 2, (size_t)(end - s - i - 2)), fputs("</strong>", f);
			i = (size_t)(end - s) + 2;
		} else if (s[i] == '[' && (k = link_at(f, s + i, n - i)) > 0) {
			i += k;
		} else {
			escaped(f, s + i, 1), i++;
		}
	}
}

/* An image line ![alt](file): the file read from dir and inlined. */
static int image(FILE *f, const char *line, size_t n, const char *dir, coli_err *e)
{
	const char *mid = memchr(line, ']', n);
	if (!mid || mid[1] != '(' || line[n - 1] != ')')
		return inline_md(f, line, n), 0;
	char file[512], *buf, *b64;
	size_t len;
	snprintf(file, sizeof(file), "%.*s", (int)(line + n - 1 - mid - 2), mid + 2);
	char *path = coli_path_join(dir, file);
	int rc = path ? coli_read_file(path, &buf, &len, e) : coli_errf(e, COLI_ENOMEM, "out of memory");
	free(path);
	if (rc < 0)
		return -1;
	b64 = prof_base64((unsigned char *)buf, len);
	free(buf);
	if (!b64)
		return coli_errf(e, COLI_ENOMEM, "out of memory for the image %s (%zu bytes)", file, len);
	const char *ext = strrchr(file, '.');
	fprintf(f, "<figure><img alt=\"");
	escaped(f, line + 2, (size_t)(mid - line - 2));
	fprintf(f, "\" src=\"data:image/%s;base64,%s\"></figure>\n", ext && !strcmp(ext, ".svg") ? "svg+xml" : "png", b64);
	free(b64);
	return 0;
}

/* A table row | a | b |: cells as th (head) or td; the |---| line skipped. */
static void table_row(FILE *f, const char *line, size_t n, int head)
{
	if (strspn(line, "|-: ") >= n)
		return;
	fputs("<tr>", f);
	for (const char *p = line + 1, *end = line + n; p < end;) {
		const char *bar = memchr(p, '|', (size_t)(end - p));
		if (!bar)
			break;
		const char *a = p, *b = bar;
		while (a < b && *a == ' ')
			a++;
		while (b > a && b[-1] == ' ')
			b--;
		fputs(head ? "<th>" : "<td>", f), inline_md(f, a, (size_t)(b - a)), fputs(head ? "</th>" : "</td>", f);
		p = bar + 1;
	}
	fputs("</tr>\n", f);
}

/* Closes the open block (paragraph, list, table) when the next line starts another kind. */
static void close_block(FILE *f, char *open, char next)
{
	if (*open == next)
		return;
	fputs(*open == 'p' ? "</p>\n" : *open == 'l' ? "</ul>\n" : *open == 't' ? "</table>\n" : "", f);
	fputs(next == 'p' ? "<p>" : next == 'l' ? "<ul>\n" : next == 't' ? "<table>\n" : "", f);
	*open = next;
}

static int line_html(FILE *f, const char *s, size_t n, const char *dir, char *open, coli_err *e)
{
	int h = (int)strspn(s, "#");
	char kind = n == 0 ? 0 : h > 0 && s[h] == ' ' ? 'h' : s[0] == '|' ? 't' : !strncmp(s, "- ", 2) ? 'l'
		  : !strncmp(s, "![", 2) ? 'i' : 'p';
	int first_row = kind == 't' && *open != 't';
	close_block(f, open, kind == 'h' || kind == 'i' ? 0 : kind);
	if (kind == 'h')
		fprintf(f, "<h%d>", h), inline_md(f, s + h + 1, n - (size_t)h - 1), fprintf(f, "</h%d>\n", h);
	else if (kind == 't')
		table_row(f, s, n, first_row);
	else if (kind == 'l')
		fputs("<li>", f), inline_md(f, s + 2, n - 2), fputs("</li>\n", f);
	else if (kind == 'i')
		return image(f, s, n, dir, e);
	else if (kind == 'p')
		inline_md(f, s, n), fputc('\n', f);
	return 0;
}

static const char style[] =
	"body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}"
	"table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:3px 8px}"
	"td{text-align:right}td:first-child{text-align:left}th{background:#eee}"
	"img{max-width:100%;border:1px solid #ddd}code{background:#f3f3f3;padding:0 3px}";

char *prof_html(const char *md, const char *dir, const char *title, size_t *len, coli_err *e)
{
	char *out = NULL, open = 0;
	FILE *f = open_memstream(&out, len);
	if (!f)
		return coli_errf(e, COLI_ENOMEM, "out of memory for the HTML report"), NULL;
	fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>");
	escaped(f, title, strlen(title));
	fprintf(f, "</title><style>%s</style></head><body>\n", style);
	int rc = 0;
	for (const char *s = md; rc == 0 && *s;) {
		size_t n = strcspn(s, "\n");
		rc = line_html(f, s, n, dir, &open, e);
		s += n + (s[n] == '\n');
	}
	close_block(f, &open, 0);
	fprintf(f, "</body></html>\n");
	if (fclose(f) != 0 && rc == 0)
		rc = coli_errf(e, COLI_ENOMEM, "out of memory for the HTML report");
	if (rc < 0)
		free(out), out = NULL;
	return out;
}
