/* container.c: opening a container: its manifest, section files and carried files (the identity
 * and the files' fixed headers: identity.c). */
#include "crc32.h"
#include "container.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "manifest.h"
#include "mirrormap.h"

static int open_section(coli_container *c, coli_section s, coli_err *e)
{
	char *path = coli_path_join(c->dir, coli_section_file(s));
	if (!path)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	int rc = 0;
	uint64_t size = 0;
	uint8_t h[COLI_SECTION_HEADER];
	c->fd[s] = coli_open_regular(path, O_RDONLY, &size, e);
	if (c->fd[s] < 0)
		rc = -1;
	else if (size != c->layout.section_size[s])
		rc = coli_errf(e, COLI_EDATA, "%s: size %llu, manifest says %llu", path,
			       (unsigned long long)size, (unsigned long long)c->layout.section_size[s]);
	else if (coli_pread_full(c->fd[s], h, sizeof(h), 0, path, e) < 0)
		rc = -1;
	else
		rc = coli_section_header_check(h, s, c->identity, path, e);
	free(path);
	return rc;
}

/* Carried files are small (config, tokenizer): read whole and checked against their CRC, so
 * an edited generation_config.json (another EOS id) is refused instead of used silently. */
int coli_carried_check(const char *dir, const coli_carried *f, coli_err *e)
{
	char *path = coli_path_join(dir, f->file), *buf = NULL;
	size_t len = 0;
	int rc = path ? coli_read_file(path, &buf, &len, e) : coli_errf(e, COLI_ENOMEM, "out of memory");
	uint32_t got = rc == 0 ? coli_crc32(0, buf, len) : 0;
	if (rc == 0 && (uint64_t)len != f->size)
		rc = coli_errf(e, COLI_EDATA, "%s: size %zu, manifest says %llu", path, len, (unsigned long long)f->size);
	else if (rc == 0 && got != f->crc)
		rc = coli_errf(e, COLI_EDATA, "%s: crc32 0x%08x, manifest says 0x%08x (changed since conversion)", path,
			       got, f->crc);
	free(buf);
	free(path);
	return rc;
}

static int check_carried(const coli_container *c, coli_err *e)
{
	for (int i = 0; i < c->n_carried; i++)
		if (coli_carried_check(c->dir, &c->carried[i], e) < 0)
			return -1;
	return 0;
}

/* 1 when dir/name exists; with absent set, 1 only when it is known not to (ENOENT). */
static int exists(const char *dir, const char *name, int absent)
{
	char *path = coli_path_join(dir, name);
	int rc = path ? access(path, F_OK) : 0, err = errno;
	free(path);
	return absent ? rc < 0 && err == ENOENT : path && rc == 0;
}

/* A folder without manifest.coli: say what it is in plain words (an unfinished conversion, a
 * checkpoint given for a container) instead of "No such file or directory". */
static int not_container(const char *dir, coli_err *e)
{
	if (exists(dir, "convert.journal", 0))
		return coli_errf(e, COLI_EDATA, "%s: an unfinished conversion (convert.journal, no manifest.coli), "
				 "not a container yet; rerun the coli-convert command to finish it", dir);
	if (exists(dir, "config.json", 0) &&
	    (exists(dir, "model.safetensors.index.json", 0) || exists(dir, "model.safetensors", 0)))
		return coli_errf(e, COLI_EDATA, "%s: a Hugging Face checkpoint, not a coli container (no manifest.coli); "
				 "convert it first: coli-convert %s OUT.coli", dir, dir);
	return coli_errf(e, COLI_EIO, "%s/%s: %s (not a coli container)", dir, COLI_MANIFEST_FILE, strerror(ENOENT));
}

int coli_container_open_manifest(coli_container **out, const char *dir, coli_err *e)
{
	*out = NULL;
	coli_container *c = coli_calloc(1, sizeof(*c), e);
	if (!c)
		return -1;
	for (int s = 0; s < COLI_SEC_COUNT; s++)
		c->fd[s] = -1;
	c->dir = strdup(dir);
	if ((c->dir ? coli_manifest_read(c, e) : coli_errf(e, COLI_ENOMEM, "out of memory")) < 0) {
		coli_container_close(c);
		return -1;
	}
	*out = c;
	return 0;
}

int coli_container_open(coli_container **out, const char *dir, coli_err *e)
{
	*out = NULL;
	if (exists(dir, COLI_MANIFEST_FILE, 1))
		return not_container(dir, e);
	coli_container *c;
	int rc = coli_container_open_manifest(&c, dir, e);
	for (int s = 0; rc == 0 && s < COLI_SEC_COUNT; s++)
		if ((rc = open_section(c, (coli_section)s, e)) < 0 && exists(dir, coli_section_file((coli_section)s), 1) &&
		    exists(dir, COLI_MIRROR_FILE, 0)) /* a mirror staged by coli-plan holds only experts.bin */
			rc = coli_errf(e, COLI_EDATA, "%s: a partial mirror (%s, no %s), not a container: coli-run reads it as "
				       "--mirror %s beside the container (-m)", dir, COLI_MIRROR_FILE,
				       coli_section_file((coli_section)s), dir);
	if (rc == 0)
		rc = check_carried(c, e);
	if (rc < 0) {
		coli_container_close(c);
		return -1;
	}
	*out = c;
	return 0;
}

void coli_container_close(coli_container *c)
{
	if (!c)
		return;
	for (int s = 0; s < COLI_SEC_COUNT; s++)
		if (c->fd[s] >= 0)
			close(c->fd[s]);
	coli_layout_release(&c->layout);
	for (int i = 0; i < c->n_carried; i++)
		free(c->carried[i].file);
	free(c->carried);
	free(c->config_json);
	free(c->provenance_json);
	free(c->dir);
	free(c);
}

const coli_ltensor *coli_container_tensor(const coli_container *c, const char *name)
{
	for (int i = 0; i < c->layout.n_tensors; i++)
		if (strcmp(c->layout.tensors[i].name, name) == 0)
			return &c->layout.tensors[i];
	return NULL;
}

const coli_lexperts *coli_container_experts(const coli_container *c, int layer)
{
	for (int i = 0; i < c->layout.n_elayers; i++)
		if (c->layout.elayers[i].layer == layer)
			return &c->layout.elayers[i];
	return NULL;
}

int coli_container_same(const char *copy, const char *of, const char *opt, coli_err *e)
{
	char *theirs = coli_path_join(copy, COLI_MANIFEST_FILE), *ours = coli_path_join(of, COLI_MANIFEST_FILE);
	char *a = NULL, *b = NULL;
	size_t na = 0, nb = 0, i = 0;
	int rc = ours && theirs ? 0 : coli_errf(e, COLI_ENOMEM, "out of memory");
	if (rc == 0)
		rc = coli_read_file(ours, &a, &na, e);
	if (rc == 0 && coli_read_file(theirs, &b, &nb, e) < 0) {
		rc = -1;
		if (opt)
			coli_err_prefix(e, opt);
	}
	while (rc == 0 && i < na && i < nb && a[i] == b[i])
		i++;
	if (rc == 0 && (i < na || i < nb))
		rc = coli_errf(e, COLI_EDATA, "%s%s%s: manifest.coli differs from %s at byte %zu: not the same container",
			       opt ? opt : "", opt ? " " : "", theirs, ours, i);
	free(theirs), free(ours), free(a), free(b);
	return rc;
}
