/* fuzz_journal.c: convert.journal through coli_journal_parse; a journal it accepts must hold
 * what journal.h promises: 0 <= next_job <= jobs, jobs >= 1, hex identities, the CRC tables. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "journal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	coli_journal j;
	coli_err e;
	if (coli_journal_parse((const char *)data, size, "convert.journal", &j, &e) < 0)
		return 0;
	if (j.jobs < 1 || j.next_job < 0 || j.next_job > j.jobs || strlen(j.identity) != 64 || strlen(j.source) != 64 ||
	    (j.n_tensor_crc && !j.tensor_crc) || (j.n_record_crc && !j.record_crc))
		abort();
	coli_journal_release(&j);
	return 0;
}
