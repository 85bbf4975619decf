/* test_options.c: option tables: every kind, bounds, the forms of GNU options, operands, each
 * refusal naming the option and the value, and --help wrapped within 100 columns. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "t.h"

static struct values {
	int flag, mode, count, choice, help, implied, called;
	uint64_t seed;
	double ratio;
	float temp;
	const char *name, *list[3];
	int n_list;
} v;

enum { MODE_A = 1, MODE_B = 2 };

static const coli_choice io[] = {{"uring", 10}, {"threads", 20}, {"mmap", 30}, {NULL, 0}};

/* A callback that refuses "bad" and counts the others. */
static int call(const coli_option *opt, const char *arg, coli_err *e)
{
	if (arg && !strcmp(arg, "bad"))
		return coli_errf(e, COLI_EUSAGE, "'%s' is not good", arg);
	(*(int *)opt->value)++;
	return 0;
}

static const coli_option table[] = {
	COLI_OPT_TEXT("A tool for testing option tables."),
	COLI_OPT_TEXT(""),
	COLI_OPT_FLAG('f', "flag", &v.flag, "a flag"),
	COLI_OPT_SET('a', "mode-a", &v.mode, MODE_A, "mode A"),
	COLI_OPT_SET(0, "mode-b", &v.mode, MODE_B, "mode B"),
	COLI_OPT_GROUP("values:"),
	COLI_OPT_INT('n', "count", &v.count, "N", 1, 1 << 20, "a count", .implies = &v.implied),
	COLI_OPT_U64(0, "seed", &v.seed, "N", "a seed"),
	COLI_OPT_DOUBLE(0, "ratio", &v.ratio, "R", 0, 1, "a ratio in (0, 1]", .open_lo = 1),
	COLI_OPT_FLOAT('t', "temp", &v.temp, "T", -1, 100, "a temperature in [-1, 100]"),
	COLI_OPT_STRING('o', "name", &v.name, "NAME", "a name"),
	COLI_OPT_STRINGS(0, "item", v.list, &v.n_list, 3, "X", "repeatable, up to 3"),
	COLI_OPT_CHOICE(0, "io", &v.choice, io, "one of three"),
	COLI_OPT_CALLBACK(0, "call", &v.called, "ARG", call, "a callback with a value"),
	COLI_OPT_CALLBACK(0, "poke", &v.called, NULL, call, "a callback without one"),
	COLI_OPT_HELP(&v.help),
	COLI_OPT_END(),
};

static char *args[32];
static int n_args;
static coli_err err;

/* Parses "prog" + the words of line (split at spaces); returns what coli_opts_parse returns. */
static int parse(const char *line)
{
	static char buf[512];
	memset(&v, 0, sizeof(v));
	err = (coli_err){0, ""};
	snprintf(buf, sizeof(buf), "prog %s", line);
	n_args = 0;
	for (char *w = strtok(buf, " "); w && n_args < 31; w = strtok(NULL, " "))
		args[n_args++] = w;
	args[n_args] = NULL;
	return coli_opts_parse(table, n_args, args, &err);
}

/* line must be refused with exactly msg. */
static void refused(const char *line, const char *msg)
{
	char name[600];
	int rc = parse(line);
	snprintf(name, sizeof(name), "refused: %s -> %s", line, msg);
	T_CHECK(name, rc == -1 && err.code == COLI_EUSAGE && !strcmp(err.msg, msg), "rc %d, code %d, '%s'",
		rc, err.code, err.msg);
}

static void kinds(void)
{
	int n = parse("-f --mode-b -n 5 --seed 18446744073709551615 --ratio 0.5 -t -0.5 -o x --io mmap");
	T_CHECK("kinds: flag, set, int, u64, double, float, string, choice",
		n == 0 && v.flag == 1 && v.mode == MODE_B && v.count == 5 && v.seed == UINT64_MAX &&
		v.ratio == 0.5 && v.temp == -0.5f && !strcmp(v.name, "x") && v.choice == 30,
		"n %d, %s", n, err.msg);
	n = parse("--seed 0x1F --item a --item b --call c --poke");
	T_CHECK("kinds: u64 in hex, repeatable strings, callbacks", n == 0 && v.seed == 31 && v.n_list == 2 &&
		!strcmp(v.list[0], "a") && !strcmp(v.list[1], "b") && v.called == 2, "n %d, %s", n, err.msg);
	n = parse("--name a --name b");
	T_CHECK("kinds: the last string given counts", n == 0 && !strcmp(v.name, "b"), "%s", v.name);
	n = parse("--count 7");
	T_CHECK("kinds: .implies is set with the option", n == 0 && v.implied == 1, "implied %d", v.implied);
	n = parse("--flag");
	T_CHECK("kinds: .implies is left alone without it", n == 0 && v.implied == 0, "implied %d", v.implied);
}

static void bounds(void)
{
	int n = parse("-n 1 --ratio 1 -t 100");
	T_CHECK("bounds: inclusive ends accepted", n == 0 && v.count == 1 && v.ratio == 1 && v.temp == 100,
		"%s", err.msg);
	n = parse("-n 1048576 -t -1");
	T_CHECK("bounds: the other inclusive ends", n == 0 && v.count == 1 << 20 && v.temp == -1, "%s", err.msg);
	refused("-n 0", "-n: '0' is not a count in 1..1048576");
	refused("--count 1048577", "--count: '1048577' is not a count in 1..1048576");
	refused("--count 5x", "--count: '5x' is not a count in 1..1048576");
	refused("--count ''", "--count: '''' is not a count in 1..1048576");
	refused("--count 99999999999999999999", "--count: '99999999999999999999' is not a count in 1..1048576");
	refused("--ratio 0", "--ratio: '0' is not a number in (0, 1]");
	refused("--ratio 1.5", "--ratio: '1.5' is not a number in (0, 1]");
	refused("--ratio nan", "--ratio: 'nan' is not a number in (0, 1]");
	refused("-t -2", "-t: '-2' is not a number in [-1, 100]");
	refused("--seed -1", "--seed: '-1' is not an unsigned 64-bit integer");
	refused("--seed 18446744073709551616", "--seed: '18446744073709551616' is not an unsigned 64-bit integer");
	refused("--seed 0x", "--seed: '0x' is not an unsigned 64-bit integer");
}

static void forms(void)
{
	int n = parse("--count=9 --name=a=b --io=uring");
	T_CHECK("forms: --name=value (the value may hold '=')", n == 0 && v.count == 9 && !strcmp(v.name, "a=b") &&
		v.choice == 10, "%s", err.msg);
	n = parse("-n12 -ox");
	T_CHECK("forms: -xVALUE", n == 0 && v.count == 12 && !strcmp(v.name, "x"), "%s", err.msg);
	n = parse("-fan 3");
	T_CHECK("forms: bundled flags, the last taking the next argument", n == 0 && v.flag && v.mode == MODE_A &&
		v.count == 3, "%s", err.msg);
	n = parse("-fn4");
	T_CHECK("forms: bundled flags, the last with its value attached", n == 0 && v.flag && v.count == 4,
		"%s", err.msg);
	n = parse("--cou 6 --mode-a");
	T_CHECK("forms: a unique prefix of a long name", n == 0 && v.count == 6 && v.mode == MODE_A, "%s", err.msg);
	n = parse("--count -5x");
	T_CHECK("forms: a value may start with '-'", n == -1 && strstr(err.msg, "'-5x'"), "%s", err.msg);
	refused("--mode 1", "ambiguous option '--mode' (--mode-a, --mode-b)");
	refused("--flag=1", "--flag takes no value");
	refused("--poke=1", "--poke takes no value");
}

static void unknown_and_missing(void)
{
	refused("--frob", "unknown option '--frob'");
	refused("--frob=3", "unknown option '--frob'");
	refused("-x", "unknown option '-x'");
	refused("-fx", "unknown option '-x'");
	refused("--=3", "unknown option '--'");
	refused("--count", "--count needs a value");
	refused("-n", "-n needs a value");
	refused("-fn", "-n needs a value");
	refused("--io", "--io needs a value");
	refused("--call", "--call needs a value");
}

static void choices_and_limits(void)
{
	refused("--io bogus", "--io: 'bogus' is not uring, threads or mmap");
	refused("--io URING", "--io: 'URING' is not uring, threads or mmap");
	refused("--item a --item b --item c --item d", "--item: 'd' is one too many (at most 3)");
	int n = parse("--item a --item b --item c");
	T_CHECK("limits: up to the maximum", n == 0 && v.n_list == 3 && !strcmp(v.list[2], "c"), "%s", err.msg);
	refused("--call bad", "--call: 'bad' is not good");
}

static void operands(void)
{
	int n = parse("a -f b --count 3 c");
	T_CHECK("operands: in order, options among them", n == 3 && !strcmp(args[0], "a") && !strcmp(args[1], "b") &&
		!strcmp(args[2], "c") && !args[3] && v.flag && v.count == 3, "n %d", n);
	n = parse("-f -- --count -n - x");
	T_CHECK("operands: '--' ends the options", n == 4 && !strcmp(args[0], "--count") && !strcmp(args[1], "-n") &&
		!strcmp(args[2], "-") && !strcmp(args[3], "x") && v.flag && !v.count, "n %d", n);
	n = parse("-");
	T_CHECK("operands: '-' alone is an operand", n == 1 && !strcmp(args[0], "-"), "n %d", n);
	n = parse("");
	T_CHECK("operands: none", n == 0 && !args[0], "n %d", n);
	n = parse("x --help --frob");
	T_CHECK("help: sets its flag and stops the parse", n == 1 && v.help == 1 && err.code == 0, "n %d, %s", n,
		err.msg);
	n = parse("-h");
	T_CHECK("help: -h", n == 0 && v.help == 1, "n %d", n);
}

static const char *const synopsis[] = {"prog [options] FILE", "prog --other FILE", NULL};

static int dummy, dummy_n;
static const char *longest[1];

static const coli_option wide[] = {
	COLI_OPT_TEXT("A paragraph long enough to be wrapped: lorem ipsum dolor sit amet, consectetur "
		      "adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua."),
	COLI_OPT_FLAG('q', "quiet", &dummy, "short help"),
	COLI_OPT_INT(0, "count", &dummy, "N", 0, 9, "Ut enim ad minim veniam, quis nostrud exercitation "
		     "ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in "
		     "reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur."),
	COLI_OPT_STRINGS(0, "a-very-long-option-name", longest, &dummy_n, 1, "VALUE",
			 "names wider than the column get a line of their own, the help under it"),
	COLI_OPT_INT(0, "hidden", &dummy, "N", 0, 9, NULL),
	COLI_OPT_END(),
};

/* The line of text that starts with prefix, or NULL. */
static const char *line_of(const char *text, const char *prefix)
{
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, prefix, strlen(prefix)))
			return l;
	return NULL;
}

static int widest(const char *text)
{
	int w = 0;
	for (const char *l = text; *l;) {
		int n = (int)strcspn(l, "\n");
		w = n > w ? n : w;
		l += n + (l[n] == '\n');
	}
	return w;
}

static void help_text(void)
{
	char *h = coli_opts_help(synopsis, wide);
	T_CHECK("help: formatted", h != NULL, "NULL");
	if (!h)
		return;
	const char *head = "usage: prog [options] FILE\n       prog --other FILE\n\nA paragraph";
	T_CHECK("help: synopsis first, the others under it, a blank line", !strncmp(h, head, strlen(head)),
		"%.80s", h);
	T_CHECK("help: no line wider than 100 columns", widest(h) <= COLI_HELP_WIDTH, "widest %d", widest(h));
	T_CHECK("help: long text wrapped onto several lines", widest(h) > 90, "widest %d", widest(h));
	T_CHECK("help: options in a column after the widest name", line_of(h, "  -q, --quiet  short help\n") &&
		line_of(h, "  --count N    Ut enim"), "%s", h);
	const char *cont = line_of(h, "  --count N");
	cont = cont ? strchr(cont, '\n') + 1 : NULL;
	T_CHECK("help: continuation lines start at the column", cont && !strncmp(cont, "               ", 15) &&
		cont[15] != ' ', "%.40s", cont ? cont : "");
	const char *own = line_of(h, "  --a-very-long-option-name VALUE\n");
	T_CHECK("help: a wide name on its own line, its help under it at the column",
		own && !strncmp(strchr(own, '\n') + 1, "               names wider", 26), "%s", h);
	T_CHECK("help: an option without help is not shown", !strstr(h, "--hidden"), "%s", h);
	T_CHECK("help: ends with a newline", h[strlen(h) - 1] == '\n' && h[strlen(h) - 2] != '\n', "%s", h);
	free(h);
	h = coli_opts_help(synopsis, table);
	T_CHECK("help: choices shown as their words, groups as headers", h && line_of(h, "  --io uring|threads|mmap") &&
		line_of(h, "values:\n") && line_of(h, "  -h, --help "), "%s", h ? h : "");
	free(h);
}

/* coli_opts_int: a tool's own values read as an INT option reads its. */
static void int_values(void)
{
	coli_err e = {0, ""};
	int n = -1;
	T_CHECK("opts_int: 12 in 1..16", coli_opts_int("12", 1, 16, &n, &e) == 0 && n == 12, "n %d: %s", n, e.msg);
	T_CHECK("opts_int: 17 above 1..16 refused, naming the value and range",
		coli_opts_int("17", 1, 16, &n, &e) < 0 && strstr(e.msg, "'17' is not a count in 1..16") && n == 12, "%s",
		e.msg);
	T_CHECK("opts_int: '4x' and '' refused", coli_opts_int("4x", 1, 16, &n, &e) < 0 && coli_opts_int("", 1, 16, &n, &e) < 0,
		"n %d", n);
	T_CHECK("opts_int: -3 in -5..5, an integer", coli_opts_int("-3", -5, 5, &n, &e) == 0 && n == -3, "n %d", n);
}

int main(void)
{
	int_values();
	kinds();
	bounds();
	forms();
	unknown_and_missing();
	choices_and_limits();
	operands();
	help_text();
	T_EXIT();
}
