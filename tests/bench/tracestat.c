/* tracestat.c: coli-tracestat, a .coli_trace summarised as one JSON line (for the tests and the
 * trace-overhead benchmark; coli-profile is the user's tool): calls by phase, each span kind's
 * total, each outcome's count, reads and their bytes, and how well each call's spans tile it:
 * gaps or overlaps between consecutive spans, and the worst |sum of spans - call| / call.
 *
 * usage: coli-tracestat TRACE      exit 1 when the trace does not read */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

typedef struct sums {
	long calls[2], spans, gaps, reads, reads_failed, records;
	long outcomes[COLI_X_N];
	uint64_t span_ns[COLI_SPAN_N], read_bytes, positions[2];
	double worst;             /* largest |sum of a call's spans - its duration| / duration */
	uint64_t call_sum, prev_end; /* the call being read: its spans' sum, the last span's end */
	int in_call;
} sums;

static void span(sums *s, const coli_trace_rec *r)
{
	if (s->in_call && r->t0 != s->prev_end)
		s->gaps++;
	s->in_call = 1, s->prev_end = r->t1;
	s->call_sum += r->t1 - r->t0;
	s->span_ns[r->sub] += r->t1 - r->t0;
	s->spans++;
}

static void token(sums *s, const coli_trace_rec *r)
{
	double dur = (double)(r->t1 - r->t0), err = dur > 0 ? ((double)s->call_sum - dur) / dur : 0;
	err = err < 0 ? -err : err;
	s->worst = err > s->worst ? err : s->worst;
	s->calls[r->sub]++, s->positions[r->sub] += r->n;
	s->call_sum = 0, s->in_call = 0;
}

static void add(sums *s, const coli_trace_rec *r)
{
	s->records++;
	if (r->kind == COLI_TR_SPAN)
		span(s, r);
	else if (r->kind == COLI_TR_TOKEN)
		token(s, r);
	else if (r->kind == COLI_TR_EXPERT)
		s->outcomes[r->sub]++;
	else if (r->kind == COLI_TR_READ)
		s->reads++, s->read_bytes += r->sub & 1 ? r->n : 0, s->reads_failed += !(r->sub & 1);
}

static json_t *summary(const sums *s, const coli_trace_info *in)
{
	static const char *const span_names[COLI_SPAN_N] = {"attention", "router", "experts", "io_wait", "other",
							    "between", "linear", "indexer", "mix"};
	static const char *const x_names[] = {"pin", "hit", "miss", "prefetched", "predicted", "predict_wasted"};
	json_t *sp = json_object(), *x = json_object();
	for (int k = 0; k < COLI_SPAN_N; k++)
		json_object_set_new(sp, span_names[k], json_real((double)s->span_ns[k] / 1e9));
	for (int k = 0; k < COLI_X_N; k++)
		json_object_set_new(x, x_names[k], json_integer(s->outcomes[k]));
	return json_pack("{s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:o, s:o, s:I, s:I, s:I}", "n_layers",
			 in->n_layers, "n_experts", in->n_experts, "top_k", in->top_k, "copies", in->n_copies,
			 "records", (json_int_t)s->records, "prefill_calls", (json_int_t)s->calls[0], "decode_calls",
			 (json_int_t)s->calls[1], "prefill_positions", (json_int_t)s->positions[0], "spans",
			 (json_int_t)s->spans, "span_gaps", (json_int_t)s->gaps, "worst_sum_error", s->worst,
			 "span_seconds", sp, "outcomes", x, "reads", (json_int_t)s->reads, "read_bytes",
			 (json_int_t)s->read_bytes, "reads_failed", (json_int_t)s->reads_failed);
}

int main(int argc, char **argv)
{
	coli_trace_reader *r = NULL;
	coli_err e = {0, ""};
	coli_trace_rec rec;
	sums s = {0};
	int rc;
	static const char usage[] =
		"usage: coli-tracestat TRACE\n"
		"\n"
		"A .coli_trace (coli-run --trace) read and checked, summarised as one JSON line: calls by\n"
		"phase, each span kind's seconds, each outcome's count, reads and bytes, and how the spans\n"
		"tile each call (span_gaps, worst_sum_error). Exit 1 when the trace does not read.\n"
		"\n"
		"  -h, --help  this text\n";
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
		return fputs(usage, stdout), 0;
	if (argc != 2) {
		fprintf(stderr, "coli-tracestat: give one TRACE\n%s", usage);
		return 2;
	}
	if (coli_trace_reader_open(&r, argv[1], &e) < 0) {
		fprintf(stderr, "coli-tracestat: %s\n", e.msg);
		return 1;
	}
	while ((rc = coli_trace_next(r, &rec, &e)) == 1)
		add(&s, &rec);
	if (rc == 0) {
		json_t *j = summary(&s, coli_trace_reader_info(r));
		char *out = json_dumps(j, JSON_COMPACT);
		puts(out);
		free(out);
		json_decref(j);
	} else {
		fprintf(stderr, "coli-tracestat: %s\n", e.msg);
	}
	coli_trace_reader_close(r);
	return rc == 0 ? 0 : 1;
}
