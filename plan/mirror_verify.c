/* mirror_verify.c: coli-plan mirror verify: every record a mirror claims re-read and checked. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32.h"
#include "fileio.h"
#include "mirror_stage.h"
#include "mirrormap.h"

/* Whether dir/name exists with the size given. */
static int has_file(const char *dir, const char *name, uint64_t size)
{
	char *path = coli_path_join(dir, name);
	struct stat st;
	int ok = path && stat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size;
	free(path);
	return ok;
}

const char *mirror_kind(const coli_container *c, const char *dir, uint64_t held)
{
	if (held < coli_mirror_records(c))
		return "partial";
	int all = has_file(dir, "dense.bin", c->layout.section_size[COLI_SEC_DENSE]) &&
		  has_file(dir, "mtp.bin", c->layout.section_size[COLI_SEC_MTP]);
	for (int i = 0; all && i < c->n_carried; i++)
		all = has_file(dir, c->carried[i].file, c->carried[i].size);
	return all ? "full" : "every record, not the other files";
}

/* The map of dir (a full copy when there is none: every record claimed). */
static int claimed(const coli_container *c, const char *dir, coli_mirror_map *m, verify_report *r, coli_err *e)
{
	char *path = coli_path_join(dir, COLI_MIRROR_FILE);
	uint64_t n = coli_mirror_records(c);
	int rc = path ? 0 : coli_errf(e, COLI_ENOMEM, "out of memory");
	if (rc == 0 && access(path, F_OK) == 0)
		rc = coli_mirror_map_read(path, c->identity, n, m, e);
	else if (rc == 0 && (rc = coli_mirror_map_init(m, c->identity, n, e)) == 0)
		for (uint64_t i = 0; i < n; i++)
			coli_mirror_set(m, i);
	r->n_records = n, r->held = m->held, r->partial = rc == 0 && m->held < n;
	free(path);
	return rc;
}

/* dir/experts.bin opened (O_DIRECT where allowed), its length and section header checked. */
static int open_experts(const coli_container *c, const char *path, uint8_t *buf, coli_err *e)
{
	uint64_t size = 0;
	int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return coli_errf(e, COLI_EIO, "%s: %s", path, strerror(errno));
	struct stat st;
	size = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	int rc = 0;
	if (size != c->layout.section_size[COLI_SEC_EXPERTS])
		rc = coli_errf(e, COLI_EDATA, "%s: size %llu, the manifest says %llu", path, (unsigned long long)size,
			       (unsigned long long)c->layout.section_size[COLI_SEC_EXPERTS]);
	if (rc == 0)
		rc = coli_pread_full(fd, buf, COLI_SECTION_HEADER, 0, path, e);
	if (rc == 0)
		rc = coli_section_header_check(buf, COLI_SEC_EXPERTS, c->identity, path, e);
	if (rc < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Each claimed record read and its CRC compared; the bad ones noted. */
static void check_records(const coli_container *c, const coli_mirror_map *m, int fd, uint8_t *buf,
			  coli_progress_fn fn, void *ctx, verify_report *r)
{
	uint64_t k = 0, total = 0;
	for (int i = 0; i < c->layout.n_elayers; i++)
		total += c->layout.elayers[i].record_size * (uint64_t)c->layout.elayers[i].n_experts;
	for (int i = 0; i < c->layout.n_elayers; i++) {
		const coli_lexperts *l = &c->layout.elayers[i];
		for (int x = 0; x < l->n_experts; x++, k++) {
			if (!coli_mirror_has(m, k))
				continue;
			coli_err ignore;
			uint64_t off = coli_record_offset(l, x);
			int ok = coli_pread_full(fd, buf, (size_t)l->record_size, off, "experts.bin", &ignore) == 0;
			uint32_t crc = ok ? coli_crc32(0, buf, l->record_size) : 0;
			r->checked++, r->bytes += l->record_size;
			if ((!ok || crc != l->crc[x]) && r->n_bad++ < VERIFY_MAX_BAD)
				r->bad[r->n_bad - 1] = (verify_bad){l->layer, x, off, crc, ok ? l->crc[x] : 0};
			if (fn)
				fn(ctx, r->bytes, total);
		}
	}
}

int verify_run(const char *dir, const char *model, coli_progress_fn fn, void *ctx, verify_report *r, coli_err *e)
{
	coli_container *c = NULL;
	coli_mirror_map m = {0};
	uint8_t *buf = NULL;
	char *path = coli_path_join(dir, "experts.bin");
	memset(r, 0, sizeof(*r));
	int fd = -1, rc = path ? 0 : coli_errf(e, COLI_ENOMEM, "out of memory");
	if (rc == 0)
		rc = coli_container_open_manifest(&c, dir, e);
	if (rc == 0 && model)
		rc = coli_container_same(dir, model, NULL, e);
	if (rc == 0)
		rc = claimed(c, dir, &m, r, e);
	uint64_t size = 0;
	for (int i = 0; rc == 0 && i < c->layout.n_elayers; i++)
		size = c->layout.elayers[i].record_size > size ? c->layout.elayers[i].record_size : size;
	size = size > COLI_SECTION_HEADER ? size : COLI_SECTION_HEADER;
	if (rc == 0 && posix_memalign((void **)&buf, 4096, (size_t)size) != 0)
		rc = coli_errf(e, COLI_ENOMEM, "out of memory allocating %llu bytes", (unsigned long long)size);
	if (rc == 0 && (fd = open_experts(c, path, buf, e)) < 0)
		rc = -1;
	if (rc == 0)
		check_records(c, &m, fd, buf, fn, ctx, r);
	if (rc == 0)
		r->kind = mirror_kind(c, dir, r->held);
	if (fd >= 0)
		close(fd);
	free(buf), free(path);
	coli_mirror_map_release(&m);
	coli_container_close(c);
	return rc;
}
