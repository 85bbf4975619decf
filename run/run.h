/* run.h: what coli-run's command line asks for, and the parts that do it. */
#ifndef COLI_RUN_H
#define COLI_RUN_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "engine.h"
#include "error.h"
#include "options.h"
#include "plan.h"
#include "policy.h"
#include "sampler.h"
#include "speculative.h"
#include "tokenizer.h"
#include "trace.h"

#define COLI_RUN_VERSION "coli-run 0.1.0"

typedef struct run_opts {
	const char *model;
	const char *prompt_ids;   /* "63 236 218" */
	const char *prompt;       /* text, tokenized with the container's tokenizer.json */
	int n_gen;
	int print_ids;
	int teacher_force;
	const char *dump_logits;
	const char *dump_routing;
	int threads;
	int precision;            /* --precision: COLI_PREC_EXACT (default) or COLI_PREC_Q8 */
	int quiet;
	float temperature;        /* 0: greedy */
	int greedy;               /* --greedy given (refused with --temp above 0) */
	int top_k;
	float top_p;
	uint64_t seed;
	int ignore_eos;
	const char *session;      /* .coli_kv to resume and save */
	int chat;
	int ctx;                  /* KV capacity in tokens (0: prompt + n + margin) */
	const char *tokenizer;    /* tokenizer-only modes */
	int encode;
	const char *decode;
	int stream;               /* --stream: experts read from disk on demand */
	int cache_slots;          /* --cache-slots N per MoE layer, pins included (implies stream); 0:
				   * top_k x 4, or what --ram leaves */
	int prefetch;             /* --prefetch on|off|auto: predict the next layer's experts when
				   * streaming (1, 0, PREFETCH_AUTO; -1: not given, auto) */
	int pins;                 /* --pins N per MoE layer (implies stream); -1: default (top_k
				   * with --usage, else 0) */
	int *cache_list, n_cache_list; /* --cache-slots N0,N1,...: per MoE layer (MTP included) */
	int *pins_list, n_pins_list;   /* --pins P0,P1,...: the same */
	int io;                   /* --io: STORE_IO_THREADS_POOL, STORE_IO_URING or STORE_IO_MMAP */
	int qd;                   /* --queue-depth N: reads in flight per disk; 0: the backend's 8 */
	int cache_policy;         /* --cache-policy: STORE_CACHE_LRU or STORE_CACHE_LFU */
	const char *mirrors[8];   /* --mirror DIR (repeatable): copies of the container */
	int n_mirrors;
	int no_crc;               /* --crc off */
	const char *usage;        /* --usage FILE: .coli_usage routing statistics to fold this run into */
	double ram;               /* --ram GiB: budget of everything coli-run allocates (implies
				   * stream; sizes the cache slots); 0: none */
	const char *const *argv;  /* the command line (the trace's metadata) */
	int argc;
	const char *trace;        /* --trace FILE: spans, reads and routed experts' outcomes per token
				   * (formats/trace.md) */
	int json;                 /* --json: the closing statistics as one JSON object on stdout */
	const char *plan;         /* --plan FILE: plan.json, whose knobs set the options above */
	const coli_plan *planned; /* the plan read (its predictions are reported), or NULL */
	const char *route_from;   /* --route-from TRACE: a route_trace v1 CSV replayed in place of the
				   * routers (benchmarks; formats/route.md) */
	int draft;                /* --draft: DRAFT_AUTO, 0 (off) or K draft tokens per verify */
	const char *draft_oracle; /* --draft-oracle FILE: drafts from a previous run's ids (benchmarks) */
	double draft_oracle_rate; /* --draft-oracle-rate R: each oracle draft right with probability R */
} run_opts;

#define DRAFT_AUTO COLI_SPEC_AUTO
#define PREFETCH_AUTO 2 /* --prefetch auto */

int run_main(const run_opts *o, coli_err *e);

/* plan.c: --plan FILE read into *p, checked against the container (-m) and this machine, and its
 * knobs parsed by coli-run's options table into *o as if given on the command line (o holds the
 * command line's options, defaults the table's initial values); a knob the command line also
 * set is an error. */
int run_plan_apply(run_opts *o, const run_opts *defaults, const coli_option *options, coli_plan *p, coli_err *e);

/* tokmode.c: --tokenizer FILE --encode (stdin text -> ids) / --decode "ids" (-> text). */
int run_tokenizer_mode(const run_opts *o, coli_err *e);

/* ids.c: "63 236 218" -> ids, each below vocab; *ids malloc'd. what names the option in errors. */
int parse_ids(const char *s, int vocab, const char *what, int32_t **ids, int *n, coli_err *e);

/* gencfg.c: the EOS ids of the container's generation_config.json (or config.json). */
int eos_ids(const coli_container *c, int32_t *ids, int max, int *n, coli_err *e);

/* chat.c: one user turn in the family's chat format, as text to tokenize with special tokens
 * (caller frees); prev: the text of the conversation's last token (NULL when none). A family
 * without a built-in format: NULL with chat_check's error. */
char *chat_turn(coli_family f, const char *user, int first, const char *prev, coli_err *e);
/* 0 when the family has a built-in chat format; else -1 with a usage error naming the family. */
int chat_check(coli_family f, coli_err *e);
/* 1 when chat.c's table has the family: a format, or deliberately none (and why). */
int chat_has_entry(coli_family f);

/* session.c: a conversation's tokens and KV cache saved to / resumed from a .coli_kv file. */
typedef struct session {
	int32_t *tokens;          /* the conversation so far */
	int n_tokens, cap;
	int pending;              /* 1 when the last token is chosen but not yet run through the model */
} session;

int session_push(session *s, const int32_t *ids, int n, coli_err *e);
/* Reads path when it exists (else an empty session) and sizes the KV cache for extra more tokens. */
int session_load(session *s, coli_kv *kv, const coli_engine *m, const char *path, int extra, coli_err *e);
int session_save(const session *s, const coli_kv *kv, const coli_engine *m, const char *path, coli_err *e);

/* outputs.c: the files a run writes (--session, --usage, --dump-logits, --dump-routing, --trace),
 * checked before any work and named as the user gave them: a folder or a device given as a file
 * or two options naming one file (EUSAGE), a folder missing, not a folder or not writable (EIO:
 * a temporary is created in it and removed). outputs_space: the sizes known before the run
 * (bytes, 0: unknown), summed per file system, against its free space (EIO). */
typedef struct run_output {
	const char *opt, *path;
} run_output;
#define RUN_OUTPUTS 5

typedef struct output_sizes {
	double session, usage, logits, routing;
} output_sizes;

int outputs_check(const run_opts *o, coli_err *e);
int outputs_space(const run_opts *o, const output_sizes *z, coli_err *e);

/* The lock of --session FILE or --usage FILE for a run: FILE.lock beside it, created, locked
 * (fcntl F_SETLK: the kernel releases it when the process ends, however it ends) and holding the
 * pid; a lock another process holds is refused (EIO) naming its pid. Released by removing the
 * lock file while still holding it (a run that locked a file removed meanwhile tries again). */
typedef struct run_lock {
	int fd;
	char *path;
} run_lock;

int run_lock_take(run_lock *l, const char *opt, const char *file, coli_err *e);
void run_lock_release(run_lock *l); /* accepts a zeroed lock with fd -1, or one never taken */

/* signals.c: SIGINT and SIGTERM (docs/coli-run.md, Signals). Installed at start: while loading,
 * a signal removes the paths given to run_signals_cleanup (the lock files) and exits 128 + the
 * signal at once; after run_signals_running it only sets a flag (run_signal_pending) and makes
 * run_signal_fd readable, for the generation loop (between tokens) and the chat prompt (poll);
 * run_signal_take returns the signal (0: none) and clears both. */
int run_signals_install(coli_err *e);
void run_signals_cleanup(const char *path);
void run_signals_running(void);
int run_signal_pending(void);
int run_signal_take(void);
int run_signal_fd(void);

/* prefetch.c: --prefetch auto (the default when streaming): next-layer prediction on or off as
 * measured decode steps say, not by a rule. A probe alternates the two modes PREFETCH_SLICE
 * tokens at a time (the run's drift, its cache filling, falls on both alike) until each has run
 * PREFETCH_PROBE tokens; the mode of fewer seconds per token (ties: on) is then held for
 * PREFETCH_HOLD0 tokens, twice as long after each probe that confirms it (up to
 * PREFETCH_HOLD_MAX), PREFETCH_HOLD0 again after one that changes it, then probed again (the
 * other mode first). The first probe starts with prediction on. */
#define PREFETCH_SLICE 2
#define PREFETCH_PROBE 8
#define PREFETCH_HOLD0 32
#define PREFETCH_HOLD_MAX 256

typedef struct prefetch_auto {
	int on;                   /* the next step's mode: 1 prediction on */
	int probing;              /* 1: alternating; 0: holding `held` */
	int held;                 /* the mode the last probe chose */
	double s[2];              /* [mode] seconds of the probe's steps */
	int n[2];                 /* [mode] tokens of the probe's steps */
	int slice;                /* tokens of the current slice of the probe */
	int hold, left;           /* tokens the current hold lasts; left of it */
	int tokens[2];            /* [mode] tokens decoded over the run */
	int probes, switches;     /* probes ended; of them, those that changed the mode */
	double last_s[2];         /* [mode] the last probe's seconds per token */
} prefetch_auto;

void prefetch_auto_init(prefetch_auto *a);
/* A decode step made tokens (> 0) in seconds with prediction a->on: the next step's mode. */
int prefetch_auto_step(prefetch_auto *a, double seconds, int tokens);

/* report.c: the closing figures of a run, printed as text lines on stderr or as one line of
 * JSON on stdout (--json), from the same numbers. */
typedef struct run_report {
	int prefilled, decoded;
	double prefill_s, decode_s;
	double weights_per_token;  /* bytes of weights one decode token reads */
	const char *isa;
	int threads;
	const char *precision;     /* "exact" or "q8" */
	const char *q8_isa;        /* the q8 products' variant; NULL when exact */
	double q8_share;           /* of weights_per_token, the bytes multiplied in q8 */
	double peak_rss;           /* bytes */
	const char *store_kind;    /* "ram", "mmap" or "stream" */
	int streaming;             /* st and all below are set */
	coli_store_stats st;            /* over the decode (over the whole run without one) */
	coli_store_stats all;           /* over the whole run (failed reads) */
	int per_token;             /* tokens the per-token figures divide by */
	double wall;               /* seconds the disks' busy fractions are of */
	int prefetch;              /* next-layer prediction on (or auto): its figures are printed */
	const prefetch_auto *pauto; /* --prefetch auto's decisions; NULL when not auto */
	const coli_budget *ram;    /* --ram: the budget's split; NULL without */
	double ram_gib;
	const int32_t *ids;        /* the generated ids (JSON) */
	int n_ids;
	const char *trace;         /* --trace FILE, or NULL */
	const char *route_from;    /* --route-from TRACE, or NULL: said in both forms */
	const coli_plan *plan;     /* --plan: its predictions beside the measured figures; NULL without */
	const char *plan_path;
	const coli_spec *draft;      /* --draft other than 0, --draft-oracle: its figures; NULL without */
	const char *draft_oracle;  /* --draft-oracle FILE, or NULL: said in both forms */
	double draft_oracle_rate;
} run_report;

void report_text(const run_report *p);
/* one or many, as n says: "1 token", "2 tokens". */
const char *run_plural(long long n, const char *one, const char *many);
int report_json(const run_report *p, coli_err *e);

/* trace.c: --trace FILE. prepare before the model opens (coli_engine_opts.tracer = &t), open once it
 * has (the copies are known), close at the end: ok 0 removes the temporary. */
typedef struct run_trace {
	coli_tracer t;
	coli_trace_writer *w;
	pthread_mutex_t mu;        /* one writer, records from several threads */
	int failed;
	coli_err err;              /* the first append's failure */
} run_trace;

void run_trace_prepare(run_trace *rt);
int run_trace_open(run_trace *rt, const char *path, const coli_engine *m, const run_opts *o, coli_err *e);
int run_trace_close(run_trace *rt, int ok, coli_err *e);

#endif
