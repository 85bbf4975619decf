/* convert.h: coli-convert's parts: output folder, job list, encoding, pipeline, journal. */
#ifndef COLI_CONVERT_H
#define COLI_CONVERT_H

#include <stdint.h>

#include "container.h"
#include "error.h"
#include "safetensors.h"

#define COLI_CONVERT_VERSION "coli-convert 0.1.0"
#define JOURNAL_FILE "convert.journal"

typedef struct convert_opts {
	const char *src, *out;
	int bits[3];          /* expert, dense, mtp; 0: not given (4, 4, 8; FP4 experts kept) */
	int threads;
	int force;
	int allow_nonfinite;
	int quiet;
} convert_opts;

/* A unit of work: rows [row0, row0+nrows) of a dense/MTP tensor, or one expert record. */
typedef struct job {
	int tensor;           /* index into layout.tensors, or -1 for a record */
	int64_t row0, nrows;
	int elayer, expert;   /* for records */
	int rec;              /* record ordinal (index into conv.xspec / 3), else -1 */
	uint64_t in_bytes;    /* source bytes it reads */
	uint64_t in_span;     /* read-buffer bytes it needs (alignment slack included) */
	uint64_t out_bytes;   /* bytes it produces */
} job;

/* Everything a conversion shares between threads (read-only once the pipeline runs). */
typedef struct conv {
	const convert_opts *o;
	coli_ckpt *src;
	int skipped;              /* source tensors left out by the family's mapping (a vision tower) */
	coli_container ct;    /* the container being written: model, layout, identity, carried */
	int *dfd;             /* per shard: O_DIRECT read descriptor (buffered where unsupported) */
	char source_hex[65];  /* sha256 of the shards' names, sizes and mtimes: a resume must see the same */
	int fd[COLI_SEC_COUNT];
	int direct_experts;   /* experts.bin opened O_DIRECT for whole-record writes, or -1 */
	job *jobs;
	int n_jobs;
	coli_tensor_spec *specs; /* expected tensor set, from coli_model_tensors */
	int n_specs;
	int *xspec;           /* per record: spec indices of its gate, up, down */
	uint64_t total_in, total_out;
} conv;

/* A job's result: codes bytes and scales bytes with their CRCs (records: codes only). */
typedef struct job_out {
	uint8_t *buf;         /* codes, then scales */
	uint64_t codes_len, scales_len;
	uint32_t codes_crc, scales_crc;
} job_out;

/* A worker's aligned read buffer; reset (used = 0) for each job. */
typedef struct inbuf {
	uint8_t *base;
	uint64_t cap, used;
} inbuf;

/* Runs a conversion (fresh or resumed) to a finished container. */
int convert_run(const convert_opts *o, coli_err *e);

/* jobs.c: the ordered job list for the planned layout. */
int jobs_build(conv *cv, coli_err *e);

/* encode.c: performs job j into out (buf sized for the largest job); scratch holds floats;
 * in receives the job's source bytes. */
int encode_job(const conv *cv, const job *j, job_out *out, float *scratch, inbuf *in, coli_err *e);
uint64_t encode_scratch_floats(const conv *cv);

/* source.c: O_DIRECT reads of source tensor bytes. */
int source_open(conv *cv, coli_err *e);
void source_close(conv *cv);
uint64_t source_span(uint64_t len);
int inbuf_init(inbuf *b, uint64_t cap, coli_err *e);
const uint8_t *source_read(const conv *cv, const coli_st_tensor *t, uint64_t off, uint64_t len, int aligned,
			   inbuf *b, coli_err *e);

/* outdir.c: prepares the output folder (created when missing); carries the source's
 * config and tokenizer files into it (before the section files are reserved, so that the
 * reservation counts their space); the carried files' bytes in the source; removes the carried
 * files (a fresh start that failed keeps nothing) or the temporaries (*.tmp) of a conversion. */
int outdir_prepare(const convert_opts *o, coli_err *e);
int outdir_carry(conv *cv, coli_err *e);
uint64_t outdir_carried_bytes(const convert_opts *o);
void outdir_uncarry(const char *out);
void outdir_drop_tmp(const char *out);

/* journal.c: resume state, rewritten atomically at checkpoints. */
typedef struct journal {
	int next_job;
	uint32_t codes_crc, scales_crc; /* running CRCs of the tensor in progress */
} journal;
int journal_save(const conv *cv, const journal *j, coli_err *e);
/* Loads the journal if present (returns 1), 0 if absent; errors if it belongs to another plan. */
int journal_load(conv *cv, journal *j, coli_err *e);

/* pipeline.c: runs jobs from j->next_job to the end with worker threads and one writer. */
int pipeline_run(conv *cv, journal *j, coli_err *e);

/* info.c: --info and --verify. */
int info_print(const char *path, coli_err *e);
int verify_run(const char *path, int quiet, coli_err *e);

/* stop.c: SIGINT and SIGTERM. install: before anything is written a signal exits at once
 * (128 + the signal, one line "nothing written"); writing: from now on it is only recorded, and
 * convert_stop_signal() returns it (0: none) for the writer to stop between jobs; its name
 * ("interrupted (SIGINT)", "terminated (SIGTERM)"). convert_stop_wait: until a signal comes (the
 * test hook COLI_TEST_PAUSE_AT_JOB). */
void convert_signals_install(void);
void convert_signals_writing(void);
int convert_stop_signal(void);
const char *convert_stop_name(void);
void convert_stop_wait(void);

/* progress.c: a rate-limited progress bar on a TTY. */
void progress_update(uint64_t done, uint64_t total, int final);

#endif
