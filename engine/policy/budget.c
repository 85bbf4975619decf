/* policy/budget.c: coli-run's RAM budget split into the fixed part, pins and LRU slots (policy.h). */
#include "policy.h"

#define GIB 1073741824.0

/* The pins of a layer caching n records: --pins as given, else half the cache, at most the
 * experts the usage has seen and leaving top_k slots; none without usage. */
static int pins_for(const coli_budget_in *in, int n, int top_k)
{
	int p = in->pins >= 0 ? in->pins : n / 2;
	if (in->pins < 0 && p > n - top_k)
		p = n - top_k;
	if (in->pins < 0 && p > in->usage_known)
		p = in->usage_known;
	return in->has_usage && p > 0 ? p : 0;
}

/* The per-layer cache of n records into pins and slots (policy.h, coli_budget_split). */
static void split_cache(const coli_budget_in *in, int n, int top_k, coli_budget *out)
{
	out->pins = pins_for(in, n, top_k);
	out->slots = n - out->pins > top_k ? n - out->pins : top_k;
}

/* The records per layer before the split: given, the default, or what the budget leaves. */
static int cache_records(const coli_budget_in *in, const coli_budget *b, int top_k)
{
	if (in->cache_slots > 0)
		return in->cache_slots;
	if (in->budget > 0 && in->record > 0)
		return b->left / in->record > in->max_experts ? in->max_experts : (int)(b->left / in->record);
	return top_k * COLI_CACHE_PER_TOP_K;
}

/* The per-layer lists: each layer's pins and slots, summed into b's bytes (b->pins and b->slots
 * the most of one layer). */
static int split_lists(const coli_budget_in *in, int top_k, coli_budget *b, coli_err *e)
{
	int pins = 0, slots = 0, pins_min = 0, slots_min = 0;
	b->pin_bytes = b->slot_bytes = 0;
	for (int i = 0; i < in->n_lists; i++) {
		int c = in->list_cache ? in->list_cache[i] : b->cache;
		int p = in->list_pins ? (in->has_usage ? in->list_pins[i] : 0) : pins_for(in, c, top_k);
		if (c - p < top_k)
			return coli_errf(e, COLI_EUSAGE, "MoE layer %d: %d pins leave fewer than top_k (%d) of its %d "
					 "cache slots to the LRU", i, p, top_k, c);
		b->pin_bytes += in->list_record[i] * p, b->slot_bytes += in->list_record[i] * (c - p);
		if (in->out_pins)
			in->out_pins[i] = p, in->out_slots[i] = c - p;
		pins = p > pins ? p : pins, slots = c - p > slots ? c - p : slots;
		pins_min = i == 0 || p < pins_min ? p : pins_min, slots_min = i == 0 || c - p < slots_min ? c - p : slots_min;
	}
	b->pins = pins, b->slots = slots, b->pins_min = pins_min, b->slots_min = slots_min;
	return 0;
}

void coli_budget_container(const coli_container *ct, coli_budget_in *in)
{
	in->dense = (double)ct->layout.section_size[COLI_SEC_DENSE] + (double)ct->layout.section_size[COLI_SEC_MTP];
	in->record = 0, in->max_experts = 0;
	for (int i = 0; i < ct->layout.n_elayers; i++) {
		in->record += (double)ct->layout.elayers[i].record_size;
		if (ct->layout.elayers[i].n_experts > in->max_experts)
			in->max_experts = ct->layout.elayers[i].n_experts;
	}
}

/* budget / GIB is the --ram value exactly (GIB is a power of two). */
int coli_budget_split(const coli_budget_in *in, coli_budget *out, coli_err *e)
{
	int top_k = in->top_k > 0 ? in->top_k : 1;
	coli_budget b = {.dense = in->dense, .kv = in->kv, .work = in->work, .draft = in->draft, .tok = in->tok};
	b.buffers = in->work + in->draft + in->tok + (double)in->vocab * COLI_LOGIT_ROWS * sizeof(float) + COLI_RAM_HEADROOM;
	b.fixed = b.dense + b.kv + b.buffers, b.min_cache = in->record * top_k, b.left = in->budget - b.fixed;
	if (in->budget > 0 && b.left < b.min_cache)
		return coli_errf(e, COLI_EUSAGE, "--ram %g: needs at least %.2f GiB (dense %.2f GiB, KV %.2f GiB, buffers "
				 "%.2f GiB, minimum expert cache %.2f GiB)", in->budget / GIB, (b.fixed + b.min_cache) / GIB,
				 b.dense / GIB, b.kv / GIB, b.buffers / GIB, b.min_cache / GIB);
	b.cache = cache_records(in, &b, top_k);
	split_cache(in, b.cache, top_k, &b);
	b.pin_bytes = in->record * b.pins, b.slot_bytes = in->record * b.slots;
	b.pins_min = b.pins, b.slots_min = b.slots;
	if (in->n_lists > 0 && split_lists(in, top_k, &b, e) < 0)
		return -1;
	if (in->budget > 0 && b.pin_bytes + b.slot_bytes > b.left)
		return coli_errf(e, COLI_EUSAGE, "%s: %d pins and %d cache slots per layer (%.2f GiB) do not fit --ram %g "
				 "(%.2f GiB left beyond %.2f GiB fixed)", in->cache_slots > 0 ? "--cache-slots" : "--pins",
				 b.pins, b.slots, (b.pin_bytes + b.slot_bytes) / GIB, in->budget / GIB, b.left / GIB,
				 b.fixed / GIB);
	*out = b;
	return 0;
}
