/* driver.c: the fuzz targets' shared helpers, and (without libFuzzer) the regression driver. */
#include "fuzz.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define MAX_NAMES 16

static char scratch[PATH_MAX];
static char *names[MAX_NAMES]; /* files written into scratch, removed at exit */
static int n_names;

static void remove_scratch(void)
{
	char path[PATH_MAX + 256];
	for (int i = 0; i < n_names; i++) {
		snprintf(path, sizeof(path), "%s/%s", scratch, names[i]);
		unlink(path);
		free(names[i]);
	}
	rmdir(scratch);
}

const char *fuzz_dir(void)
{
	if (scratch[0])
		return scratch;
	const char *tmp = getenv("TMPDIR");
	snprintf(scratch, sizeof(scratch), "%s/coli-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(scratch)) {
		perror(scratch);
		scratch[0] = 0;
		return NULL;
	}
	atexit(remove_scratch);
	return scratch;
}

/* Remembers name for the cleanup at exit (each distinct name once). */
static int track(const char *name)
{
	for (int i = 0; i < n_names; i++)
		if (!strcmp(names[i], name))
			return 0;
	if (n_names == MAX_NAMES || !(names[n_names] = strdup(name)))
		return -1;
	n_names++;
	return 0;
}

const char *fuzz_write(const char *name, const void *data, size_t size, size_t pad)
{
	static char path[PATH_MAX + 256];
	const char *dir = fuzz_dir();
	if (!dir || track(name))
		return NULL;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return NULL;
	int ok = write(fd, data, size) == (ssize_t)size && ftruncate(fd, (off_t)(size + pad)) == 0;
	close(fd);
	return ok ? path : NULL;
}

char *fuzz_text(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (s) {
		memcpy(s, data, size);
		s[size] = 0;
	}
	return s;
}

void fuzz_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void fuzz_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void fuzz_put_crc(uint8_t *p, const uint8_t *from, size_t n)
{
	fuzz_put32(p, (uint32_t)crc32(0, from, (uInt)n));
}

void fuzz_raw_and_fixed(const uint8_t *data, size_t size, fuzz_fix_fn fix, fuzz_run_fn run,
			void *ctx)
{
	uint8_t *b = malloc(size ? size : 1);
	run(data, size, ctx);
	if (b && size)
		memcpy(b, data, size);
	if (b && fix(b, size) == 0 && memcmp(b, data, size))
		run(b, size, ctx);
	free(b);
}

int fuzz_fix_payload_header(uint8_t *b, size_t size)
{
	if (size < 128)
		return -1;
	fuzz_put64(b + 72, size - 128);
	fuzz_put_crc(b + 80, b + 128, size - 128);
	fuzz_put_crc(b + 124, b, 124);
	return 0;
}

typedef struct payload_file {
	const char *name;
	fuzz_read_fn read;
} payload_file;

static void read_payload_file(const uint8_t *data, size_t size, void *ctx)
{
	const payload_file *p = ctx;
	uint8_t id[32] = {0};
	const char *path = fuzz_write(p->name, data, size, 0);
	if (size > 16)
		memcpy(id, data + 16, size - 16 < 32 ? size - 16 : 32);
	if (path)
		p->read(path, id);
}

void fuzz_payload_file(const uint8_t *data, size_t size, const char *name, fuzz_read_fn read)
{
	payload_file p = {name, read};
	fuzz_raw_and_fixed(data, size, fuzz_fix_payload_header, read_payload_file, &p);
}

#ifndef COLI_LIBFUZZER
/* ---- the regression driver: every file of the folders (or files) given, sorted by name ---- */

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return -1;
	}
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		if (n == cap && !(buf = realloc(buf, cap = cap ? 2 * cap : 4096))) {
			fclose(f);
			return -1;
		}
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
	}
	int bad = ferror(f);
	fclose(f);
	if (!bad)
		LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return bad ? -1 : 0;
}

static int cmp_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Runs the regular files of dir (not its subfolders: crashes/ holds known crashes). */
static int run_dir(const char *dir, int *count)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, cmp_name), rc = n < 0 ? -1 : 0;
	if (n < 0)
		perror(dir);
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX + 256];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
		if (rc == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			rc = run_file(path);
			*count += rc == 0;
		}
		free(ents[i]);
	}
	free(ents);
	return rc;
}

int main(int argc, char **argv)
{
	const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	int count = 0, rc = 0;
	if (!strncmp(name, "fuzz_", 5))
		name += 5;
	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc && rc == 0; i++) {
		struct stat st;
		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
			rc = run_dir(argv[i], &count);
		else if ((rc = run_file(argv[i])) == 0)
			count++;
	}
	if (rc || !count) {
		printf("FAIL fuzz %s: %s\n", name, rc ? "an input could not be read" : "no inputs");
		return 1;
	}
	printf("PASS fuzz %s: %d inputs\n", name, count);
	return 0;
}
#endif
