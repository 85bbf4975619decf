/* identity.c: a container's identity hash and the fixed headers of its files (magic, version,
 * canaries, identity, CRC): what the converter writes and every reader checks first. */
#include "container.h"

#include <stdio.h>
#include <string.h>

#include "crc32.h"
#include "le.h"
#include "manifest.h"
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
