/* container.h: the coli container, a folder X.coli/ (spec: formats/container.md).
 *
 *   manifest.coli   64-byte header (magic, version, canaries, JSON length and CRC, header CRC)
 *                   + UTF-8 JSON manifest; written last, atomically: its presence marks a
 *                   finished container
 *   dense.bin       4096-byte section header + dense tensors (64-aligned)
 *   mtp.bin         4096-byte section header + MTP-layer tensors (64-aligned)
 *   experts.bin     4096-byte section header + expert records (4096-aligned, layer-major)
 *   config.json, generation_config.json, tokenizer*.json ...   carried verbatim from the source
 *
 * Readers validate everything at open (headers, manifest, geometry, identity, sizes); the CRCs
 * of the data are checked by coli_container_verify (full pass) or per record by streamers.
 */
#ifndef COLI_CONTAINER_H
#define COLI_CONTAINER_H

#include <stdint.h>

#include "error.h"
#include "layout.h"
#include "model.h"
#include "safetensors.h"

#define COLI_CONTAINER_VERSION 1u
#define COLI_MANIFEST_FILE "manifest.coli"
#define COLI_MANIFEST_HEADER 64u
#define COLI_MAX_MANIFEST (1u << 30)

extern const uint8_t coli_magic[8]; /* "\x89COLI\r\n\x1a" */

typedef struct coli_carried {
	char *file;      /* plain file name inside the container */
	uint64_t size;
	uint32_t crc;
} coli_carried;

typedef struct coli_container {
	char *dir;
	coli_model model;
	char *config_json;        /* canonical config text (sorted keys, compact) */
	uint8_t identity[32];
	char identity_hex[65];
	int bits[3];              /* expert, dense, mtp */
	coli_layout layout;
	int n_carried;
	coli_carried *carried;
	char *provenance_json;    /* compact JSON text */
	int fd[COLI_SEC_COUNT];   /* section files, O_RDONLY */
} coli_container;

/* Opens and validates a container folder. *out is the caller's; close with coli_container_close. */
int coli_container_open(coli_container **out, const char *dir, coli_err *e);
void coli_container_close(coli_container *c); /* accepts NULL */

/* Only manifest.coli read, as a container description (layout, record CRCs, identity), the
 * section files not opened (fd[] -1): for a mirror folder, whose partial copy has no dense.bin. */
int coli_container_open_manifest(coli_container **out, const char *dir, coli_err *e);

/* Whether the folder copy holds the same container as the folder of: 0 when their manifest.coli
 * files are byte-identical, else -1 with e: COLI_EDATA "[OPT ]COPY/manifest.coli: manifest.coli
 * differs from OF/manifest.coli at byte N: not the same container", or the read's error (the
 * copy's prefixed "OPT: "). opt: the option that named copy ("--mirror"), or NULL. */
int coli_container_same(const char *copy, const char *of, const char *opt, coli_err *e);

/* Dense or MTP tensor by name; NULL when absent. */
const coli_ltensor *coli_container_tensor(const coli_container *c, const char *name);

/* Expert layout of MoE layer `layer` (MTP layers count on from n_layers); NULL if not MoE. */
const coli_lexperts *coli_container_experts(const coli_container *c, int layer);

/* Progress callback for long passes: bytes done of total. */
typedef void (*coli_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* Re-reads every byte of every section and carried file: section headers, tensor and record
 * CRCs, zero padding, sizes. The first problem names the record (layer, expert), file and
 * offset. */
int coli_container_verify(const coli_container *c, coli_progress_fn fn, void *ctx, coli_err *e);

/* --- writing (used by coli-convert) --- */

/* The container coli-convert writes from the checkpoint folder src_dir, described without
 * writing anything (describe.c): ct's model, config_json, bits, layout (CRCs 0), identity and
 * identity_hex; its other fields are left as they are (coli-convert plans with it too).
 * bits: expert, dense and MTP bits as given (0: not given: 4, 4 and 8, FP4 experts kept as
 * shipped; 4 or 8 for them is refused, COLI_EUSAGE). src: the checkpoint opened, mapped onto the
 * table's names and checked here (*skipped: its tensors left out, a vision tower); or NULL:
 * config.json alone, each tensor in the dtype the family's release stores it
 * (coli_model_release_dtype). */
int coli_container_describe(coli_container *ct, const char *src_dir, coli_ckpt *src, const int bits[3], int *skipped,
			    coli_err *e);

/* Identity hash of a planned container: canonical config, MTP layer count, bits and the whole
 * tensor and record geometry (not the CRCs: it is known before any data is written). */
void coli_container_identity(const coli_layout *L, const char *config_canonical, int mtp_layers,
			     const int bits[3], uint8_t out[32]);

/* The 4096-byte header of a section file. */
void coli_section_header(uint8_t out[COLI_SECTION_HEADER], coli_section s, const uint8_t identity[32]);

/* Checks a section file header read from disk; what names the file. */
int coli_section_header_check(const uint8_t h[COLI_SECTION_HEADER], coli_section s,
			      const uint8_t identity[32], const char *what, coli_err *e);

/* Writes manifest.coli into dir atomically from a filled-in container description
 * (layout with CRCs, carried files with sizes and CRCs, provenance JSON text). */
int coli_manifest_write(const coli_container *c, coli_err *e);

#endif
