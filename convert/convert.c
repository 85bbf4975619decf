/* convert.c: one conversion from start (or resume) to a finished container and its summary. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "convert.h"
#include "fileio.h"
#include "sha256.h"

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Fingerprint of the source files: a resumed conversion must read the same bytes. */
static int source_fingerprint(conv *cv, coli_err *e)
{
	coli_sha256 h;
	uint8_t d[32];
	coli_sha256_init(&h);
	for (int i = 0; i < cv->src->n_files; i++) {
		struct stat st;
		char line[512];
		if (fstat(cv->src->files[i].fd, &st) < 0)
			return coli_errf(e, COLI_EIO, "%s: %s", cv->src->files[i].path, strerror(errno));
		int n = snprintf(line, sizeof(line), "%s %lld %lld.%09ld\n", cv->src->files[i].name,
				 (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
		coli_sha256_update(&h, line, (size_t)n);
	}
	coli_sha256_final(&h, d);
	coli_hex32(d, cv->source_hex);
	return 0;
}

/* SRC_DIR must be a folder: one missing or a file is named as such, before any file in it is
 * looked for. */
static int source_folder(const char *src, coli_err *e)
{
	struct stat st;
	if (stat(src, &st) < 0)
		return coli_errf(e, COLI_EIO, "%s: SRC_DIR: %s", src, errno == ENOENT ? "no such folder" : strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return coli_errf(e, COLI_EUSAGE, "%s: SRC_DIR: not a folder (the checkpoint's folder: config.json and the "
				 "safetensors shards)", src);
	return 0;
}

/* SRC_DIR must be a checkpoint: a container given by mistake is named as such. */
static int not_a_container(const char *src, coli_err *e)
{
	char *path = coli_path_join(src, COLI_MANIFEST_FILE);
	int is = path && access(path, F_OK) == 0;
	free(path);
	return is ? coli_errf(e, COLI_EUSAGE, "%s: a coli container (manifest.coli), not a Hugging Face checkpoint; "
			      "SRC_DIR must be the checkpoint folder it was converted from", src)
		  : 0;
}

static int plan(conv *cv, coli_err *e)
{
	if (source_folder(cv->o->src, e) < 0 || not_a_container(cv->o->src, e) < 0 || coli_ckpt_open(&cv->src, cv->o->src, e) < 0 ||
	    source_fingerprint(cv, e) < 0 ||
	    coli_container_describe(&cv->ct, cv->o->src, cv->src, cv->o->bits, &cv->skipped, e) < 0)
		return -1;
	if (cv->skipped) /* never silently: the container holds the text model only */
		fprintf(stderr, "coli-convert: %s: %d tensors of the vision tower (model.visual.*) left out: the container "
			"holds the text model\n", cv->o->src, cv->skipped);
	return jobs_build(cv, e) < 0 ? -1 : source_open(cv, e);
}

static uint64_t section_bytes(const conv *cv)
{
	uint64_t n = 0;
	for (int s = 0; s < COLI_SEC_COUNT; s++)
		n += cv->ct.layout.section_size[s];
	return n;
}

/* The section files and the carried files (config, tokenizer) together. */
static uint64_t container_bytes(const conv *cv)
{
	return section_bytes(cv) + outdir_carried_bytes(cv->o);
}

/* The section files, closed and removed. */
static void remove_sections(conv *cv)
{
	for (int s = 0; s < COLI_SEC_COUNT; s++) {
		char *path = coli_path_join(cv->o->out, coli_section_file((coli_section)s));
		if (cv->fd[s] >= 0)
			close(cv->fd[s]);
		cv->fd[s] = -1;
		if (path)
			unlink(path);
		free(path);
	}
}

/* Opens the section files at their final size (space reserved up front, after the carried
 * files are written, so a full disk is found before hours of work) with their headers written. */
static int open_sections(conv *cv, int fresh, coli_err *e)
{
	for (int s = 0; s < COLI_SEC_COUNT; s++) {
		char *path = coli_path_join(cv->o->out, coli_section_file((coli_section)s));
		uint8_t h[COLI_SECTION_HEADER];
		uint64_t size = cv->ct.layout.section_size[s];
		int rc = 0;
		cv->fd[s] = path ? open(path, O_RDWR | O_CREAT | O_CLOEXEC | (fresh ? O_TRUNC : 0), 0644) : -1;
		if (cv->fd[s] < 0 || ftruncate(cv->fd[s], (off_t)size) < 0)
			rc = coli_errf(e, COLI_EIO, "%s: %s", path ? path : "?", strerror(errno));
		else if (fallocate(cv->fd[s], 0, 0, (off_t)size) < 0 && errno != EOPNOTSUPP) {
			int err = errno; /* container_bytes stats files */
			rc = coli_errf(e, COLI_EIO, "%s: %s reserving %.3f GiB (the container needs %.3f GiB)", path,
				       err == ENOSPC ? "disk full" : strerror(err), (double)size / (1 << 30),
				       (double)container_bytes(cv) / (1 << 30));
		}
		coli_section_header(h, (coli_section)s, cv->ct.identity);
		if (rc == 0)
			rc = coli_pwrite_full(cv->fd[s], h, sizeof(h), 0, path, e);
		free(path);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* Records are 4096-aligned: written with O_DIRECT they skip the page-cache copy, which costs
 * more CPU than the quantization. Where O_DIRECT is refused (tmpfs), writes stay buffered. */
static void open_direct_experts(conv *cv)
{
	char *path = coli_path_join(cv->o->out, "experts.bin");
	cv->direct_experts = path ? open(path, O_WRONLY | O_DIRECT | O_CLOEXEC) : -1;
	free(path);
}

static char *provenance(const conv *cv)
{
	json_t *shards = json_array();
	for (int i = 0; i < cv->src->n_files; i++)
		json_array_append_new(shards, json_pack("{s:s, s:I}", "name", cv->src->files[i].name, "size",
							(json_int_t)cv->src->files[i].size));
	json_t *p = json_pack("{s:s, s:{s:i, s:i, s:i, s:b}, s:{s:s, s:b, s:o}}", "converter",
			      COLI_CONVERT_VERSION, "options", "expert_bits", cv->ct.bits[0], "dense_bits",
			      cv->ct.bits[1], "mtp_bits", cv->ct.bits[2], "allow_nonfinite", cv->o->allow_nonfinite,
			      "source", "dtype", cv->ct.model.dtype, "fp8", cv->ct.model.fp8, "shards", shards);
	char *s = p ? json_dumps(p, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(p);
	return s;
}

static int finish(conv *cv, coli_err *e)
{
	for (int s = 0; s < COLI_SEC_COUNT; s++)
		if (fsync(cv->fd[s]) < 0)
			return coli_errf(e, COLI_EIO, "%s/%s: fsync: %s", cv->o->out,
					 coli_section_file((coli_section)s), strerror(errno));
	cv->ct.dir = (char *)cv->o->out;
	cv->ct.provenance_json = provenance(cv);
	if (!cv->ct.provenance_json)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	int rc = coli_manifest_write(&cv->ct, e);
	cv->ct.dir = NULL;
	char *jp = coli_path_join(cv->o->out, JOURNAL_FILE);
	if (rc == 0 && jp)
		unlink(jp);
	free(jp);
	return rc;
}

static void summary(const conv *cv, double secs, int resumed_at)
{
	uint64_t this_run = 0;
	for (int k = resumed_at; k < cv->n_jobs; k++)
		this_run += cv->jobs[k].in_bytes;
	const coli_layout *L = &cv->ct.layout;
	uint64_t params = 0, out = 0;
	int records = 0;
	for (int i = 0; i < L->n_tensors; i++)
		params += (uint64_t)L->tensors[i].blob.rows * (uint64_t)L->tensors[i].blob.cols;
	for (int i = 0; i < L->n_elayers; i++) {
		records += L->elayers[i].n_experts;
		for (int p = 0; p < 3; p++)
			params += (uint64_t)L->elayers[i].n_experts * (uint64_t)L->elayers[i].part[p].rows *
				  (uint64_t)L->elayers[i].part[p].cols;
	}
	for (int s = 0; s < COLI_SEC_COUNT; s++)
		out += L->section_size[s];
	double gib = 1024.0 * 1024 * 1024;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("%s: %d tensors, %d expert records, %.3f GiB in, %.3f GiB out, %.2f bits/weight, %.1f s, %.2f GiB/s, peak RSS %.0f MiB%s\n",
	       cv->o->out, L->n_tensors, records, (double)cv->total_in / gib, (double)out / gib,
	       (double)out * 8 / (double)params, secs, (double)this_run / gib / (secs > 1e-6 ? secs : 1e-6),
	       (double)ru.ru_maxrss / 1024, resumed_at > 0 ? " (resumed)" : "");
}

static void conv_release(conv *cv)
{
	for (int s = 0; s < COLI_SEC_COUNT; s++)
		if (cv->fd[s] >= 0)
			close(cv->fd[s]);
	if (cv->direct_experts >= 0)
		close(cv->direct_experts);
	coli_layout_release(&cv->ct.layout);
	for (int i = 0; i < cv->ct.n_carried; i++)
		free(cv->ct.carried[i].file);
	free(cv->ct.carried);
	free(cv->ct.config_json);
	free(cv->ct.provenance_json);
	free(cv->jobs);
	free(cv->specs);
	free(cv->xspec);
	if (cv->src)
		source_close(cv);
	coli_ckpt_close(cv->src);
}

/* Appends note to e's message. */
static void add_note(coli_err *e, const char *note)
{
	size_t n = strlen(e->msg);
	snprintf(e->msg + n, sizeof(e->msg) - n, "%s", note);
}

/* A stop after the journal exists leaves an unfinished conversion (its temporaries removed): say
 * what is on disk and how to resume it or get rid of it. */
static void left_on_disk(const conv *cv, const journal *jr, coli_err *e)
{
	char note[512];
	int nonfinite = strstr(e->msg, "is not finite") != NULL; /* encode.c's non-finite stop */
	snprintf(note, sizeof(note),
		 "%s%s keeps the unfinished conversion (%.3f GiB of section files, allocated at full size, and %s: "
		 "%d of %d jobs done): rerun the same command%s to resume, or delete %s",
		 convert_stop_signal() ? ": " : "; ", cv->o->out, (double)section_bytes(cv) / (1 << 30), JOURNAL_FILE,
		 jr->next_job, cv->n_jobs, nonfinite && !cv->o->allow_nonfinite ? " with --allow-nonfinite" : "", cv->o->out);
	add_note(e, note);
	outdir_drop_tmp(cv->o->out);
}

/* A fresh start that failed before its journal was written keeps nothing (a folder of reserved,
 * empty section files would only hold the disk's space): the section and carried files go, with
 * their temporaries; a full disk is told the space the container needs and what is free. */
static void undo_fresh(conv *cv, coli_err *e)
{
	char note[256] = "";
	struct statvfs fs;
	remove_sections(cv);
	outdir_uncarry(cv->o->out);
	if (strstr(e->msg, "disk full") && !strstr(e->msg, "the container needs") && statvfs(cv->o->out, &fs) == 0)
		snprintf(note, sizeof(note), " (the container needs %.3f GiB with its carried files, %.3f GiB is free)",
			 (double)container_bytes(cv) / (1 << 30), (double)fs.f_bavail * (double)fs.f_frsize / (1 << 30));
	add_note(e, note);
	add_note(e, "; nothing kept");
}

int convert_run(const convert_opts *o, coli_err *e)
{
	conv cv = {.o = o, .fd = {-1, -1, -1}, .direct_experts = -1};
	journal jr = {0, 0, 0};
	double t0 = mono();
	int rc = plan(&cv, e), resumed = 0;
	if (rc == 0) { /* from here a signal stops the work between two jobs, resumable */
		convert_signals_writing();
		rc = outdir_prepare(o, e);
	}
	if (rc == 0 && (resumed = journal_load(&cv, &jr, e)) < 0)
		rc = -1;
	int fresh = rc == 0 && !resumed;
	if (rc == 0)
		rc = outdir_carry(&cv, e);
	if (rc == 0)
		rc = open_sections(&cv, fresh, e);
	if (rc == 0)
		open_direct_experts(&cv);
	if (rc == 0 && fresh)
		rc = journal_save(&cv, &jr, e);
	if (rc < 0 && fresh)
		undo_fresh(&cv, e);
	int start = jr.next_job;
	if (rc == 0 && (rc = pipeline_run(&cv, &jr, e)) < 0)
		left_on_disk(&cv, &jr, e);
	if (rc == 0 && convert_stop_signal()) { /* after the last job: its journal says all are done */
		coli_errf(e, COLI_EIO, "%s", convert_stop_name());
		left_on_disk(&cv, &jr, e);
		rc = -1;
	}
	if (rc == 0)
		rc = finish(&cv, e);
	if (rc == 0 && convert_stop_signal()) /* while the manifest was written: finished all the same */
		rc = coli_errf(e, COLI_EIO, "%s as it finished: %s is a finished container", convert_stop_name(), o->out);
	else if (rc == 0 && !o->quiet)
		summary(&cv, mono() - t0, start);
	conv_release(&cv);
	return rc;
}
