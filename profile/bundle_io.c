/* bundle_io.c: datapoint bundles written and read as .tar.gz with libarchive (bundle_io.h). */
#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bundle_io.h"
#include "fileio.h"
#include "sha256.h"

static void sha_hex(const void *d, size_t n, char out[65])
{
	coli_sha256 s;
	uint8_t h[32];
	coli_sha256_init(&s);
	coli_sha256_update(&s, d, n);
	coli_sha256_final(&s, h);
	coli_hex32(h, out);
}

static int arc_err(struct archive *a, const char *path, const char *what, coli_err *e)
{
	const char *why = archive_error_string(a);
	return coli_errf(e, COLI_EDATA, "%s: %s: %s (a truncated, damaged or foreign archive: a bundle is a .tar.gz "
			 "that coli-profile datapoint wrote)", path, what, why ? why : "unreadable");
}

/* The data of the current entry into a new member. */
static int read_member(struct archive *a, struct archive_entry *en, prof_bundle *b, size_t *total, const char *path,
		       coli_err *e)
{
	const char *name = archive_entry_pathname(en);
	int64_t size = archive_entry_size(en);
	if (!name || archive_entry_filetype(en) != AE_IFREG)
		return coli_errf(e, COLI_EDATA, "%s: member '%s' is not a regular file", path, name ? name : "?");
	if (size < 0 || (uint64_t)size > PROF_BUNDLE_MAX_BYTES - *total)
		return coli_errf(e, COLI_EDATA, "%s: member '%s': %lld bytes exceed the %llu bytes a bundle may hold", path,
				 name, (long long)size, (unsigned long long)PROF_BUNDLE_MAX_BYTES);
	prof_member *m = realloc(b->m, (size_t)(b->n + 1) * sizeof(*m));
	if (!m)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	b->m = m, m += b->n;
	m->name = strdup(name), m->size = (size_t)size, m->data = malloc((size_t)size + 1);
	b->n++;
	if (!m->name || !m->data)
		return coli_errf(e, COLI_ENOMEM, "%s: out of memory for member '%s' (%lld bytes)", path, name, (long long)size);
	la_ssize_t got = size ? archive_read_data(a, m->data, (size_t)size) : 0;
	if (got != (la_ssize_t)size)
		return got < 0 ? arc_err(a, path, name, e)
			       : coli_errf(e, COLI_EDATA, "%s: member '%s': %lld of %lld bytes (truncated archive)", path, name,
					   (long long)got, (long long)size);
	m->data[size] = 0;
	*total += (size_t)size;
	return 0;
}

static int read_all(struct archive *a, prof_bundle *b, const char *path, coli_err *e)
{
	struct archive_entry *en;
	size_t total = 0;
	int rc;
	if (archive_read_open_filename(a, path, 65536) != ARCHIVE_OK)
		return arc_err(a, path, "cannot open", e);
	while ((rc = archive_read_next_header(a, &en)) == ARCHIVE_OK)
		if (read_member(a, en, b, &total, path, e) < 0)
			return -1;
	if (rc != ARCHIVE_EOF)
		return arc_err(a, path, b->n ? "after the last whole member" : "the first member", e);
	return 0;
}

/* Each member against the manifest: the first manifest.json, the others its files exactly. */
static int check_members(prof_bundle *b, const char *path, coli_err *e)
{
	char name[4300], hex[65];
	if (b->n == 0 || strcmp(b->m[0].name, "manifest.json") != 0)
		return coli_errf(e, COLI_EDATA, "%s: first member '%s', expected 'manifest.json' (not a coli bundle)", path,
				 b->n ? b->m[0].name : "(none: empty archive)");
	snprintf(name, sizeof(name), "%s:manifest.json", path);
	if (!(b->man = malloc(sizeof(*b->man))))
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	if (coli_bundle_manifest_parse((char *)b->m[0].data, b->m[0].size, name, b->man, e) < 0)
		return -1;
	for (int i = 1; i < b->n; i++) {
		const coli_bundle_file *f = coli_bundle_file_of(b->man, b->m[i].name);
		if (!f || prof_bundle_get(b, b->m[i].name) != &b->m[i])
			return coli_errf(e, COLI_EDATA, "%s: member '%s' %s", path, b->m[i].name,
					 f ? "appears twice" : "is not in the manifest");
		if (f->bytes != b->m[i].size)
			return coli_errf(e, COLI_EDATA, "%s: member '%s': %zu bytes, the manifest says %llu", path, f->name,
					 b->m[i].size, (unsigned long long)f->bytes);
		sha_hex(b->m[i].data, b->m[i].size, hex);
		if (strcmp(hex, f->sha256) != 0)
			return coli_errf(e, COLI_EDATA, "%s: member '%s': sha256 %s, the manifest says %s (corrupt member)", path,
					 f->name, hex, f->sha256);
	}
	for (int i = 0; i < b->man->n_files; i++)
		if (!prof_bundle_get(b, b->man->files[i].name))
			return coli_errf(e, COLI_EDATA, "%s: '%s' is in the manifest but not in the archive (truncated?)", path,
					 b->man->files[i].name);
	return 0;
}

int prof_bundle_read(prof_bundle *b, const char *path, coli_err *e)
{
	memset(b, 0, sizeof(*b));
	struct archive *a = archive_read_new();
	if (!a)
		return coli_errf(e, COLI_ENOMEM, "out of memory for an archive reader");
	archive_read_support_filter_gzip(a);
	archive_read_support_format_tar(a);
	int rc = read_all(a, b, path, e);
	archive_read_free(a);
	if (rc == 0)
		rc = check_members(b, path, e);
	if (rc < 0)
		prof_bundle_release(b);
	return rc;
}

const prof_member *prof_bundle_get(const prof_bundle *b, const char *name)
{
	for (int i = 0; i < b->n; i++)
		if (strcmp(b->m[i].name, name) == 0)
			return &b->m[i];
	return NULL;
}

void prof_bundle_release(prof_bundle *b)
{
	for (int i = 0; i < b->n; i++)
		free(b->m[i].name), free(b->m[i].data);
	free(b->m), free(b->man);
	memset(b, 0, sizeof(*b));
}

static int write_entry(struct archive *a, const char *name, const void *d, size_t n, double mtime, const char *tmp,
		       coli_err *e)
{
	struct archive_entry *en = archive_entry_new();
	if (!en)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	archive_entry_set_pathname(en, name);
	archive_entry_set_size(en, (la_int64_t)n);
	archive_entry_set_filetype(en, AE_IFREG);
	archive_entry_set_perm(en, 0644);
	archive_entry_set_mtime(en, (time_t)mtime, 0);
	int rc = archive_write_header(a, en) == ARCHIVE_OK && (n == 0 || archive_write_data(a, d, n) == (la_ssize_t)n);
	archive_entry_free(en);
	if (!rc)
		return coli_errf(e, COLI_EIO, "%s: writing member '%s': %s", tmp, name,
				 archive_error_string(a) ? archive_error_string(a) : "failed");
	return 0;
}

/* Every file read into memory, its size and sha256 into the manifest. */
static int load_files(coli_bundle_manifest *m, const char *const *paths, char **data, size_t *len, coli_err *e)
{
	for (int i = 0; i < m->n_files; i++) {
		if (coli_read_file(paths[i], &data[i], &len[i], e) < 0)
			return -1;
		m->files[i].bytes = len[i];
		sha_hex(data[i], len[i], m->files[i].sha256);
	}
	return 0;
}

static int write_archive(const char *tmp, const coli_bundle_manifest *m, const char *man, char **data, size_t *len,
			 coli_err *e)
{
	struct archive *a = archive_write_new();
	if (!a)
		return coli_errf(e, COLI_ENOMEM, "out of memory for an archive writer");
	int rc = 0;
	if (archive_write_add_filter_gzip(a) != ARCHIVE_OK || archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    archive_write_open_filename(a, tmp) != ARCHIVE_OK)
		rc = coli_errf(e, COLI_EIO, "%s: %s", tmp, archive_error_string(a) ? archive_error_string(a) : "cannot write");
	if (rc == 0)
		rc = write_entry(a, "manifest.json", man, strlen(man), m->created, tmp, e);
	for (int i = 0; rc == 0 && i < m->n_files; i++)
		rc = write_entry(a, m->files[i].name, data[i], len[i], m->created, tmp, e);
	if (archive_write_close(a) != ARCHIVE_OK && rc == 0)
		rc = coli_errf(e, COLI_EIO, "%s: %s", tmp, archive_error_string(a) ? archive_error_string(a) : "close failed");
	archive_write_free(a);
	return rc;
}

int prof_bundle_write(const char *out, coli_bundle_manifest *m, const char *const *paths, coli_err *e)
{
	char **data = calloc((size_t)m->n_files + 1, sizeof(*data)), *man = NULL, tmp[4200];
	size_t *len = calloc((size_t)m->n_files + 1, sizeof(*len));
	int rc = data && len ? load_files(m, paths, data, len, e) : coli_errf(e, COLI_ENOMEM, "out of memory");
	if (rc == 0 && !(man = coli_bundle_manifest_json(m, e)))
		rc = -1;
	snprintf(tmp, sizeof(tmp), "%s.tmp", out);
	if (rc == 0 && (rc = write_archive(tmp, m, man, data, len, e)) == 0 && rename(tmp, out) < 0)
		rc = coli_errf(e, COLI_EIO, "%s: cannot rename to %s", tmp, out);
	if (rc < 0)
		unlink(tmp);
	for (int i = 0; data && i < m->n_files; i++)
		free(data[i]);
	free(data), free(len), free(man);
	return rc;
}
