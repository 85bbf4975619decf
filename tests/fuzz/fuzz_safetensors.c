/* fuzz_safetensors.c: a safetensors file head (u64 header length + JSON header) through
 * coli_ckpt_open_file. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz.h"
#include "safetensors.h"

/* Zero bytes after the input stand for the tensor data, so that the offsets of a header cut
 * from a real shard are inside the file and the later rules (sizes, overlaps) are reached. */
#define DATA_PAD (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_write("model.safetensors", data, size, DATA_PAD);
	coli_ckpt *c = NULL;
	coli_err e;
	if (path && coli_ckpt_open_file(&c, path, &e) == 0)
		for (int i = 0; i < c->n_tensors; i++)
			if (coli_ckpt_find(c, c->tensors[i].name) != &c->tensors[i])
				abort(); /* the table must be sorted and its names unique */
	coli_ckpt_close(c);
	return 0;
}
