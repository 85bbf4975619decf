/* plan.c: reading and validating plan.json (formats/plan.md). */
#include "plan.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

const char *const coli_plan_knobs[] = {
	"ram", "ctx", "threads", "cache-slots", "pins", "cache-policy", "usage", "prefetch", "io", "queue-depth", "mirror", "draft", "precision", NULL,
};

int coli_plan_knob_index(const char *name)
{
	for (int i = 0; coli_plan_knobs[i]; i++)
		if (strcmp(coli_plan_knobs[i], name) == 0)
			return i;
	return -1;
}

/* What the reader is working on: the file's name for errors. */
typedef struct reader {
	const char *path;
	coli_plan *p;
	coli_err *e;
} reader;

static int bad(const reader *r, const char *field, const char *why)
{
	return coli_errf(r->e, COLI_EDATA, "%s: %s: %s", r->path, field, why);
}

/* o's member key of type t (field: where o is, for errors); NULL with the error when it is
 * missing or of another type. */
static json_t *member(const reader *r, json_t *o, const char *field, const char *key, json_type t)
{
	static const char *const names[] = {"an object", "an array", "a string", "an integer", "a number"};
	json_t *v = json_object_get(o, key);
	if (v && (json_typeof(v) == t || (t == JSON_REAL && json_is_number(v))))
		return v;
	char f[128];
	snprintf(f, sizeof(f), "%s%s%s", field, *field ? "." : "", key);
	if (!v)
		bad(r, f, "missing");
	else
		coli_errf(r->e, COLI_EDATA, "%s: %s: not %s", r->path, f, t <= JSON_REAL ? names[t] : "valid");
	return NULL;
}

/* A string member copied into out[cap]. */
static int string_to(const reader *r, json_t *o, const char *field, const char *key, char *out, size_t cap)
{
	json_t *v = member(r, o, field, key, JSON_STRING);
	if (!v)
		return -1;
	if (strlen(json_string_value(v)) >= cap) {
		char f[128];
		snprintf(f, sizeof(f), "%s.%s", field, key);
		return bad(r, f, "too long");
	}
	strcpy(out, json_string_value(v));
	return 0;
}

/* A number member in [lo, hi]. */
static int number_to(const reader *r, json_t *o, const char *field, const char *key, double lo, double hi,
		     double *out)
{
	json_t *v = json_object_get(o, key);
	char f[128];
	snprintf(f, sizeof(f), "%s.%s", field, key);
	if (!v || !json_is_number(v))
		return bad(r, f, v ? "not a number" : "missing");
	double d = json_number_value(v);
	if (!isfinite(d) || d < lo || d > hi)
		return coli_errf(r->e, COLI_EDATA, "%s: %s: %g is not in %g..%g", r->path, f, d, lo, hi);
	*out = d;
	return 0;
}

/* container.described, when the plan was made from a checkpoint: its folder and the bits. */
static int read_described(const reader *r, json_t *c)
{
	static const char *const cls[3] = {"expert", "dense", "mtp"};
	if (!json_object_get(c, "described"))
		return 0;
	json_t *d = member(r, c, "container", "described", JSON_OBJECT), *b;
	if (!d || string_to(r, d, "container.described", "checkpoint", r->p->checkpoint, sizeof(r->p->checkpoint)) < 0 ||
	    !(b = member(r, d, "container.described", "bits", JSON_OBJECT)))
		return -1;
	for (int i = 0; i < 3; i++) {
		double v;
		if (number_to(r, b, "container.described.bits", cls[i], 4, 16, &v) < 0)
			return -1;
		if (v != 4 && v != 8 && v != 16)
			return coli_errf(r->e, COLI_EDATA, "%s: container.described.bits.%s: %g is not 4, 8 or 16", r->path,
					 cls[i], v);
		r->p->bits[i] = (int)v;
	}
	return 0;
}

static int read_container(const reader *r, json_t *root)
{
	json_t *c = member(r, root, "", "container", JSON_OBJECT);
	if (!c || string_to(r, c, "container", "identity", r->p->identity, sizeof(r->p->identity)) < 0)
		return -1;
	const char *id = r->p->identity;
	if (strlen(id) != 64 || strspn(id, "0123456789abcdef") != 64)
		return coli_errf(r->e, COLI_EDATA, "%s: container.identity: '%s' is not 64 lowercase hex digits",
				 r->path, id);
	return read_described(r, c);
}

static int read_disk(const reader *r, json_t *d, int i)
{
	char field[64];
	snprintf(field, sizeof(field), "machine.disks[%d]", i);
	if (!json_is_object(d))
		return bad(r, field, "not an object");
	coli_plan_disk *k = &r->p->disks[i];
	double major, minor;
	if (string_to(r, d, field, "dir", k->dir, sizeof(k->dir)) < 0 || string_to(r, d, field, "dev", k->dev, sizeof(k->dev)) < 0 ||
	    string_to(r, d, field, "identity", k->identity, sizeof(k->identity)) < 0 ||
	    number_to(r, d, field, "major", 0, 4095, &major) < 0 || number_to(r, d, field, "minor", 0, 1048575, &minor) < 0)
		return -1;
	k->major = (unsigned)major, k->minor = (unsigned)minor;
	return 0;
}

static int read_machine(const reader *r, json_t *root)
{
	json_t *m = member(r, root, "", "machine", JSON_OBJECT), *disks;
	double cores, cpus;
	if (!m || string_to(r, m, "machine", "cpu_model", r->p->cpu_model, sizeof(r->p->cpu_model)) < 0 ||
	    number_to(r, m, "machine", "physical_cores", 1, 65536, &cores) < 0 ||
	    number_to(r, m, "machine", "logical_cpus", 1, 65536, &cpus) < 0 ||
	    !(disks = member(r, m, "machine", "disks", JSON_ARRAY)))
		return -1;
	r->p->physical_cores = (int)cores, r->p->logical_cpus = (int)cpus;
	if (json_array_size(disks) > COLI_PLAN_MAX_DISKS)
		return coli_errf(r->e, COLI_EDATA, "%s: machine.disks: %zu disks, at most %d", r->path,
				 json_array_size(disks), COLI_PLAN_MAX_DISKS);
	for (size_t i = 0; i < json_array_size(disks); i++)
		if (read_disk(r, json_array_get(disks, i), (int)i) < 0)
			return -1;
	r->p->n_disks = (int)json_array_size(disks);
	return 0;
}

/* A knob's value as its command-line argument: a string as it is, a number in the shortest
 * form that reads back the same, true/false as on/off. */
static char *knob_text(json_t *v)
{
	char buf[64];
	if (json_is_string(v))
		return strdup(json_string_value(v));
	if (json_is_integer(v))
		snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v)) {
		for (int prec = 15; prec <= 17; prec++) /* the shortest that reads back the same */
			if (snprintf(buf, sizeof(buf), "%.*g", prec, json_real_value(v)) > 0 &&
			    strtod(buf, NULL) == json_real_value(v))
				break;
	}
	else
		snprintf(buf, sizeof(buf), "%s", json_is_true(v) ? "on" : "off");
	return strdup(buf);
}

static int add_knob(const reader *r, const char *name, json_t *v)
{
	coli_plan *p = r->p;
	if (p->n_knobs == COLI_PLAN_MAX_KNOBS)
		return coli_errf(r->e, COLI_EDATA, "%s: knobs: more than %d values", r->path, COLI_PLAN_MAX_KNOBS);
	if (!json_is_string(v) && !json_is_number(v) && !json_is_boolean(v))
		return coli_errf(r->e, COLI_EDATA, "%s: knobs.%s: not a string, number or boolean", r->path, name);
	char *text = knob_text(v);
	if (!text)
		return coli_errf(r->e, COLI_ENOMEM, "%s: knobs.%s: out of memory", r->path, name);
	p->knobs[p->n_knobs].name = coli_plan_knobs[coli_plan_knob_index(name)];
	p->knobs[p->n_knobs++].value = text;
	return 0;
}

/* Each knob a coli-run option; an array (a repeatable option: mirror) gives one per item. */
static int read_knobs(const reader *r, json_t *root)
{
	json_t *k = member(r, root, "", "knobs", JSON_OBJECT), *v;
	const char *name;
	if (!k)
		return -1;
	json_object_foreach(k, name, v) {
		if (coli_plan_knob_index(name) < 0) {
			char list[256] = "";
			for (int i = 0, n = 0; coli_plan_knobs[i]; i++)
				n += snprintf(list + n, sizeof(list) - (size_t)n, "%s%s", i ? ", " : "", coli_plan_knobs[i]);
			return coli_errf(r->e, COLI_EDATA, "%s: knobs.%s: not an option coli-run takes from a plan (knobs: %s)",
					 r->path, name, list);
		}
		int rc = 0;
		if (json_is_array(v) && strcmp(name, "mirror") == 0)
			for (size_t i = 0; rc == 0 && i < json_array_size(v); i++)
				rc = add_knob(r, name, json_array_get(v, i));
		else
			rc = add_knob(r, name, v);
		if (rc < 0)
			return -1;
	}
	return 0;
}

static int read_speed(const reader *r, json_t *pred, const char *key, coli_plan_speed *s)
{
	char field[32];
	snprintf(field, sizeof(field), "predicted.%s", key);
	json_t *o = member(r, pred, "predicted", key, JSON_OBJECT);
	if (!o || number_to(r, o, field, "tok_s", 0, 1e9, &s->tok_s) < 0 ||
	    number_to(r, o, field, "disk_s", 0, 1e9, &s->disk_s) < 0 ||
	    number_to(r, o, field, "experts_s", 0, 1e9, &s->experts_s) < 0 ||
	    number_to(r, o, field, "attention_s", 0, 1e9, &s->attention_s) < 0 ||
	    number_to(r, o, field, "other_s", 0, 1e9, &s->other_s) < 0)
		return -1;
	return 0;
}

static int read_predicted(const reader *r, json_t *root)
{
	json_t *pred = member(r, root, "", "predicted", JSON_OBJECT);
	if (!pred || number_to(r, pred, "predicted", "hit_rate", 0, 1, &r->p->hit_rate) < 0)
		return -1;
	return read_speed(r, pred, "warm", &r->p->warm) < 0 || read_speed(r, pred, "cold", &r->p->cold) < 0 ? -1 : 0;
}

/* Each copy's sustained rate, disks[].bps: the streaming store's shares start from them. */
static int read_copies(const reader *r, json_t *root)
{
	json_t *disks = member(r, root, "", "disks", JSON_ARRAY);
	if (!disks)
		return -1;
	if (json_array_size(disks) > COLI_PLAN_MAX_DISKS)
		return coli_errf(r->e, COLI_EDATA, "%s: disks: %zu copies, at most %d", r->path, json_array_size(disks),
				 COLI_PLAN_MAX_DISKS);
	for (size_t i = 0; i < json_array_size(disks); i++) {
		char field[32];
		snprintf(field, sizeof(field), "disks[%zu]", i);
		json_t *d = json_array_get(disks, i);
		if (!json_is_object(d))
			return bad(r, field, "not an object");
		if (number_to(r, d, field, "bps", 0, 1e15, &r->p->copy_bps[i]) < 0)
			return -1;
	}
	r->p->n_copies = (int)json_array_size(disks);
	return 0;
}

/* The explanatory members: only their types matter to a reader. */
static int read_notes(const reader *r, json_t *root)
{
	static const char *const arrays[] = {"layers", "decisions", "warnings", NULL};
	for (int i = 0; arrays[i]; i++)
		if (!member(r, root, "", arrays[i], JSON_ARRAY))
			return -1;
	return read_copies(r, root);
}

static int read_root(const reader *r, json_t *root)
{
	char format[32];
	double version;
	if (!json_is_object(root))
		return coli_errf(r->e, COLI_EDATA, "%s: not a JSON object", r->path);
	if (string_to(r, root, "", "format", format, sizeof(format)) < 0)
		return -1;
	if (strcmp(format, "coli-plan") != 0)
		return coli_errf(r->e, COLI_EDATA, "%s: format: '%s' is not 'coli-plan'", r->path, format);
	if (number_to(r, root, "", "version", 1, 1e9, &version) < 0)
		return -1;
	if (version != COLI_PLAN_VERSION)
		return coli_errf(r->e, COLI_EDATA, "%s: version: %g, this coli reads version %d (make a new plan "
				 "with this coli-plan)", r->path, version, COLI_PLAN_VERSION);
	r->p->version = COLI_PLAN_VERSION;
	if (read_container(r, root) < 0 || read_machine(r, root) < 0 || read_knobs(r, root) < 0 ||
	    read_predicted(r, root) < 0)
		return -1;
	return read_notes(r, root);
}

int coli_plan_parse(const char *text, size_t len, const char *path, coli_plan *p, coli_err *e)
{
	memset(p, 0, sizeof(*p));
	json_error_t je;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return coli_errf(e, COLI_EDATA, "%s: bad JSON at line %d: %s", path, je.line, je.text);
	reader r = {path, p, e};
	int rc = read_root(&r, root);
	json_decref(root);
	if (rc < 0)
		coli_plan_release(p);
	return rc;
}

int coli_plan_read(const char *path, coli_plan *p, coli_err *e)
{
	char *text;
	size_t len;
	memset(p, 0, sizeof(*p));
	if (coli_read_file(path, &text, &len, e) < 0)
		return -1;
	int rc = coli_plan_parse(text, len, path, p, e);
	free(text);
	return rc;
}

void coli_plan_release(coli_plan *p)
{
	for (int i = 0; i < p->n_knobs; i++)
		free(p->knobs[i].value);
	memset(p, 0, sizeof(*p));
}
