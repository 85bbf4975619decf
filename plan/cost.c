/* cost.c: threads, prefetch, the I/O backend, each copy's share of the reads, and the predicted
 * decode speed, from a cost model calibrated by the probe.
 *
 * Seconds per decode token, at the middle of a --ctx context (position ctx / 2):
 *   experts    each MoE layer's top_k records / the kernels' measured speed for their encoding
 *              (int4, int8, FP4: a probe before revision 1.2 has no FP4 figure, int4's stands in:
 *              the same bytes per weight)
 *   attention  the attention matrices (self_attn.*, deepseek_v4's attn.*) / the kernels' speed for their encoding,
 *              + the attention core at position ctx / 2: its multiply-adds (the engine's count)
 *              at the probe's rate (x threads where the engine shares them), or the KV cache
 *              read at the memory bandwidth when that takes longer; DSA models attend only
 *              index_topk positions past that many, plus the indexer's scan of every earlier
 *              position on its full layers (a context-dependent term, over every thread); Gated
 *              DeltaNet layers (linear_attn.*) count as attention: their projections, the delta
 *              rule's passes over the recurrent state and the state read and written
 *   other      every other dense matrix (routers, shared experts, dense MLPs, lm_head) the same
 *              way, + OTHER_PER_LAYER per layer (norms, RoPE, sums: measured small)
 *   disk       the misses' reads not hidden, averaged over the number of misses in a token (each
 *              of top_k picks a miss with probability 1 - hit: binomial): a layer's misses are read
 *              at once from the copies together (each at the probe's O_DIRECT bandwidth at that
 *              queue depth, each its share of the bytes, the shares coli-run reads by: the
 *              sustained rates', a partial copy's at most what it holds), while the layer's hits
 *              are multiplied; with prefetch, --recall (the
 *              share of next-layer predictions the routing chose, as coli-run reports it) of
 *              them are read during the previous layer's compute instead. A layer's reads
 *              go at the probe's burst rate where it beats the sustained one (a throttled
 *              device's allowance, refilled while the CPU computes), but never faster on
 *              average: a token takes at least its reads at the sustained rates (its misses
 *              and, with prefetch, its wrong guesses: wrong_reads).
 *              deepseek_v4: its hash layers' experts follow from the token id, and the engine
 *              requests their misses when the token is embedded (nn/v4.c): nothing predicted,
 *              nothing read wrongly; a hash layer waits only when the reads requested since
 *              (its own and the earlier hash layers') outlast the compute before its experts.
 *              Its other layers are not predicted (the engine runs no next-layer prediction
 *              for the family): their misses are read when the router has chosen.
 * Warm: the planned hit rate; cold: only the pins hit (the LRU slots start empty). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "planner.h"
#include "policy.h"
#include "store.h"

#define GIB 1073741824.0
#define OTHER_PER_LAYER 2e-6 /* s: norms, residuals, RoPE, the router's softmax per layer */
#define WRONG_COST 0.25      /* share of a wrong prediction's read that delays demanded reads
			      * (they are read only while no demanded read is in flight) */

/* Weight bytes per second of the kernels at this plan's threads and precision, for an encoding
 * (q8: the int4 and int8 records' products with 8-bit activations; FP4 always float32). */
static double kernel_bps(const plan *p, coli_enc enc)
{
	const coli_probe *pr = &p->probe;
	int all = p->threads > 1;
	double q8 = enc == COLI_ENC_Q4   ? (all ? pr->q8_int4_bps_all : pr->q8_int4_bps_1)
		    : enc == COLI_ENC_Q8 ? (all ? pr->q8_int8_bps_all : pr->q8_int8_bps_1)
					 : 0;
	if (p->q8 && q8 > 0)
		return q8;
	if (enc == COLI_ENC_FP4 && pr->fp4_bps_all > 0)
		return all ? pr->fp4_bps_all : pr->fp4_bps_1;
	if (enc == COLI_ENC_Q4 || enc == COLI_ENC_FP4)
		return all ? pr->int4_bps_all : pr->int4_bps_1;
	if (enc == COLI_ENC_Q8)
		return all ? pr->int8_bps_all : pr->int8_bps_1;
	return all ? pr->mem_bps_all : pr->mem_bps_1; /* float matrices: as fast as memory reads */
}

/* The encoding of a MoE layer's records (their gate's). */
static coli_enc record_enc(const plan *p, const plan_layer *L)
{
	const coli_lexperts *x = coli_container_experts(p->ct, L->layer);
	return x ? x->part[0].enc : COLI_ENC_Q4;
}

/* Seconds per token of the dense matrices: attention's (*att) and the others (*rest). */
static void dense_time(const plan *p, double *att, double *rest)
{
	const coli_layout *L = &p->ct->layout;
	*att = *rest = 0;
	for (int i = 0; i < L->n_tensors; i++) {
		const coli_ltensor *t = &L->tensors[i];
		if (t->section != COLI_SEC_DENSE || t->ndim != 2 || strstr(t->name, "embed_tokens"))
			continue;
		double s = (double)t->blob.nbytes / kernel_bps(p, t->blob.enc);
		*(strstr(t->name, "self_attn") || strstr(t->name, "linear_attn") || strstr(t->name, ".attn.") ? att : rest) += s;
	}
}

/* The O_DIRECT bandwidth of disk d at queue depth qd (interpolated between the probe's). */
static double disk_bps(const coli_probe_disk *d, double qd)
{
	if (d->n_qd == 0)
		return 0;
	if (qd <= d->qd[0])
		return d->direct_bps[0];
	for (int i = 1; i < d->n_qd; i++)
		if (qd <= d->qd[i]) {
			double f = (qd - d->qd[i - 1]) / (d->qd[i] - d->qd[i - 1]);
			return d->direct_bps[i - 1] + f * (d->direct_bps[i] - d->direct_bps[i - 1]);
		}
	return d->direct_bps[d->n_qd - 1];
}

/* What disk d sustains at queue depth qd over a token's reads: disk_bps, but no more than any
 * deeper queue probed sustained. More reads in flight never slow a device down for long; a
 * shallow window measured above a deeper one carries a throttle's allowance (bench-plan's loop
 * devices, throttled to 400 MB/s: 429 and 456 MB/s probed at depths 1 and 4, 414 and 405 at 8
 * and 16, and every streamed run that the disk bounds read at 400; docs/benchmarks.md, "Streamed
 * compute"). */
static double sustained_bps(const coli_probe_disk *d, double qd)
{
	double b = disk_bps(d, qd);
	for (int i = 0; i < d->n_qd; i++)
		if (d->qd[i] >= qd && d->direct_bps[i] < b)
			b = d->direct_bps[i];
	return b;
}

/* How much faster disk d reads a burst after idle time than it sustains (1 when not, or not
 * measured): the probe's burst rate over its sustained rate at the burst's queue depth. */
static double burst_factor(const coli_probe_disk *d)
{
	double f = d->burst_bps > 0 ? d->burst_bps / disk_bps(d, COLI_PROBE_BURST_RECORDS) : 1;
	return f > 1 ? f : 1;
}

/* Seconds to read m records of rec bytes from the copies together, each copy its share of the
 * bytes (plan_shares: the store sends the reads by them), at the probe's rate for the queue depth
 * (burst set: one layer's reads, at each copy's burst rate; else a token's, at the sustained
 * rates, sustained_bps): the copy that takes longest. A record is read whole from one copy, so a layer's reads
 * take at least one record's on the copy it went to, that copy drawn by the shares. */
static double read_time(const plan *p, double m, double rec, int burst)
{
	if (m <= 0)
		return 0;
	double qd = ceil(m / p->n_copies), t = 0, one = 0;
	if (qd > p->qd)
		qd = p->qd;
	for (int i = 0; i < p->n_copies; i++) {
		const coli_probe_disk *d = p->copies[i].disk;
		double b = burst ? disk_bps(d, qd) * burst_factor(d) : sustained_bps(d, qd);
		t = fmax(t, m * p->copies[i].share * rec / b);
		one += p->copies[i].share * fmin(m, 1) * rec / b;
	}
	return burst ? fmax(t, one) : t;
}

/* Seconds per token of the attention core at position pos (see the head comment). */
static double attn_core_time(const plan *p, int pos)
{
	const coli_model *m = &p->ct->model;
	int threaded;
	double fmas = coli_attn_decode_fmas(m, pos, &threaded), kv = coli_attn_decode_bytes(m, pos);
	double mem = kv / (p->threads > 1 ? p->probe.mem_bps_all : p->probe.mem_bps_1);
	double rate = p->probe.attn_fma_per_s * (threaded ? p->threads : 1);
	double core = rate > 0 ? fmas / rate : 0; /* 0: a probe of revision 1.0, without the figure */
	if (rate > 0) /* DSA's indexer scan, Gated DeltaNet's delta rule: over every thread */
		core += (coli_attn_index_fmas(m, pos) + coli_attn_linear_fmas(m)) / (p->probe.attn_fma_per_s * p->threads);
	return core > mem ? core : mem;
}

/* Records a layer reads per token for wrong next-layer predictions, with prefetch: top_k
 * guesses, (1 - --recall) of them wrong, each read unless cached (a guess not chosen taken as
 * cached at the cache's share of the experts). They cost the disk's sustained rate like the
 * misses: at recall 0.05 the grid's prefetch-on runs read 5.6x the bytes (docs/benchmarks.md). */
static double wrong_reads(const plan *p, const plan_layer *L)
{
	if (!p->prefetch || L->n_experts <= 0)
		return 0;
	double cached = (double)L->cache / L->n_experts;
	return p->top_k * (1 - p->a->recall) * (1 - (cached < 1 ? cached : 1));
}

/* 1 when the engine predicts the next layer's experts for this family (moe_predict): every
 * family but deepseek_v4, whose forward reads its hash layers ahead instead. */
static int predicts(const plan *p)
{
	return p->ct->model.family != COLI_FAM_DEEPSEEK_V4;
}

/* 1 for a main layer routed by token id (deepseek_v4's first num_hash_layers). */
static int hash_layer(const plan *p, int layer)
{
	return layer < p->ct->model.n_hash_layers && layer < p->ct->model.n_layers;
}

/* Seconds a token waits for layer L's misses when each of its top_k picks misses with
 * probability q: the wait averaged over the number of misses m (binomial, plan_miss_prob), not
 * taken at the mean, since it is not linear in m: no read and no latency at m = 0, the queue
 * depth and the one-record floor per copy (read_time), the hits' products that hide the reads
 * fewer as m grows. reads: the reads' time alone (a hash layer's, read ahead: the caller adds it
 * up). The hidden part: the layer's products of its hits (x per top_k records) and, with
 * prefetch, --recall of the reads during the previous layer's compute less a quarter of the wrong
 * guesses' time. */
static double layer_wait(const plan *p, const plan_layer *L, double q, double x, double compute_layer, int reads)
{
	double sum = 0;
	for (int m = 0; m <= p->top_k; m++) {
		double pm = plan_miss_prob(p->top_k, q, m);
		if (pm <= 0 || m == 0)
			continue;
		double disk = read_time(p, m, L->record, 1) + p->copies[0].disk->latency_s;
		double hidden = x * (p->top_k - m) / p->top_k; /* the hits multiplied while the misses arrive */
		if (p->prefetch && predicts(p))
			hidden += fmin(p->a->recall * disk, compute_layer) - (1 - p->a->recall) * WRONG_COST * disk;
		sum += pm * (reads ? disk : fmax(0, disk - hidden));
	}
	return sum;
}

/* The predicted speed at hit rates hit(layer) (warm: the plan's, cold: the pins'); warm, each
 * layer's stall_s. */
static coli_plan_speed speed(plan *p, int cold)
{
	coli_plan_speed s;
	memset(&s, 0, sizeof(s));
	double att, rest;
	dense_time(p, &att, &rest);
	const coli_model *m = &p->ct->model;
	s.attention_s = att + attn_core_time(p, p->a->ctx / 2);
	s.other_s = rest + OTHER_PER_LAYER * m->n_layers;
	double compute_layer = (att + rest) / (m->n_layers > 0 ? m->n_layers : 1), sustained = 0;
	double ahead = 0, stalled = 0; /* hash layers: reads requested at the token's start, waits so far */
	for (int i = 0; i < p->n_moe; i++) {
		plan_layer *L = &p->layers[i];
		double h = cold ? L->hit_pins : L->hit, x = p->top_k * L->record / kernel_bps(p, record_enc(p, L));
		s.experts_s += x;
		L->exact = hash_layer(p, L->layer);
		if (!p->stream)
			continue;
		double miss = p->top_k * (1 - h), stall;
		if (L->exact) { /* ready when the reads ahead of it are; needed after the compute before it */
			ahead += layer_wait(p, L, 1 - h, x, compute_layer, 1);
			stall = fmax(0, ahead - (compute_layer + x) * L->layer - compute_layer - stalled);
			stalled += stall;
		} else {
			stall = layer_wait(p, L, 1 - h, x, compute_layer, 0);
		}
		if (!cold)
			L->stall_s = stall;
		s.disk_s += stall;
		sustained += read_time(p, miss + wrong_reads(p, L), L->record, 0);
	}
	double compute = s.experts_s + s.attention_s + s.other_s;
	if (compute + s.disk_s < sustained) /* the sustained rates bound the average */
		s.disk_s = sustained - compute;
	s.tok_s = 1 / (compute + s.disk_s);
	return s;
}

/* Threads: the physical cores, unless one thread multiplies faster than all (then 1). */
static void choose_threads(plan *p)
{
	const coli_probe *pr = &p->probe;
	p->threads = pr->physical_cores;
	if (pr->int4_bps_1 > pr->int4_bps_all) {
		p->threads = 1;
		plan_note_add(p, "threads", "1", "one thread multiplies int4 weights faster (%.1f GB/s) than %d (%.1f GB/s)",
			      pr->int4_bps_1 / 1e9, pr->physical_cores, pr->int4_bps_all / 1e9);
		return;
	}
	char v[16];
	snprintf(v, sizeof(v), "%d", p->threads);
	plan_note_add(p, "threads", v, "the physical cores: int4 products at %.1f GB/s on %d threads against %.1f GB/s "
		      "on one", pr->int4_bps_all / 1e9, p->threads, pr->int4_bps_1 / 1e9);
}

/* Warm seconds per token the hash layers' misses (hash 1) or the other layers' (0) stall. */
static double hash_stall(const plan *p, int hash)
{
	double t = 0;
	for (int i = 0; i < p->n_moe; i++)
		t += p->layers[i].exact == hash ? p->layers[i].stall_s : 0;
	return t;
}

/* Prefetch on when the model says it saves time at the warm hit rate. deepseek_v4: off (the
 * engine predicts no layer of the family), its hash layers read ahead exactly whatever the knob. */
static void choose_prefetch(plan *p)
{
	if (!p->stream)
		return;
	if (!predicts(p)) {
		int n = p->ct->model.n_hash_layers < p->ct->model.n_layers ? p->ct->model.n_hash_layers : p->ct->model.n_layers;
		p->prefetch = 0;
		speed(p, 0);
		plan_note_add(p, "prefetch", "off", "deepseek_v4: the engine predicts no next layer for the family; its %d "
			      "hash layer(s) route by token id, so their experts are read ahead exactly when the token is "
			      "embedded (no prediction, no wrong reads): predicted wait for their misses %.1f ms a token, "
			      "for the other layers' %.1f ms", n, 1e3 * hash_stall(p, 1), 1e3 * hash_stall(p, 0));
		return;
	}
	p->prefetch = 0;
	coli_plan_speed off = speed(p, 0);
	p->prefetch = 1;
	coli_plan_speed on = speed(p, 0);
	p->prefetch = on.tok_s > off.tok_s;
	plan_note_add(p, "prefetch", p->prefetch ? "on" : "off", "predicted %.2f tok/s with next-layer prediction, %.2f "
		      "without (it hides reads behind the previous layer's compute, %.0f%% of predictions right, and "
		      "its wrong reads cost disk time)", on.tok_s, off.tok_s, p->a->recall * 100);
}

/* The share of the misses a partial mirror can serve: per layer, the routing probability of
 * the records it holds among the experts not pinned (where misses fall), averaged. */
static double miss_share_held(const plan *p, const coli_mirror_map *m)
{
	double sum = 0;
	uint64_t rec0 = 0;
	int *pins = malloc((size_t)(p->ct->model.n_experts > 0 ? p->ct->model.n_experts : 1) * sizeof(*pins));
	for (int i = 0; pins && i < p->n_moe; i++) {
		const plan_layer *L = &p->layers[i];
		const double *c = p->usage.counts ? p->usage.counts + (size_t)L->layer * (size_t)p->usage.n_experts : NULL;
		int n_pins = c ? coli_pins_choose(c, L->n_experts, L->pins, pins) : 0;
		double held = 0, all = 0;
		for (int x = 0; x < L->n_experts; x++) {
			int pinned = 0;
			for (int j = 0; j < n_pins && !pinned; j++)
				pinned = pins[j] == x;
			double q = pinned ? 0 : L->p[x];
			all += q, held += coli_mirror_has(m, rec0 + (uint64_t)x) ? q : 0;
		}
		sum += all > 0 ? held / all : 0;
		rec0 += (uint64_t)L->n_experts;
	}
	free(pins);
	return p->n_moe ? sum / p->n_moe : 1;
}

/* Each copy's share of the reads: coli_copy_shares of the copies' sustained rates at the queue
 * depth, a partial copy capped at the share of the misses it holds; the streaming store sends the
 * reads by the same rule (store/replica.h), from the same rates (plan.json's disks[].bps). */
void plan_shares(plan *p)
{
	double bps[PLAN_MAX_COPIES], held[PLAN_MAX_COPIES], share[PLAN_MAX_COPIES], total = 0;
	for (int i = 1; i < p->n_copies; i++)
		if (p->copies[i].map.bits) {
			p->copies[i].held = miss_share_held(p, &p->copies[i].map);
			plan_note_add(p, "mirror", "partial", "%s holds %u of %u records, where %.0f%% of the misses fall",
				      p->copies[i].dir, p->copies[i].map.held, p->copies[i].map.n_records,
				      p->copies[i].held * 100);
		}
	for (int i = 0; i < p->n_copies; i++) {
		total += bps[i] = p->copies[i].bps = disk_bps(p->copies[i].disk, p->qd);
		held[i] = p->copies[i].held;
	}
	coli_copy_shares(p->n_copies, bps, held, share);
	for (int i = 0; i < p->n_copies; i++)
		p->copies[i].share = share[i];
	p->disk_bps = total;
	if (p->n_copies > 1)
		plan_note_add(p, "mirror", "", "%d copies read together, %.2f GB/s at queue depth %d; the model's copy "
			      "serves %.0f%% of the bytes (each copy by its sustained rate, a partial one at most what it "
			      "holds: coli-run sends the reads by the same shares)", p->n_copies, total / 1e9, p->qd,
			      p->copies[0].share * 100);
}

/* Disk d's queue depth: among the depths probed of at least top_k (a layer's misses are
 * requested together, each pread thread reading and checking one record: fewer threads would
 * leave misses waiting for one, and a prefetch's read would hold up a demanded one), the
 * smallest within 5% of the best bandwidth measured at those depths; the deepest probed when
 * none reaches top_k. *best_below: the best bandwidth measured below top_k (0: none). */
static int disk_qd(const coli_probe_disk *d, int top_k, double *best, double *best_below)
{
	int pick = d->n_qd ? d->qd[d->n_qd - 1] : STORE_IO_THREADS;
	*best = *best_below = 0;
	for (int j = 0; j < d->n_qd; j++) {
		double *b = d->qd[j] >= top_k ? best : best_below;
		*b = d->direct_bps[j] > *b ? d->direct_bps[j] : *b;
	}
	for (int j = 0; *best > 0 && j < d->n_qd; j++)
		if (d->qd[j] >= top_k && d->direct_bps[j] >= 0.95 * *best) {
			pick = d->qd[j];
			break;
		}
	if (*best == 0) /* no depth of top_k probed: the deepest */
		*best = d->n_qd ? d->direct_bps[d->n_qd - 1] : 0;
	return pick;
}

/* The queue depth: disk_qd of the copy that needs the most. */
static void choose_qd(plan *p)
{
	int qd = 1;
	double best = 0, below = 0;
	for (int i = 0; i < p->n_copies; i++) {
		int pick = disk_qd(p->copies[i].disk, p->top_k, &best, &below);
		qd = pick > qd ? pick : qd;
	}
	p->qd = qd > STORE_MAX_QD ? STORE_MAX_QD : qd;
	if (!p->stream)
		return;
	const coli_probe_disk *d = p->copies[0].disk;
	char v[16], list[160] = "", faster[160] = "";
	disk_qd(d, p->top_k, &best, &below);
	for (int j = 0, n = 0; j < d->n_qd; j++)
		n += snprintf(list + n, sizeof(list) - (size_t)n, "%s%d: %.2f", j ? ", " : "", d->qd[j], d->direct_bps[j] / 1e9);
	if (below > best)
		snprintf(faster, sizeof(faster), "; fewer reads in flight measured faster here (%.2f GB/s) but would leave "
			 "a layer's misses waiting for a thread", below / 1e9);
	snprintf(v, sizeof(v), "%d", p->qd);
	if (d->n_qd && d->qd[d->n_qd - 1] < p->top_k)
		plan_note_add(p, "queue-depth", v, "the deepest queue probed, none reaching top_k (%d: a layer's misses are "
			      "read together) (GB/s at each depth probed on %s: %s)", p->top_k, d->dev, list);
	else
		plan_note_add(p, "queue-depth", v, "the smallest queue depth of at least top_k (%d: a layer's misses are read "
			      "together) within 5%% of the best O_DIRECT bandwidth measured at such depths, %.2f GB/s (GB/s "
			      "at each depth probed on %s: %s)%s", p->top_k, best / 1e9, d->dev, list, faster);
}

/* A note for each copy whose bursts read faster than it sustains. */
static void note_bursts(plan *p)
{
	for (int i = 0; p->stream && i < p->n_copies; i++) {
		const coli_probe_disk *d = p->copies[i].disk;
		if (burst_factor(d) > 1.05)
			plan_note_add(p, "disk", d->dev, "%s reads bursts of %d records after idle time at %.2f GB/s, %.1fx "
				      "what it sustains (%.2f GB/s: a throttle's allowance): a layer's misses are timed at the "
				      "burst rate, a token's reads at the sustained rate at least", d->dev, COLI_PROBE_BURST_RECORDS,
				      d->burst_bps / 1e9, burst_factor(d), disk_bps(d, COLI_PROBE_BURST_RECORDS) / 1e9);
	}
}

/* --precision q8: predicted with the probe's q8 kernel figures; chosen only with --allow-q8 and
 * when faster, else offered in a note. */
static void choose_precision(plan *p)
{
	if (p->probe.q8_int4_bps_all <= 0) {
		plan_note_add(p, "precision", "exact", "the probe has no q8 kernel figures (a probe before revision 1.2: "
			      "coli-plan probe --force measures them)");
		return;
	}
	double exact = speed(p, 0).tok_s;
	p->q8 = 1;
	double q8 = speed(p, 0).tok_s;
	p->q8 = p->a->allow_q8 && q8 > exact;
	if (q8 <= exact)
		plan_note_add(p, "precision", "exact", "--precision q8 would not be faster: predicted %.2f tok/s warm against "
			      "%.2f exact (the reads bound the speed, not the products)", q8, exact);
	else if (p->q8)
		plan_note_add(p, "precision", "q8", "--allow-q8: predicted %.2f tok/s warm against %.2f exact (x%.2f), with "
			      "8-bit activations: not exact (routing and tokens may differ; its cost measured on the reference "
			      "models: docs/coli-run.md, Precision)", q8, exact, q8 / exact);
	else
		plan_note_add(p, "precision", "exact", "the default; --allow-q8 would take --precision q8: predicted %.2f tok/s "
			      "warm against %.2f (x%.2f), not exact (its cost measured on the reference models: "
			      "docs/coli-run.md, Precision)", q8, exact, q8 / exact);
}

int plan_cost(plan *p, coli_err *e)
{
	(void)e;
	choose_threads(p);
	choose_qd(p);
	p->io = STORE_IO_THREADS_POOL;
	if (p->stream)
		plan_note_add(p, "io", "threads", "%d pread threads per disk: measured as fast as one io_uring on these "
			      "machines, which also checks each chunk on one thread", p->qd);
	plan_shares(p);
	note_bursts(p);
	choose_prefetch(p);
	if (p->ct->model.n_mtp_layers > 0)
		plan_note_add(p, "draft", "auto", "%d MTP layer(s): coli-run measures the drafts' acceptance and a verify's "
			      "cost at the hit rate it meets, and drafts only while that pays (the output is the same)",
			      p->ct->model.n_mtp_layers);
	else
		plan_note_add(p, "draft", "", "no MTP layers in the container: nothing to draft with");
	choose_precision(p);
	p->warm = speed(p, 0);
	p->cold = speed(p, 1);
	return 0;
}
