/* trace.h: .coli_trace, what happened during one coli-run (forward calls, compute spans, expert
 * reads, cache outcomes), for coli-profile to attribute time and replay the cache (spec:
 * formats/trace.md).
 *
 *   128-byte header (magic, version, container identity, n_layers, n_experts, top_k, start time
 *   in Unix ns, record size, n_copies, size and CRC of the extension, header CRC)
 *   extension: per copy of experts.bin { char dev[32]; u16 dir_len; dir }, u32 meta_size, JSON
 *   zlib stream (RFC 1950) of 40-byte little-endian records:
 *     u8 kind, u8 sub, u16 copy, i32 token, i32 layer, i32 expert, u64 t0, u64 t1, u64 n
 *   (version 2 adds the BETWEEN span and the WALL record: a caller's timed phase, its calls
 *   tiling it)
 *   32-byte trailer (magic, record count, CRC32 of the uncompressed records, trailer CRC)
 *
 * Written to "<path>.tmp" and renamed into place by coli_trace_writer_close: a file at path is a
 * finished trace. Readers stream (constant memory), check every record as it is yielded and the
 * trailer at the end; a cut file is reported as truncated, damage as corrupt. */
#ifndef COLI_TRACE_H
#define COLI_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define COLI_TRACE_VERSION 3u          /* what the writer writes; readers take 1 to 3 */
#define COLI_TRACE_VERSION_MIN 1u
#define COLI_TRACE_HEADER 128u
#define COLI_TRACE_REC_SIZE 40u
#define COLI_TRACE_TRAILER 32u
#define COLI_TRACE_MAX_LAYERS 4096
#define COLI_TRACE_MAX_EXPERTS 65536
#define COLI_TRACE_MAX_COPIES 256
#define COLI_TRACE_MAX_DIR 4096         /* bytes of a copy's folder path */
#define COLI_TRACE_MAX_META (1u << 20)  /* bytes of the metadata JSON */
#define COLI_TRACE_BUF_RECORDS 4096     /* records a writer buffers before deflating them */

/* kind; WALL (version 2): a phase as its caller timed it, n the tokens it counts */
enum { COLI_TR_TOKEN = 1, COLI_TR_SPAN = 2, COLI_TR_READ = 3, COLI_TR_EXPERT = 4, COLI_TR_WALL = 5 };
enum { COLI_PHASE_PREFILL = 0, COLI_PHASE_DECODE = 1 };                                  /* TOKEN sub */
/* SPAN sub; BETWEEN (version 2): the caller's time between forward calls (sampling, printing);
 * INDEXER (version 3): a sparse attention's selection (DSA's indexer, DeepSeek V4's compressors
 * and indexer); MIX (version 3): DeepSeek V4's hyper-connections */
enum { COLI_SPAN_ATTENTION, COLI_SPAN_ROUTER, COLI_SPAN_EXPERTS, COLI_SPAN_IO_WAIT,
       COLI_SPAN_OTHER, COLI_SPAN_BETWEEN, COLI_SPAN_LINEAR, COLI_SPAN_INDEXER, COLI_SPAN_MIX, COLI_SPAN_N };
#define COLI_SPAN_N_V1 5 /* span kinds a version 1 file may hold */
#define COLI_SPAN_N_V2 7 /* a version 2 file */
/* EXPERT sub: a routed expert's outcome when its layer got it */
enum { COLI_X_PIN, COLI_X_HIT, COLI_X_MISS, COLI_X_PREFETCHED, COLI_X_PREDICTED,
       COLI_X_PREDICT_WASTED, COLI_X_N };
/* READ flags (sub): bit 0 ok (delivered), bit 1 read for a prediction, bit 2 a re-read (CRC
 * recovery); bits 3..7 reserved, 0 */
enum { COLI_READ_OK = 1, COLI_READ_PREDICT = 2, COLI_READ_REREAD = 4 };

/* One event; the meaning of each field per kind is in formats/trace.md, "Records". */
typedef struct coli_trace_rec {
	uint8_t kind;     /* COLI_TR_* */
	uint8_t sub;      /* TOKEN, WALL: phase; SPAN: span kind; READ: flags; EXPERT: outcome */
	uint16_t copy;    /* READ: which copy of experts.bin (0 the model's, 1.. mirrors); else 0 */
	int32_t token;    /* index of the forward call in the run (0-based; a prefill batch is one call) */
	int32_t layer;    /* container layer, -1 none (embedding, head) */
	int32_t expert;   /* READ, EXPERT: expert id; else -1 */
	uint64_t t0, t1;  /* nanoseconds since the trace's start: TOKEN/SPAN/WALL start and end; READ submit and completion; EXPERT: t0 = when its get returned, t1 = t0 */
	uint64_t n;       /* TOKEN: positions in the call (1 for decode); WALL: tokens the caller counts; READ: bytes; SPAN, EXPERT: 0 */
} coli_trace_rec;

/* One copy of experts.bin the run read (store_disk's dir and dev). */
typedef struct coli_trace_copy {
	const char *dir;  /* the container folder: the model's, or a mirror */
	char dev[32];     /* its block device ("nvme0n1"), MAJ:MIN or "?"; NUL-terminated */
} coli_trace_copy;

/* What the header says about the run. */
typedef struct coli_trace_info {
	uint8_t identity[32];           /* the container's identity hash */
	int n_layers;                   /* container layers, MTP layers included */
	int n_experts, top_k;           /* routed experts per MoE layer, experts chosen per token */
	uint64_t start_unix_ns;         /* Unix time of t = 0 (set by the writer at open) */
	int n_copies;                   /* 1..COLI_TRACE_MAX_COPIES */
	const coli_trace_copy *copies;  /* [n_copies]: the model's copy, then each mirror */
	const char *meta;               /* a JSON object (command line, version, settings); NULL: {} */
	int version;                    /* the file's (read); the writer writes COLI_TRACE_VERSION */
} coli_trace_info;

typedef struct coli_trace_writer coli_trace_writer;
typedef struct coli_trace_reader coli_trace_reader;

/* Writing. One thread at a time calls a writer (the engine serialises its records);
 * coli_trace_now alone may be called from any thread. */

/* Creates "<path>.tmp" and writes the header of info (checked: shape in range, copies, meta a
 * JSON object); allocates every buffer the writer uses. info is not kept. */
int coli_trace_writer_open(coli_trace_writer **out, const char *path, const coli_trace_info *info, coli_err *e);

/* Nanoseconds since the writer opened (CLOCK_MONOTONIC): the clock of t0 and t1. */
uint64_t coli_trace_now(const coli_trace_writer *w);

/* Appends n records, each checked as a reader will check it (an invalid one is refused with
 * COLI_EUSAGE, the records before it kept). Never allocates: records are buffered and deflated
 * into the file every COLI_TRACE_BUF_RECORDS. After an I/O error the writer is failed: appends
 * and close return -1. */
int coli_trace_append(coli_trace_writer *w, const coli_trace_rec *r, coli_err *e);
int coli_trace_append_n(coli_trace_writer *w, const coli_trace_rec *r, size_t n, coli_err *e);

/* Flushes, writes the trailer, fsyncs, renames "<path>.tmp" to path and fsyncs the folder; frees
 * w (accepts NULL). On failure the temporary is removed and no file appears at path. */
int coli_trace_writer_close(coli_trace_writer *w, coli_err *e);

/* Removes the temporary and frees w (accepts NULL): nothing appears at path. */
void coli_trace_writer_abort(coli_trace_writer *w);

/* Reading. The header (magic, version, CRCs, every field, the metadata parsed as JSON) is
 * checked at open; records as they are yielded; the trailer when the records end. Errors name
 * the file, the field, the value and the record index; COLI_EDATA, the message saying
 * "truncated" for a cut file and "corrupt" for damaged bytes; COLI_EIO for failed reads. */

/* Reads up to n bytes into buf: the count, 0 at the end of the input, or -1 with e holding the
 * problem (the reader adds the name). */
typedef long (*coli_trace_read_fn)(void *ctx, void *buf, size_t n, coli_err *e);

/* 1 when the file at path starts with this format's magic (a trace, whatever else it holds), 0
 * when not (another format, or shorter than the magic); -1 with e when it cannot be opened: for
 * a tool that takes a trace or another format in one argument. */
int coli_trace_sniff(const char *path, coli_err *e);

/* A reader of a file, of a buffer (data must outlive the reader), or of any input through fn
 * (a FILE*, an archive member); name is the subject of error messages. */
int coli_trace_reader_open(coli_trace_reader **out, const char *path, coli_err *e);
int coli_trace_reader_open_mem(coli_trace_reader **out, const void *data, size_t n, const char *name,
			       coli_err *e);
int coli_trace_reader_open_cb(coli_trace_reader **out, coli_trace_read_fn fn, void *ctx, const char *name,
			      coli_err *e);

/* The header, valid until the reader closes. */
const coli_trace_info *coli_trace_reader_info(const coli_trace_reader *r);

/* The next record: 1; 0 at the end (the trailer checked: count and CRC); -1 on error. */
int coli_trace_next(coli_trace_reader *r, coli_trace_rec *rec, coli_err *e);

/* Up to max (>= 1) records into recs: how many, 0 at the end, -1 on error. An error after some records
 * returns those, and -1 on the next call. */
long coli_trace_next_n(coli_trace_reader *r, coli_trace_rec *recs, size_t max, coli_err *e);

void coli_trace_reader_close(coli_trace_reader *r); /* accepts NULL; never closes fn's input */

#endif
