/* outdir.c: the output folder: refuse foreign content, protect finished containers, carry the
 * source's config and tokenizer files. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32.h"
#include "convert.h"
#include "fileio.h"
#include "tokjson.h"

static const char *const carried_files[] = {
	"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
	"special_tokens_map.json", "chat_template.jinja", "chat_template.json",
};
#define N_CARRIED (int)(sizeof(carried_files) / sizeof(carried_files[0]))

static const char *const own_files[] = {COLI_MANIFEST_FILE, "dense.bin", "mtp.bin", "experts.bin", JOURNAL_FILE};
#define N_OWN (int)(sizeof(own_files) / sizeof(own_files[0]))

/* A name coli-convert writes (or its ".tmp" twin). */
static int is_own(const char *name)
{
	size_t n = strlen(name);
	if (n > 4 && strcmp(name + n - 4, ".tmp") == 0)
		n -= 4;
	for (int i = 0; i < N_OWN; i++)
		if (strlen(own_files[i]) == n && strncmp(own_files[i], name, n) == 0)
			return 1;
	for (int i = 0; i < N_CARRIED; i++)
		if (strlen(carried_files[i]) == n && strncmp(carried_files[i], name, n) == 0)
			return 1;
	return 0;
}

static int scan(const char *out, int *finished, coli_err *e)
{
	DIR *d = opendir(out);
	if (!d)
		return coli_errf(e, COLI_EIO, "%s: %s", out, strerror(errno));
	int rc = 0;
	for (struct dirent *de; rc == 0 && (de = readdir(d));) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (!is_own(de->d_name))
			rc = coli_errf(e, COLI_EUSAGE,
				       "%s: folder holds '%s', which is not part of a coli container; refusing to write there",
				       out, de->d_name);
		if (strcmp(de->d_name, COLI_MANIFEST_FILE) == 0)
			*finished = 1;
	}
	closedir(d);
	return rc;
}

/* Removes what an earlier conversion left, the manifest first so that the folder stops
 * looking finished before anything else goes. */
static int clear(const char *out, coli_err *e)
{
	char path[4096];
	for (int i = 0; i < N_OWN + N_CARRIED; i++) {
		const char *name = i < N_OWN ? own_files[i] : carried_files[i - N_OWN];
		for (int tmp = 0; tmp < 2; tmp++) {
			snprintf(path, sizeof(path), "%s/%s%s", out, name, tmp ? ".tmp" : "");
			if (unlink(path) < 0 && errno != ENOENT)
				return coli_errf(e, COLI_EIO, "%s: %s", path, strerror(errno));
		}
	}
	return 0;
}

int outdir_prepare(const convert_opts *o, coli_err *e)
{
	struct stat st;
	int finished = 0;
	if (stat(o->out, &st) < 0) {
		if (errno != ENOENT || mkdir(o->out, 0755) < 0)
			return coli_errf(e, COLI_EIO, "%s: %s", o->out, strerror(errno));
		return 0;
	}
	if (!S_ISDIR(st.st_mode))
		return coli_errf(e, COLI_EUSAGE, "%s: exists and is not a folder", o->out);
	if (scan(o->out, &finished, e) < 0)
		return -1;
	if (finished && !o->force)
		return coli_errf(e, COLI_EUSAGE, "%s: a finished container is here; use --force to overwrite it", o->out);
	return o->force ? clear(o->out, e) : 0;
}

/* A tokenizer whose ids reach past the model's vocabulary: said once, not refused (the ids
 * below it still work; coli-run refuses a prompt that uses one beyond). */
static int check_tokenizer(const conv *cv, const char *path, const char *buf, size_t len, coli_err *e)
{
	int64_t max = -1;
	char where[64];
	if (coli_tokjson_max_id(buf, len, path, &max, where, sizeof(where), e) < 0)
		return -1;
	if (max >= cv->ct.model.vocab_size)
		fprintf(stderr, "coli-convert: warning: %s: token %s has id %lld, beyond the model's vocab_size %d "
			"(config.json): coli-run refuses prompts that contain it\n", path, where, (long long)max,
			cv->ct.model.vocab_size);
	return 0;
}

static int carry_one(conv *cv, const char *name, coli_err *e)
{
	char *src = coli_path_join(cv->o->src, name), *dst = coli_path_join(cv->o->out, name), *buf = NULL;
	size_t len = 0;
	int rc = 0;
	if (!src || !dst)
		rc = coli_errf(e, COLI_ENOMEM, "out of memory");
	else if (access(src, F_OK) == 0 && (rc = coli_read_file(src, &buf, &len, e)) == 0)
		rc = strcmp(name, "tokenizer.json") == 0 ? check_tokenizer(cv, src, buf, len, e) : 0;
	if (rc == 0 && buf)
		rc = coli_write_atomic(dst, buf, len, e);
	if (rc == 0 && buf) {
		coli_carried *c = &cv->ct.carried[cv->ct.n_carried++];
		*c = (coli_carried){strdup(name), len, coli_crc32(0, buf, len)};
		if (!c->file)
			rc = coli_errf(e, COLI_ENOMEM, "out of memory");
	}
	free(buf);
	free(src);
	free(dst);
	return rc;
}

int outdir_carry(conv *cv, coli_err *e)
{
	if (!(cv->ct.carried = coli_calloc(N_CARRIED, sizeof(coli_carried), e)))
		return -1;
	for (int i = 0; i < N_CARRIED; i++)
		if (carry_one(cv, carried_files[i], e) < 0)
			return -1;
	return 0;
}

uint64_t outdir_carried_bytes(const convert_opts *o)
{
	uint64_t n = 0;
	for (int i = 0; i < N_CARRIED; i++) {
		char *src = coli_path_join(o->src, carried_files[i]);
		struct stat st;
		if (src && stat(src, &st) == 0 && S_ISREG(st.st_mode))
			n += (uint64_t)st.st_size;
		free(src);
	}
	return n;
}

/* Removes name and name.tmp in out, for each of the n names. */
static void remove_names(const char *out, const char *const *names, int n, int keep_final)
{
	char path[4096];
	for (int i = 0; i < n; i++)
		for (int tmp = keep_final; tmp < 2; tmp++) {
			snprintf(path, sizeof(path), "%s/%s%s", out, names[i], tmp ? ".tmp" : "");
			unlink(path);
		}
}

void outdir_uncarry(const char *out)
{
	remove_names(out, carried_files, N_CARRIED, 0);
	remove_names(out, own_files, N_OWN, 1);
}

void outdir_drop_tmp(const char *out)
{
	remove_names(out, carried_files, N_CARRIED, 1);
	remove_names(out, own_files, N_OWN, 1);
}
