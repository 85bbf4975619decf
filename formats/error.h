/* error.h: the error type every libcoli call fills instead of printing or exiting. */
#ifndef COLI_ERROR_H
#define COLI_ERROR_H

/* Error classes; main() maps them to exit statuses (data/io -> 1, usage -> 2). */
enum coli_errcode {
	COLI_OK = 0,
	COLI_EDATA = 1,  /* a file's content is wrong: bad header, shape, checksum */
	COLI_EIO = 2,    /* open/read/write/fsync failed, disk full, short read */
	COLI_ENOMEM = 3, /* an allocation failed; msg names the size */
	COLI_EUSAGE = 4, /* the caller asked for something invalid */
};

/* One message, "<subject>: <field>: <problem>", e.g.
 * "model.coli/experts.bin: expert[17][203].offset: 1234+4096 exceeds file size 4000". */
typedef struct coli_err {
	int code;
	char msg[1024];
} coli_err;

/* Fills e (may be NULL) and returns -1, so callers write `return coli_errf(e, ...)`. */
int coli_errf(coli_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefixes e->msg with "<prefix>: " (used when a lower layer did not know the file name). */
void coli_err_prefix(coli_err *e, const char *prefix);

/* Exit status for an error: 2 for usage errors, 1 otherwise. */
int coli_err_exit_status(const coli_err *e);

#endif
