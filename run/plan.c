/* plan.c: coli-run --plan FILE: a plan.json's knobs applied as coli-run options, after checking
 * that the plan was made for this container and this machine. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "container.h"
#include "probe.h"
#include "run.h"

/* Where each knob lands in run_opts (up to three fields: a count, or a list and its length). */
typedef struct knob_fields {
	const char *name;
	size_t off[3], size[3];
} knob_fields;

#define F(m) offsetof(run_opts, m)
#define S(m) sizeof(((run_opts *)0)->m)
static const knob_fields fields[] = {
	{"ram", {F(ram)}, {S(ram)}},
	{"ctx", {F(ctx)}, {S(ctx)}},
	{"threads", {F(threads)}, {S(threads)}},
	{"cache-slots", {F(cache_slots), F(cache_list), F(n_cache_list)}, {S(cache_slots), S(cache_list), S(n_cache_list)}},
	{"pins", {F(pins), F(pins_list), F(n_pins_list)}, {S(pins), S(pins_list), S(n_pins_list)}},
	{"cache-policy", {F(cache_policy)}, {S(cache_policy)}},
	{"usage", {F(usage)}, {S(usage)}},
	{"prefetch", {F(prefetch)}, {S(prefetch)}},
	{"io", {F(io)}, {S(io)}},
	{"queue-depth", {F(qd)}, {S(qd)}},
	{"draft", {F(draft)}, {S(draft)}},
	{"precision", {F(precision)}, {S(precision)}},
	{"mirror", {F(mirrors), F(n_mirrors)}, {S(mirrors), S(n_mirrors)}},
};
#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))

static const knob_fields *fields_of(const char *name)
{
	for (size_t i = 0; i < N_FIELDS; i++)
		if (strcmp(fields[i].name, name) == 0)
			return &fields[i];
	return NULL;
}

/* Whether a's fields of knob k differ from b's. */
static int differs(const knob_fields *k, const run_opts *a, const run_opts *b)
{
	for (int i = 0; i < 3 && k->size[i]; i++)
		if (memcmp((const char *)a + k->off[i], (const char *)b + k->off[i], k->size[i]))
			return 1;
	return 0;
}

static void copy_fields(const knob_fields *k, run_opts *to, const run_opts *from)
{
	for (int i = 0; i < 3 && k->size[i]; i++)
		memcpy((char *)to + k->off[i], (const char *)from + k->off[i], k->size[i]);
}

/* The plan is this container's (identity) and this machine's (CPU, cores, each folder's device). */
static int check_plan(const coli_plan *p, const char *path, const coli_container *ct, const char *model, coli_err *e)
{
	int rc = 0;
	if (strcmp(ct->identity_hex, p->identity) && *p->checkpoint)
		rc = coli_errf(e, COLI_EDATA, "%s: container.identity: the plan is for container %.16s..., the one coli-convert "
			       "writes from %s with bits expert %d, dense %d, mtp %d (container.described); %s is %.16s... "
			       "(bits expert %d, dense %d, mtp %d): another container; make a plan for it (coli-plan %s)", path,
			       p->identity, p->checkpoint, p->bits[0], p->bits[1], p->bits[2], model, ct->identity_hex,
			       ct->bits[0], ct->bits[1], ct->bits[2], model);
	else if (strcmp(ct->identity_hex, p->identity))
		rc = coli_errf(e, COLI_EDATA, "%s: container.identity: the plan is for container %.16s..., %s is %.16s...: "
			       "make a plan for it (coli-plan %s)", path, p->identity, model, ct->identity_hex, model);
	coli_probe m;
	memset(&m, 0, sizeof(m));
	snprintf(m.cpu_model, sizeof(m.cpu_model), "%s", p->cpu_model);
	m.physical_cores = p->physical_cores, m.logical_cpus = p->logical_cpus, m.n_disks = p->n_disks;
	for (int i = 0; i < p->n_disks; i++) {
		coli_probe_disk *d = &m.disks[i];
		snprintf(d->dir, sizeof(d->dir), "%s", p->disks[i].dir);
		snprintf(d->dev, sizeof(d->dev), "%s", p->disks[i].dev);
		snprintf(d->identity, sizeof(d->identity), "%s", p->disks[i].identity);
		d->major = p->disks[i].major, d->minor = p->disks[i].minor;
	}
	return rc < 0 ? -1 : coli_probe_check_machine(&m, path, e);
}

/* One knob parsed by coli-run's own table, as "--name value" would be. */
static int apply_knob(const coli_option *options, const char *path, const coli_plan_knob *k, coli_err *e)
{
	char name[40];
	snprintf(name, sizeof(name), "--%s", k->name);
	char *argv[] = {"coli-run", name, k->value, NULL};
	coli_err ke = {0, ""};
	if (coli_opts_parse(options, 3, argv, &ke) < 0)
		return coli_errf(e, COLI_EDATA, "%s: knobs.%s: %s", path, k->name, ke.msg);
	return 0;
}

/* Whether the plan sets knob name. */
static int has_knob(const coli_plan *p, const char *name)
{
	for (int i = 0; i < p->n_knobs; i++)
		if (strcmp(p->knobs[i].name, name) == 0)
			return 1;
	return 0;
}

/* What the plan's knobs need beyond their ranges: per-layer lists as long as the container's
 * MoE layers, and the usage file its pins were chosen from (a missing one would pin nothing and
 * start a new table: not the plan's run). */
static int check_knobs(const run_opts *o, const coli_plan *p, const coli_container *ct, coli_err *e)
{
	int lists[2] = {has_knob(p, "cache-slots") && o->cache_list, has_knob(p, "pins") && o->pins_list}, rc = 0;
	for (int k = 0; k < 2 && rc == 0; k++) {
		int len = k ? o->n_pins_list : o->n_cache_list;
		if (lists[k] && len != ct->layout.n_elayers)
			rc = coli_errf(e, COLI_EDATA, "%s: knobs.%s: %d counts, %s has %d MoE layers (MTP included)", o->plan,
				       k ? "pins" : "cache-slots", len, o->model, ct->layout.n_elayers);
	}
	if (rc == 0 && has_knob(p, "usage") && o->usage && access(o->usage, F_OK) < 0)
		rc = coli_errf(e, COLI_EDATA, "%s: knobs.usage: %s: %s: the plan's pins and predictions come from it (give "
			       "the plan's usage file back, or plan again)", o->plan, o->usage, strerror(errno));
	return rc;
}

/* The plan's knobs over the defaults, then the command line's options it does not set (one it
 * sets is refused). */
static int apply_knobs(run_opts *o, const run_opts *defaults, const coli_option *options, const coli_plan *p,
		       coli_err *e)
{
	run_opts cmd = *o;
	*o = *defaults;
	for (int i = 0; i < p->n_knobs; i++)
		if (apply_knob(options, cmd.plan, &p->knobs[i], e) < 0)
			return -1;
	run_opts planned = *o;
	*o = cmd;
	o->stream |= planned.stream;
	int rc = 0;
	for (int i = 0; rc == 0 && i < p->n_knobs; i++) {
		const knob_fields *k = fields_of(p->knobs[i].name);
		if (k && differs(k, &cmd, defaults))
			rc = coli_errf(e, COLI_EUSAGE, "--%s: %s sets it (knobs.%s); give one or the other", k->name,
				       cmd.plan, k->name);
		else if (k)
			copy_fields(k, o, &planned);
	}
	if (planned.cache_list != o->cache_list) /* the plan's lists not taken (a refusal) */
		free(planned.cache_list);
	if (planned.pins_list != o->pins_list)
		free(planned.pins_list);
	return rc;
}

int run_plan_apply(run_opts *o, const run_opts *defaults, const coli_option *options, coli_plan *p, coli_err *e)
{
	coli_container *ct = NULL;
	if (coli_plan_read(o->plan, p, e) < 0 || coli_container_open(&ct, o->model, e) < 0)
		return -1;
	int rc = check_plan(p, o->plan, ct, o->model, e);
	if (rc == 0)
		rc = apply_knobs(o, defaults, options, p, e);
	if (rc == 0)
		rc = check_knobs(o, p, ct, e);
	coli_container_close(ct);
	return rc;
}
