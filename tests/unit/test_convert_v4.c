/* test_convert_v4.c: deepseek_v4's checkpoint as V4 Flash ships it (the deepseek_v4-fp4-tiny
 * fixture), converted at 16 bits: every FP4 expert value (e2m1 code, low nibble the even column,
 * times 2^(scale - 127) per 32 columns) stored exactly as bf16, every FP8 matrix's codes kept
 * with its F8_E8M0 .scale bytes widened to float32 scales 2^(b - 127); decoded here with tables
 * of this file, not the converter's. Converted with the defaults: every fp4 record part holds
 * the source's code bytes and .scale bytes bit for bit, at 4.25 bits a weight. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "container.h"
#include "safetensors.h"
#include "t.h"

static const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

/* n bytes of section s at off (caller frees). */
static uint8_t *read_at(const coli_container *c, coli_section s, uint64_t off, uint64_t n)
{
	uint8_t *b = malloc(n);
	if (b && pread(c->fd[s], b, n, (off_t)off) != (ssize_t)n)
		free(b), b = NULL;
	return b;
}

/* The source tensor of part p of expert ex of expert layer x, and its .scale (NULL when absent). */
static const coli_st_tensor *expert_src(const coli_container *c, const coli_ckpt *src, const coli_lexperts *x, int ex,
					int p, const coli_st_tensor **scale)
{
	static const char *const w[3] = {"w1", "w3", "w2"};
	char name[128], sname[160];
	if (x->mtp)
		snprintf(name, sizeof(name), "mtp.%d.ffn.experts.%d.%s", x->layer - c->model.n_layers, ex, w[p]);
	else
		snprintf(name, sizeof(name), "layers.%d.ffn.experts.%d.%s", x->layer, ex, w[p]);
	snprintf(sname, sizeof(sname), "%s.scale", name);
	strcat(name, ".weight");
	*scale = coli_ckpt_find(src, sname);
	return coli_ckpt_find(src, name);
}

/* Every part of every expert record against the source's FP4 codes and scales; returns the
 * values that differ (bits), first one into why. */
static long check_experts(const coli_container *c, const coli_ckpt *src, char *why, size_t n)
{
	long bad = 0;
	for (int i = 0; i < c->layout.n_elayers; i++) {
		const coli_lexperts *x = &c->layout.elayers[i];
		for (int ex = 0; ex < x->n_experts; ex++) {
			uint8_t *rec = read_at(c, COLI_SEC_EXPERTS, coli_record_offset(x, ex), x->record_size);
			for (int p = 0; rec && p < 3; p++) {
				const coli_st_tensor *s, *t = expert_src(c, src, x, ex, p, &s);
				const char *name = t ? t->name : "(missing)";
				const coli_blob *b = &x->part[p];
				if (!t || !s || t->dtype != COLI_DT_I8 || s->dtype != COLI_DT_F8_E8M0 || b->enc != COLI_ENC_BF16) {
					bad++, snprintf(why, n, "%s: source or stored encoding not FP4 -> bf16", name);
					continue;
				}
				const uint8_t *codes = coli_ckpt_data(src, t), *sc = coli_ckpt_data(src, s);
				for (int64_t r = 0; r < b->rows; r++)
					for (int64_t col = 0; col < b->cols; col++) {
						uint8_t byte = codes[r * b->cols / 2 + col / 2];
						float want = e2m1[col % 2 ? byte >> 4 : byte & 15] *
							     ldexpf(1.0f, (int)sc[r * (b->cols / 32) + col / 32] - 127);
						uint16_t h;
						memcpy(&h, rec + x->part_off[p] + (uint64_t)r * b->row_bytes + 2 * col, 2);
						uint32_t u = (uint32_t)h << 16, v;
						memcpy(&v, &want, 4);
						if (u != v && !bad++)
							snprintf(why, n, "%s [%lld, %lld]: stored 0x%08x, source %g", name, (long long)r,
								 (long long)col, u, (double)want);
					}
			}
			free(rec);
		}
	}
	return bad;
}

/* Every part of every fp4 record: its codes the source's I8 bytes, its scales the source's
 * F8_E8M0 bytes, the padding zero; returns the parts that differ, the first into why. The
 * parts' bits per weight (codes and scales) into *bpw. */
static long check_fp4_records(const coli_container *c, const coli_ckpt *src, double *bpw, char *why, size_t n)
{
	long bad = 0;
	uint64_t bytes = 0, weights = 0;
	for (int i = 0; i < c->layout.n_elayers; i++) {
		const coli_lexperts *x = &c->layout.elayers[i];
		for (int ex = 0; ex < x->n_experts; ex++) {
			uint8_t *rec = read_at(c, COLI_SEC_EXPERTS, coli_record_offset(x, ex), x->record_size);
			for (int p = 0; rec && p < 3; p++) {
				const coli_blob *b = &x->part[p];
				const coli_st_tensor *s, *t = expert_src(c, src, x, ex, p, &s);
				const uint8_t *at = rec + x->part_off[p];
				int same = t && s && b->enc == COLI_ENC_FP4 && t->nbytes == b->codes_bytes &&
					   s->nbytes == b->scales_bytes && memcmp(at, coli_ckpt_data(src, t), t->nbytes) == 0 &&
					   memcmp(at + b->scales_off, coli_ckpt_data(src, s), s->nbytes) == 0;
				for (uint64_t k = b->codes_bytes; same && k < b->scales_off; k++)
					same = at[k] == 0;
				if (!same && !bad++)
					snprintf(why, n, "layer %d expert %d part %d: enc %s, codes or scales differ from %s", x->layer,
						 ex, p, coli_enc_name(b->enc), t ? t->name : "(missing)");
				bytes += b->nbytes;
				weights += (uint64_t)b->rows * (uint64_t)b->cols;
			}
			if (!rec)
				bad++, snprintf(why, n, "record unreadable");
			free(rec);
		}
	}
	*bpw = weights ? (double)bytes * 8 / (double)weights : 0;
	return bad;
}

/* Every FP8 matrix: codes as the source's bytes, scales 2^(b - 127) of its .scale bytes. */
static long check_fp8(const coli_container *c, const coli_ckpt *src, int *matrices, char *why, size_t n)
{
	long bad = 0;
	for (int i = 0; i < c->layout.n_tensors; i++) {
		const coli_ltensor *lt = &c->layout.tensors[i];
		const coli_st_tensor *t = coli_ckpt_find(src, lt->name);
		if (!t || t->dtype != COLI_DT_F8_E4M3)
			continue;
		char sname[256];
		snprintf(sname, sizeof(sname), "%.*s.scale", (int)(strlen(lt->name) - 7), lt->name);
		const coli_st_tensor *s = coli_ckpt_find(src, sname);
		uint8_t *blob = read_at(c, lt->section, lt->offset, lt->blob.nbytes);
		(*matrices)++;
		if (!s || !blob || lt->blob.enc != COLI_ENC_FP8 || memcmp(blob, coli_ckpt_data(src, t), t->nbytes)) {
			bad++, snprintf(why, n, "%s: codes or encoding differ", lt->name);
			free(blob);
			continue;
		}
		const uint8_t *sc = coli_ckpt_data(src, s);
		for (uint64_t k = 0; k < s->nelem; k++) {
			float got, want = ldexpf(1.0f, (int)sc[k] - 127);
			memcpy(&got, blob + lt->blob.scales_off + 4 * k, 4);
			if (got != want && !bad++)
				snprintf(why, n, "%s: scale %llu is %g, .scale byte %u", lt->name, (unsigned long long)k,
					 (double)got, sc[k]);
		}
		free(blob);
	}
	return bad;
}

int main(void)
{
	char dir[] = "/tmp/coli-test-convert-v4.XXXXXX", src[600], out[600], cmd[1600], why[512] = "";
	if (!mkdtemp(dir))
		return 1;
	snprintf(src, sizeof(src), "%s/deepseek_v4-fp4-tiny/checkpoint", t_fixtures());
	snprintf(out, sizeof(out), "%s/v4.coli", dir);
	snprintf(cmd, sizeof(cmd), "bin/coli-convert -q --expert-bits 16 --dense-bits 16 --mtp-bits 16 %s %s", src, out);
	int st = system(cmd);
	coli_container *c = NULL;
	coli_ckpt *ck = NULL;
	coli_err e = {0, ""};
	int ok = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && coli_container_open(&c, out, &e) == 0 &&
		 coli_ckpt_open(&ck, src, &e) == 0;
	T_CHECK("convert v4: the FP4 fixture converts at 16 bits and opens", ok, "status %d: %s", st, e.msg);
	if (ok) {
		long bad = check_experts(c, ck, why, sizeof(why));
		T_CHECK("convert v4: every FP4 expert value stored exactly as bf16 (main and MTP layers)",
			bad == 0 && c->layout.n_elayers == 6, "%ld values differ, %d expert layers; first: %s", bad,
			c->layout.n_elayers, why);
		int matrices = 0;
		bad = check_fp8(c, ck, &matrices, why, sizeof(why));
		T_CHECK("convert v4: every FP8 matrix's codes kept, its UE8M0 scales as float32 2^(b - 127)",
			bad == 0 && matrices > 0, "%ld differ over %d matrices; first: %s", bad, matrices, why);
	}
	coli_container_close(c);
	c = NULL;
	snprintf(out, sizeof(out), "%s/v4-fp4.coli", dir);
	snprintf(cmd, sizeof(cmd), "bin/coli-convert -q %s %s", src, out);
	st = system(cmd);
	ok = ok && st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && coli_container_open(&c, out, &e) == 0;
	T_CHECK("convert v4: the FP4 fixture converts with the defaults (experts kept as fp4) and opens", ok,
		"status %d: %s", st, e.msg);
	if (ok) {
		double bpw = 0;
		long bad = check_fp4_records(c, ck, &bpw, why, sizeof(why));
		T_CHECK("convert v4: every fp4 record part holds the source's codes and UE8M0 scale bytes bit for bit (main and MTP layers)",
			bad == 0 && c->layout.n_elayers == 6, "%ld parts differ, %d expert layers; first: %s", bad,
			c->layout.n_elayers, why);
		T_CHECK("convert v4: fp4 record parts take 4.25 bits a weight (codes 4, a scale byte per 32)", bpw == 4.25,
			"%.4f bits a weight", bpw);
	}
	coli_container_close(c);
	coli_ckpt_close(ck);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	T_CHECK("convert v4: scratch folder removed", system(cmd) == 0, "rm failed");
	T_EXIT();
}
