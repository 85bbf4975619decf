/* inputs.c: what coli-plan MODEL.coli reads: the container, this machine's probe, the usage
 * counts, and the fixed part of the RAM budget as coli-run computes it. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "fileio.h"
#include "planner.h"
#include "tokenizer.h"

#define GIB 1073741824.0

/* The probe's disk holding dir (same device); NULL with e when it was not probed. */
static const coli_probe_disk *probed_disk(const plan *p, const char *dir, coli_err *e)
{
	coli_probe_disk d;
	memset(&d, 0, sizeof(d));
	if (coli_probe_disk_ident(dir, &d, e) < 0)
		return NULL;
	for (int i = 0; i < p->probe.n_disks; i++)
		if (p->probe.disks[i].major == d.major && p->probe.disks[i].minor == d.minor)
			return &p->probe.disks[i];
	coli_errf(e, COLI_EDATA, "%s is on %s (%u:%u), which %s has not measured: run coli-plan probe --disk %s "
		  "(with the other folders) first", dir, d.dev, d.major, d.minor, p->a->probe, dir);
	return NULL;
}

/* A mirror's record map when it has one (a partial mirror; formats/mirror.md). */
static int read_map(const plan *p, plan_copy *c, coli_err *e)
{
	char *path = coli_path_join(c->dir, COLI_MIRROR_FILE);
	if (!path)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	int rc = access(path, F_OK) == 0 ?
		coli_mirror_map_read(path, p->ct->identity, coli_mirror_records(p->ct), &c->map, e) : 0;
	if (rc < 0) {
		char msg[sizeof(e->msg)];
		memcpy(msg, e->msg, sizeof(msg));
		snprintf(e->msg, sizeof(e->msg), "--mirror %.*s", (int)sizeof(e->msg) - 16, msg);
	}
	free(path);
	return rc;
}

/* Copy i's experts.bin: as long as the model's, and another file than every copy before it (a
 * mirror naming the model's folder, through a link say, or twice the same one, would only split
 * one disk's reads). */
static int distinct(const plan *p, int i, coli_err *e)
{
	struct stat st[PLAN_MAX_COPIES];
	for (int j = 0; j <= i; j++) {
		char *path = coli_path_join(p->copies[j].dir, "experts.bin");
		int rc = path && stat(path, &st[j]) == 0 ? 0 : -1;
		if (rc < 0)
			coli_errf(e, path ? COLI_EIO : COLI_ENOMEM, "%s%s: %s", j ? "--mirror " : "", path ? path : "experts.bin",
				  strerror(errno));
		free(path);
		if (rc < 0)
			return -1;
	}
	if (st[i].st_size != st[0].st_size)
		return coli_errf(e, COLI_EDATA, "--mirror %s/experts.bin: size %lld bytes, %s/experts.bin has %lld",
				 p->copies[i].dir, (long long)st[i].st_size, p->copies[0].dir, (long long)st[0].st_size);
	for (int j = 0; j < i; j++)
		if (st[i].st_dev == st[j].st_dev && st[i].st_ino == st[j].st_ino)
			return coli_errf(e, COLI_EUSAGE, "--mirror %s: the same experts.bin as %s, not another copy",
					 p->copies[i].dir, p->copies[j].dir);
	return 0;
}

static int open_copies(plan *p, coli_err *e)
{
	const plan_args *a = p->a;
	p->n_copies = 1 + a->n_mirrors;
	for (int i = 0; i < p->n_copies; i++) {
		plan_copy *c = &p->copies[i];
		c->dir = i ? a->mirrors[i - 1] : p->described && a->on ? a->on : a->model, c->held = 1;
		if (i && (coli_container_same(c->dir, p->ct->dir, "--mirror", e) < 0 || read_map(p, c, e) < 0 ||
			  distinct(p, i, e) < 0))
			return -1;
		if (!(c->disk = probed_disk(p, c->dir, e)))
			return -1;
		if (!realpath(c->dir, c->abs))
			return coli_errf(e, COLI_EIO, "%s: %s", c->dir, strerror(errno));
	}
	return 0;
}

/* --usage: this container's counts (another container's file is refused by the reader). */
static int read_usage(plan *p, coli_err *e)
{
	if (!p->a->usage)
		return 0;
	if (coli_usage_read(p->a->usage, p->ct->identity, &p->usage, e) < 0)
		return -1;
	if (!realpath(p->a->usage, p->usage_abs))
		return coli_errf(e, COLI_EIO, "%s: %s", p->a->usage, strerror(errno));
	const coli_model *m = &p->ct->model;
	if (p->usage.n_layers != m->n_layers + m->n_mtp_layers || p->usage.n_experts != m->n_experts)
		return coli_errf(e, COLI_EDATA, "%s: shape %d x %d, the container has %d layers x %d experts",
				 p->a->usage, p->usage.n_layers, p->usage.n_experts, m->n_layers + m->n_mtp_layers,
				 m->n_experts);
	return 0;
}

/* The no-usage routing model fitted on every position of r (the prompt replayed, the decode
 * counted), of its layers after the first PLAN_RAMP_LAYERS (every layer when it has no more). */
static int fit_routing(plan *p, const coli_route *r, coli_err *e)
{
	int from = r->n_layers > PLAN_RAMP_LAYERS ? PLAN_RAMP_LAYERS : 0;
	plan_view v = {from, r->n_layers, 1, 0, r->n_positions, r->n_prefill, r->top_k};
	plan_seq *q;
	int32_t *ids;
	int n, rc = plan_route_seqs(r, &v, &q, &ids, &n, e);
	if (rc == 0 && n == 0)
		rc = coli_errf(e, COLI_EDATA, "%s: no decode position to fit the routing model on (the trace holds only a "
				"prompt)", r->name);
	if (rc == 0)
		rc = plan_locality_fit(&p->loc, q, n, r->n_experts, r->top_k, e);
	free(q), free(ids);
	if (rc == 0)
		snprintf(p->loc.source, sizeof(p->loc.source), "fitted on --routing %s (%d layers x %d experts, top-%d)",
			 r->name, r->n_layers, r->n_experts, r->top_k);
	return rc;
}

/* --routing (a route trace or a .coli_trace): the no-usage routing model fitted on it; when it has
 * this model's shape (experts, top_k, at least its main MoE layers), its layers also replayed. */
static int read_routing(plan *p, coli_err *e)
{
	const coli_model *m = &p->ct->model;
	int main_moe = 0;
	p->loc = plan_locality_default;
	if (!p->a->routing)
		return 0;
	if (plan_route_open(&p->routing, p->a->routing, e) < 0)
		return -1;
	for (int i = 0; i < p->ct->layout.n_elayers; i++)
		main_moe += !p->ct->layout.elayers[i].mtp;
	const coli_route *r = p->routing;
	p->replay = r->n_experts == m->n_experts && r->top_k == m->top_k && r->n_layers >= main_moe;
	return fit_routing(p, r, e);
}

/* The budget: --ram, else what the machine leaves: the memory cgroup's limit or the available
 * RAM, whichever is smaller, less 10% for everything else the machine runs. */
static void choose_budget(plan *p)
{
	double avail = p->probe.ram_available;
	if (p->probe.cgroup_limit > 0 && p->probe.cgroup_limit < avail)
		avail = p->probe.cgroup_limit;
	if (p->a->ram > 0) {
		p->budget = p->a->ram * GIB;
		plan_note_add(p, "ram", "", "--ram %g GiB as asked (this machine has %.2f GiB available%s)", p->a->ram,
			      avail / GIB, p->probe.cgroup_limit > 0 ? " within its memory cgroup" : "");
		return;
	}
	p->budget = (double)(long long)(avail * 0.9 / GIB * 100) / 100 * GIB; /* GiB with 2 decimals */
	plan_note_add(p, "ram", "", "%.2f GiB: 90%% of the %.2f GiB available%s, the rest left to the system",
		      p->budget / GIB, avail / GIB, p->probe.cgroup_limit > 0 ? " (the memory cgroup's limit)" : "");
}

/* The fixed part (dense, KV for --ctx, buffers) as coli-run sizes it (coli_run_sizing), for
 * batches of COLI_MAX_BATCH tokens (a chat's: the most a run sizes for), the probe's cores,
 * --draft auto where the container has MTP layers (the plan's knob) and the tables of the
 * tokenizer.json of the folder planned (a container's, or the checkpoint's that coli-convert
 * copies), loaded to measure them as coli-run loads it. */
static int fixed_part(plan *p, coli_err *e)
{
	const coli_container *ct = p->ct;
	const coli_model *m = &ct->model;
	coli_tok *tok = NULL;
	if (coli_tok_load_dir(&tok, p->a->model, e) < 0)
		return -1;
	coli_run_ask a = {.ctx = p->a->ctx + 1, .batch = COLI_MAX_BATCH, .threads = p->probe.physical_cores,
			  .draft = m->n_mtp_layers > 0, .tok = tok ? (double)coli_tok_bytes(tok) : 0, .budget = p->budget,
			  .pins = -1, .usage = p->usage.counts};
	coli_tok_free(tok);
	if (coli_run_sizing(ct, &a, &p->fixed, e) < 0)
		return -1;
	p->top_k = m->top_k > 0 ? m->top_k : 1, p->n_moe = ct->layout.n_elayers;
	return 0;
}

int plan_inputs(plan *p, const plan_args *a, coli_err *e)
{
	memset(p, 0, sizeof(*p));
	p->a = a;
	if (plan_open_container(p, e) < 0)
		return -1;
	if (coli_probe_read(a->probe, &p->probe, e) < 0 || coli_probe_check_machine(&p->probe, a->probe, e) < 0)
		return -1;
	if (open_copies(p, e) < 0 || read_usage(p, e) < 0 || read_routing(p, e) < 0)
		return -1;
	choose_budget(p);
	return fixed_part(p, e);
}

void plan_release(plan *p)
{
	for (int i = 0; p->layers && i < p->n_moe; i++)
		free(p->layers[i].p), free(p->layers[i].ids);
	free(p->layers);
	coli_usage_release(&p->usage);
	coli_route_close(p->routing);
	for (int i = 0; i < p->n_copies; i++)
		coli_mirror_map_release(&p->copies[i].map);
	coli_container_close(p->ct);
	memset(p, 0, sizeof(*p));
}
