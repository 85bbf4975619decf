/* journal.h: convert.journal, the resume state of an unfinished coli-convert (JSON, written
 * atomically after the data it describes is on disk):
 *   {"identity": hex64, "source": hex64, "allow_nonfinite": bool, "jobs": N, "next_job": k,
 *    "codes_crc": c, "scales_crc": s, "tensor_crc": [...], "record_crc": [...]}
 * The reader checks every field's type and range; coli-convert then compares them with the
 * conversion it is about to resume (formats/container.md, "Resume"). */
#ifndef COLI_JOURNAL_H
#define COLI_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct coli_journal {
	char identity[65], source[65]; /* lowercase hex */
	int allow_nonfinite;
	long long jobs, next_job;      /* 1 <= jobs, 0 <= next_job <= jobs */
	uint32_t codes_crc, scales_crc;
	uint32_t *tensor_crc, *record_crc; /* malloc'd: coli_journal_release */
	size_t n_tensor_crc, n_record_crc;
} coli_journal;

/* Parses text[0..len) into *j; errors (COLI_EDATA) name path and the field. */
int coli_journal_parse(const char *text, size_t len, const char *path, coli_journal *j, coli_err *e);
void coli_journal_release(coli_journal *j); /* accepts a zeroed or released journal */

#endif
