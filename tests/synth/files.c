/* files.c: the output files of one run, written atomically and removed again on failure. */
#include "synth.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"

int synth_files_add(synth_files *f, const char *path, coli_err *e)
{
	if (f->n == f->cap) {
		int cap = f->cap ? 2 * f->cap : 16;
		char **p = realloc(f->path, (size_t)cap * sizeof(*p));
		if (!p)
			return coli_errf(e, COLI_ENOMEM, "out of memory allocating %d paths", cap);
		f->path = p;
		f->cap = cap;
	}
	f->path[f->n] = strdup(path);
	if (!f->path[f->n])
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	f->n++;
	return 0;
}

void synth_files_remove_all(synth_files *f)
{
	for (int i = 0; i < f->n; i++)
		unlink(f->path[i]);
}

void synth_files_release(synth_files *f)
{
	for (int i = 0; i < f->n; i++)
		free(f->path[i]);
	free(f->path);
	memset(f, 0, sizeof(*f));
}

int synth_write_small(synth_files *f, const char *dir, const char *name, const void *data,
		      size_t n, coli_err *e)
{
	char *path = coli_path_join(dir, name);
	if (!path)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	int rc = synth_files_add(f, path, e);
	if (rc == 0)
		rc = coli_write_atomic(path, data, n, e);
	free(path);
	return rc;
}
