/* json.c: coli-json, the tests' and benchmarks' reader of coli's --json output (no jq on a
 * user's machine): the last line of stdin that is a JSON object, then one value per PATH.
 *
 * usage: coli-json PATH... < output      PATH: keys and array indexes joined by dots
 *                                         ("decode.tokens_per_s", "stream.disks.0.busy")
 * Prints each value on its own line: strings raw, numbers and the rest as JSON. Exit 1 when a
 * path is missing or no line is a JSON object, 2 on bad usage. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The last line of stdin that parses as a JSON object; NULL when none does. */
static json_t *last_object(void)
{
	char *line = NULL;
	size_t cap = 0;
	json_t *best = NULL;
	while (getline(&line, &cap, stdin) >= 0) {
		json_t *j = line[0] == '{' ? json_loads(line, 0, NULL) : NULL;
		if (json_is_object(j))
			json_decref(best), best = j;
		else
			json_decref(j);
	}
	free(line);
	return best;
}

static json_t *walk(json_t *j, const char *path)
{
	char *p = strdup(path), *save = NULL;
	for (char *k = strtok_r(p, ".", &save); j && k; k = strtok_r(NULL, ".", &save)) {
		char *end;
		long i = strtol(k, &end, 10);
		j = json_is_array(j) && !*end ? json_array_get(j, (size_t)i) : json_object_get(j, k);
	}
	free(p);
	return j;
}

static const char usage[] =
	"usage: coli-json PATH... < output\n"
	"\n"
	"The last line of stdin that is a JSON object (coli-run --json prints one), then the value at\n"
	"each PATH (keys and array indexes joined by dots: decode.tokens_per_s, stream.disks.0.busy), one\n"
	"per line: strings raw, the rest as JSON. Exit 1 when a path is missing or no line is an object.\n"
	"\n"
	"  -h, --help  this text\n";

int main(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
		return fputs(usage, stdout), 0;
	if (argc < 2) {
		fprintf(stderr, "coli-json: give a PATH\n%s", usage);
		return 2;
	}
	json_t *root = last_object();
	if (!root) {
		fputs("coli-json: no line of stdin is a JSON object\n", stderr);
		return 1;
	}
	int rc = 0;
	for (int i = 1; i < argc; i++) {
		json_t *v = walk(root, argv[i]);
		char *s = v && !json_is_string(v) ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
		if (!v)
			fprintf(stderr, "coli-json: '%s' is not in the object\n", argv[i]), rc = 1;
		else
			puts(s ? s : json_string_value(v));
		free(s);
	}
	json_decref(root);
	return rc;
}
