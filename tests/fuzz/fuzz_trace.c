/* fuzz_trace.c: a .coli_trace through the reader of a memory buffer, every record read, as it
 * is and with the header's and the extension's CRCs made right. */
#include "fuzz.h"
#include "trace.h"

#define BATCH 64 /* records per coli_trace_next_n */

static void read_trace(const uint8_t *data, size_t size, void *ctx)
{
	(void)ctx;
	coli_trace_reader *r = NULL;
	coli_trace_rec recs[BATCH];
	coli_err e;
	if (coli_trace_reader_open_mem(&r, data, size, "fuzz.coli_trace", &e) == 0) {
		coli_trace_reader_info(r);
		while (coli_trace_next_n(r, recs, BATCH, &e) > 0)
			;
	}
	coli_trace_reader_close(r);
}

/* ext_crc32 (84) over the ext_size (80) bytes after the header when they are present, and
 * header_crc32 (124). The records' CRC is in the trailer, behind the zlib stream: left as is. */
static int fix_header(uint8_t *b, size_t size)
{
	if (size < COLI_TRACE_HEADER)
		return -1;
	uint32_t ext = (uint32_t)b[80] | (uint32_t)b[81] << 8 | (uint32_t)b[82] << 16 |
		       (uint32_t)b[83] << 24;
	if (ext <= size - COLI_TRACE_HEADER)
		fuzz_put_crc(b + 84, b + COLI_TRACE_HEADER, ext);
	fuzz_put_crc(b + 124, b, 124);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_raw_and_fixed(data, size, fix_header, read_trace, NULL);
	return 0;
}
