/* container.c: opening a container: headers, identity, section files, carried files. */
#include "crc32.h"
#include "container.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "le.h"
#include "manifest.h"
#include "mirrormap.h"
#include "sha256.h"

const uint8_t coli_magic[8] = {0x89, 'C', 'O', 'L', 'I', '\r', '\n', 0x1a};

#define INT_CANARY 0x0123456789abcdefull
#define FLOAT_CANARY 370.5

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static uint32_t crc(const void *p, size_t n) { return coli_crc32(0, p, n); }

void coli_container_identity(const coli_layout *L, const char *config_canonical, int mtp_layers,
			     const int bits[3], uint8_t out[32])
{
	coli_sha256 s;
	char line[512];
	coli_sha256_init(&s);
	coli_sha256_update(&s, config_canonical, strlen(config_canonical));
	int n = snprintf(line, sizeof(line), "\ncoli %u mtp %d bits %d %d %d\n", COLI_CONTAINER_VERSION,
			 mtp_layers, bits[0], bits[1], bits[2]);
	coli_sha256_update(&s, line, (size_t)n);
	for (int i = 0; i < L->n_tensors; i++) {
		const coli_ltensor *t = &L->tensors[i];
		n = snprintf(line, sizeof(line), "%s %s %lld %lld %lld %lld\n", t->name, coli_enc_name(t->blob.enc),
			     (long long)t->blob.rows, (long long)t->blob.cols, (long long)t->blob.block[0],
			     (long long)t->blob.block[1]);
		coli_sha256_update(&s, line, (size_t)n);
	}
	for (int i = 0; i < L->n_elayers; i++) {
		const coli_lexperts *x = &L->elayers[i];
		n = snprintf(line, sizeof(line), "experts %d x%d", x->layer, x->n_experts);
		coli_sha256_update(&s, line, (size_t)n);
		for (int p = 0; p < 3; p++) {
			n = snprintf(line, sizeof(line), " %s %lld %lld %lld %lld", coli_enc_name(x->part[p].enc),
				     (long long)x->part[p].rows, (long long)x->part[p].cols,
				     (long long)x->part[p].block[0], (long long)x->part[p].block[1]);
			coli_sha256_update(&s, line, (size_t)n);
		}
		coli_sha256_update(&s, "\n", 1);
	}
	coli_sha256_final(&s, out);
}

/* Section header: magic, version, kind, identity; zero to byte 4092; CRC of bytes 0..4091. */
void coli_section_header(uint8_t out[COLI_SECTION_HEADER], coli_section s, const uint8_t identity[32])
{
	memset(out, 0, COLI_SECTION_HEADER);
	memcpy(out, coli_magic, 8);
	le_put32(out + 8, COLI_CONTAINER_VERSION);
	le_put32(out + 12, (uint32_t)s + 1);
	memcpy(out + 16, identity, 32);
	le_put32(out + COLI_SECTION_HEADER - 4, crc(out, COLI_SECTION_HEADER - 4));
}

int coli_section_header_check(const uint8_t h[COLI_SECTION_HEADER], coli_section s,
			      const uint8_t identity[32], const char *what, coli_err *e)
{
	if (memcmp(h, coli_magic, 8) != 0)
		return coli_errf(e, COLI_EDATA, "%s: bad binary format (magic)", what);
	if (le_get32(h + COLI_SECTION_HEADER - 4) != crc(h, COLI_SECTION_HEADER - 4))
		return coli_errf(e, COLI_EDATA, "%s: section header crc32 0x%08x, stored 0x%08x", what,
				 crc(h, COLI_SECTION_HEADER - 4), le_get32(h + COLI_SECTION_HEADER - 4));
	if (le_get32(h + 8) != COLI_CONTAINER_VERSION)
		return coli_errf(e, COLI_EDATA, "%s: version %u unsupported (this reader knows %u)", what,
				 le_get32(h + 8), COLI_CONTAINER_VERSION);
	if (le_get32(h + 12) != (uint32_t)s + 1)
		return coli_errf(e, COLI_EDATA, "%s: section kind %u, expected %u", what, le_get32(h + 12),
				 (unsigned)s + 1);
	if (!all_zero(h + 48, COLI_SECTION_HEADER - 52))
		return coli_errf(e, COLI_EDATA, "%s: reserved section header bytes 48..4091 are not zero", what);
	if (memcmp(h + 16, identity, 32) != 0)
		return coli_errf(e, COLI_EDATA, "%s: identity differs from the manifest's (a file of another container)",
				 what);
	return 0;
}

/* Manifest file header: see container.md, "Manifest header". */
void coli_manifest_header(uint8_t out[COLI_MANIFEST_HEADER], const char *json, size_t len)
{
	memset(out, 0, COLI_MANIFEST_HEADER);
	memcpy(out, coli_magic, 8);
	le_put32(out + 8, COLI_CONTAINER_VERSION);
	le_put32(out + 12, COLI_MANIFEST_HEADER);
	le_put64(out + 16, INT_CANARY);
	double f = FLOAT_CANARY;
	uint64_t fbits;
	memcpy(&fbits, &f, 8);
	le_put64(out + 24, fbits);
	le_put64(out + 32, len);
	le_put32(out + 40, crc(json, len));
	le_put32(out + 60, crc(out, 60));
}

/* Checks the manifest header against the file size; fills *json_len. */
int coli_manifest_header_check(const uint8_t h[COLI_MANIFEST_HEADER], uint64_t file_size,
			       const char *what, uint64_t *json_len, coli_err *e)
{
	double f;
	uint64_t fbits = le_get64(h + 24);
	memcpy(&f, &fbits, 8);
	if (memcmp(h, coli_magic, 8) != 0)
		return coli_errf(e, COLI_EDATA, "%s: bad binary format (magic; text-mode newline damage?)", what);
	if (le_get32(h + 60) != crc(h, 60))
		return coli_errf(e, COLI_EDATA, "%s: header crc32 0x%08x, stored 0x%08x", what, crc(h, 60), le_get32(h + 60));
	if (le_get32(h + 8) != COLI_CONTAINER_VERSION)
		return coli_errf(e, COLI_EDATA, "%s: version %u unsupported (this reader knows %u)", what,
				 le_get32(h + 8), COLI_CONTAINER_VERSION);
	if (le_get32(h + 12) != COLI_MANIFEST_HEADER || le_get64(h + 16) != INT_CANARY || f != FLOAT_CANARY)
		return coli_errf(e, COLI_EDATA, "%s: bad binary format (header size or canaries)", what);
	if (!all_zero(h + 44, 16))
		return coli_errf(e, COLI_EDATA, "%s: reserved header bytes 44..59 are not zero", what);
	*json_len = le_get64(h + 32);
	if (*json_len > COLI_MAX_MANIFEST || *json_len + COLI_MANIFEST_HEADER != file_size)
		return coli_errf(e, COLI_EDATA, "%s: manifest length %llu does not match file size %llu", what,
				 (unsigned long long)*json_len, (unsigned long long)file_size);
	return 0;
}

uint32_t coli_manifest_header_crc(const uint8_t h[COLI_MANIFEST_HEADER]) { return le_get32(h + 40); }

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
	uint32_t got = rc == 0 ? crc(buf, len) : 0;
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
