/* test_bundle.c: the datapoint bundle: manifest.json parsed, written back and parsed again; one
 * bad manifest per rule, each refused naming the field; a bundle written with libarchive and read
 * back in memory; a cut archive and a file that is none refused (members changed, missing or
 * foreign: t0820-profile-datapoint.sh, which edits archives with tar). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bundle.h"
#include "bundle_io.h"
#include "fileio.h"
#include "t.h"

static const char good[] =
	"{\"format\":\"coli-bundle\",\"version\":1,\"created\":1764590000,\"coli_version\":\"coli-run 0.1.0\","
	"\"git_commit\":\"abc\",\"model\":{\"path\":\"m.coli\",\"identity\":"
	"\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"},"
	"\"headline\":{\"run\":\"rotate-1\",\"tokens_per_s\":12.5},"
	"\"runs\":[{\"name\":\"rotate-1\",\"kind\":\"rotate\",\"trace\":\"traces/r.coli_trace\",\"json\":\"runs/r.json\","
	"\"tokens_per_s\":12.5}],"
	"\"files\":[{\"name\":\"traces/r.coli_trace\",\"bytes\":3,\"sha256\":"
	"\"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\"},"
	"{\"name\":\"runs/r.json\",\"bytes\":2,\"sha256\":"
	"\"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a\"}]}";

static coli_bundle_manifest m;

/* good with the first occurrence of from replaced by to: parse must fail naming want. */
static void bad(const char *from, const char *to, const char *want)
{
	char text[4096], name[256];
	const char *at = strstr(good, from);
	coli_err e = {0, ""};
	snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
	snprintf(name, sizeof(name), "manifest refused: %s -> %s", from, to);
	T_CHECK(name, at && coli_bundle_manifest_parse(text, strlen(text), "b:manifest.json", &m, &e) < 0 &&
		e.code == COLI_EDATA && strstr(e.msg, want), "%s", e.msg);
}

static void test_manifest(void)
{
	coli_err e = {0, ""};
	int ok = coli_bundle_manifest_parse(good, strlen(good), "m", &m, &e) == 0;
	T_CHECK("a good manifest parses", ok && m.n_runs == 1 && m.n_files == 2 && !strcmp(m.headline, "traces/r.coli_trace") &&
		m.headline_tok_s == 12.5 && m.files[0].bytes == 3 && m.runs[0].kind == COLI_BUNDLE_ROTATE, "%s", e.msg);
	char *text = coli_bundle_manifest_json(&m, &e);
	coli_bundle_manifest back;
	T_CHECK("written back, it parses to the same", text && coli_bundle_manifest_parse(text, strlen(text), "m", &back, &e) == 0 &&
		!memcmp(&back, &m, sizeof(m)), "%s", e.msg);
	free(text);
	bad("coli-bundle", "coli-plan", "format 'coli-plan'");
	bad("\"version\":1", "\"version\":2", "version 2 unsupported");
	bad("traces/r.coli_trace\",\"json", "../r.coli_trace\",\"json", "runs[0].trace: '../r.coli_trace' is not a member name");
	bad("\"name\":\"runs/r.json\"", "\"name\":\"traces/r.coli_trace\"", "listed twice");
	bad("\"kind\":\"rotate\"", "\"kind\":\"hot\"", "runs[0].kind: 'hot'");
	bad("\"run\":\"rotate-1\"", "\"run\":\"cold\"", "headline.run: 'cold' is not a run");
	bad("\"bytes\":3", "\"bytes\":-3", "files[0].bytes: -3 out of range");
	bad("\"bytes\":3", "\"bytes\":3.5", "not a whole number");
	bad("ba7816bf", "BA7816BF", "files[0].sha256");
	bad("\"identity\":\"0123", "\"identity\":\"x123", "model.identity");
	bad("\"json\":\"runs/r.json\"", "\"json\":\"runs/q.json\"", "'runs/q.json' is not in files");
	bad("\"files\":[", "\"files\":{\"a\":1}, \"x\":[", "files: not an array");
	bad("{\"format\"", "{\"format\":\"coli-bundle\",\"format\"", "not JSON");
	T_CHECK("member names", coli_bundle_name_ok("a/b.c") && !coli_bundle_name_ok("/a") && !coli_bundle_name_ok("a//b") &&
		!coli_bundle_name_ok("a/./b") && !coli_bundle_name_ok("a/") && !coli_bundle_name_ok("a b") &&
		!coli_bundle_name_ok(""), "name rules");
}

static char dir[] = "/tmp/coli-test-bundle.XXXXXX";

static const char *in_dir(const char *name)
{
	static char p[4][300];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
	return p[k];
}

static void test_archive(void)
{
	coli_err e = {0, ""};
	prof_bundle b;
	T_CHECK("scratch folder", mkdtemp(dir) != NULL, "mkdtemp");
	coli_write_atomic(in_dir("t"), "abc", 3, &e);
	coli_write_atomic(in_dir("j"), "{}", 2, &e);
	coli_bundle_manifest w = m;
	memset(w.files[0].sha256, '0', 64), w.files[0].bytes = 0; /* filled by the writer */
	const char *paths[] = {in_dir("t"), in_dir("j")};
	int ok = prof_bundle_write(in_dir("b.tar.gz"), &w, paths, &e) == 0 && access(in_dir("b.tar.gz.tmp"), F_OK) != 0;
	T_CHECK("a bundle written", ok, "%s", e.msg);
	ok = ok && prof_bundle_read(&b, in_dir("b.tar.gz"), &e) == 0;
	T_CHECK("read back in memory: manifest first, members as written", ok && b.n == 3 &&
		!strcmp(b.m[0].name, "manifest.json") && prof_bundle_get(&b, "traces/r.coli_trace")->size == 3 &&
		!memcmp(prof_bundle_get(&b, "runs/r.json")->data, "{}", 3) && !strcmp(b.man->files[0].sha256, m.files[0].sha256),
		"%s", e.msg);
	if (ok)
		prof_bundle_release(&b);
	char *buf;
	size_t len;
	coli_read_file(in_dir("b.tar.gz"), &buf, &len, &e);
	coli_write_atomic(in_dir("cut.tar.gz"), buf, len / 2, &e);
	T_CHECK("a cut bundle is refused", prof_bundle_read(&b, in_dir("cut.tar.gz"), &e) < 0 && strstr(e.msg, "cut.tar.gz"),
		"%s", e.msg);
	free(buf);
	w.n_files = 1, w.n_runs = 0;
	snprintf(w.runs[0].json, sizeof(w.runs[0].json), "traces/r.coli_trace");
	T_CHECK("a manifest that does not check is not written", prof_bundle_write(in_dir("y.tar.gz"), &w, paths, &e) < 0 &&
		access(in_dir("y.tar.gz"), F_OK) != 0, "%s", e.msg);
	coli_write_atomic(in_dir("plain"), "not an archive", 14, &e);
	T_CHECK("a file that is no archive is refused as foreign", prof_bundle_read(&b, in_dir("plain"), &e) < 0 &&
		strstr(e.msg, "foreign"), "%s", e.msg);
	static const char *const names[] = {"t", "j", "b.tar.gz", "cut.tar.gz", "plain"};
	for (int i = 0; i < 5; i++)
		unlink(in_dir(names[i]));
	rmdir(dir);
}

int main(void)
{
	test_manifest();
	test_archive();
	T_EXIT();
}
