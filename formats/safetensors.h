/* safetensors.h: validated, mmap-backed reader of HF safetensors files and sharded checkpoints.
 *
 * File layout (https://github.com/huggingface/safetensors):
 *   u64 LE  N                 header length, 0 < N <= COLI_ST_MAX_HEADER
 *   N bytes JSON header       {"__metadata__": {str: str}, "<name>": {"dtype": "BF16",
 *                              "shape": [d0, ...], "data_offsets": [begin, end]}, ...}
 *   data                      offsets are relative to byte 8+N; row-major little-endian
 *
 * Every rule is checked at open, before any tensor is used: header length bound and inside the
 * file, valid JSON object, known dtype, shape entries >= 0, product(shape) x dtype size ==
 * end - begin (overflow-safe), begin <= end, end inside the file, spans sorted by begin do not
 * overlap, no duplicate names. Errors name the file, the tensor and the field, e.g.
 * "a.safetensors: tensor 'x.weight': data_offsets: end 4096 exceeds data size 100".
 */
#ifndef COLI_SAFETENSORS_H
#define COLI_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define COLI_ST_MAX_HEADER (100u << 20) /* 100 MiB, as the reference implementation */
#define COLI_ST_MAX_DIMS 8

typedef enum coli_dtype {
	COLI_DT_BF16,
	COLI_DT_F16,
	COLI_DT_F32,
	COLI_DT_F8_E4M3,
	COLI_DT_I8, /* accepted for reference files (quant_ref_q4), never a model weight */
	COLI_DT_U8,
	COLI_DT_I32,
	COLI_DT_I64,     /* deepseek_v4's hash tables (tid2eid) */
	COLI_DT_F8_E8M0, /* UE8M0: one byte b, the value 2^(b - 127) (deepseek_v4's scales) */
	COLI_DT_COUNT
} coli_dtype;

/* "BF16" -> COLI_DT_BF16; -1 when unknown. */
int coli_dtype_parse(const char *s);
const char *coli_dtype_name(coli_dtype t);
size_t coli_dtype_size(coli_dtype t);

typedef struct coli_st_tensor {
	char *name;
	coli_dtype dtype;
	int ndim;
	int64_t shape[COLI_ST_MAX_DIMS];
	uint64_t nelem;
	int file;        /* index into coli_ckpt.files */
	uint64_t offset; /* absolute byte offset inside that file */
	uint64_t nbytes;
} coli_st_tensor;

typedef struct coli_st_file {
	char *path;    /* as opened */
	char *name;    /* basename, e.g. "model-00001-of-00002.safetensors" */
	int fd;
	uint64_t size; /* file size in bytes */
	const uint8_t *map; /* whole file, PROT_READ, MAP_SHARED */
	uint64_t data_start; /* 8 + header length */
} coli_st_file;

/* A checkpoint: one or more safetensors files, tensors sorted by name. */
typedef struct coli_ckpt {
	char *dir;
	int n_files;
	coli_st_file *files;
	int n_tensors;
	coli_st_tensor *tensors;
} coli_ckpt;

/* Opens DIR: with model.safetensors.index.json, every shard it names (each tensor of the index
 * must be in the shard the index says, and every tensor of every shard must be in the index);
 * otherwise the single DIR/model.safetensors. *out is the caller's; free with coli_ckpt_close. */
int coli_ckpt_open(coli_ckpt **out, const char *dir, coli_err *e);

/* Opens one safetensors file as a checkpoint of one file (reference files, tests). */
int coli_ckpt_open_file(coli_ckpt **out, const char *path, coli_err *e);

void coli_ckpt_close(coli_ckpt *c); /* accepts NULL */

/* Binary search by name; NULL when absent. */
const coli_st_tensor *coli_ckpt_find(const coli_ckpt *c, const char *name);

/* Pointer to the tensor's bytes inside the mapping. */
const void *coli_ckpt_data(const coli_ckpt *c, const coli_st_tensor *t);

/* Tells the kernel the tensor's pages are no longer needed (madvise DONTNEED), keeping the RSS
 * of a pass over a checkpoint larger than RAM bounded. */
void coli_ckpt_release(const coli_ckpt *c, const coli_st_tensor *t);

#endif
