/* test_probe.c: probe.json write/read round trip, one malformed input per validation rule (each
 * refused naming the field), the writer's refusal, and the machine check refusing a probe whose
 * CPU model, cores or disk device is not this machine's. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "machine.h"
#include "probe.h"
#include "t.h"

static char path[256];

static void sample(coli_probe *p)
{
	memset(p, 0, sizeof(*p));
	p->version = COLI_PROBE_VERSION;
	snprintf(p->cpu_model, sizeof(p->cpu_model), "Test CPU @ 1.0GHz");
	snprintf(p->isa, sizeof(p->isa), "avx2 fma f16c");
	p->physical_cores = 2, p->logical_cpus = 4;
	p->ram_total = 24e9, p->ram_available = 20e9, p->cgroup_limit = 3.0 * (1 << 30);
	p->mem_bps_1 = 41.5e9, p->mem_bps_all = 60.25e9;
	p->int4_bps_1 = 1.0 / 3 * 1e10, p->int4_bps_all = 2e10, p->int8_bps_1 = 9e9, p->int8_bps_all = 1.7e10;
	p->int4_prefill_bps_all = 3e10, p->int8_prefill_bps_all = 5e10, p->attn_fma_per_s = 4.5e9;
	p->fp4_bps_1 = 1.25e10, p->fp4_bps_all = 2.5e10, p->fp4_prefill_bps_all = 3.5e10;
	snprintf(p->kernels, sizeof(p->kernels), "avx2");
	snprintf(p->gpus, sizeof(p->gpus), "none found");
	p->cpu_taken = 1.7e9, p->taken = 1.7e9 + 5.5;
	p->n_disks = 2;
	for (int i = 0; i < 2; i++) {
		coli_probe_disk *d = &p->disks[i];
		snprintf(d->dir, sizeof(d->dir), "/mnt/disk%d", i);
		snprintf(d->dev, sizeof(d->dev), "loop%d", i);
		d->major = 7, d->minor = (unsigned)i;
		snprintf(d->identity, sizeof(d->identity), "size=131072 backing_file=/x/%d.img", i);
		snprintf(d->fs, sizeof(d->fs), "ext4");
		d->free_bytes = 5e10, d->record_bytes = 2510848, d->file_bytes = 512 << 20;
		d->n_qd = 3, d->qd[0] = 1, d->qd[1] = 4, d->qd[2] = 16;
		d->direct_bps[0] = 1.1e9, d->direct_bps[1] = 2.2e9, d->direct_bps[2] = 3.3e9 / 7;
		d->burst_bps = 2.5e9, d->buffered_bps = 8e8, d->latency_s = 4.76e-5, d->taken = 1.7e9 + 3;
	}
}

/* The value at a dotted path ("disks.0.qd") of root, creating nothing; NULL when absent. */
static json_t *at(json_t *root, const char *dotted, char *last, size_t size)
{
	char buf[128], *save = NULL, *key = NULL;
	json_t *o = root;
	snprintf(buf, sizeof(buf), "%s", dotted);
	for (char *t = strtok_r(buf, ".", &save); t; t = strtok_r(NULL, ".", &save)) {
		if (key)
			o = json_is_array(o) ? json_array_get(o, (size_t)atoi(key)) : json_object_get(o, key);
		key = t;
	}
	snprintf(last, size, "%s", key);
	return o;
}

/* Sets (or, v NULL, deletes) the value at a dotted path. */
static void set(json_t *root, const char *dotted, json_t *v)
{
	char key[64];
	json_t *o = at(root, dotted, key, sizeof(key));
	if (json_is_array(o))
		json_array_set_new(o, (size_t)atoi(key), v);
	else if (v)
		json_object_set_new(o, key, v);
	else
		json_object_del(o, key);
}

typedef struct bad_case {
	const char *name, *path, *value; /* value: JSON text, or NULL to delete the field */
	const char *want;                /* in the message */
} bad_case;

static const bad_case cases[] = {
	{"format", "format", "\"coli-plan\"", "format: not \"coli-probe\""},
	{"version", "version", "2", "version: 2, this reader knows 1"},
	{"version's type", "version", "\"1\"", "version: a string, expected an integer"},
	{"a missing field", "cpu_model", NULL, "cpu_model: missing"},
	{"a string's type", "cpu_model", "7", "cpu_model: an integer, expected a string"},
	{"an empty string", "cpu_model", "\"\"", "cpu_model: empty"},
	{"a string too long", "kernels", "\"avx512-and-then-some-more-letters-to-overflow\"", "kernels: longer than 31"},
	{"a number's type", "ram_total", "\"24e9\"", "ram_total: a string, expected a number"},
	{"an integer's type", "physical_cores", "2.0", "physical_cores: a number, expected an integer"},
	{"cores out of range", "physical_cores", "0", "physical_cores: 0 out of range [1, 65536]"},
	{"logical below physical", "logical_cpus", "1", "logical_cpus: 1, fewer than physical_cores"},
	{"available above total", "ram_available", "3e10", "ram_available: 30000000000, more than ram_total"},
	{"a bandwidth of 0", "int4_bps_all", "0", "int4_bps_all: 0 out of range (0, 1e+15]"},
	{"a negative bandwidth", "mem_bps_1", "-5.0", "mem_bps_1: -5 out of range (0, 1e+15]"},
	{"a huge bandwidth", "int8_prefill_bps_all", "1e300", "int8_prefill_bps_all: 1.0000000000000001e+300 out of range"},
	{"a time of 0", "taken", "0", "taken: 0 out of range (0, 1e+11]"},
	{"cgroup_limit's word", "cgroup_limit", "\"unlimited\"", "cgroup_limit: a string, expected a number or \"none\""},
	{"cgroup_limit of 0", "cgroup_limit", "0", "cgroup_limit: 0, must be > 0"},
	{"disks' type", "disks", "{}", "disks: an object, expected an array"},
	{"a disk's type", "disks.0", "[]", "disks[0]: an array, expected an object"},
	{"a relative dir", "disks.1.dir", "\"mnt/x\"", "disks[1].dir: 'mnt/x' is not an absolute path"},
	{"two entries for one dir", "disks.1.dir", "\"/mnt/disk0\"", "disks[1].dir: '/mnt/disk0' already in disks[0]"},
	{"major out of range", "disks.0.major", "5000", "disks[0].major: 5000 out of range [0, 4095]"},
	{"an empty dev", "disks.0.dev", "\"\"", "disks[0].dev: empty"},
	{"free_bytes negative", "disks.0.free_bytes", "-1", "disks[0].free_bytes: -1 out of range [0, 9.22337e+18]"},
	{"record_bytes unaligned", "disks.0.record_bytes", "5000", "disks[0].record_bytes: 5000, not a multiple of 4096"},
	{"file_bytes below a record", "disks.0.file_bytes", "8192", "disks[0].file_bytes: 8192, less than record_bytes"},
	{"latency of 0", "disks.0.latency_s", "0.0", "disks[0].latency_s: 0 out of range (0, 1000]"},
	{"qd's type", "disks.0.qd", "4", "disks[0].qd: an integer, expected an array"},
	{"no queue depth", "disks.0.qd", "[]", "disks[0].qd: 0 queue depths, expected 1..8"},
	{"qd out of range", "disks.0.qd.0", "0", "disks[0].qd[0]: 0 out of range [1, 1024]"},
	{"qd not ascending", "disks.0.qd.2", "4", "disks[0].qd[2]: 4, not above the one before"},
	{"a qd's type", "disks.0.qd.1", "4.5", "disks[0].qd[1]: a number, expected an integer"},
	{"direct_bps' count", "disks.1.direct_bps", "[1e9, 2e9]", "disks[1].direct_bps: 2 entries, qd has a different count"},
	{"a direct_bps of 0", "disks.1.direct_bps.1", "0", "disks[1].direct_bps[1]: 0 out of range (0, 1e+15]"},
	{"a direct_bps' type", "disks.1.direct_bps.0", "null", "disks[1].direct_bps[0]: null, expected a number"},
	{"a negative optional figure", "attn_fma_per_s", "-1", "attn_fma_per_s: -1 out of range [0, 1e+15]"},
	{"an optional figure's type", "disks.1.burst_bps", "\"fast\"", "disks[1].burst_bps: a string, expected a number"},
};

/* The sample's JSON with one field changed, parsed: the message, or "" when it was accepted. */
static const char *parse_changed(const coli_probe *p, const bad_case *c, coli_err *e)
{
	char *text = coli_probe_json(p, 0, e);
	json_t *root = text ? json_loads(text, 0, NULL) : NULL;
	json_t *v = c->value ? json_loads(c->value, JSON_DECODE_ANY, NULL) : NULL;
	coli_probe q;
	set(root, c->path, v);
	char *bad = json_dumps(root, JSON_COMPACT);
	e->msg[0] = 0;
	int rc = bad ? coli_probe_parse(bad, strlen(bad), "bad.json", &q, e) : -2;
	free(text);
	free(bad);
	json_decref(root);
	return rc == 0 ? "" : e->msg;
}

static void check_cases(const coli_probe *p)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		coli_err e = {0, ""};
		const char *msg = parse_changed(p, &cases[i], &e);
		char name[160];
		snprintf(name, sizeof(name), "parse: refuses %s, naming the field", cases[i].name);
		T_CHECK(name, *msg && strstr(msg, cases[i].want) && !strncmp(msg, "bad.json: ", 10) && e.code == COLI_EDATA,
			"message '%s', want 'bad.json: ...%s'", msg, cases[i].want);
	}
}

static void check_text(const char *text, const char *want, const char *name)
{
	coli_probe q;
	coli_err e = {0, ""};
	int rc = coli_probe_parse(text, strlen(text), "t.json", &q, &e);
	T_CHECK(name, rc < 0 && strstr(e.msg, want), "rc %d, message '%s', want '%s'", rc, e.msg, want);
}

static void check_lenient(const coli_probe *p)
{
	static const bad_case ok[] = {
		{"an unknown field", "future_field", "{\"x\": 1}", ""},
		{"an integer where a number is expected", "ram_total", "24000000000", ""},
		{"\"none\" for cgroup_limit", "cgroup_limit", "\"none\"", ""},
		{"no disks", "disks", "[]", ""},
		{"a probe without revision 1.1's attn_fma_per_s", "attn_fma_per_s", NULL, ""},
		{"a probe without revision 1.1's burst_bps", "disks.0.burst_bps", NULL, ""},
		{"a probe without revision 1.2's fp4_bps_all", "fp4_bps_all", NULL, ""},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		coli_err e = {0, ""};
		char name[160];
		snprintf(name, sizeof(name), "parse: accepts %s", ok[i].name);
		const char *msg = parse_changed(p, &ok[i], &e);
		T_CHECK(name, !*msg, "refused: %s", msg);
	}
	check_text("{\"format\": ", "t.json: line 1", "parse: refuses text that is not JSON, with its place");
	check_text("[1]", "t.json: an array, expected a JSON object", "parse: refuses a top level that is not an object");
	check_text("{\"format\": \"coli-probe\", \"format\": \"coli-probe\"}", "duplicate", "parse: refuses a duplicate key");
}

/* Revisions 1.1's and 1.2's optional figures read as 0 ("not measured") from a file without them. */
static void check_optional(const coli_probe *p)
{
	coli_probe old = *p, q;
	coli_err e = {0, ""};
	char *text = coli_probe_json(p, 0, &e);
	json_t *root = text ? json_loads(text, 0, NULL) : NULL;
	set(root, "attn_fma_per_s", NULL);
	set(root, "disks.1.burst_bps", NULL);
	set(root, "fp4_bps_1", NULL);
	set(root, "fp4_bps_all", NULL);
	set(root, "fp4_prefill_bps_all", NULL);
	char *t = json_dumps(root, JSON_COMPACT);
	old.attn_fma_per_s = 0, old.disks[1].burst_bps = 0;
	old.fp4_bps_1 = 0, old.fp4_bps_all = 0, old.fp4_prefill_bps_all = 0;
	int rc = t ? coli_probe_parse(t, strlen(t), "old.json", &q, &e) : -1;
	T_CHECK("parse: a probe of revision 1.0 reads its missing figures as 0, the rest as written",
		rc == 0 && !memcmp(&q, &old, sizeof(q)), "rc %d: %s", rc, e.msg);
	free(text);
	free(t);
	json_decref(root);
}

static void check_roundtrip(const coli_probe *p)
{
	coli_probe q;
	coli_err e = {0, ""};
	char tmp[300];
	int rc = coli_probe_write(path, p, &e);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	T_CHECK("write: atomic, no .tmp left", rc == 0 && access(path, F_OK) == 0 && access(tmp, F_OK) != 0, "%s", e.msg);
	memset(&q, 0x5a, sizeof(q));
	rc = coli_probe_read(path, &q, &e);
	T_CHECK("read: the round trip is exact, every field", rc == 0 && !memcmp(&q, p, sizeof(q)), "rc %d: %s", rc, e.msg);
	coli_probe none = *p;
	none.cgroup_limit = 0;
	rc = coli_probe_write(path, &none, &e) == 0 ? coli_probe_read(path, &q, &e) : -1;
	T_CHECK("read: no cgroup limit round-trips as 0 (\"none\" in the file)", rc == 0 && q.cgroup_limit == 0, "%s", e.msg);
	coli_probe bad = *p;
	bad.disks[1].qd[1] = 0;
	unlink(path);
	rc = coli_probe_write(path, &bad, &e);
	T_CHECK("write: refuses a probe the reader would refuse, writes nothing",
		rc < 0 && strstr(e.msg, "disks[1].qd[1]") && strstr(e.msg, path) && access(path, F_OK) != 0, "rc %d: %s", rc,
		e.msg);
	e.code = 0;
	rc = coli_probe_read("/nonexistent/probe.json", &q, &e);
	T_CHECK("read: a missing file is an I/O error", rc < 0 && e.code == COLI_EIO, "rc %d code %d", rc, e.code);
}

/* This machine's facts with plausible measurements, so that it validates. */
static int this_machine(coli_probe *m, const char *dir, coli_err *e)
{
	sample(m);
	m->n_disks = 0;
	if (coli_probe_machine(m, e) < 0 || coli_probe_disk_ident(dir, &m->disks[0], e) < 0)
		return -1;
	coli_probe_disk *d = &m->disks[0];
	d->record_bytes = 4096, d->file_bytes = 1 << 20, d->n_qd = 1, d->qd[0] = 1, d->direct_bps[0] = 1e9;
	d->buffered_bps = 1e9, d->latency_s = 1e-4, d->taken = 1.7e9;
	m->n_disks = 1;
	return coli_probe_validate(m, "machine", e);
}

static void check_machine(const char *dir)
{
	coli_probe m, x;
	coli_err e = {0, ""};
	int rc = this_machine(&m, dir, &e);
	T_CHECK("machine: this machine's facts validate", rc == 0 && m.physical_cores >= 1 && *m.cpu_model, "%s", e.msg);
	T_CHECK("machine: the physical cores are the engine's default threads' count",
		m.physical_cores == coli_machine_physical_cores(), "%d", m.physical_cores);
	rc = coli_probe_check_machine(&m, "p.json", &e);
	T_CHECK("machine: a probe of this machine passes", rc == 0, "%s", e.msg);
	x = m;
	snprintf(x.cpu_model, sizeof(x.cpu_model), "Another CPU");
	rc = coli_probe_check_machine(&x, "p.json", &e);
	T_CHECK("machine: refuses another cpu_model, naming both", rc < 0 && strstr(e.msg, "p.json: cpu_model 'Another CPU' is not this machine's '"),
		"rc %d: %s", rc, e.msg);
	x = m;
	x.physical_cores = m.physical_cores + 1, x.logical_cpus = m.logical_cpus + 1;
	rc = coli_probe_check_machine(&x, "p.json", &e);
	T_CHECK("machine: refuses another core count", rc < 0 && strstr(e.msg, "p.json: physical_cores"), "rc %d: %s", rc, e.msg);
	x = m;
	x.disks[0].minor ^= 1;
	rc = coli_probe_check_machine(&x, "p.json", &e);
	T_CHECK("machine: refuses a folder now on another device", rc < 0 && strstr(e.msg, "p.json: disks[0]: ") && strstr(e.msg, "probe it again"),
		"rc %d: %s", rc, e.msg);
	x = m;
	snprintf(x.disks[0].dir, sizeof(x.disks[0].dir), "/nonexistent/folder");
	rc = coli_probe_check_machine(&x, "p.json", &e);
	T_CHECK("machine: refuses a folder that is not here", rc < 0 && strstr(e.msg, "/nonexistent/folder") && strstr(e.msg, "disks[0].dir"),
		"rc %d: %s", rc, e.msg);
	coli_probe_disk d;
	e.code = 0;
	rc = coli_probe_disk_ident("/nonexistent/folder", &d, &e);
	T_CHECK("disk_ident: a missing folder is an I/O error naming it", rc < 0 && e.code == COLI_EIO && strstr(e.msg, "/nonexistent/folder"),
		"rc %d: %s", rc, e.msg);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	coli_probe p;
	snprintf(path, sizeof(path), "%s/coli-test-probe.%d.json", tmp, (int)getpid());
	sample(&p);
	coli_err e = {0, ""};
	T_CHECK("validate: the sample is valid", coli_probe_validate(&p, "sample", &e) == 0, "%s", e.msg);
	check_roundtrip(&p);
	check_cases(&p);
	check_lenient(&p);
	check_optional(&p);
	check_machine(tmp);
	unlink(path);
	T_EXIT();
}
