/* test_plan.c: plan.json read back field by field, and one malformed plan per rule of
 * formats/plan.md, each refused naming the member. */
#include <stdio.h>
#include <string.h>

#include "plan.h"
#include "t.h"

#define ID "6f68897f4f024a2f07a949eb9caa104aa0d6a1698b66b300a0c4768418b7a049"
#define MACHINE "\"machine\": {\"cpu_model\": \"AMD EPYC\", \"physical_cores\": 2, \"logical_cpus\": 2, " \
	"\"disks\": [{\"dir\": \"/m.coli\", \"dev\": \"vda\", \"major\": 254, \"minor\": 0, \"identity\": \"x\"}]}"
#define SPEED "{\"tok_s\": 10, \"disk_s\": 0.05, \"experts_s\": 0.02, \"attention_s\": 0.01, \"other_s\": 0.02}"
#define PREDICTED "\"predicted\": {\"hit_rate\": 0.5, \"warm\": " SPEED ", \"cold\": " SPEED "}"
#define NOTES "\"layers\": [], \"disks\": [{\"dir\": \"/m.coli\", \"bps\": 4e8, \"share\": 0.67}, {\"bps\": 2e8}], " \
	"\"decisions\": [], \"warnings\": []"
#define KNOBS "\"knobs\": {\"ram\": 1.5, \"threads\": 2, \"cache-slots\": \"8,12\", \"prefetch\": true, " \
	"\"mirror\": [\"/a\", \"/b\"]}"
#define GOOD "{\"format\": \"coli-plan\", \"version\": 1, \"container\": {\"path\": \"/m.coli\", \"identity\": \"" ID \
	"\"}, " MACHINE ", " KNOBS ", " PREDICTED ", " NOTES "}"

static int parse(const char *text, coli_plan *p, coli_err *e)
{
	return coli_plan_parse(text, strlen(text), "plan.json", p, e);
}

static void good_plan(void)
{
	coli_plan p;
	coli_err e = {0, ""};
	int rc = parse(GOOD, &p, &e);
	T_CHECK("plan: a valid plan is read", rc == 0, "%s", e.msg);
	T_CHECK("plan: identity, machine and disks", rc == 0 && strcmp(p.identity, ID) == 0 && p.physical_cores == 2 &&
		p.logical_cpus == 2 && p.n_disks == 1 && p.disks[0].major == 254 && strcmp(p.disks[0].dir, "/m.coli") == 0,
		"read %s %d %d", p.identity, p.physical_cores, p.n_disks);
	T_CHECK("plan: knobs as command-line arguments, mirror once per item",
		rc == 0 && p.n_knobs == 6 && strcmp(p.knobs[0].value, "1.5") == 0 && strcmp(p.knobs[2].value, "8,12") == 0 &&
		strcmp(p.knobs[3].value, "on") == 0 && strcmp(p.knobs[4].name, "mirror") == 0 &&
		strcmp(p.knobs[5].value, "/b") == 0, "%d knobs", p.n_knobs);
	T_CHECK("plan: predictions", rc == 0 && p.hit_rate == 0.5 && p.warm.tok_s == 10 && p.cold.disk_s == 0.05, "%g",
		p.hit_rate);
	T_CHECK("plan: each copy's sustained rate (disks[].bps), the store's starting rates",
		rc == 0 && p.n_copies == 2 && p.copy_bps[0] == 4e8 && p.copy_bps[1] == 2e8, "%d copies", p.n_copies);
	coli_plan_release(&p);
}

/* GOOD with the first occurrence of from replaced by to must be refused naming field. */
static void bad(const char *name, const char *from, const char *to, const char *field)
{
	char text[4096], msg[512];
	const char *at = strstr(GOOD, from);
	if (!at) {
		T_CHECK(name, 0, "'%s' not in the good plan", from);
		return;
	}
	snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - GOOD), GOOD, to, at + strlen(from));
	coli_plan p;
	coli_err e = {0, ""};
	int rc = parse(text, &p, &e);
	snprintf(msg, sizeof(msg), "plan: refused: %s", name);
	T_CHECK(msg, rc < 0 && e.code == COLI_EDATA && strstr(e.msg, field) && strstr(e.msg, "plan.json"),
		"rc %d: %s", rc, e.msg);
	if (rc == 0)
		coli_plan_release(&p);
}

int main(void)
{
	good_plan();
	bad("not JSON", "{\"format\"", "[\"format\"", "bad JSON");
	bad("another format", "\"coli-plan\"", "\"coli-probe\"", "format");
	bad("another version", "\"version\": 1", "\"version\": 2", "version");
	bad("no version", "\"version\": 1,", "", "version");
	bad("identity not hex", "\"identity\": \"6f", "\"identity\": \"Zf", "container.identity");
	bad("identity too short", ID "\"", "6f\"", "container.identity");
	bad("no machine", MACHINE ",", "", "machine");
	bad("cpu_model not a string", "\"cpu_model\": \"AMD EPYC\"", "\"cpu_model\": 3", "machine.cpu_model");
	bad("physical_cores 0", "\"physical_cores\": 2", "\"physical_cores\": 0", "machine.physical_cores");
	bad("logical_cpus missing", "\"logical_cpus\": 2, ", "", "machine.logical_cpus");
	bad("disk major out of range", "\"major\": 254", "\"major\": 99999", "machine.disks[0].major");
	bad("disk without dir", "\"dir\": \"/m.coli\", ", "", "machine.disks[0].dir");
	bad("disk not an object", "[{\"dir\"", "[3, {\"dir\"", "machine.disks[0]");
	bad("an unknown knob", "\"ram\": 1.5", "\"frob\": 1.5", "knobs.frob");
	bad("a knob as an object", "\"threads\": 2", "\"threads\": {}", "knobs.threads");
	bad("an array for a knob other than mirror", "\"threads\": 2", "\"threads\": [2]", "knobs.threads");
	bad("no knobs", KNOBS ",", "", "knobs");
	bad("hit_rate above 1", "\"hit_rate\": 0.5", "\"hit_rate\": 1.5", "predicted.hit_rate");
	bad("a negative time", "\"disk_s\": 0.05", "\"disk_s\": -1", "predicted.warm.disk_s");
	bad("no cold prediction", ", \"cold\": " SPEED, "", "predicted.cold");
	bad("a copy's rate negative", "\"bps\": 2e8", "\"bps\": -1", "disks[1].bps");
	bad("a copy without its rate", "{\"bps\": 2e8}", "{}", "disks[1].bps");
	bad("a copy not an object", "{\"bps\": 2e8}", "2", "disks[1]");
	bad("disks not an array", "\"disks\": [{\"dir\": \"/m.coli\", \"bps\"",
	    "\"disks\": 3, \"x\": [{\"dir\": \"/m.coli\", \"bps\"", "plan.json: disks: not an array");
	bad("decisions not an array", "\"decisions\": []", "\"decisions\": {}", "decisions");
	bad("duplicate key", "\"version\": 1,", "\"version\": 1, \"version\": 1,", "bad JSON");
	T_CHECK("plan: every knob is named once", coli_plan_knob_index("ram") == 0 && coli_plan_knob_index("mirror") > 0 &&
		coli_plan_knob_index("stream") < 0, "index");
	T_EXIT();
}
