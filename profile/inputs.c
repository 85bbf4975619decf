/* inputs.c: a report's trace, probe and plan, from files or a bundle (inputs.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle_io.h"
#include "fileio.h"
#include "inputs.h"
#include "sha256.h"

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);
	return n >= k && strcmp(s + n - k, tail) == 0;
}

/* 1 when path starts with gzip's magic (a bundle), 0 otherwise (a trace), -1 when it cannot be
 * read or is named as a bundle but is not gzip data. */
static int looks_gzip(const char *path, coli_err *e)
{
	unsigned char m[2] = {0, 0};
	FILE *f = fopen(path, "rb");
	if (!f)
		return coli_errf(e, COLI_EIO, "%s: cannot open: %s", path, strerror(errno));
	size_t got = fread(m, 1, 2, f);
	int err = ferror(f) ? errno : 0;
	fclose(f);
	if (err)
		return coli_errf(e, COLI_EIO, "%s: cannot read: %s", path, strerror(err));
	int gz = got == 2 && m[0] == 0x1f && m[1] == 0x8b;
	if (!gz && (ends_with(path, ".tar.gz") || ends_with(path, ".tgz")))
		return coli_errf(e, COLI_EDATA, "%s: not gzip data (%s): a bundle is the .tar.gz coli-profile datapoint "
				 "writes, a trace a .coli_trace", path, got < 2 ? "shorter than gzip's 2-byte magic" :
				 "no gzip magic 1f 8b");
	return gz;
}

/* The plan must be of the container the trace ran: a plan of another predicts another model. */
static int same_container(const prof_inputs *in, const char *plan, coli_err *e)
{
	char hex[65];
	coli_hex32(in->trace.identity, hex);
	if (!in->plan || strcmp(hex, in->plan->identity) == 0)
		return 0;
	return coli_errf(e, COLI_EDATA, "%s: container.identity: the plan is for container %.16s..., the trace %s ran "
			 "container %.16s...: give the plan of the run (coli-run --plan), or none", plan ? plan :
			 "plan.json", in->plan->identity, in->trace.name, hex);
}

static int load_probe(prof_inputs *in, const char *path, const prof_member *m, coli_err *e)
{
	if (!(in->probe = coli_calloc(1, sizeof(*in->probe), e)))
		return -1;
	return m ? coli_probe_parse((const char *)m->data, m->size, m->name, in->probe, e)
		 : coli_probe_read(path, in->probe, e);
}

static int load_plan(prof_inputs *in, const char *path, const prof_member *m, coli_err *e)
{
	if (!(in->plan = coli_calloc(1, sizeof(*in->plan), e)))
		return -1;
	return m ? coli_plan_parse((const char *)m->data, m->size, m->name, in->plan, e) : coli_plan_read(path, in->plan, e);
}

static json_t *member_json(const prof_member *m, coli_err *e)
{
	json_error_t je;
	json_t *j = m ? json_loadb((const char *)m->data, m->size, 0, &je) : NULL;
	if (m && !j)
		coli_errf(e, COLI_EDATA, "%s: not JSON: %s (line %d)", m->name, je.text, je.line);
	return j;
}

/* The bundle's headline trace, its probe and plan unless files were given, its manifest and env. */
static int from_bundle(prof_inputs *in, const char *probe, const char *plan, coli_err *e)
{
	prof_bundle b;
	if (prof_bundle_read(&b, in->path, e) < 0)
		return -1;
	const prof_member *t = prof_bundle_get(&b, b.man->headline), *pr = prof_bundle_get(&b, "probe.json");
	const prof_member *pl = prof_bundle_get(&b, "plan.json"), *man = prof_bundle_get(&b, "manifest.json");
	char name[4400];
	snprintf(name, sizeof(name), "%s:%s", in->path, b.man->headline);
	int rc = prof_trace_load_mem(&in->trace, t->data, t->size, name, e);
	if (rc == 0 && (probe || pr))
		rc = load_probe(in, probe, probe ? NULL : pr, e);
	if (rc == 0 && (plan || pl))
		rc = load_plan(in, plan, plan ? NULL : pl, e);
	if (rc == 0)
		rc = same_container(in, plan, e);
	if (rc == 0 && !(in->manifest = member_json(man, e)))
		rc = -1;
	if (rc == 0 && prof_bundle_get(&b, "env.json") && !(in->env = member_json(prof_bundle_get(&b, "env.json"), e)))
		rc = -1;
	prof_bundle_release(&b);
	return rc;
}

int prof_inputs_open(prof_inputs *in, const char *path, const char *probe, const char *plan, coli_err *e)
{
	memset(in, 0, sizeof(*in));
	in->path = path;
	int gz = looks_gzip(path, e), rc;
	if (gz < 0)
		return -1;
	in->is_bundle = gz;
	if (gz) {
		rc = from_bundle(in, probe, plan, e);
	} else {
		rc = prof_trace_load(&in->trace, path, e);
		if (rc == 0 && probe)
			rc = load_probe(in, probe, NULL, e);
		if (rc == 0 && plan)
			rc = load_plan(in, plan, NULL, e);
		if (rc == 0)
			rc = same_container(in, plan, e);
	}
	if (rc < 0)
		prof_inputs_release(in);
	return rc;
}

void prof_inputs_release(prof_inputs *in)
{
	prof_trace_release(&in->trace);
	if (in->plan)
		coli_plan_release(in->plan);
	free(in->plan), free(in->probe);
	json_decref(in->manifest), json_decref(in->env);
	memset(in, 0, sizeof(*in));
}
