/* output.c: what coli-plan MODEL.coli writes: plan.json (formats/plan.md), the summary on stdout,
 * and with --explain each decision with its reason. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "planner.h"
#include "store.h"

#define GIB 1073741824.0

void plan_note_add(plan *p, const char *what, const char *value, const char *fmt, ...)
{
	if (p->n_notes == PLAN_MAX_NOTES)
		return;
	plan_note *n = &p->notes[p->n_notes++];
	snprintf(n->what, sizeof(n->what), "%s", what);
	snprintf(n->value, sizeof(n->value), "%s", value);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(n->why, sizeof(n->why), fmt, ap);
	va_end(ap);
}

void plan_warn(plan *p, const char *fmt, ...)
{
	if (p->n_warnings == (int)(sizeof(p->warnings) / sizeof(p->warnings[0])))
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->warnings[p->n_warnings++], sizeof(p->warnings[0]), fmt, ap);
	va_end(ap);
}

/* "24" when every layer has the same figure, else "24,30,...": coli-run's list form. */
static json_t *per_layer(const plan *p, int pins)
{
	size_t cap = (size_t)p->n_moe * 12 + 1, len = 0;
	char *s = malloc(cap);
	int same = 1;
	for (int i = 0; s && i < p->n_moe; i++) {
		int v = pins ? p->layers[i].pins : p->layers[i].cache;
		same &= v == (pins ? p->layers[0].pins : p->layers[0].cache);
		len += (size_t)snprintf(s + len, cap - len, "%s%d", i ? "," : "", v);
	}
	if (s && same)
		snprintf(s, cap, "%d", pins ? p->layers[0].pins : p->layers[0].cache);
	json_t *j = s ? json_string(s) : NULL;
	free(s);
	return j;
}

static json_t *knobs_json(const plan *p)
{
	json_t *k = json_object();
	json_object_set_new(k, "threads", json_integer(p->threads));
	json_object_set_new(k, "ctx", json_integer(p->a->ctx));
	if (p->ct->model.n_mtp_layers > 0)
		json_object_set_new(k, "draft", json_string("auto"));
	if (p->q8)
		json_object_set_new(k, "precision", json_string("q8"));
	if (!p->stream)
		return k;
	json_object_set_new(k, "ram", json_real(p->budget / GIB));
	json_object_set_new(k, "cache-slots", per_layer(p, 0));
	json_object_set_new(k, "cache-policy", json_string(p->cache_policy == STORE_CACHE_LFU ? "lfu" : "lru"));
	if (p->usage.counts) {
		json_object_set_new(k, "usage", json_string(p->usage_abs));
		json_object_set_new(k, "pins", per_layer(p, 1));
	}
	json_object_set_new(k, "prefetch", json_string(p->prefetch ? "on" : "off"));
	json_object_set_new(k, "io", json_string("threads"));
	json_object_set_new(k, "queue-depth", json_integer(p->qd));
	if (p->n_copies > 1) {
		json_t *m = json_array();
		for (int i = 1; i < p->n_copies; i++)
			json_array_append_new(m, json_string(p->copies[i].abs));
		json_object_set_new(k, "mirror", m);
	}
	return k;
}

static json_t *speed_json(const coli_plan_speed *s)
{
	return json_pack("{s:f, s:f, s:f, s:f, s:f}", "tok_s", s->tok_s, "disk_s", s->disk_s, "experts_s",
			 s->experts_s, "attention_s", s->attention_s, "other_s", s->other_s);
}

static json_t *machine_json(const plan *p)
{
	json_t *d = json_array();
	for (int i = 0; i < p->n_copies; i++)
		json_array_append_new(d, json_pack("{s:s, s:s, s:i, s:i, s:s}", "dir", p->copies[i].abs, "dev",
						   p->copies[i].disk->dev, "major", (int)p->copies[i].disk->major, "minor",
						   (int)p->copies[i].disk->minor, "identity", p->copies[i].disk->identity));
	return json_pack("{s:s, s:i, s:i, s:o}", "cpu_model", p->probe.cpu_model, "physical_cores",
			 p->probe.physical_cores, "logical_cpus", p->probe.logical_cpus, "disks", d);
}

static json_t *layers_json(const plan *p)
{
	json_t *a = json_array();
	for (int i = 0; i < p->n_moe; i++) {
		const plan_layer *L = &p->layers[i];
		json_array_append_new(a, json_pack("{s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:s, s:f}", "layer", L->layer,
						   "cache", L->cache, "pins", L->pins, "hit_rate", L->hit, "pinned_share",
						   L->hit_pins, "top10_share", L->top10, "prior_alpha", L->alpha, "read_ahead",
						   L->exact ? "exact" : p->prefetch ? "predicted" : "none", "stall_s",
						   L->stall_s));
	}
	return a;
}

static json_t *notes_json(const plan *p)
{
	json_t *a = json_array();
	for (int i = 0; i < p->n_notes; i++)
		json_array_append_new(a, json_pack("{s:s, s:s, s:s}", "what", p->notes[i].what, "value", p->notes[i].value,
						   "why", p->notes[i].why));
	return a;
}

static json_t *copies_json(const plan *p)
{
	json_t *a = json_array();
	for (int i = 0; i < p->n_copies; i++)
		json_array_append_new(a, json_pack("{s:s, s:s, s:f, s:f, s:f}", "dir", p->copies[i].dir, "dev",
						   p->copies[i].disk->dev, "bps", p->copies[i].bps, "share",
						   p->copies[i].share, "held", p->copies[i].held));
	return a;
}

json_t *plan_json(const plan *p)
{
	json_t *w = json_array();
	for (int i = 0; i < p->n_warnings; i++)
		json_array_append_new(w, json_string(p->warnings[i]));
	json_t *budget = json_pack("{s:f, s:f, s:f, s:f, s:f}", "budget", p->budget, "dense", p->fixed.dense, "kv",
				   p->fixed.kv, "buffers", p->fixed.buffers, "cache", p->fixed.left);
	return json_pack("{s:s, s:i, s:o, s:o, s:o, s:{s:f, s:o, s:o}, s:o, s:o, s:o, s:o, s:o}", "format",
			 "coli-plan", "version", COLI_PLAN_VERSION, "container", plan_container_json(p), "machine", machine_json(p), "knobs", knobs_json(p), "predicted",
			 "hit_rate", p->hit, "warm", speed_json(&p->warm), "cold", speed_json(&p->cold), "budget", budget,
			 "layers", layers_json(p), "disks", copies_json(p), "decisions", notes_json(p), "warnings", w);
}

int plan_write(const plan *p, coli_err *e)
{
	json_t *j = plan_json(p);
	char *text = j ? json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(10)) : NULL;
	json_decref(j);
	if (!text)
		return coli_errf(e, COLI_ENOMEM, "out of memory writing %s", p->a->out);
	size_t n = strlen(text);
	text[n] = '\n'; /* in place of the NUL: the file ends with a newline */
	int rc = coli_write_atomic(p->a->out, text, n + 1, e);
	free(text);
	return rc;
}

static void print_speed(const char *what, const coli_plan_speed *s)
{
	printf("%s %.2f tok/s: disk %.1f ms, expert products %.1f ms, attention %.1f ms, other %.1f ms per token\n",
	       what, s->tok_s, s->disk_s * 1e3, s->experts_s * 1e3, s->attention_s * 1e3, s->other_s * 1e3);
}

void plan_print(const plan *p)
{
	if (p->a->quiet)
		return;
	printf("plan for %s on %s (%d cores), written to %s\n", p->a->model, p->probe.cpu_model, p->probe.physical_cores,
	       p->a->out);
	plan_print_container(p);
	printf("RAM %.2f GiB: dense %.2f, KV %.2f (--ctx %d), buffers %.2f, expert cache %.2f GiB\n", p->budget / GIB,
	       p->fixed.dense / GIB, p->fixed.kv / GIB, p->a->ctx, p->fixed.buffers / GIB, p->fixed.left / GIB);
	if (p->stream)
		printf("expert cache: hit rate %.1f%% predicted (pins alone %.1f%%)\n", p->hit * 100, p->hit_pins * 100);
	print_speed("warm", &p->warm);
	print_speed("cold", &p->cold);
	for (int i = 0; i < p->n_warnings; i++)
		printf("warning: %s\n", p->warnings[i]);
	for (int i = 0; p->a->explain && i < p->n_notes; i++)
		printf("%s%s%s: %s\n", p->notes[i].what, *p->notes[i].value ? " " : "", p->notes[i].value, p->notes[i].why);
}
