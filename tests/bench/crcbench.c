/* crcbench.c: CRC-32 throughput of each variant this CPU runs (crc32.h) over one record-sized
 * buffer, warm, on one thread: what checking a streamed record costs the thread that checks it.
 * usage: coli-crcbench [RECORD_BYTES]   prints "variant=NAME gbs=X" per variant */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "crc32.h"

static const char usage[] =
	"usage: coli-crcbench [RECORD_BYTES]\n"
	"\n"
	"CRC-32 throughput of each variant this CPU runs (zlib, pclmul, vpclmul) over one buffer of\n"
	"RECORD_BYTES (1..4 GiB, default 2506752: a Qwen3-30B-A3B expert record), warm, one thread, for\n"
	"half a second each; prints \"variant=NAME gbs=X\" per variant.\n"
	"\n"
	"  -h, --help  this text\n";

static volatile uint32_t sink; /* keeps the CRCs */

static double rate(coli_crc32_fn fn, const uint8_t *buf, size_t n)
{
	uint32_t c = fn(0, buf, n); /* warms the caches */
	int reps = 0;
	double t0 = coli_now(), t;
	while ((t = coli_now()) - t0 < 0.5 || reps < 3)
		c = fn(c, buf, n), reps++;
	sink ^= c;
	return (double)n * reps / (t - t0) / 1e9;
}

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
		return fputs(usage, stdout), 0;
	char *end = NULL;
	unsigned long long n = argc > 1 ? strtoull(argv[1], &end, 10) : 2506752;
	if (argc > 2 || (end && *end) || n < 1 || n > (4ull << 30)) {
		fprintf(stderr, "coli-crcbench: bad arguments\n%s", usage);
		return 2;
	}
	uint8_t *buf = malloc((size_t)n);
	if (!buf) {
		fprintf(stderr, "coli-crcbench: cannot allocate %llu bytes\n", n);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(i * 131 + (i >> 9));
	static const char *names[] = {"zlib", "pclmul", "vpclmul"};
	for (int v = 0; v < 3; v++) {
		coli_crc32_fn fn = coli_crc32_variant(names[v]);
		if (fn)
			printf("variant=%s gbs=%.2f\n", names[v], rate(fn, buf, (size_t)n));
	}
	free(buf);
	return 0;
}
