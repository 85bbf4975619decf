/* test_profile.c: coli-profile's attribution on synthetic traces with known answers (the parts sum
 * to the wall exactly, the verdict's Amdahl arithmetic, the disks' busy and service times), the
 * order rules of the trace summary, the report's markdown and its HTML with images inlined. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attrib.h"
#include "fileio.h"
#include "html.h"
#include "report.h"
#include "t.h"
#include "trace.h"

static char path[256];
static const coli_trace_copy copies[2] = {{"/m/q.coli", "nvme0n1"}, {"/n/q.coli", "nvme1n1"}};

static coli_trace_rec rec(int kind, int sub, int token, int layer, int expert, uint64_t t0, uint64_t t1, uint64_t n)
{
	return (coli_trace_rec){(uint8_t)kind, (uint8_t)sub, 0, token, layer, expert, t0, t1, n};
}

/* Spans of one call from t0: each kind's ns in order ATTENTION, ROUTER, EXPERTS, IO_WAIT, OTHER. */
static int spans(coli_trace_writer *w, int token, uint64_t t0, const uint64_t ns[COLI_SPAN_N], coli_err *e)
{
	for (int k = 0; k < COLI_SPAN_N; k++, t0 += ns[k - 1])
		if (coli_trace_append(w, &(coli_trace_rec){COLI_TR_SPAN, (uint8_t)k, 0, token, 0, -1, t0, t0 + ns[k], 0}, e) < 0)
			return -1;
	return 0;
}

/* Prefill: one call of 4 positions, 1000 ns, spans 200/100/300/350/50 (they tile it).
 * Decode: two calls of 2000 ns each, spans 200/100/400/1200/50 (50 ns untraced).
 * Decode outcomes per call: layer 0 HIT + MISS, layer 1 PIN + MISS (+ one PREDICT_WASTED): 50%.
 * Reads on copy 0: [100, 600] and [400, 900], 1000 bytes each (busy 800 ns, service 1000 ns);
 * one failed read on copy 1. */
static int write_known(const char *meta, coli_err *e)
{
	coli_trace_info in = {{1}, 2, 8, 2, 0, 2, copies, meta, 0};
	coli_trace_writer *w;
	static const uint64_t pre[COLI_SPAN_N] = {200, 100, 300, 350, 50}, dec[COLI_SPAN_N] = {200, 100, 400, 1200, 50};
	if (coli_trace_writer_open(&w, path, &in, e) < 0)
		return -1;
	int rc = spans(w, 0, 0, pre, e);
	coli_trace_rec r[] = {
		rec(COLI_TR_READ, COLI_READ_OK, 0, 0, 3, 100, 600, 1000), rec(COLI_TR_READ, COLI_READ_OK, 0, 1, 4, 400, 900, 1000),
		rec(COLI_TR_TOKEN, COLI_PHASE_PREFILL, 0, -1, -1, 0, 1000, 4),
	};
	rc = rc ? rc : coli_trace_append_n(w, r, 3, e);
	for (int c = 1; rc == 0 && c <= 2; c++) {
		uint64_t t0 = 1000 + 2000 * (uint64_t)(c - 1);
		coli_trace_rec x[] = {
			rec(COLI_TR_EXPERT, COLI_X_HIT, c, 0, 1, t0, t0, 0), rec(COLI_TR_EXPERT, COLI_X_MISS, c, 0, 2, t0, t0, 0),
			rec(COLI_TR_EXPERT, COLI_X_PIN, c, 1, 1, t0, t0, 0), rec(COLI_TR_EXPERT, COLI_X_MISS, c, 1, 5, t0, t0, 0),
			rec(COLI_TR_EXPERT, COLI_X_PREDICT_WASTED, c, 1, 6, t0, t0, 0),
			rec(COLI_TR_READ, 0, c, 1, 5, t0, t0 + 10, 7),
			rec(COLI_TR_TOKEN, COLI_PHASE_DECODE, c, -1, -1, t0, t0 + 2000, 1),
		};
		x[5].copy = 1;
		rc = spans(w, c, t0, dec, e);
		rc = rc ? rc : coli_trace_append_n(w, x, 7, e);
	}
	if (rc < 0) {
		coli_trace_writer_abort(w);
		return -1;
	}
	return coli_trace_writer_close(w, e);
}

static int near(double a, double b) { return fabs(a - b) <= 1e-12 + 1e-9 * fabs(b); }

static void test_known(void)
{
	coli_err e = {0, ""};
	prof_trace t;
	prof_attrib a;
	int ok = write_known(NULL, &e) == 0 && prof_trace_load(&t, path, &e) == 0;
	T_CHECK("known trace: written and read", ok, "%s", e.msg);
	if (!ok)
		return;
	ok = prof_attrib_make(&a, &t, NULL, &e) == 0;
	T_CHECK("known trace: attributed", ok, "%s", e.msg);
	if (!ok)
		return prof_trace_release(&t);
	const prof_phase *p = &a.ph[0], *d = &a.ph[1];
	double sum_p = 0, sum_d = 0;
	for (int k = 0; k < PART_N; k++)
		sum_p += p->part[k], sum_d += d->part[k];
	T_CHECK("prefill: 1 call, 4 tokens, 1000 ns", p->calls == 1 && p->positions == 4 && near(p->wall, 1e-6), "%d %g %g",
		p->calls, p->positions, p->wall);
	T_CHECK("prefill: parts as written, untraced 0", near(p->part[PART_IO_WAIT], 350e-9) &&
		near(p->part[PART_EXPERTS], 300e-9) && near(p->part[PART_ATTENTION], 200e-9) &&
		near(p->part[PART_ROUTER], 100e-9) && near(p->part[PART_OTHER], 50e-9) && p->part[PART_UNTRACED] == 0,
		"io %g experts %g untraced %g", p->part[PART_IO_WAIT], p->part[PART_EXPERTS], p->part[PART_UNTRACED]);
	T_CHECK("decode: 2 calls, 4000 ns, io 2400, untraced 100", d->calls == 2 && near(d->wall, 4e-6) &&
		near(d->part[PART_IO_WAIT], 2400e-9) && near(d->part[PART_UNTRACED], 100e-9), "%d %g %g %g", d->calls, d->wall,
		d->part[PART_IO_WAIT], d->part[PART_UNTRACED]);
	T_CHECK("the parts sum to the wall", near(sum_p, p->wall) && near(sum_d, d->wall), "%g/%g %g/%g", sum_p, p->wall,
		sum_d, d->wall);
	T_CHECK("hit rate: pin + hit over gets, predict_wasted not a get", near(prof_hit_rate(d->out), 0.5) &&
		prof_gets(d->out) == 8, "%g %llu", prof_hit_rate(d->out), (unsigned long long)prof_gets(d->out));
	T_CHECK("per layer x call hits", t.lhit[1 * 2 + 0] == 1 && t.lget[1 * 2 + 0] == 2 && t.lhit[2 * 2 + 1] == 1 &&
		t.lget[0] == 0, "%u %u %u", t.lhit[2], t.lget[2], t.lhit[5]);
	T_CHECK("disk 0: 2 reads, busy 800 ns, service 1000 ns, 2000 bytes", a.disks[0].reads == 2 &&
		near(a.disks[0].busy, 800e-9) && near(a.disks[0].service, 1000e-9) && a.disks[0].bytes == 2000,
		"%ld %g %g %g", a.disks[0].reads, a.disks[0].busy, a.disks[0].service, a.disks[0].bytes);
	T_CHECK("disk 1: 2 failed reads, no bytes", a.disks[1].failed == 2 && a.disks[1].bytes == 0, "%ld %g",
		a.disks[1].failed, a.disks[1].bytes);
	const prof_verdict *v = &a.v;
	T_CHECK("verdict: decode, bound by I/O wait (60%)", v->phase == 1 && v->bound == PART_IO_WAIT &&
		near(v->share[PART_IO_WAIT], 0.6), "%d %d %g", v->phase, v->bound, v->share[PART_IO_WAIT]);
	T_CHECK("verdict: tokens/s 500000, disk 2x = 1/(0.4 + 0.3) x, no wait = 1/0.4 x", near(v->tok_s, 5e5) &&
		near(v->disk2x, 5e5 / 0.7) && near(v->no_wait, 5e5 / 0.4) && near(v->compute2x, 5e5 / 0.9),
		"%g %g %g %g", v->tok_s, v->disk2x, v->no_wait, v->compute2x);
	T_CHECK("verdict text carries the arithmetic", strstr(v->text, "1.43x") && strstr(v->text, "60%"), "%s", v->text);
	json_t *j = prof_attrib_json(&a, &t);
	T_CHECK("JSON: verdict bound io_wait, decode wall", j && !strcmp(json_string_value(json_object_get(
		json_object_get(j, "verdict"), "bound")), "io_wait") && near(json_number_value(json_object_get(
		json_object_get(json_object_get(j, "phases"), "decode"), "wall_s")), 4e-6), "bad JSON");
	json_decref(j);
	prof_inputs in = {.path = path, .trace = t};
	char *md = prof_report_md(&in, &a, NULL, "none here");
	T_CHECK("markdown: table, wall row, verdict, no plots said", md && strstr(md, "| I/O wait | 0.000000 | 35.0% |") &&
		strstr(md, "| **wall** |") && strstr(md, "## Verdict") && strstr(md, "No plots: none here"), "%s", md);
	free(md);
	prof_attrib_release(&a);
	prof_trace_release(&t);
}

static void test_cache_estimate(void)
{
	coli_err e = {0, ""};
	prof_trace t;
	prof_attrib a;
	/* cache_slots 2 of 8 experts: the estimate replays 2 and 3 slots (top_k 2) */
	int ok = write_known("{\"store\":{\"kind\":\"stream\",\"cache_slots\":2,\"ram_gib\":0}}", &e) == 0 &&
		 prof_trace_load(&t, path, &e) == 0 && prof_attrib_make(&a, &t, NULL, &e) == 0;
	const prof_cache_est *c = &a.v.cache;
	T_CHECK("a streamed trace's metadata: the cache estimate is made", ok && c->ok && c->cache == 2 && c->more == 3,
		"%s %d %d %s", e.msg, c->cache, c->more, c->why);
	if (!ok)
		return;
	/* the routing: layer 0 {1,2}, layer 1 {1 pinned, 5} twice: the second call all hits */
	T_CHECK("the replayed hit rates: 5 of 8 decode gets at 2 and 3 slots (a pin kept)", near(c->base_hit, 0.625) &&
		near(c->more_hit, 0.625) && near(a.v.more_tok_s, a.v.tok_s) && c->pins == 1, "%g %g %g %d", c->base_hit,
		c->more_hit, a.v.more_tok_s, c->pins);
	T_CHECK("no policy recorded: LFU, coli-run's default, said", !strcmp(c->policy, "LFU") &&
		strstr(c->policy_from, "default") && strstr(a.v.text, "LFU per layer") && strstr(a.v.text, "default"),
		"%s %s: %s", c->policy, c->policy_from, a.v.text);
	prof_attrib_release(&a);
	prof_trace_release(&t);
}

/* A streamed run of one MoE layer (8 experts, top_k 1): a prompt call, then a decode call per
 * expert of seq, each waiting 100 ns for the disk. */
static int write_seq(const char *meta, const int *seq, int n, coli_err *e)
{
	coli_trace_info in = {{1}, 1, 8, 1, 0, 1, copies, meta, 0};
	coli_trace_writer *w;
	if (coli_trace_writer_open(&w, path, &in, e) < 0)
		return -1;
	coli_trace_rec r[] = {rec(COLI_TR_SPAN, COLI_SPAN_OTHER, 0, -1, -1, 0, 100, 0),
			      rec(COLI_TR_TOKEN, COLI_PHASE_PREFILL, 0, -1, -1, 0, 100, 2)};
	int rc = coli_trace_append_n(w, r, 2, e);
	for (int c = 1; rc == 0 && c <= n; c++) {
		uint64_t t0 = 100 * (uint64_t)c;
		coli_trace_rec x[] = {rec(COLI_TR_SPAN, COLI_SPAN_IO_WAIT, c, 0, -1, t0, t0 + 100, 0),
				      rec(COLI_TR_EXPERT, COLI_X_MISS, c, 0, seq[c - 1], t0 + 100, t0 + 100, 0),
				      rec(COLI_TR_TOKEN, COLI_PHASE_DECODE, c, -1, -1, t0, t0 + 100, 1)};
		rc = coli_trace_append_n(w, x, 3, e);
	}
	return rc < 0 ? (coli_trace_writer_abort(w), -1) : coli_trace_writer_close(w, e);
}

/* The more-cache replay of seq under meta: base and more hit rates, the policy named. */
static void policy_case(const char *name, const char *meta, const char *policy, double base, double more)
{
	static const int seq[] = {1, 1, 1, 2, 3, 2, 3, 1};
	coli_err e = {0, ""};
	prof_trace t;
	prof_attrib a;
	int ok = write_seq(meta, seq, 8, &e) == 0 && prof_trace_load(&t, path, &e) == 0 &&
		 prof_attrib_make(&a, &t, NULL, &e) == 0;
	const prof_cache_est *c = &a.v.cache;
	T_CHECK(name, ok && c->ok && !strcmp(c->policy, policy) && c->cache == 2 && c->more == 3 &&
		near(c->base_hit, base) && near(c->more_hit, more) && strstr(a.v.text, policy),
		"%s: ok %d %s at %d: %g, at %d: %g (%s)", e.msg, ok && c->ok, c->policy, c->cache, c->base_hit, c->more,
		c->more_hit, c->why);
	if (ok)
		prof_attrib_release(&a), prof_trace_release(&t);
}

/* Defect 14: the replay is of the run's own policy. 1 1 1 2 3 2 3 1 at 2 slots: LRU hits 1 1 2 3
 * (4 of 8), LFU keeps 1 and thrashes 2 and 3 (hits 1 1 1: 3 of 8); at 3 slots both hit 5. */
static void test_policy_replay(void)
{
	policy_case("replay: the metadata's LFU", "{\"store\":{\"kind\":\"stream\",\"cache_slots\":2,"
		    "\"cache_policy\":\"lfu\"}}", "LFU", 3.0 / 8, 5.0 / 8);
	policy_case("replay: the metadata's LRU", "{\"store\":{\"kind\":\"stream\",\"cache_slots\":2,"
		    "\"cache_policy\":\"lru\"}}", "LRU", 4.0 / 8, 5.0 / 8);
	policy_case("replay: not recorded, LRU on the command line", "{\"argv\":[\"coli-run\",\"--cache-policy\","
		    "\"lru\"],\"store\":{\"kind\":\"stream\",\"cache_slots\":2}}", "LRU", 4.0 / 8, 5.0 / 8);
	policy_case("replay: not recorded at all: LFU (the default)", "{\"store\":{\"kind\":\"stream\","
		    "\"cache_slots\":2}}", "LFU", 3.0 / 8, 5.0 / 8);
	coli_err e = {0, ""};
	prof_trace t;
	prof_attrib a;
	static const int seq[] = {1, 2};
	int ok = write_seq("{\"store\":{\"kind\":\"stream\",\"ram_gib\":0.5}}", seq, 2, &e) == 0 &&
		 prof_trace_load(&t, path, &e) == 0 && prof_attrib_make(&a, &t, NULL, &e) == 0;
	T_CHECK("replay: a cache --ram sized (not recorded): no estimate, and the verdict says why", ok && !a.v.cache.ok &&
		a.v.more_tok_s == 0 && strstr(a.v.text, "No more-cache estimate: --ram sized"), "%s %s", e.msg, a.v.text);
	if (ok)
		prof_attrib_release(&a), prof_trace_release(&t);
}

/* recs written as a one-layer trace (version 3), loaded and attributed: 1 when all went well. */
static int attributed(const coli_trace_rec *recs, size_t n, prof_trace *t, prof_attrib *a, coli_err *e)
{
	coli_trace_info in = {{1}, 1, 8, 1, 0, 1, copies, NULL, 0};
	coli_trace_writer *w;
	return coli_trace_writer_open(&w, path, &in, e) == 0 && coli_trace_append_n(w, recs, n, e) == 0 &&
	       coli_trace_writer_close(w, e) == 0 && prof_trace_load(t, path, e) == 0 && prof_attrib_make(a, t, NULL, e) == 0;
}

/* Defect 6: the caller's time between calls (BETWEEN spans) is a part of the wall, and tokens/s
 * counts it and the tokens the caller counted (the WALL: 3 tokens, as two calls of drafts and a
 * verify make). Two decode calls of 300 ns, each 100 ns of it between calls. */
static void test_between(void)
{
	coli_err e = {0, ""};
	prof_trace t;
	prof_attrib a;
	coli_trace_rec r[] = {
		rec(COLI_TR_SPAN, COLI_SPAN_OTHER, 0, -1, -1, 0, 100, 0), rec(COLI_TR_TOKEN, COLI_PHASE_PREFILL, 0, -1, -1, 0, 100, 2),
		rec(COLI_TR_SPAN, COLI_SPAN_BETWEEN, 1, -1, -1, 100, 150, 0), rec(COLI_TR_SPAN, COLI_SPAN_EXPERTS, 1, 0, -1, 150, 350, 0),
		rec(COLI_TR_SPAN, COLI_SPAN_BETWEEN, 1, -1, -1, 350, 400, 0), rec(COLI_TR_TOKEN, COLI_PHASE_DECODE, 1, -1, -1, 100, 400, 1),
		rec(COLI_TR_SPAN, COLI_SPAN_EXPERTS, 2, 0, -1, 400, 600, 0), rec(COLI_TR_SPAN, COLI_SPAN_BETWEEN, 2, -1, -1, 600, 700, 0),
		rec(COLI_TR_TOKEN, COLI_PHASE_DECODE, 2, -1, -1, 400, 700, 1), rec(COLI_TR_WALL, COLI_PHASE_DECODE, 3, -1, -1, 100, 700, 3)};
	int ok = attributed(r, 10, &t, &a, &e);
	T_CHECK("between calls: written (version 3) and attributed", ok && t.version == 3, "%s", e.msg);
	if (!ok)
		return;
	const prof_phase *d = &a.ph[COLI_PHASE_DECODE];
	T_CHECK("between calls: a part of the decode wall, tokens/s over the whole, the tokens the WALL counted",
		near(d->wall, 600e-9) && near(d->part[PART_BETWEEN], 200e-9) && near(d->part[PART_EXPERTS], 400e-9) &&
		d->part[PART_UNTRACED] == 0 && d->calls == 2 && d->positions == 3 && near(a.v.tok_s, 3 / 600e-9) &&
		a.v.bound == PART_EXPERTS, "wall %g between %g calls %d tokens %g tok/s %g", d->wall, d->part[PART_BETWEEN],
		d->calls, d->positions, a.v.tok_s);
	prof_inputs in2 = {.path = path, .trace = t};
	char *md = prof_report_md(&in2, &a, NULL, "none");
	T_CHECK("between calls: its row in the table", md && strstr(md, "| between calls | 0.000000 | 0.0% | 0.000000 | 33.3% |") &&
		!strstr(md, "version 1 trace"), "%s", md);
	free(md);
	in2.trace.version = 1;
	md = prof_report_md(&in2, &a, NULL, "none");
	T_CHECK("a version 1 trace: the report says its wall lacks the time between calls", md &&
		strstr(md, "A version 1 trace: the time between forward calls"), "%s", md);
	free(md);
	json_t *j = prof_attrib_json(&a, &t);
	T_CHECK("between calls: JSON parts_s.between_calls, no probe is null", j && near(json_number_value(json_object_get(
		json_object_get(json_object_get(json_object_get(j, "phases"), "decode"), "parts_s"), "between_calls")), 200e-9) &&
		json_is_null(json_object_get(json_array_get(json_object_get(j, "disks"), 0), "probe_mb_per_s")), "bad JSON");
	json_decref(j);
	T_CHECK("a run with no I/O wait: no disk-2x offer", !strstr(a.v.text, "disk 2x") &&
		strstr(a.v.text, "No I/O wait"), "%s", a.v.text);
	prof_attrib_release(&a);
	prof_trace_release(&t);
}

/* Version 3's spans: the sparse selection (INDEXER) counts in what the plan calls attention, the
 * hyper-connections (MIX) in its "other"; each its own row and JSON key. One decode call of 100 ns
 * whose largest part is the selection. */
static void test_new_spans(void)
{
	coli_err e = {0, ""};
	prof_trace t;
	prof_attrib a;
	coli_trace_rec r[] = {
		rec(COLI_TR_SPAN, COLI_SPAN_MIX, 0, 0, -1, 0, 10, 0), rec(COLI_TR_SPAN, COLI_SPAN_ATTENTION, 0, 0, -1, 10, 30, 0),
		rec(COLI_TR_SPAN, COLI_SPAN_INDEXER, 0, 0, -1, 30, 60, 0), rec(COLI_TR_SPAN, COLI_SPAN_EXPERTS, 0, 0, -1, 60, 85, 0),
		rec(COLI_TR_SPAN, COLI_SPAN_MIX, 0, 0, -1, 85, 100, 0), rec(COLI_TR_TOKEN, COLI_PHASE_DECODE, 0, -1, -1, 0, 100, 1)};
	int ok = attributed(r, 6, &t, &a, &e);
	T_CHECK("version 3 spans: written and attributed", ok, "%s", e.msg);
	if (!ok)
		return;
	const prof_phase *d = &a.ph[COLI_PHASE_DECODE];
	T_CHECK("version 3 spans: sparse selection and hyper-connections parts; the plan's attention and other",
		near(d->part[PART_INDEXER], 30e-9) && near(d->part[PART_MIX], 25e-9) && near(d->part[PART_ATTENTION], 20e-9) &&
		near(prof_attention_s(d), 50e-9) && near(prof_other_s(d), 25e-9) && a.v.bound == PART_INDEXER,
		"indexer %g mix %g attention %g", d->part[PART_INDEXER], d->part[PART_MIX], prof_attention_s(d));
	prof_inputs in2 = {.path = path, .trace = t};
	char *md = prof_report_md(&in2, &a, NULL, "none");
	T_CHECK("version 3 spans: their rows in the table", md && strstr(md, "| sparse selection | 0.000000 | 0.0% | 0.000000 | 30.0% |") &&
		strstr(md, "| hyper-connections | 0.000000 | 0.0% | 0.000000 | 25.0% |"), "%s", md);
	free(md);
	json_t *j = prof_attrib_json(&a, &t);
	json_t *parts = json_object_get(json_object_get(json_object_get(j, "phases"), "decode"), "parts_s");
	T_CHECK("version 3 spans: JSON parts_s.sparse_selection and hyper_connections",
		near(json_number_value(json_object_get(parts, "sparse_selection")), 30e-9) &&
		near(json_number_value(json_object_get(parts, "hyper_connections")), 25e-9), "bad JSON");
	json_decref(j);
	prof_attrib_release(&a);
	prof_trace_release(&t);
}

static void test_order(void)
{
	coli_err e = {0, ""};
	coli_trace_info in = {{1}, 2, 8, 2, 0, 1, copies, NULL, 0};
	coli_trace_writer *w;
	prof_trace t;
	coli_trace_rec r[] = {rec(COLI_TR_TOKEN, 1, 0, -1, -1, 0, 10, 1), rec(COLI_TR_SPAN, 0, 2, 0, -1, 10, 20, 0)};
	int ok = coli_trace_writer_open(&w, path, &in, &e) == 0 && coli_trace_append_n(w, r, 2, &e) == 0 &&
		 coli_trace_writer_close(w, &e) == 0;
	T_CHECK("out-of-order trace written", ok, "%s", e.msg);
	T_CHECK("a span of call 2 after call 0 is refused, naming the record", prof_trace_load(&t, path, &e) < 0 &&
		e.code == COLI_EDATA && strstr(e.msg, "record 1") && strstr(e.msg, "out of order"), "%s", e.msg);
	ok = coli_trace_writer_open(&w, path, &in, &e) == 0 && coli_trace_writer_close(w, &e) == 0;
	T_CHECK("an empty trace is refused", ok && prof_trace_load(&t, path, &e) < 0 && strstr(e.msg, "no forward call"),
		"%s", e.msg);
}

static void test_html(void)
{
	coli_err e = {0, ""};
	char *b = prof_base64((const unsigned char *)"foobar", 6), *b1 = prof_base64((const unsigned char *)"fo", 2);
	T_CHECK("base64 (RFC 4648 vectors)", b && b1 && !strcmp(b, "Zm9vYmFy") && !strcmp(b1, "Zm8="), "%s %s", b, b1);
	free(b), free(b1);
	char dir[] = "/tmp/coli-test-html.XXXXXX";
	T_CHECK("scratch folder", mkdtemp(dir) != NULL, "mkdtemp");
	char *img = coli_path_join(dir, "a.png");
	coli_write_atomic(img, "\x89PNG", 4, &e);
	size_t n;
	char *h = prof_html("# T <x>\n\n| a | b |\n|---|---:|\n| `c` | **d** |\n\n![cap](a.png)\n\n- [l](u)\n", dir, "t", &n, &e);
	T_CHECK("HTML: heading escaped, table, code, bold, image inlined, list, link", h &&
		strstr(h, "<h1>T &lt;x&gt;</h1>") && strstr(h, "<th>a</th>") && strstr(h, "<td><code>c</code></td>") &&
		strstr(h, "<strong>d</strong>") && strstr(h, "src=\"data:image/png;base64,iVBORw==\"") &&
		strstr(h, "<li><a href=\"u\">l</a></li>") && !strstr(h, "---"), "%s", h ? h : e.msg);
	free(h);
	h = prof_html("![gone](b.png)\n", dir, "t", &n, &e);
	T_CHECK("HTML: a missing image is an error naming it", !h && strstr(e.msg, "b.png"), "%s", e.msg);
	unlink(img);
	free(img);
	rmdir(dir);
}

int main(void)
{
	snprintf(path, sizeof(path), "/tmp/coli-test-profile-%d.coli_trace", (int)getpid());
	test_known();
	test_cache_estimate();
	test_policy_replay();
	test_between();
	test_new_spans();
	test_order();
	test_html();
	unlink(path);
	T_EXIT();
}
