/* fuzz_index.c: model.safetensors.index.json through coli_ckpt_open, next to two fixed shards. */
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "safetensors.h"

/* The shards the seed index names: tensors a, b in the first, c in the second. */
static const char *const shards[2][2] = {
	{"model-00001-of-00002.safetensors",
	 "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
	 "\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[8,16]}}"},
	{"model-00002-of-00002.safetensors",
	 "{\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"},
};

/* Writes both shards once: u64 length, header, zeros for the data. */
static int write_shards(void)
{
	static int done;
	for (int i = 0; !done && i < 2; i++) {
		uint8_t buf[512];
		size_t n = strlen(shards[i][1]);
		fuzz_put64(buf, n);
		memcpy(buf + 8, shards[i][1], n);
		if (!fuzz_write(shards[i][0], buf, 8 + n, 16))
			return -1;
	}
	done = 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	coli_ckpt *c = NULL;
	coli_err e;
	if (write_shards() || !fuzz_write("model.safetensors.index.json", data, size, 0))
		return 0;
	coli_ckpt_open(&c, fuzz_dir(), &e);
	coli_ckpt_close(c);
	return 0;
}
