/* main.c: coli-synth's top-level flow: tokenizer, config, plan, files, measurement. */
#include "synth.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "fileio.h"

/* ---- generation ------------------------------------------------------------------------------ */

typedef struct run {
	synth_opts *o;
	synth_tok tok;
	int have_tok;
	synth_shape shape;
	char *config, *generation;
	coli_model m;
	coli_tensor_spec *spec;
	int n_spec;
	synth_plan plan;
	synth_table table;
	synth_files files;
	int made_dir; /* the output folder is ours to remove on failure */
	int had_marker; /* an earlier coli-synth run wrote the folder */
} run;

static int load_tokenizer(run *r, coli_err *e)
{
	synth_opts *o = r->o;
	if (o->no_tokenizer)
		return 0;
	char *def_path = o->tokenizer ? NULL : synth_tok_default_path(o->family);
	const char *path = o->tokenizer ? o->tokenizer : def_path;
	int rc = path ? synth_tok_load(&r->tok, path, e)
		      : coli_errf(e, COLI_EIO, "cannot locate the default tokenizer");
	if (rc && !o->tokenizer)
		coli_errf(e, COLI_EIO, "%s: cannot read the default tokenizer (run 'make deps', or "
			  "pass --tokenizer PATH or --no-tokenizer)", path ? path : "?");
	free(def_path);
	r->have_tok = rc == 0;
	return rc;
}

static int choose_vocab(run *r, coli_err *e)
{
	synth_opts *o = r->o;
	int64_t need = r->have_tok ? r->tok.n_tokens : 1;
	if (o->vocab < 0)
		o->vocab = r->have_tok ? (int)((need + 127) / 128 * 128) : 32768;
	if (o->vocab < need)
		return coli_errf(e, COLI_EUSAGE, "--vocab: '%d' is less than the tokenizer's %lld tokens",
				 o->vocab, (long long)need);
	return 0;
}

/* config.json text -> coli_model (so names and shapes are libcoli's) -> plan -> table. */
static int build(run *r, coli_err *e)
{
	synth_shape_derive(&r->shape, r->o, r->have_tok ? &r->tok : NULL);
	r->config = synth_config_json(r->o, &r->shape);
	r->generation = synth_generation_json(r->o, &r->shape);
	if (!r->config || !r->generation)
		return coli_errf(e, COLI_ENOMEM, "out of memory building config.json");
	if (coli_model_parse(&r->m, r->config, "config.json", e)) {
		e->code = COLI_EUSAGE; /* the options made a config libcoli rejects */
		return -1;
	}
	if (coli_model_tensors(&r->m, &r->spec, &r->n_spec, e) ||
	    synth_plan_build(&r->plan, &r->m, r->o, r->spec, r->n_spec, e))
		return -1;
	return synth_table_build(&r->table, &r->plan, r->spec, r->n_spec, r->o, e);
}

static int copy_file(run *r, const char *src, const char *name, coli_err *e)
{
	char *data;
	size_t n;
	if (coli_read_file(src, &data, &n, e))
		return -1;
	int rc = synth_write_small(&r->files, r->o->out, name, data, n, e);
	free(data);
	return rc;
}

/* 1 when dir holds anything but "." and ".."; -1 on error. */
static int non_empty(const char *dir, coli_err *e)
{
	DIR *d = opendir(dir);
	if (!d)
		return coli_errf(e, errno == ENOTDIR ? COLI_EUSAGE : COLI_EIO, "%s: %s", dir, strerror(errno));
	int found = 0;
	for (struct dirent *de; !found && (de = readdir(d));)
		found = strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return found;
}

/* An existing folder is written into only when it is empty or holds coli-synth's marker (so an
 * earlier run's checkpoint is replaced, never someone's real one), or with --force. */
static int refuse_foreign(run *r, const char *marker, coli_err *e)
{
	const char *dir = r->o->out;
	if (mkdir(dir, 0777) == 0)
		return r->made_dir = 1, 0;
	if (errno != EEXIST)
		return coli_errf(e, COLI_EIO, "%s: %s", dir, strerror(errno));
	if (access(marker, F_OK) == 0)
		return r->had_marker = 1, 0;
	int full = non_empty(dir, e);
	if (full > 0 && !r->o->force)
		return coli_errf(e, COLI_EUSAGE, "%s: folder is not empty and coli-synth did not write it (no %s); "
				 "refusing to replace what is there: choose an empty folder or use --force", dir,
				 SYNTH_MARKER);
	return full < 0 ? -1 : 0;
}

/* The marker is written before anything else; a failed run removes it again unless it was
 * there before. */
static int claim_dir(run *r, coli_err *e)
{
	static const char text[] = SYNTH_TOOL " wrote this folder\n";
	char *marker = coli_path_join(r->o->out, SYNTH_MARKER);
	int rc = marker ? refuse_foreign(r, marker, e) : coli_errf(e, COLI_ENOMEM, "out of memory");
	if (rc == 0 && !r->had_marker &&
	    (synth_files_add(&r->files, marker, e) || coli_write_atomic(marker, text, sizeof(text) - 1, e)))
		rc = -1;
	free(marker);
	return rc;
}

static int write_small_files(run *r, coli_err *e)
{
	const char *dir = r->o->out;
	if (claim_dir(r, e))
		return -1;
	if (r->have_tok && copy_file(r, r->tok.json_path, "tokenizer.json", e))
		return -1;
	if (r->have_tok && r->tok.config_path &&
	    copy_file(r, r->tok.config_path, "tokenizer_config.json", e))
		return -1;
	if (synth_write_small(&r->files, dir, "config.json", r->config, strlen(r->config), e))
		return -1;
	return synth_write_small(&r->files, dir, "generation_config.json", r->generation,
				 strlen(r->generation), e);
}

static int written(const synth_files *f, const char *path)
{
	for (int i = 0; i < f->n; i++)
		if (!strcmp(f->path[i], path))
			return 1;
	return 0;
}

/* Shards and indexes of an earlier run in the same folder would confuse readers; remove them
 * (save_pretrained does the same). */
static void remove_stale(run *r)
{
	DIR *d = opendir(r->o->out);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		const char *n = de->d_name;
		size_t len = strlen(n);
		int shard = !strncmp(n, "model", 5) && len > 12 && !strcmp(n + len - 12, ".safetensors");
		if (!shard && strcmp(n, "model.safetensors.index.json"))
			continue;
		char *p = coli_path_join(r->o->out, n);
		if (p && !written(&r->files, p))
			unlink(p);
		free(p);
	}
	if (d)
		closedir(d);
}

static void on_signal(int sig)
{
	(void)sig;
	synth_interrupted = 1;
}

static void catch_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

static int write_all_files(run *r, coli_err *e)
{
	uint64_t bytes = 0;
	double t0 = coli_now();
	catch_signals();
	if (write_small_files(r, e) ||
	    synth_write_shards(&r->table, &r->plan, r->o->out, r->o->threads,
			       !r->o->quiet && isatty(2), &r->files, &bytes, e)) {
		synth_files_remove_all(&r->files);
		if (r->made_dir)
			rmdir(r->o->out);
		return -1;
	}
	remove_stale(r);
	double dt = coli_now() - t0;
	fprintf(stderr, SYNTH_TOOL ": wrote %.2f GB (%d shard%s, %d tensors) to %s in %.2f s, "
		"%.2f GB/s\n", bytes / 1e9, r->table.n_shards, r->table.n_shards > 1 ? "s" : "",
		r->table.n_stored, r->o->out, dt, dt > 0 ? bytes / 1e9 / dt : 0);
	if (!r->plan.predict_reachable)
		fprintf(stderr, SYNTH_TOOL ": --predict %.2f is below the lowest recall reachable "
			"with %d experts top-%d (%.2f); using that\n", r->o->predict,
			r->m.n_experts, r->m.top_k, r->plan.mc_recall);
	return 0;
}

/* --dry-run: the config and what would be written, on stdout. */
static void dry_run(const run *r)
{
	fputs(r->config, stdout);
	printf("%.2f GB in %d shard%s, %d tensors\n", r->table.total_size / 1e9,
	       r->table.n_shards, r->table.n_shards > 1 ? "s" : "", r->table.n_stored);
}

static void run_release(run *r)
{
	synth_table_release(&r->table);
	synth_plan_release(&r->plan);
	synth_files_release(&r->files);
	synth_tok_release(&r->tok);
	free(r->spec);
	free(r->config);
	free(r->generation);
}

static int generate(synth_opts *o, coli_err *e)
{
	run r;
	memset(&r, 0, sizeof(r));
	r.o = o;
	int rc = load_tokenizer(&r, e) || choose_vocab(&r, e) || build(&r, e) ? -1 : 0;
	if (rc == 0 && o->dry_run)
		dry_run(&r);
	else if (rc == 0 && o->out)
		rc = write_all_files(&r, e);
	if (rc == 0 && o->gguf && !o->dry_run) {
		catch_signals();
		rc = synth_gguf_write(o->gguf, &r.plan, &r.table, r.have_tok ? &r.tok : NULL,
				      &r.shape, o, e);
	}
	if (rc == 0 && o->measure_tokens > 0 && !o->dry_run) {
		synth_src src;
		synth_measure_opts mo = {o->measure_tokens, o->threads, o->quiet, o->seed, &r.plan};
		synth_src_regen(&src, &r.plan, &r.table);
		rc = synth_measure(&src, &mo, e);
	}
	run_release(&r);
	return rc;
}

static int measure_only(synth_opts *o, coli_err *e)
{
	coli_model m;
	synth_src src;
	if (synth_src_ckpt_open(&src, &m, o->measure_only, e))
		return -1;
	synth_measure_opts mo = {o->measure_tokens, o->threads, o->quiet, o->seed, NULL};
	catch_signals();
	int rc = synth_measure(&src, &mo, e);
	synth_src_ckpt_close(&src);
	return rc;
}

/* --help on stdout, exit status 0. */
static int print_help(void)
{
	char *text = synth_opts_help();
	fputs(text ? text : SYNTH_TOOL ": out of memory formatting --help\n", stdout);
	free(text);
	return 0;
}

int main(int argc, char **argv)
{
	synth_opts o;
	coli_err e = {0, ""};
	synth_opts_init(&o);
	int rc = synth_opts_parse(&o, argc, argv, &e);
	if (rc == 0 && o.help)
		return print_help();
	if (rc == 0)
		rc = o.measure_only ? synth_opts_resolve_measure(&o, &e) : synth_opts_resolve(&o, &e);
	if (rc == 0)
		rc = o.measure_only ? measure_only(&o, &e) : generate(&o, &e);
	if (rc == 0)
		return 0;
	fprintf(stderr, SYNTH_TOOL ": %s\n", e.msg);
	if (e.code == COLI_EUSAGE)
		fprintf(stderr, "(see '" SYNTH_TOOL " --help')\n");
	return coli_err_exit_status(&e);
}
