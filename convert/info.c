/* info.c: `coli-convert --info` and `--verify`: what a container holds, and a full check. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert.h"

/* "123.4 MiB": a size in the largest binary unit that keeps it >= 1. */
static const char *human(uint64_t b, char buf[32])
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)b;
	int u = 0;
	while (v >= 1024 && u < 4)
		v /= 1024, u++;
	snprintf(buf, 32, u ? "%.2f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

static uint64_t class_bytes(const coli_layout *L, coli_section s, coli_tclass cls)
{
	uint64_t n = 0;
	for (int i = 0; i < L->n_tensors; i++)
		if (L->tensors[i].section == s && L->tensors[i].cls == cls)
			n += L->tensors[i].blob.nbytes;
	return n;
}

static void print_records(const coli_container *c)
{
	uint64_t main_bytes = 0, mtp_bytes = 0;
	int main_layers = 0;
	for (int i = 0; i < c->layout.n_elayers; i++) {
		const coli_lexperts *x = &c->layout.elayers[i];
		uint64_t b = x->record_size * (uint64_t)x->n_experts;
		*(x->mtp ? &mtp_bytes : &main_bytes) += b;
		main_layers += !x->mtp;
	}
	const coli_lexperts *x = c->layout.n_elayers ? &c->layout.elayers[0] : NULL;
	if (x) {
		uint64_t parts = x->part[0].nbytes + x->part[1].nbytes + x->part[2].nbytes, weights = 0;
		for (int p = 0; p < 3; p++)
			weights += (uint64_t)x->part[p].rows * (uint64_t)x->part[p].cols;
		printf("record      %llu bytes (gate %s [%lld, %lld], up %s, down %s [%lld, %lld]; parts %llu bytes, %.2f bits a "
		       "weight), 4096-aligned\n",
		       (unsigned long long)x->record_size, coli_enc_name(x->part[0].enc), (long long)x->part[0].rows,
		       (long long)x->part[0].cols, coli_enc_name(x->part[1].enc), coli_enc_name(x->part[2].enc),
		       (long long)x->part[2].rows, (long long)x->part[2].cols, (unsigned long long)parts,
		       (double)parts * 8 / (double)weights);
	}
	char b1[32], b2[32];
	printf("experts     %s in %d MoE layers x %d records", human(main_bytes, b1), main_layers, x ? x->n_experts : 0);
	if (mtp_bytes)
		printf(" + %s MTP records", human(mtp_bytes, b2));
	printf(" (experts.bin %s with its header)\n", human(c->layout.section_size[COLI_SEC_EXPERTS], b1));
}

/* The MTP layer's part of mtp.bin, or that there is none (mtp.bin then holds only its header). */
static void print_mtp(const coli_container *c)
{
	char b1[32], b2[32];
	uint64_t size = c->layout.section_size[COLI_SEC_MTP];
	if (c->model.n_mtp_layers)
		printf("mtp         %s (mtp.bin)\n", human(size, b1));
	else
		printf("mtp         none (mtp.bin holds only its %s header)\n", human(size, b2));
}

/* The path of a container: a folder. */
static int container_folder(const char *path, coli_err *e)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return coli_errf(e, COLI_EIO, "%s: %s", path, errno == ENOENT ? "no such folder" : strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return coli_errf(e, COLI_EDATA, "%s: not a folder, so not a coli container (a folder holding manifest.coli)",
				 path);
	return 0;
}


int info_print(const char *path, coli_err *e)
{
	coli_container *c;
	if (container_folder(path, e) < 0 || coli_container_open(&c, path, e) < 0)
		return -1;
	const coli_model *m = &c->model;
	const coli_layout *L = &c->layout;
	int moe = 0;
	for (int l = 0; l < m->n_layers; l++)
		moe += m->is_moe[l];
	printf("container   %s (format %u)\n", path, COLI_CONTAINER_VERSION);
	printf("identity    %s\n", c->identity_hex);
	printf("family      %s\n", coli_family_name(m->family));
	printf("layers      %d (%d dense, %d MoE) + %d MTP\n", m->n_layers, m->n_layers - moe, moe, m->n_mtp_layers);
	printf("experts     %d per MoE layer, top-%d, %d shared\n", m->n_experts, m->top_k, m->n_shared_experts);
	printf("bits        expert %d, dense %d, mtp %d (small tensors f32)\n", c->bits[0], c->bits[1], c->bits[2]);
	char b1[32], b2[32], b3[32];
	printf("dense       %s (dense.bin: matrices %s, small f32 %s)\n", human(L->section_size[COLI_SEC_DENSE], b1),
	       human(class_bytes(L, COLI_SEC_DENSE, COLI_TC_MATRIX), b2), human(class_bytes(L, COLI_SEC_DENSE, COLI_TC_SMALL), b3));
	print_mtp(c);
	print_records(c);
	char b4[32];
	printf("total       %s: dense.bin %s + mtp.bin %s + experts.bin %s\n",
	       human(L->section_size[0] + L->section_size[1] + L->section_size[2], b1), human(L->section_size[COLI_SEC_DENSE], b2),
	       human(L->section_size[COLI_SEC_MTP], b3), human(L->section_size[COLI_SEC_EXPERTS], b4));
	printf("provenance  %s\n", c->provenance_json);
	coli_container_close(c);
	return 0;
}

static void verify_progress(void *ctx, uint64_t done, uint64_t total)
{
	if (!*(int *)ctx)
		progress_update(done, total, done == total);
}

int verify_run(const char *path, int quiet, coli_err *e)
{
	coli_container *c;
	if (container_folder(path, e) < 0 || coli_container_open(&c, path, e) < 0)
		return -1;
	int rc = coli_container_verify(c, verify_progress, &quiet, e);
	if (rc == 0 && !quiet) {
		uint64_t total = 0;
		int records = 0;
		for (int s = 0; s < COLI_SEC_COUNT; s++)
			total += c->layout.section_size[s];
		for (int i = 0; i < c->layout.n_elayers; i++)
			records += c->layout.elayers[i].n_experts;
		char b1[32];
		printf("%s: ok: %d tensors, %d expert records, %d carried files, %s verified\n", path,
		       c->layout.n_tensors, records, c->n_carried, human(total, b1));
	}
	coli_container_close(c);
	return rc;
}
