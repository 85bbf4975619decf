/* checkpoint.c: what coli-plan plans for: the container a folder holds (manifest.coli), or the one
 * coli-convert would write from the Hugging Face checkpoint the folder is (config.json, with or
 * without its safetensors), described by the converter's own decision (coli_container_describe)
 * rather than read; and what the plan says of a described one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "planner.h"

#define GIB 1073741824.0

static int has(const char *dir, const char *file)
{
	char *path = coli_path_join(dir, file);
	int yes = path && access(path, F_OK) == 0;
	free(path);
	return yes;
}

/* --on DIR: an existing folder (the disk the probe measured is looked up from it). */
static int check_on(const char *on, coli_err *e)
{
	struct stat st;
	if (stat(on, &st) < 0)
		return coli_errf(e, COLI_EUSAGE, "--on %s: %s (the folder coli-convert would write the container in, "
				 "on a disk the probe measured)", on, errno == ENOENT ? "no such folder" : strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return coli_errf(e, COLI_EUSAGE, "--on %s: not a folder (the folder coli-convert would write the container "
				 "in, on a disk the probe measured)", on);
	return 0;
}

/* The container coli-convert would write from checkpoint folder dir, with the dtypes of its
 * safetensors' headers when it has them, else the release's. */
static int describe(plan *p, const char *dir, coli_err *e)
{
	const plan_args *a = p->a;
	coli_ckpt *src = NULL;
	int skipped;
	if (a->n_mirrors)
		return coli_errf(e, COLI_EUSAGE, "--mirror %s: a copy of a container; %s is a checkpoint, whose container does "
				 "not exist yet (convert it, stage the mirror, and plan from the container)", a->mirrors[0], dir);
	if (a->on && check_on(a->on, e) < 0)
		return -1;
	if (!realpath(dir, p->ckpt_abs))
		return coli_errf(e, COLI_EIO, "%s: %s", dir, strerror(errno));
	p->from_headers = has(dir, "model.safetensors.index.json") || has(dir, "model.safetensors");
	if (!(p->ct = coli_calloc(1, sizeof(*p->ct), e)))
		return -1;
	for (int s = 0; s < COLI_SEC_COUNT; s++)
		p->ct->fd[s] = -1;
	p->described = 1;
	if (p->from_headers && coli_ckpt_open(&src, dir, e) < 0)
		return -1;
	int rc = coli_container_describe(p->ct, dir, src, a->bits, &skipped, e);
	coli_ckpt_close(src);
	if (rc == 0 && skipped) /* as coli-convert says it */
		plan_note_add(p, "container", "", "%d tensors of the vision tower (model.visual.*) left out: the container "
			      "holds the text model", skipped);
	return rc;
}

int plan_open_container(plan *p, coli_err *e)
{
	const plan_args *a = p->a;
	const char *dir = a->model;
	if (access(dir, F_OK) == 0 && !has(dir, COLI_MANIFEST_FILE))
		return has(dir, "config.json") ? describe(p, dir, e)
		       : coli_errf(e, COLI_EDATA, "%s: neither a coli container (manifest.coli) nor a Hugging Face "
				   "checkpoint (config.json)", dir);
	static const char *const bit_opt[3] = {"--expert-bits", "--dense-bits", "--mtp-bits"};
	for (int i = 0; i < 3; i++)
		if (a->bits[i])
			return coli_errf(e, COLI_EUSAGE, "%s %d: for a checkpoint folder (the encodings coli-convert would "
					 "choose); %s is a container, whose encodings are its own", bit_opt[i], a->bits[i], dir);
	if (a->on)
		return coli_errf(e, COLI_EUSAGE, "--on %s: for a checkpoint folder (where its container would be written); "
				 "%s is a container, read where it is", a->on, dir);
	return coli_container_open(&p->ct, dir, e);
}

/* Bytes of section s's tensors by encoding, as "q4 3.81 GiB, f32 0.11 GiB". */
static void encodings(const coli_layout *L, coli_section s, char *out, size_t cap)
{
	double by[COLI_ENC_COUNT] = {0};
	size_t n = 0;
	for (int i = 0; i < L->n_tensors; i++)
		if (L->tensors[i].section == s)
			by[L->tensors[i].blob.enc] += (double)L->tensors[i].blob.nbytes;
	out[0] = 0;
	for (int k = 0; k < COLI_ENC_COUNT && n < cap; k++)
		if (by[k] > 0)
			n += (size_t)snprintf(out + n, cap - n, "%s%s %.2f GiB", n ? ", " : "", coli_enc_name((coli_enc)k),
					      by[k] / GIB);
}

/* The dtypes the description assumed. */
static void dtypes(const plan *p, char *out, size_t cap)
{
	const coli_model *m = &p->ct->model;
	if (p->from_headers) {
		snprintf(out, cap, "the dtypes of its safetensors' headers");
		return;
	}
	snprintf(out, cap, "config.json alone: the release's dtypes (%s%s%s)", *m->dtype ? m->dtype : "bfloat16",
		 m->fp8 ? ", F8_E4M3 matrices with block scales" : "", m->fp4_experts ? ", FP4 routed experts" : "");
}

void plan_print_container(const plan *p)
{
	const coli_container *ct = p->ct;
	const coli_layout *L = &ct->layout;
	char enc[256], dt[160];
	if (!p->described)
		return;
	dtypes(p, dt, sizeof(dt));
	printf("container not converted: what coli-convert %s OUT.coli --expert-bits %d --dense-bits %d --mtp-bits %d "
	       "would write (%s), identity %.16s...\n", p->a->model, ct->bits[0], ct->bits[1], ct->bits[2], dt,
	       ct->identity_hex);
	for (int s = COLI_SEC_DENSE; s <= COLI_SEC_MTP; s++) {
		encodings(L, (coli_section)s, enc, sizeof(enc));
		printf("  %s %.2f GiB%s%s\n", coli_section_file((coli_section)s), L->section_size[s] / GIB, *enc ? ": " : "",
		       enc);
	}
	printf("  experts.bin %.2f GiB:", L->section_size[COLI_SEC_EXPERTS] / GIB);
	for (int i = 0, j; i < L->n_elayers; i = j) { /* runs of layers alike */
		const coli_lexperts *x = &L->elayers[i];
		for (j = i + 1; j < L->n_elayers; j++) {
			const coli_lexperts *y = &L->elayers[j];
			if (y->mtp != x->mtp || y->n_experts != x->n_experts || y->record_size != x->record_size ||
			    y->part[0].enc != x->part[0].enc || y->part[2].enc != x->part[2].enc)
				break;
		}
		printf("%s %d %slayer%s x %d records of %llu bytes (%s gate, up, down)", i ? "," : "", j - i, x->mtp ? "MTP " : "",
		       j - i > 1 ? "s" : "", x->n_experts, (unsigned long long)x->record_size, coli_enc_name(x->part[0].enc));
	}
	printf("\n");
}

json_t *plan_container_json(const plan *p)
{
	const coli_container *ct = p->ct;
	json_t *c = json_pack("{s:s, s:s}", "path", p->copies[0].abs, "identity", ct->identity_hex);
	if (p->described)
		json_object_set_new(c, "described", json_pack("{s:s, s:s, s:{s:i, s:i, s:i}, s:{s:I, s:I, s:I}}", "checkpoint",
							      p->ckpt_abs, "dtypes", p->from_headers ? "safetensors" : "release",
							      "bits", "expert", ct->bits[0], "dense", ct->bits[1], "mtp",
							      ct->bits[2], "sections", "dense",
							      (json_int_t)ct->layout.section_size[COLI_SEC_DENSE], "mtp",
							      (json_int_t)ct->layout.section_size[COLI_SEC_MTP], "experts",
							      (json_int_t)ct->layout.section_size[COLI_SEC_EXPERTS]));
	return c;
}
