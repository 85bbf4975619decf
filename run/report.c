/* report.c: coli-run's closing figures, one struct printed as text lines on stderr or as one
 * JSON object on stdout (--json): the same numbers either way. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0.0;
}

const char *run_plural(long long n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static const char *tokens(int n)
{
	return run_plural(n, "token", "tokens");
}

#define MIB 1048576.0
#define GIB 1073741824.0

/* The streaming figures both forms print. */
typedef struct stream_fig {
	double hit, pin_hit, slot_hit;  /* percent of gets */
	double mib_tok, read_gbs, recall, wasted_mib_tok;
} stream_fig;

static stream_fig stream_figures(const run_report *p)
{
	const coli_store_stats *st = &p->st;
	double gets = (double)(st->hits + st->misses), n = p->per_token;
	stream_fig f = {
		.hit = 100.0 * ratio((double)st->hits, gets),
		.pin_hit = 100.0 * ratio((double)st->pin_hits, gets),
		.slot_hit = 100.0 * ratio((double)(st->hits - st->pin_hits), gets),
		.mib_tok = ratio((double)st->bytes_read / MIB, n),
		.read_gbs = ratio((double)st->bytes_read / 1e9, st->read_s),
		.recall = 100.0 * ratio((double)st->predict_hits, (double)st->predicted),
		.wasted_mib_tok = ratio((double)st->predict_wasted_bytes / MIB, n),
	};
	return f;
}

static void text_prefetch_auto(const prefetch_auto *a)
{
	char last[96] = "no probe ended yet";
	if (a->probes)
		snprintf(last, sizeof(last), "%d %s (the last: %.4f s per token on, %.4f off), %d %s", a->probes,
			 run_plural(a->probes, "probe", "probes"), a->last_s[1], a->last_s[0], a->switches,
			 run_plural(a->switches, "switch", "switches"));
	fprintf(stderr, "coli-run: prefetch auto: on for %d of %d decode %s, %s\n", a->tokens[1],
		a->tokens[0] + a->tokens[1], tokens(a->tokens[0] + a->tokens[1]), last);
}

static void text_stream(const run_report *p)
{
	const coli_store_stats *st = &p->st;
	stream_fig f = stream_figures(p);
	char pred[96] = "", pins[96] = "", head[48] = "";
	if (p->prefetch)
		snprintf(pred, sizeof(pred), ", prefetch recall %.1f%%, %.1f MiB wasted per token", f.recall, f.wasted_mib_tok);
	if (st->pins > 0) {
		snprintf(pins, sizeof(pins), " (pin %.1f%%, slot %.1f%%)", f.pin_hit, f.slot_hit);
		if (st->pins_min < st->pins) /* per-layer lists: the range, not the largest layer's */
			snprintf(head, sizeof(head), "pins %d..%d/layer, ", st->pins_min, st->pins);
		else
			snprintf(head, sizeof(head), "pins %d/layer, ", st->pins);
	}
	fprintf(stderr, "coli-run: stream: %shit rate %.1f%%%s, %llu %s, %.1f MiB read per token, read %.2f GB/s%s\n",
		head, f.hit, pins, (unsigned long long)st->misses, run_plural((long long)st->misses, "miss", "misses"),
		f.mib_tok, f.read_gbs, pred);
	if (p->pauto)
		text_prefetch_auto(p->pauto);
	for (int i = 0; i < st->n_disks; i++) {
		const store_disk *d = &st->disks[i];
		char fail[48] = "";
		if (p->all.disks[i].failures)
			snprintf(fail, sizeof(fail), ", %llu failed %s in the run", (unsigned long long)p->all.disks[i].failures,
				 run_plural((long long)p->all.disks[i].failures, "read", "reads"));
		char share[96] = "", rate[48] = "";
		if (d->rate_bps > 0)
			snprintf(rate, sizeof(rate), ", sustained %.0f MB/s", d->rate_bps / 1e6);
		if (st->n_disks > 1)
			snprintf(share, sizeof(share), ", %.0f%% of the bytes (target %.0f%%%s)",
				 100.0 * ratio((double)d->bytes_read, (double)st->bytes_read), 100.0 * d->share, rate);
		fprintf(stderr, "coli-run: disk %s (%s): %.1f MiB read, busy %.0f%%, %.0f MB/s while busy%s%s\n", d->dir,
			d->dev, (double)d->bytes_read / MIB, 100.0 * ratio(d->busy_s, p->wall),
			ratio((double)d->bytes_read / 1e6, d->busy_s), share, fail);
	}
}

/* The drafting figures both forms print. */
typedef struct draft_fig {
	double acceptance, per_forward;   /* accepted / drafted; tokens per main-model forward */
	double verify_mib, plain_mib;     /* expert MiB read per verify, per plain step (streaming) */
	double extra_mib;                 /* verify_mib - plain_mib (0 without plain steps) */
} draft_fig;

static draft_fig draft_figures(const coli_spec_stats *st)
{
	draft_fig f = {
		.acceptance = ratio((double)st->accepted, (double)st->drafted),
		.per_forward = ratio((double)st->tokens, (double)(st->rounds + st->plain)),
		.verify_mib = ratio((double)st->verify_bytes / MIB, (double)st->rounds),
		.plain_mib = ratio((double)st->plain_bytes / MIB, (double)st->plain),
	};
	f.extra_mib = st->plain && st->rounds ? f.verify_mib - f.plain_mib : 0;
	return f;
}

static void text_draft(const run_report *p)
{
	const coli_spec_stats *st = &p->draft->st;
	draft_fig f = draft_figures(st);
	char oracle[160] = "";
	if (p->draft_oracle)
		snprintf(oracle, sizeof(oracle), ", drafts from the oracle %s at rate %.2f (not the model's)", p->draft_oracle,
			 p->draft_oracle_rate);
	fprintf(stderr, "coli-run: draft: %lld %s, acceptance %.1f%% (%lld of %lld), %.2f tokens per forward, "
		"%lld plain %s, %.1f MiB of experts read per verify (%+.1f MiB over a plain step)%s; %s\n",
		(long long)st->rounds, run_plural(st->rounds, "verify", "verifies"), 100 * f.acceptance,
		(long long)st->accepted, (long long)st->drafted, f.per_forward, (long long)st->plain,
		run_plural(st->plain, "step", "steps"), f.verify_mib, f.extra_mib, oracle, p->draft->why);
}

/* The closing line; its decode part only when tokens were decoded (not after --teacher-force
 * or -n 1, whose one token comes from the prompt's logits). */
void report_text(const run_report *p)
{
	double tps = ratio(p->decoded, p->decode_s), mib = p->weights_per_token / MIB;
	char decode[160] = "";
	if (p->decoded)
		snprintf(decode, sizeof(decode), ", decode %d %s in %.2f s (%.2f tok/s, %.1f MiB of weights per token, "
			 "%.1f GB/s)", p->decoded, tokens(p->decoded), p->decode_s, tps, mib, p->weights_per_token * tps / 1e9);
	char prec[128] = "";
	if (p->q8_isa)
		snprintf(prec, sizeof(prec), ", precision q8 (%s products, %.0f%% of the weight bytes)", p->q8_isa,
			 100 * p->q8_share);
	fprintf(stderr, "coli-run: prompt %d %s in %.2f s (%.1f tok/s)%s, %s kernels x%d%s, peak RSS %.0f MiB%s%s%s%s%s%s\n",
		p->prefilled, tokens(p->prefilled), p->prefill_s, ratio(p->prefilled, p->prefill_s), decode, p->isa,
		p->threads, prec, p->peak_rss / MIB, p->route_from ? ", routing from " : "", p->route_from ? p->route_from : "",
		p->route_from ? " (not the model's)" : "", p->draft_oracle ? ", drafts from the oracle " : "",
		p->draft_oracle ? p->draft_oracle : "", p->draft_oracle ? " (not the model's)" : "");
	if (p->streaming)
		text_stream(p);
	if (p->draft)
		text_draft(p);
	if (p->plan)
		fprintf(stderr, "coli-run: plan %s: predicted %.2f tok/s warm (%.2f cold), hit rate %.1f%%; measured "
			"%.2f tok/s, hit rate %.1f%%\n", p->plan_path, p->plan->warm.tok_s, p->plan->cold.tok_s,
			100 * p->plan->hit_rate, tps, p->streaming ? stream_figures(p).hit : 100.0);
	if (p->ram) {
		const coli_budget *b = p->ram;
		char per[32]; /* per-layer lists: the range, not the largest layer's */
		snprintf(per, sizeof(per), b->slots_min < b->slots ? "%d..%d" : "%d", b->slots_min < b->slots ? b->slots_min
			 : b->slots, b->slots);
		fprintf(stderr, "coli-run: ram budget %.2f GiB: dense %.2f, KV %.2f, buffers %.2f, pins %.2f, slots %.2f "
			"(%s/layer)\n", p->ram_gib, b->dense / GIB, b->kv / GIB, b->buffers / GIB, b->pin_bytes / GIB,
			b->slot_bytes / GIB, per);
	}
}

static json_t *json_disks(const run_report *p)
{
	json_t *a = json_array();
	for (int i = 0; i < p->st.n_disks; i++) {
		const store_disk *d = &p->st.disks[i];
		json_array_append_new(a, json_pack("{s:s, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:I}", "dir", d->dir, "device",
						   d->dev, "mib_read", (double)d->bytes_read / MIB, "busy",
						   ratio(d->busy_s, p->wall), "mb_per_s_busy",
						   ratio((double)d->bytes_read / 1e6, d->busy_s), "byte_share",
						   ratio((double)d->bytes_read, (double)p->st.bytes_read), "target_share",
						   d->share, "sustained_mb_per_s", d->rate_bps / 1e6, "failed_reads",
						   (json_int_t)p->all.disks[i].failures));
	}
	return a;
}

static json_t *json_stream(const run_report *p)
{
	const coli_store_stats *st = &p->st;
	stream_fig f = stream_figures(p);
	json_t *o = json_pack("{s:i, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:o}", "pins_per_layer", st->pins, "hits",
			      (json_int_t)st->hits, "misses", (json_int_t)st->misses, "records_coalesced",
			      (json_int_t)st->coalesced, "pin_hits", (json_int_t)st->pin_hits,
			      "hit_rate", f.hit / 100, "pin_hit_rate", f.pin_hit / 100, "slot_hit_rate", f.slot_hit / 100,
			      "mib_read_per_token", f.mib_tok, "read_gb_per_s", f.read_gbs, "disks", json_disks(p));
	if (p->prefetch) {
		json_t *pf = json_pack("{s:s, s:I, s:I, s:f, s:f}", "mode", p->pauto ? "auto" : "on", "predicted",
				       (json_int_t)st->predicted, "predict_hits", (json_int_t)st->predict_hits, "recall",
				       f.recall / 100, "wasted_mib_per_token", f.wasted_mib_tok);
		const prefetch_auto *a = p->pauto;
		if (a) /* the last probe's seconds per token: null before one ended */
			json_object_set_new(pf, "auto", json_pack("{s:i, s:i, s:i, s:i, s:o, s:o}", "on_tokens", a->tokens[1],
								  "off_tokens", a->tokens[0], "probes", a->probes, "switches",
								  a->switches, "on_s_per_token",
								  a->probes ? json_real(a->last_s[1]) : json_null(),
								  "off_s_per_token",
								  a->probes ? json_real(a->last_s[0]) : json_null()));
		json_object_set_new(o, "prefetch", pf);
	}
	return o;
}

static json_t *json_ram(const run_report *p)
{
	const coli_budget *b = p->ram;
	return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:i}", "gib", p->ram_gib, "dense_gib", b->dense / GIB,
			 "kv_gib", b->kv / GIB, "buffers_gib", b->buffers / GIB, "pins_gib", b->pin_bytes / GIB,
			 "slots_gib", b->slot_bytes / GIB, "pins_per_layer", b->pins, "slots_per_layer", b->slots);
}

static json_t *json_draft(const run_report *p)
{
	const coli_spec *d = p->draft;
	const coli_spec_stats *st = &d->st;
	draft_fig f = draft_figures(st);
	json_t *o = json_pack("{s:s, s:i, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:b, s:s, s:i}", "mode",
			      d->want == DRAFT_AUTO ? "auto" : d->want > 0 ? "fixed" : "off", "k", d->want > 0 ? d->want : 0,
			      "verifies", (json_int_t)st->rounds, "drafted", (json_int_t)st->drafted, "accepted",
			      (json_int_t)st->accepted, "plain_steps", (json_int_t)st->plain, "acceptance", f.acceptance,
			      "tokens_per_forward", f.per_forward, "verify_mib", f.verify_mib, "plain_step_mib", f.plain_mib,
			      "extra_mib_per_verify", f.extra_mib, "draft_seconds", st->draft_s, "verify_seconds", st->verify_s,
			      "on", d->on, "why", d->why, "switches", st->switches);
	if (p->draft_oracle) { /* a path that is not UTF-8 still says the drafts were the oracle's */
		json_t *s = json_string(p->draft_oracle);
		json_object_set_new(o, "oracle", s ? s : json_string("(path not UTF-8)"));
		json_object_set_new(o, "oracle_rate", json_real(p->draft_oracle_rate));
	}
	return o;
}

static json_t *json_report(const run_report *p)
{
	double tps = ratio(p->decoded, p->decode_s);
	json_t *ids = json_array();
	for (int i = 0; i < p->n_ids; i++)
		json_array_append_new(ids, json_integer(p->ids[i]));
	json_t *o = json_pack(
		"{s:{s:i, s:f, s:f}, s:{s:i, s:f, s:f, s:f, s:f}, s:{s:s, s:i, s:s}, s:f, s:s, s:o}", "prompt", "tokens",
		p->prefilled, "seconds", p->prefill_s, "tokens_per_s", ratio(p->prefilled, p->prefill_s), "decode", "tokens",
		p->decoded, "seconds", p->decode_s, "tokens_per_s", tps, "weights_mib_per_token", p->weights_per_token / MIB,
		"weights_gb_per_s", p->weights_per_token * tps / 1e9, "kernels", "isa", p->isa, "threads", p->threads,
		"precision", p->precision, "peak_rss_mib", p->peak_rss / MIB, "store", p->store_kind, "ids", ids);
	if (p->q8_isa) {
		json_t *q8 = json_pack("{s:s, s:f}", "q8_isa", p->q8_isa, "q8_weight_share", p->q8_share);
		json_object_update(json_object_get(o, "kernels"), q8);
		json_decref(q8);
	}
	if (p->streaming)
		json_object_set_new(o, "stream", json_stream(p));
	if (p->ram)
		json_object_set_new(o, "ram_budget", json_ram(p));
	if (p->draft)
		json_object_set_new(o, "draft", json_draft(p));
	if (p->trace)
		json_object_set_new(o, "trace", json_string(p->trace));
	if (p->plan)
		json_object_set_new(o, "plan", json_pack("{s:s?, s:{s:f, s:f, s:f}, s:{s:f, s:f}}", "path", p->plan_path,
							 "predicted", "tokens_per_s", p->plan->warm.tok_s, "cold_tokens_per_s",
							 p->plan->cold.tok_s, "hit_rate", p->plan->hit_rate, "measured",
							 "tokens_per_s", tps, "hit_rate",
							 p->streaming ? stream_figures(p).hit / 100 : 1.0));
	json_t *rf = p->route_from ? json_string(p->route_from) : NULL;
	if (p->route_from) /* a path that is not UTF-8 still says the routing was replayed */
		json_object_set_new(o, "route_from", rf ? rf : json_string("(path not UTF-8)"));
	return o;
}

int report_json(const run_report *p, coli_err *e)
{
	json_t *o = json_report(p);
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
	json_decref(o);
	if (!s)
		return coli_errf(e, COLI_ENOMEM, "out of memory for the --json report");
	printf("%s\n", s);
	fflush(stdout);
	free(s);
	return 0;
}
