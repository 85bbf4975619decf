/* options.h: option tables: one declaration per tool that both parses argv and writes --help.
 *
 * A tool declares its options once, as an array of coli_option ending with COLI_OPT_END(),
 * each pointing at the field it sets:
 *
 *	static run_opts o = {.n_gen = 128};
 *	static int help;
 *	static const coli_option options[] = {
 *		COLI_OPT_STRING('m', "model", &o.model, "PATH", "the container"),
 *		COLI_OPT_INT('n', NULL, &o.n_gen, "N", 0, 1 << 24, "tokens to generate (default 128)"),
 *		COLI_OPT_INT(0, "cache-slots", &o.cache_slots, "N", 1, 1 << 20, "...", .implies = &o.stream),
 *		COLI_OPT_CHOICE(0, "prefetch", &o.prefetch, on_off, "..."),
 *		COLI_OPT_HELP(&help),
 *		COLI_OPT_END(),
 *	};
 *
 * coli_opts_parse() reads argv GNU style: "--name value", "--name=value", a unique prefix of a
 * long name, "-x value", "-xVALUE", bundled short flags ("-qv"), options anywhere among the
 * operands, "--" ends the options. coli_opts_help() formats the same table as --help text.
 * Neither prints nor exits: errors come back in a coli_err (COLI_EUSAGE) naming the option and
 * the value, e.g. "--cache-slots: '0' is not a count in 1..1048576", "unknown option '--frob'",
 * "--ram needs a value". The macros check the type of each value pointer at compile time.
 */
#ifndef COLI_OPTIONS_H
#define COLI_OPTIONS_H

#include <stdint.h>

#include "error.h"

/* What an entry is, and the type its value points to. */
enum coli_option_kind {
	COLI_OPTION_END = 0,  /* ends a table */
	COLI_OPTION_GROUP,    /* --help only: a header line, help, e.g. "shape:" */
	COLI_OPTION_TEXT,     /* --help only: a paragraph, help, wrapped ("" is a blank line) */
	COLI_OPTION_HELP,     /* int: set to 1, and parsing stops there (the caller prints --help) */
	COLI_OPTION_FLAG,     /* int: set to .set */
	COLI_OPTION_INT,      /* int: a decimal integer in .lo..hi */
	COLI_OPTION_U64,      /* uint64_t: decimal, or hex after 0x */
	COLI_OPTION_DOUBLE,   /* double: a number in [.flo, .fhi], (.flo, .fhi] with .open_lo */
	COLI_OPTION_FLOAT,    /* float: the same */
	COLI_OPTION_STRING,   /* const char *: the argument itself (the last one given counts) */
	COLI_OPTION_STRINGS,  /* const char *[.max_count]: each one given, counted in *.count */
	COLI_OPTION_CHOICE,   /* int: the .value of the word given among .choices */
	COLI_OPTION_CALLBACK, /* anything: .fn does the work */
};

/* One word of a COLI_OPTION_CHOICE and the int it stores; a table of them ends with {NULL}. */
typedef struct coli_choice {
	const char *word;
	int value;
} coli_choice;

typedef struct coli_option coli_option;

/* A callback's work: arg is the option's value (NULL when .arg is NULL). On failure it returns
 * -1 with e saying what is wrong with arg ("'12Q' is not a size"); the parser puts the option's
 * name in front. */
typedef int (*coli_option_fn)(const coli_option *opt, const char *arg, coli_err *e);

struct coli_option {
	enum coli_option_kind kind;
	char short_name;             /* 'm' for -m; 0: none */
	const char *long_name;       /* "model" for --model; NULL: none */
	void *value;                 /* what the option sets, typed by kind (CALLBACK: for .fn) */
	const char *arg;             /* the value's name in --help ("N", "FILE"); NULL: the option
				      * takes no value (CHOICE: it takes one, shown as "on|off") */
	const char *help;            /* the --help text, wrapped to the column; NULL: not shown */
	long long lo, hi;            /* INT: inclusive bounds */
	double flo, fhi;             /* DOUBLE, FLOAT: bounds, inclusive unless open_lo */
	int open_lo;                 /* DOUBLE, FLOAT: flo itself is refused */
	int set;                     /* FLAG: the value stored */
	const coli_choice *choices;  /* CHOICE: the words, ending with {NULL} */
	int *count;                  /* STRINGS: how many are stored */
	int max_count;               /* STRINGS: the capacity of value[] */
	coli_option_fn fn;           /* CALLBACK */
	int *implies;                /* any kind: also set to 1 when the option is given */
};

/* Compile-time type check of a value pointer inside a static initializer. */
#define COLI_OPT_PTR_(T, p) (1 ? (p) : (T *)0)

/* Table entries. s: short name or 0, l: long name or NULL, p: the value's address, a: the
 * value's name in --help, h: help text; the trailing ... takes extra designators such as
 * .implies = &o.stream or .open_lo = 1. */
#define COLI_OPT_END() {.kind = COLI_OPTION_END}
#define COLI_OPT_GROUP(title) {.kind = COLI_OPTION_GROUP, .help = (title)}
#define COLI_OPT_TEXT(text) {.kind = COLI_OPTION_TEXT, .help = (text)}
#define COLI_OPT_HELP(p) {.kind = COLI_OPTION_HELP, .short_name = 'h', .long_name = "help", \
	.value = COLI_OPT_PTR_(int, p), .help = "this text"}
#define COLI_OPT_FLAG(s, l, p, h, ...) {.kind = COLI_OPTION_FLAG, .short_name = (s), \
	.long_name = (l), .value = COLI_OPT_PTR_(int, p), .help = (h), .set = 1, __VA_ARGS__}
#define COLI_OPT_SET(s, l, p, v, h, ...) {.kind = COLI_OPTION_FLAG, .short_name = (s), \
	.long_name = (l), .value = COLI_OPT_PTR_(int, p), .help = (h), .set = (v), __VA_ARGS__}
#define COLI_OPT_INT(s, l, p, a, lo_, hi_, h, ...) {.kind = COLI_OPTION_INT, .short_name = (s), \
	.long_name = (l), .value = COLI_OPT_PTR_(int, p), .arg = (a), .help = (h), .lo = (lo_), \
	.hi = (hi_), __VA_ARGS__}
#define COLI_OPT_U64(s, l, p, a, h, ...) {.kind = COLI_OPTION_U64, .short_name = (s), \
	.long_name = (l), .value = COLI_OPT_PTR_(uint64_t, p), .arg = (a), .help = (h), __VA_ARGS__}
#define COLI_OPT_DOUBLE(s, l, p, a, lo_, hi_, h, ...) {.kind = COLI_OPTION_DOUBLE, \
	.short_name = (s), .long_name = (l), .value = COLI_OPT_PTR_(double, p), .arg = (a), \
	.help = (h), .flo = (lo_), .fhi = (hi_), __VA_ARGS__}
#define COLI_OPT_FLOAT(s, l, p, a, lo_, hi_, h, ...) {.kind = COLI_OPTION_FLOAT, \
	.short_name = (s), .long_name = (l), .value = COLI_OPT_PTR_(float, p), .arg = (a), \
	.help = (h), .flo = (lo_), .fhi = (hi_), __VA_ARGS__}
#define COLI_OPT_STRING(s, l, p, a, h, ...) {.kind = COLI_OPTION_STRING, .short_name = (s), \
	.long_name = (l), .value = COLI_OPT_PTR_(const char *, p), .arg = (a), .help = (h), \
	__VA_ARGS__}
#define COLI_OPT_STRINGS(s, l, p, n, max, a, h, ...) {.kind = COLI_OPTION_STRINGS, \
	.short_name = (s), .long_name = (l), .value = COLI_OPT_PTR_(const char *, p), \
	.count = COLI_OPT_PTR_(int, n), .max_count = (max), .arg = (a), .help = (h), __VA_ARGS__}
#define COLI_OPT_CHOICE(s, l, p, words, h, ...) {.kind = COLI_OPTION_CHOICE, .short_name = (s), \
	.long_name = (l), .value = COLI_OPT_PTR_(int, p), .choices = (words), .help = (h), \
	__VA_ARGS__}
#define COLI_OPT_CALLBACK(s, l, p, a, f, h, ...) {.kind = COLI_OPTION_CALLBACK, \
	.short_name = (s), .long_name = (l), .value = (p), .arg = (a), .fn = (f), .help = (h), \
	__VA_ARGS__}

/* The widest line coli_opts_help writes (a word longer than a whole line is the exception). */
#define COLI_HELP_WIDTH 100

/* Parses argv[1..argc) against opts, setting the values of the options given, in order.
 * Returns the number of operands (arguments that are not options, and all after "--"), moved in
 * order to argv[0..n) with argv[n] = NULL; or -1 with e (COLI_EUSAGE) naming the option and
 * the value. A COLI_OPTION_HELP stops the parse where it stands: the caller checks its flag
 * before anything else. */
int coli_opts_parse(const coli_option *opts, int argc, char **argv, coli_err *e);

/* A whole decimal number in lo..hi into *out, as an INT option reads its value (for values a
 * tool parses itself, such as the items of a list); else -1 with e: "'x' is not a count in 1..8". */
int coli_opts_int(const char *s, long long lo, long long hi, int *out, coli_err *e);

/* A comma-separated list of whole numbers in lo..hi ("24,30,12") into *out (malloc'd, caller
 * frees) and *n; -1 with e naming the bad item ("'x' is not a count in 1..8") or an empty one. */
int coli_opts_int_list(const char *s, long long lo, long long hi, int **out, int *n, coli_err *e);

/* The --help text: "usage: " and synopsis[0], the other synopsis lines (NULL-terminated) under
 * it, a blank line, then each entry of opts: options as "  -x, --name ARG" with their help in
 * one column, wrapped so that no line exceeds COLI_HELP_WIDTH. Malloc'd (caller frees); NULL
 * when out of memory. */
char *coli_opts_help(const char *const *synopsis, const coli_option *opts);

/* What a tool prints when its command line stops it: "<tool>: <msg>\n" (when msg is not NULL:
 * a usage error, for stderr) and then the --help text. Malloc'd (caller frees); NULL when out of
 * memory. */
char *coli_opts_usage(const char *tool, const char *msg, const char *const *synopsis,
		      const coli_option *opts);

#endif
