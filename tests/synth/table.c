/* table.c: the stored tensors (kind, dtype, distribution, shard, offset) of a synthetic model.
 *
 * Shards are filled in module order (embeddings, layers, final norm, lm_head) as HF's
 * save_pretrained does, a new shard starting when the next tensor would pass --shard-size;
 * inside a shard the data is in name order (as the safetensors library writes it), so each
 * "<w>_scale_inv" directly follows its fp8 weight.
 */
#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

/* The RMSNorms a (1 + w) family (qwen3_5_moe) stores centred on 0, as libcoli's engine reads
 * them; the Gated DeltaNet's gated norm is a plain one. */
static int offset_norm(const coli_model *m, coli_role r)
{
	return m->norm_offset && (r == COLI_R_ATTN_NORM || r == COLI_R_MLP_NORM || r == COLI_R_FINAL_NORM ||
				  r == COLI_R_Q_NORM || r == COLI_R_K_NORM || r == COLI_R_ENORM ||
				  r == COLI_R_HNORM || r == COLI_R_HEAD_NORM);
}

/* deepseek_v4's tensors by role: mHC's fn like a linear, its scales like norms, its bases, the
 * sinks and the compressors' position biases small like biases (F32 all); the hash table. */
static synth_kind v4_kind(const coli_tensor_spec *s)
{
	switch (s->role) {
	case COLI_R_EMBED: return SK_EMBED;
	case COLI_R_LM_HEAD: return SK_HEAD;
	case COLI_R_ROUTER: return SK_ROUTER;
	case COLI_R_CORR_BIAS: return SK_CORR;
	case COLI_R_TID2EID: return SK_TID2EID;
	case COLI_R_HC_ATTN_SCALE: case COLI_R_HC_FFN_SCALE: case COLI_R_HC_HEAD_SCALE: return SK_NORM;
	case COLI_R_HC_ATTN_BASE: case COLI_R_HC_FFN_BASE: case COLI_R_HC_HEAD_BASE: case COLI_R_SINK:
	case COLI_R_CMP_APE: case COLI_R_IDX_CMP_APE: return SK_BIAS;
	case COLI_R_WO_B: return SK_OUT;
	case COLI_R_SH_DOWN: return SK_DOWN;
	case COLI_R_EXPERT: return s->proj == COLI_PROJ_DOWN ? SK_DOWN : SK_LINEAR;
	default: return s->ndim == 1 ? SK_NORM : SK_LINEAR;
	}
}

static synth_kind kind_of(const coli_tensor_spec *s, const coli_model *m)
{
	if (m->family == COLI_FAM_DEEPSEEK_V4)
		return v4_kind(s);
	if (ends_with(s->name, "embed_tokens.weight"))
		return SK_EMBED;
	if (ends_with(s->name, "lm_head.weight") || ends_with(s->name, "shared_head.head.weight"))
		return SK_HEAD;
	if (ends_with(s->name, "e_score_correction_bias"))
		return SK_CORR;
	if (s->role == COLI_R_ROUTER)
		return SK_ROUTER;
	if (offset_norm(m, s->role))
		return SK_NORM0;
	if (s->ndim == 1)
		return ends_with(s->name, ".bias") ? SK_BIAS : SK_NORM;
	if (s->cls == COLI_TC_EXPERT)
		return s->proj == COLI_PROJ_DOWN ? SK_DOWN : SK_LINEAR;
	if (ends_with(s->name, "o_proj.weight") || s->role == COLI_R_LIN_OUT)
		return SK_OUT;
	if (ends_with(s->name, "down_proj.weight"))
		return SK_DOWN;
	return SK_LINEAR;
}

static float std_of(const synth_plan *p, const synth_tensor *t)
{
	float in = (float)t->cols, H = (float)p->m->hidden_size;
	switch (t->kind) {
	case SK_EMBED: return 1.0f;
	case SK_NORM: case SK_NORM0: return 0.1f;
	case SK_BIAS: return 0.02f;
	case SK_ROUTER: return p->router_std;
	case SK_HEAD: return 4.0f / sqrtf(H);
	case SK_OUT: return p->layer[t->layer].s_out / sqrtf(in);
	case SK_DOWN: return p->layer[t->layer].s_down / sqrtf(in);
	default: return 1.0f / sqrtf(in);
	}
}

/* Values are keyed by name, except that the MTP copies of the embeddings and of lm_head hold
 * the same values as the originals (as in DeepSeek-V3 checkpoints). */
static uint64_t key_of(const synth_plan *p, const synth_tensor *t)
{
	if (t->kind == SK_EMBED)
		return synth_key(p->seed, "model.embed_tokens.weight");
	if (t->kind == SK_HEAD)
		return synth_key(p->seed, "lm_head.weight");
	return synth_key(p->seed, t->name);
}

static int fill(synth_tensor *t, const coli_tensor_spec *s, const synth_plan *p, const synth_opts *o,
		coli_err *e)
{
	snprintf(t->name, sizeof(t->name), "%s", s->name);
	t->ndim = s->ndim;
	t->rows = s->ndim == 2 ? s->shape[0] : 1;
	t->cols = s->ndim == 2 ? s->shape[1] : s->shape[0];
	t->kind = kind_of(s, p->m);
	/* as the family's release stores it (formats/release.c), with the config this run wrote */
	t->dtype = coli_model_release_dtype(p->m, s, synth_layout_fused(p->m, o));
	t->ue8m0 = p->m->family == COLI_FAM_DEEPSEEK_V4 && t->dtype == COLI_DT_F8_E4M3;
	t->layer = s->layer;
	t->expert = s->expert;
	t->key = key_of(p, t);
	t->std = std_of(p, t);
	t->scale_of = t->lead = -1;
	if (synth_layout_name(t, s, p->m, o, e))
		return -1;
	t->nbytes = (uint64_t)t->rows * synth_row_bytes(t);
	if (t->dtype == COLI_DT_I8) /* FP4: stored [rows, cols / 2], two codes a byte */
		t->sndim = 2, t->sshape[0] = t->rows, t->sshape[1] = t->cols / 2;
	if (t->kind == SK_DOWN && p->layer[t->layer].alpha != 0) {
		t->sj = coli_malloc((size_t)t->cols * sizeof(float), e);
		if (!t->sj)
			return -1;
		synth_align_coefs(p, t, t->sj);
	}
	return 0;
}

/* The F32 "<w>_scale_inv" [ceil(rows/128), ceil(cols/128)] of fp8 weight t[w]; deepseek_v4's
 * F8_E8M0 "<base>.scale" of the same shape, or [rows, cols/32] for an FP4 expert. */
static int add_scale(synth_table *tb, int w, coli_err *e)
{
	synth_tensor *t = &tb->t[w], *s = &tb->t[tb->n];
	char name[sizeof(s->name) + 16];
	int e8 = t->ue8m0 || t->dtype == COLI_DT_I8;
	if (e8)
		snprintf(name, sizeof(name), "%.*s.scale", (int)strlen(t->name) - 7, t->name); /* less ".weight" */
	else
		snprintf(name, sizeof(name), "%s_scale_inv", t->name);
	if (strlen(name) >= sizeof(s->name))
		return coli_errf(e, COLI_EUSAGE, "%s: tensor name too long", t->name);
	memset(s, 0, sizeof(*s));
	memcpy(s->name, name, strlen(name) + 1);
	if (t->stored) {
		char stored[sizeof(name)];
		snprintf(stored, sizeof(stored), "%s_scale_inv", t->stored);
		if (!(s->stored = strdup(stored)))
			return coli_errf(e, COLI_ENOMEM, "out of memory naming '%s'", name);
	}
	s->lead = -1;
	s->glue = 1;
	s->ndim = 2;
	s->rows = (t->rows + SYNTH_FP8_BLOCK - 1) / SYNTH_FP8_BLOCK;
	s->cols = (t->cols + SYNTH_FP8_BLOCK - 1) / SYNTH_FP8_BLOCK;
	s->dtype = COLI_DT_F32;
	s->kind = SK_SCALE;
	s->layer = t->layer;
	s->expert = t->expert;
	s->scale_of = w;
	if (e8) { /* computed from the weight's values when written: nothing kept */
		s->dtype = COLI_DT_F8_E8M0;
		s->weight = t;
		if (t->dtype == COLI_DT_I8)
			s->rows = t->rows, s->cols = t->cols / 32;
		s->nbytes = (uint64_t)s->rows * (uint64_t)s->cols;
		tb->n++;
		return 0;
	}
	s->nbytes = (uint64_t)s->rows * (uint64_t)s->cols * 4;
	t->scales = coli_calloc((size_t)(s->rows * s->cols), sizeof(float), e);
	if (!t->scales)
		return -1;
	tb->n++;
	return 0;
}

/* Module order: embeddings, layers, then the remaining globals. */
static int module_rank(const coli_tensor_spec *s)
{
	if (s->layer >= 0)
		return 1;
	return ends_with(s->name, "embed_tokens.weight") || s->role == COLI_R_EMBED ? 0 : 2;
}

static int add_all(synth_table *tb, const synth_plan *p, const coli_tensor_spec *spec, int n,
		   const synth_opts *o, coli_err *e)
{
	for (int rank = 0; rank < 3; rank++) {
		for (int i = 0; i < n; i++) {
			if (module_rank(&spec[i]) != rank)
				continue;
			int w = tb->n++;
			if (fill(&tb->t[w], &spec[i], p, o, e))
				return -1;
			if ((tb->t[w].dtype == COLI_DT_F8_E4M3 || tb->t[w].dtype == COLI_DT_I8) && add_scale(tb, w, e))
				return -1;
		}
	}
	return 0;
}

/* Fused experts: a layer's gate/up views and its down views are two stored tensors, each led by
 * its first member; all the layer's expert tensors after the very first stay in its shard. */
static void link_fused(synth_table *tb)
{
	int lead[2] = {-1, -1};
	for (int i = 0; i < tb->n; i++) {
		synth_tensor *t = &tb->t[i];
		int k = t->kind == SK_DOWN;
		if (t->expert < 0 || t->sndim != 3)
			continue;
		if (lead[k] < 0 || strcmp(tb->t[lead[k]].stored, t->stored))
			lead[k] = i;
		t->lead = lead[k];
		tb->t[lead[k]].fused_bytes += t->nbytes;
		t->glue = !(k == 0 && lead[0] == i);
	}
}

/* Assigns shards (a weight and its scale_inv, and a layer's fused experts, stay together). */
static void assign_shards(synth_table *tb, uint64_t shard_size)
{
	uint64_t cur = 0;
	int shard = 0;
	for (int i = 0; i < tb->n; i++) {
		synth_tensor *t = &tb->t[i];
		uint64_t need = t->nbytes;
		for (int j = i + 1; !t->glue && j < tb->n && tb->t[j].glue; j++)
			need += tb->t[j].nbytes;
		if (!t->glue && cur > 0 && cur + need > shard_size) {
			shard++;
			cur = 0;
		}
		t->shard = shard;
		cur += t->nbytes;
		tb->total_size += t->nbytes;
	}
	tb->n_shards = shard + 1;
}

static const synth_table *sort_tb;

static int by_name(const void *a, const void *b)
{
	return strcmp(sort_tb->t[*(const int *)a].name, sort_tb->t[*(const int *)b].name);
}

/* Data order: by the stored name; a fused tensor's members in table order. */
static int by_stored(const void *a, const void *b)
{
	int i = *(const int *)a, j = *(const int *)b;
	int c = strcmp(synth_stored_name(&sort_tb->t[i]), synth_stored_name(&sort_tb->t[j]));
	return c ? c : (i > j) - (i < j);
}

const char *synth_stored_name(const synth_tensor *t)
{
	return t->stored ? t->stored : t->name;
}

/* Per shard: tensors in name order and their offsets. */
static int lay_out(synth_table *tb, coli_err *e)
{
	int S = tb->n_shards;
	tb->order = coli_calloc((size_t)S, sizeof(*tb->order), e);
	tb->count = tb->order ? coli_calloc((size_t)S, sizeof(int), e) : NULL;
	tb->shard_data = tb->count ? coli_calloc((size_t)S, sizeof(uint64_t), e) : NULL;
	if (!tb->shard_data)
		return -1;
	for (int i = 0; i < tb->n; i++) {
		tb->count[tb->t[i].shard]++;
		tb->n_stored += tb->t[i].lead < 0 || tb->t[i].lead == i;
	}
	for (int s = 0; s < S; s++) {
		tb->order[s] = coli_malloc((size_t)tb->count[s] * sizeof(int), e);
		if (!tb->order[s])
			return -1;
		tb->count[s] = 0;
	}
	for (int i = 0; i < tb->n; i++)
		tb->order[tb->t[i].shard][tb->count[tb->t[i].shard]++] = i;
	sort_tb = tb;
	tb->sorted = coli_malloc((size_t)tb->n * sizeof(int), e);
	if (!tb->sorted)
		return -1;
	for (int i = 0; i < tb->n; i++)
		tb->sorted[i] = i;
	qsort(tb->sorted, (size_t)tb->n, sizeof(int), by_name);
	for (int s = 0; s < S; s++) {
		qsort(tb->order[s], (size_t)tb->count[s], sizeof(int), by_stored);
		for (int j = 0; j < tb->count[s]; j++) {
			synth_tensor *t = &tb->t[tb->order[s][j]];
			t->offset = tb->shard_data[s];
			tb->shard_data[s] += t->nbytes;
		}
	}
	return 0;
}

int synth_table_build(synth_table *tb, const synth_plan *p, const coli_tensor_spec *spec,
		      int n_spec, const synth_opts *o, coli_err *e)
{
	memset(tb, 0, sizeof(*tb));
	tb->t = coli_calloc((size_t)n_spec * 2 + (size_t)synth_layout_vision_count(p->m, o), sizeof(*tb->t), e);
	if (!tb->t || add_all(tb, p, spec, n_spec, o, e))
		return -1;
	synth_layout_vision(tb, p, o);
	link_fused(tb);
	assign_shards(tb, o->shard_size);
	return lay_out(tb, e);
}

void synth_table_release(synth_table *tb)
{
	if (!tb)
		return;
	for (int i = 0; tb->t && i < tb->n; i++) {
		free(tb->t[i].scales);
		free(tb->t[i].sj);
		free(tb->t[i].stored);
	}
	for (int s = 0; tb->order && s < tb->n_shards; s++)
		free(tb->order[s]);
	free(tb->order);
	free(tb->count);
	free(tb->shard_data);
	free(tb->sorted);
	free(tb->t);
	memset(tb, 0, sizeof(*tb));
}

int synth_table_find(const synth_table *tb, const char *name)
{
	int lo = 0, hi = tb->n - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2, c = strcmp(tb->t[tb->sorted[mid]].name, name);
		if (c == 0)
			return tb->sorted[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

void synth_shard_name(const synth_table *tb, int shard, char *buf, size_t cap)
{
	if (tb->n_shards == 1)
		snprintf(buf, cap, "model.safetensors");
	else
		snprintf(buf, cap, "model-%05d-of-%05d.safetensors", shard + 1, tb->n_shards);
}
