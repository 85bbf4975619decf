/* test_route.c: the route_trace v1 reader: the real Qwen3-30B-A3B trace's shape and a few of its
 * values, a small valid trace (with the allowed hole, CRLF, no final newline), and one malformed
 * input per rule of formats/route.md, each refused naming the field and the line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "route.h"
#include "t.h"

#define REAL "tests/data/traces/qwen3-30b-a3b.route.csv"

/* A valid trace: 2 layers x 8 experts, top-2; prompt positions 0, 1 (0 lacks the last layer),
 * decode position 2. Line i + 1 of the file is base[i]. */
static const char *const base[] = {
	"# route_trace v1",
	"# model=/m/q 3.gguf arch=qwen3moe n_layer=2 n_expert=8 n_expert_used=2",
	"# layer=0 expert_bytes=100 dense_bytes=10",
	"# layer=1 expert_bytes=100 dense_bytes=10",
	"turn,phase,step,layer,slot,expert,weight,residency,expert_bytes",
	"0,0,0,0,0,3,0.6,0,100",
	"0,0,0,0,1,5,0.4,0,100",
	"0,0,1,0,0,1,0.7,1,0",
	"0,0,1,0,1,2,0.3,0,100",
	"0,0,1,1,0,7,0.5,0,100",
	"0,0,1,1,1,0,0.5,0,100",
	"0,1,2,0,0,4,0.9,0,100",
	"0,1,2,0,1,6,0.1,0,100",
	"0,1,2,1,0,2,0.8,0,100",
	"0,1,2,1,1,3,0.2,0,100",
};
#define N_BASE (int)(sizeof(base) / sizeof(base[0]))

/* One change of the base: line `line` (1-based) replaced by text, deleted (text NULL), or, with
 * line N_BASE + 1, text appended. */
typedef struct edit {
	int line;
	const char *text;
} edit;

static char buf[4096];

#define N_EDITS 3

/* The base with the edits of ed (NULL: none; line 0: unused), or with rows (NULL: the base's)
 * after its five header lines; each line ending in eol. */
static size_t make(const edit *ed, const char *rows, const char *eol)
{
	size_t n = 0;
	for (int i = 1; i <= N_BASE + 1; i++) {
		const char *t = i <= N_BASE && (!rows || i <= 5) ? base[i - 1] : rows && i == 6 ? rows : NULL;
		for (int j = 0; ed && j < N_EDITS; j++)
			if (ed[j].line == i)
				t = ed[j].text;
		if (t)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s", t, eol);
	}
	return n;
}

static int open_text(const char *text, size_t n, coli_route **r, coli_err *e)
{
	return coli_route_open_mem(r, text, n, "t.route.csv", e);
}

static void test_real(void)
{
	coli_route *r = NULL;
	coli_err e = {0, ""};
	int rc = coli_route_open(&r, REAL, &e);
	T_CHECK("route: the real trace reads", rc == 0, "%s", e.msg);
	if (rc)
		return;
	T_CHECK("route: real shape 48 layers x 128 experts, top-6", r->n_layers == 48 && r->n_experts == 128 && r->top_k == 6,
		"%d %d %d", r->n_layers, r->n_experts, r->top_k);
	T_CHECK("route: real positions 156, prompt 28, 27 absent (layer 47 of prompt positions 0..26)",
		r->n_positions == 156 && r->n_prefill == 28 && r->n_absent == 27, "%d %d %d", r->n_positions, r->n_prefill,
		r->n_absent);
	T_CHECK("route: real header", strcmp(r->arch, "qwen3moe") == 0 && r->expert_bytes[6] == 2654208 &&
		r->dense_bytes[0] == 11953152 && strstr(r->model, "Qwen3-30B-A3B-Q4_K_M.gguf"), "%s %s", r->arch, r->model);
	const float *w = NULL;
	const int32_t *x = coli_route_at(r, 0, 0, &w);
	static const int32_t p0[6] = {49, 19, 58, 29, 16, 70}, p28[6] = {60, 49, 78, 50, 106, 32};
	T_CHECK("route: real (0, 0) in slot order", x && memcmp(x, p0, sizeof(p0)) == 0 && w[0] == 0.221297f, "%d", x ? x[0] : -1);
	x = coli_route_at(r, 28, 0, &w);
	T_CHECK("route: real (28, 0): the first decode token", x && memcmp(x, p28, sizeof(p28)) == 0 && w[5] == 0.0904526f,
		"%d", x ? x[0] : -1);
	x = coli_route_at(r, 155, 47, &w);
	T_CHECK("route: real (155, 47), the last row", x && x[5] == 126 && w[5] == 0.0559865f, "%d", x ? x[5] : -1);
	T_CHECK("route: real (26, 47) absent, (27, 47) present",
		!coli_route_at(r, 26, 47, NULL) && coli_route_at(r, 27, 47, NULL) && coli_route_at(r, 27, 47, NULL)[0] == 105, "%s", "");
	T_CHECK("route: out of range is NULL", !coli_route_at(r, 156, 0, NULL) && !coli_route_at(r, 0, 48, NULL) &&
		!coli_route_at(r, -1, 0, NULL), "%s", "");
	coli_route_close(r);
}

static void test_small(void)
{
	static const char *const eols[] = {"\n", "\r\n"};
	for (int i = 0; i < 2; i++) {
		coli_route *r = NULL;
		coli_err e = {0, ""};
		size_t n = make(NULL, NULL, eols[i]);
		int rc = open_text(buf, n - (i ? 0 : 1), &r, &e); /* LF: without the final newline */
		T_CHECK(i ? "route: small trace with CRLF" : "route: small trace without a final newline",
			rc == 0 && r->n_positions == 3 && r->n_prefill == 2 && r->n_absent == 1 && r->n_layers == 2 &&
			strcmp(r->model, "/m/q 3.gguf") == 0, "%s", e.msg);
		if (rc)
			continue;
		const float *w;
		const int32_t *x = coli_route_at(r, 1, 1, &w);
		T_CHECK("route: small values", x && x[0] == 7 && x[1] == 0 && w[1] == 0.5f && !coli_route_at(r, 0, 1, NULL) &&
			coli_route_at(r, 2, 1, NULL)[1] == 3, "%s", "");
		coli_route_close(r);
	}
}

typedef struct bad_case {
	const char *name;
	edit ed[N_EDITS];
	const char *want;          /* in the message: the line and the field */
} bad_case;

static const bad_case cases[] = {
	{"not a route trace", {{1, "# route trace v1"}}, "line 1: magic: "},
	{"another version", {{1, "# route_trace v2"}}, "line 1: version: '2'"},
	{"model line malformed", {{2, "# modl=x arch=a n_layer=2 n_expert=8 n_expert_used=2"}}, "line 2: model: "},
	{"no arch", {{2, "# model=x n_layer=2 n_expert=8 n_expert_used=2"}}, "line 2: model: "},
	{"n_layer 0", {{2, "# model=x arch=a n_layer=0 n_expert=8 n_expert_used=2"}}, "line 2: n_layer: 0 out of range 1..4096"},
	{"n_layer not a number", {{2, "# model=x arch=a n_layer=two n_expert=8 n_expert_used=2"}}, "line 2: n_layer: 'two'"},
	{"n_expert too large", {{2, "# model=x arch=a n_layer=2 n_expert=70000 n_expert_used=2"}},
	 "line 2: n_expert: 70000 out of range 1..65536"},
	{"n_expert_used above n_expert", {{2, "# model=x arch=a n_layer=2 n_expert=8 n_expert_used=9"}},
	 "line 2: n_expert_used: 9 exceeds n_expert 8"},
	{"n_expert_used missing", {{2, "# model=x arch=a n_layer=2 n_expert=8"}}, "line 2: n_expert_used: missing"},
	{"extra key", {{2, "# model=x arch=a n_layer=2 n_expert=8 n_expert_used=2 top=1"}},
	 "line 2: n_expert_used: '2 top=1'"},
	{"layer line out of order", {{3, "# layer=1 expert_bytes=100 dense_bytes=10"}}, "line 3: layer: 1, expected 0"},
	{"a layer line missing", {{4, NULL}}, "line 4: layer: 'turn,phase"},
	{"expert_bytes negative", {{3, "# layer=0 expert_bytes=-1 dense_bytes=10"}}, "line 3: expert_bytes: '-1'"},
	{"dense_bytes missing", {{3, "# layer=0 expert_bytes=100"}}, "line 3: dense_bytes: missing"},
	{"column names", {{5, "turn,phase,step,layer,slot,expert,weight"}}, "line 5: columns: "},
	{"short row", {{6, "0,0,0,0,0,3,0.6,0"}}, "line 6: row: 8 fields, expected 9"},
	{"turn 1", {{6, "1,0,0,0,0,3,0.6,0,100"}}, "line 6: turn: 1: "},
	{"phase 2", {{6, "0,2,0,0,0,3,0.6,0,100"}}, "line 6: phase: 2 out of range 0..1"},
	{"step not a number", {{6, "0,0,x,0,0,3,0.6,0,100"}}, "line 6: step: 'x'"},
	{"step signed", {{6, "0,0,+0,0,0,3,0.6,0,100"}}, "line 6: step: '+0'"},
	{"layer beyond n_layer", {{6, "0,0,0,2,0,3,0.6,0,100"}}, "line 6: layer: 2 out of range 0..1 (n_layer 2)"},
	{"slot beyond top_k", {{6, "0,0,0,0,2,3,0.6,0,100"}}, "line 6: slot: 2 out of range 0..1 (n_expert_used 2)"},
	{"expert beyond n_expert", {{6, "0,0,0,0,0,8,0.6,0,100"}}, "line 6: expert: 8 out of range 0..7 (n_expert 8)"},
	{"weight nan", {{6, "0,0,0,0,0,3,nan,0,100"}}, "line 6: weight: 'nan'"},
	{"weight negative", {{6, "0,0,0,0,0,3,-0.6,0,100"}}, "line 6: weight: '-0.6'"},
	{"weight beyond float", {{6, "0,0,0,0,0,3,1e999,0,100"}}, "line 6: weight: '1e999'"},
	{"weight with junk", {{6, "0,0,0,0,0,3,0.6x,0,100"}}, "line 6: weight: '0.6x'"},
	{"weight in hex", {{6, "0,0,0,0,0,3,0x1p-1,0,100"}}, "line 6: weight: '0x1p-1'"},
	{"residency 2", {{6, "0,0,0,0,0,3,0.6,2,100"}}, "line 6: residency: 2"},
	{"row expert_bytes empty", {{6, "0,0,0,0,0,3,0.6,0,"}}, "line 6: expert_bytes: ''"},
	{"control byte", {{6, "0,0,0,0,0,3,0.6,0,100\t"}}, "line 6: line: control byte 0x09"},
	{"empty line", {{6, ""}}, "line 6: row: 1 fields"},
	{"slot given twice", {{7, "0,0,0,0,0,5,0.4,0,100"}}, "line 7: slot: 0 of position 0 layer 0 given again (first at line 6)"},
	{"expert twice in an entry", {{7, "0,0,0,0,1,3,0.4,0,100"}}, "line 7: expert: 3 twice at position 0 layer 0"},
	{"an entry with a slot missing", {{15, NULL}}, "line 14: slot: position 2 layer 1 has 1 of 2 experts (slot 1 missing)"},
	{"weights rising by slot", {{7, "0,0,0,0,1,5,0.7,0,100"}}, "line 7: weight: 0.7 in slot 1 above 0.6 in slot 0"},
	{"prefill row after decode rows", {{6, NULL}, {N_BASE + 1, "0,0,0,0,0,3,0.6,0,100"}},
	 "line 15: phase: 0 (prefill) after decode rows (from line 11)"},
	{"a position in two phases", {{12, "0,0,2,0,0,4,0.9,0,100"}}, "line 13: phase: 1 at position 2, which is phase 0 at line 12"},
	{"a gap in the positions", {{N_BASE + 1, "0,1,4,0,0,4,0.9,0,100\n0,1,4,0,1,6,0.1,0,100"}},
	 "line 16: step: position 3 has no rows, though the trace reaches 4"},
	{"a step far beyond the rows", {{15, "0,1,1000000,1,1,3,0.2,0,100"}}, "line 15: step: 1000000, but 10 rows cannot fill"},
	{"the last prompt position lacks the last layer", {{10, NULL}, {11, NULL}},
	 "line 8: layer: position 1 (this line) has no rows for layer 1"},
	{"a decode position lacks a layer", {{12, NULL}, {13, NULL}}, "line 12: layer: position 2 (this line) has no rows for layer 0"},
	{"decode at position 0", {{6, NULL}, {7, NULL}, {N_BASE + 1, "0,1,0,0,0,3,0.6,0,100\n0,1,0,0,1,5,0.4,0,100"}},
	 "line 14: phase: 1 (decode) at position 0"},
};

/* Cases whose rows are all their own: {name, want, rows} after the base's header lines. */
static const char *const rows_cases[][3] = {
	{"prefill position after a decode position", "line 10: phase: 0 (prefill) at position 2, after decode position 1",
	 "0,0,0,0,0,3,0.6,0,100\n0,0,0,0,1,5,0.4,0,100\n0,0,0,1,0,3,0.6,0,100\n0,0,0,1,1,5,0.4,0,100\n"
	 "0,0,2,0,0,3,0.6,0,100\n0,0,2,0,1,5,0.4,0,100\n0,0,2,1,0,3,0.6,0,100\n0,0,2,1,1,5,0.4,0,100\n"
	 "0,1,1,0,0,3,0.6,0,100\n0,1,1,0,1,5,0.4,0,100\n0,1,1,1,0,3,0.6,0,100\n0,1,1,1,1,5,0.4,0,100"},
	{"no rows", "t.route.csv: rows: none after the column names", ""},
};

/* Refused, with want in a message that opens with the file's name. */
static void refused(const char *what, size_t n, const char *want)
{
	coli_route *r = NULL;
	coli_err e = {0, ""};
	int rc = open_text(buf, n, &r, &e);
	char name[160];
	snprintf(name, sizeof(name), "route: refused: %s", what);
	T_CHECK(name, rc < 0 && !r && e.code == COLI_EDATA && strstr(e.msg, want) && strncmp(e.msg, "t.route.csv: ", 13) == 0,
		"rc %d, message '%s', expected '%s'", rc, e.msg, want);
}

static void test_bad(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		refused(cases[i].name, make(cases[i].ed, NULL, "\n"), cases[i].want);
	for (size_t i = 0; i < sizeof(rows_cases) / sizeof(rows_cases[0]); i++) {
		size_t n = make(NULL, rows_cases[i][2], "\n");
		refused(rows_cases[i][0], n - !*rows_cases[i][2], rows_cases[i][1]); /* "": no row line at all */
	}
}

static void test_edges(void)
{
	coli_route *r = NULL;
	coli_err e = {0, ""};
	T_CHECK("route: empty file refused", open_text("", 0, &r, &e) < 0 && strstr(e.msg, "line 1: magic: missing"), "%s", e.msg);
	T_CHECK("route: header cut after line 2", open_text(base[0], strlen(base[0]), &r, &e) < 0 &&
		strstr(e.msg, "line 2: model: missing"), "%s", e.msg);
	T_CHECK("route: a missing file names it", coli_route_open(&r, "no/such.route.csv", &e) < 0 && strstr(e.msg, "no/such.route.csv"),
		"%s", e.msg);
	coli_route_close(NULL);
}

int main(void)
{
	test_real();
	test_small();
	test_bad();
	test_edges();
	T_EXIT();
}
