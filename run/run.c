/* run.c: one coli-run invocation: load, feed the prompt (after a resumed session), then
 * teacher-force or generate, stream the text, save the session, report speed and memory. */
#include "run.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fileio.h"
#include "policy.h"
#include "route.h"
#include "sampler.h"
#include "usage.h"

typedef struct runner {
	const run_opts *o;
	coli_engine m;
	coli_tok *tok;              /* NULL when the container carries no tokenizer.json */
	coli_kv kv;
	session s;
	sampler smp;
	int32_t eos[16];
	int n_eos;
	double prefill_s, decode_s;
	int prefilled, decoded;
	coli_store_stats st0;            /* streaming counters when decoding began */
	coli_usage usage;           /* --usage: the statistics of earlier runs */
	double *counts;             /* --usage: this run's routing counts (the engine's opts.usage) */
	coli_budget plan;           /* the expert cache chosen (--ram: the budget's split) */
	int *lists;                 /* --cache-slots / --pins LIST: [2][MoE layers] the pins and LRU
				     * slots of the split */
	int *layer_cache;           /* [2][container layers] LRU slots, pins: the store's lists */
	run_trace tr;               /* --trace */
	coli_route *route;          /* --route-from */
	int gen0;                   /* index in the session of the last generation's first id */
	int print_ids;              /* ids on stdout: --print-ids, or no tokenizer to decode them */
	int resumed;                /* tokens of the resumed session */
	int warned_positions;       /* the max_position_embeddings warning was given */
	int lines, bad_lines;       /* --chat: lines read, lines skipped for invalid UTF-8 */
	coli_spec dr;                 /* --draft, --draft-oracle */
	prefetch_auto pa;           /* --prefetch auto, when pa_on */
	int pa_on;
	int32_t *oracle;            /* --draft-oracle: the ids read */
	int n_oracle;
	run_lock session_lock, usage_lock; /* --session, --usage: held for the run */
	int sig;                    /* the signal that ends the run (SIGINT, SIGTERM); 0: none */
	int made;                   /* tokens the last generation made */
	int turns;                  /* --chat: turns answered */
	int at_prompt;              /* --chat: the signal came at the prompt */
	int space_checked;          /* outputs_space ran (before the first turn) */
} runner;

/* The new input of this run: --prompt-ids, --prompt text, or a chat turn. */
static int input_ids(runner *r, const char *text, int first, int32_t **ids, int *n, coli_err *e)
{
	*ids = NULL;
	*n = 0;
	if (r->o->prompt_ids && !r->o->chat)
		return parse_ids(r->o->prompt_ids, r->m.cfg->vocab_size, "--prompt-ids", ids, n, e);
	if (!text)
		return 0;
	if (!r->tok)
		return coli_errf(e, COLI_EUSAGE, "%s: no tokenizer.json in the container; use --prompt-ids", r->m.ct->dir);
	int32_t last = r->s.n_tokens > 0 ? r->s.tokens[r->s.n_tokens - 1] : -1;
	const char *prev = last >= 0 ? coli_tok_token(r->tok, last) : NULL;
	char *turn = r->o->chat ? chat_turn(r->m.cfg->family, text, first, prev, e) : NULL;
	if (r->o->chat && !turn)
		return -1;
	const char *t = turn ? turn : text;
	int rc = coli_tok_encode(r->tok, t, strlen(t), 1, ids, n, e);
	free(turn);
	for (int i = 0; rc == 0 && i < *n; i++)
		if ((*ids)[i] >= r->m.cfg->vocab_size)
			rc = coli_errf(e, COLI_EDATA, "%s/tokenizer.json: token %d ('%s') is outside the model's vocab_size %d",
				       r->m.ct->dir, (*ids)[i], coli_tok_token(r->tok, (*ids)[i]), r->m.cfg->vocab_size);
	return rc;
}

static int is_eos(const runner *r, int32_t id)
{
	for (int i = 0; i < r->n_eos && !r->o->ignore_eos; i++)
		if (r->eos[i] == id)
			return 1;
	return 0;
}

/* Runs every session token not yet in the KV cache; logits of the last one into last. */
static int feed(runner *r, float *last, coli_err *e)
{
	int todo = r->s.n_tokens - r->kv.n;
	if (todo <= 0)
		return coli_errf(e, COLI_EUSAGE, "nothing to run: give a prompt (--prompt, --prompt-ids)");
	double t = coli_now();
	coli_tracer_wall_begin(&r->tr.t, COLI_PHASE_PREFILL, t); /* the trace's wall is prefill_s */
	int rc = coli_spec_feed(&r->dr, &r->m, &r->kv, r->s.tokens + r->kv.n, todo, last, e);
	double end = coli_now();
	coli_tracer_wall_end(&r->tr.t, end, (uint64_t)todo);
	r->prefill_s += end - t;
	r->prefilled += todo;
	r->s.pending = 0;
	return rc;
}

/* An output's write failed (at the end of the run: a disk filled meanwhile, say): the message
 * starts with the option and the path the user gave. */
static int not_written(int rc, const char *opt, const char *path, coli_err *e)
{
	char p[4200];
	if (rc == 0)
		return 0;
	snprintf(p, sizeof(p), "%s %s: not written (an earlier file there is left as it was)", opt, path);
	coli_err_prefix(e, p);
	return -1;
}

static int emit(runner *r, coli_detok *d, int32_t id, coli_err *e)
{
	const char *text;
	size_t len;
	if (r->print_ids || !d)
		return 0;
	if (coli_detok_feed(d, id, &text, &len, e) < 0)
		return -1;
	fwrite(text, 1, len, stdout);
	fflush(stdout);
	return 0;
}

/* One made token: kept (a step's logits dumped), pushed, printed; 1 when generation stops at it. */
static int take_token(runner *r, coli_detok *d, int32_t id, const float *row, float *steps, int32_t *out, int *k,
		      coli_err *e)
{
	int V = r->m.cfg->vocab_size;
	if (steps)
		memcpy(steps + (size_t)*k * V, row, (size_t)V * sizeof(float));
	out[(*k)++] = id;
	int rc = session_push(&r->s, &id, 1, e);
	r->s.pending = 1;
	if (rc == 0)
		rc = emit(r, d, id, e);
	return rc < 0 ? -1 : is_eos(r, id) || *k == r->o->n_gen;
}

/* Samples up to n tokens from logits, stopping after an EOS; the last chosen token stays
 * pending (chosen, not yet run through the model: a resumed session runs it first). Each step
 * (draft.c) is a plain decode step or a round of drafts and their verify, making one token or
 * more; a stop within them rolls the caches back. */
static int generate(runner *r, float *logits, coli_err *e)
{
	coli_detok *d = NULL;
	int rc = r->tok && !r->print_ids ? coli_detok_new(&d, r->tok, 1, e) : 0;
	int32_t *out = coli_malloc((size_t)(r->o->n_gen + 1) * sizeof(*out), e), made[COLI_DRAFT_MAX + 1];
	const float *rows[COLI_DRAFT_MAX + 1] = {logits};
	int k = 0, V = r->m.cfg->vocab_size, nm = 1, stop = 0;
	float *steps = r->o->dump_logits ? coli_malloc((size_t)(r->o->n_gen + 1) * V * sizeof(float), e) : NULL;
	if (r->o->dump_logits && !steps)
		rc = -1;
	double t = coli_now();
	coli_store_get_stats(r->m.store, &r->st0);
	r->gen0 = r->s.n_tokens;
	int dec0 = r->decoded;
	coli_tracer_wall_begin(&r->tr.t, COLI_PHASE_DECODE, t); /* the trace's wall: decode_s, its tokens */
	if (rc == 0 && out && r->o->n_gen > 0)
		made[0] = coli_sampler_pick(&r->smp, logits);
	while (rc == 0 && out && k < r->o->n_gen) {
		int j = 0;
		while (j < nm && (stop = take_token(r, d, made[j], rows[j], steps, out, &k, e)) == 0)
			j++;
		if (stop < 0)
			rc = -1;
		if (stop > 0 && j + 1 < nm && coli_spec_stop(&r->dr, &r->m, &r->kv, r->kv.n - (nm - j - 1), e) < 0)
			rc = -1;
		if (stop)
			break;
		if (run_signal_pending()) /* between tokens: the one chosen stays pending */
			break;
		int n0 = r->kv.n;
		double t0 = coli_now();
		rc = coli_spec_step(&r->dr, &r->m, &r->kv, &r->smp, made[nm - 1], k - 1, r->o->n_gen - k, made, rows, &nm,
				logits, e);
		r->s.pending = 0;
		r->decoded += r->kv.n - n0;
		if (r->pa_on && rc == 0)
			coli_store_set_predict(r->m.store, prefetch_auto_step(&r->pa, coli_now() - t0, r->kv.n - n0));
	}
	for (int i = 0; rc == 0 && out && r->print_ids && i < k; i++)
		printf("%d%c", out[i], i + 1 < k ? ' ' : '\n');
	if (d) {
		const char *text;
		size_t len;
		coli_detok_flush(d, &text, &len);
		fwrite(text, 1, len, stdout);
		if (!r->o->chat)
			putchar('\n');
	}
	double end = coli_now();
	coli_tracer_wall_end(&r->tr.t, end, (uint64_t)(r->decoded - dec0));
	r->decode_s += end - t;
	r->made = k;
	if (rc == 0 && steps)
		rc = not_written(coli_write_atomic(r->o->dump_logits, steps, (size_t)k * V * sizeof(float), e), "--dump-logits",
				 r->o->dump_logits, e);
	coli_detok_free(d);
	free(steps);
	free(out);
	return out ? rc : -1;
}

/* The prompt alone, logits of every position and routing dumped (the scripting contract). */
static int teacher_force(runner *r, coli_err *e)
{
	int V = r->m.cfg->vocab_size, L = coli_engine_moe_layers(&r->m), k = r->m.cfg->top_k;
	int n = r->s.n_tokens - r->kv.n;
	float *logits = coli_malloc((size_t)n * V * sizeof(float), e);
	coli_routing_log rl = {coli_malloc((size_t)(L ? L : 1) * n * k * sizeof(int32_t), e), NULL};
	double t = coli_now();
	r->tr.t.phase = COLI_PHASE_PREFILL;
	int rc = logits && rl.ids ? coli_forward(&r->m, &r->kv, r->s.tokens + r->kv.n, n, logits, NULL, &rl, e) : -1;
	r->prefill_s += coli_now() - t;
	r->prefilled += n;
	if (rc == 0 && r->o->dump_logits)
		rc = not_written(coli_write_atomic(r->o->dump_logits, logits, (size_t)n * V * sizeof(float), e),
				 "--dump-logits", r->o->dump_logits, e);
	if (rc == 0 && r->o->dump_routing)
		rc = not_written(coli_write_atomic(r->o->dump_routing, rl.ids, (size_t)L * n * k * sizeof(int32_t), e),
				 "--dump-routing", r->o->dump_routing, e);
	free(logits);
	free(rl.ids);
	return rc;
}

/* The KV cache cannot hold this turn: the numbers the user gave (prompt, -n, --ctx). The
 * last generated token is never run, so n tokens of input and -n N need n + N - 1. */
static int context_full(const runner *r, coli_err *e)
{
	const run_opts *o = r->o;
	int mine = r->s.n_tokens - r->resumed, need = mine + o->n_gen - 1;
	char sess[64] = "";
	if (r->resumed)
		snprintf(sess, sizeof(sess), " beyond the resumed session's %d", r->resumed);
	if (o->ctx)
		return coli_errf(e, COLI_EUSAGE, "--ctx %d: too small for %s%d tokens and -n %d (needs --ctx %d%s)", o->ctx,
				 o->chat ? "this chat's " : "the prompt's ", mine, o->n_gen, need, sess);
	return coli_errf(e, COLI_EUSAGE, "%s%d tokens and -n %d exceed the default context of %d tokens%s: give --ctx %d "
			 "or more", o->chat ? "this chat's " : "the prompt's ", mine, o->n_gen, r->kv.cap - 1 - r->resumed,
			 sess, need);
}

/* --route-from: the positions this turn runs (the context, and -n N's first N - 1 tokens; the
 * last one is never run) must all be in the trace. */
static int route_covers(const runner *r, coli_err *e)
{
	const run_opts *o = r->o;
	int gen = o->teacher_force || o->n_gen == 0 ? 0 : o->n_gen - 1, need = r->s.n_tokens + gen;
	if (!r->route || need <= r->route->n_positions)
		return 0;
	char sess[64] = "";
	if (r->resumed)
		snprintf(sess, sizeof(sess), ", %d of them the resumed session's", r->resumed);
	return coli_errf(e, COLI_EUSAGE, "--route-from %s: positions: this run reaches %d positions (%d in the context%s, "
			 "then -n %d), the trace has %d", r->route->name, need, r->s.n_tokens, sess,
			 o->teacher_force ? 0 : o->n_gen, r->route->n_positions);
}

/* Once: the context this turn reaches is longer than the model was trained for. */
static void warn_positions(runner *r)
{
	int end = r->s.n_tokens + (r->o->teacher_force ? 0 : r->o->n_gen), max = r->m.cfg->max_position_embeddings;
	if (r->warned_positions || max <= 0 || end <= max)
		return;
	r->warned_positions = 1;
	fflush(stdout);
	fprintf(stderr, "coli-run: warning: %d tokens (%d in the context, -n %d) exceed the model's "
		"max_position_embeddings %d: what comes after may be poor\n", end, r->s.n_tokens, r->o->teacher_force ? 0 :
		r->o->n_gen, max);
}

/* Before the first turn runs: what the outputs will hold where it is known (the session of a run
 * that is not a chat, the usage table, the dumps), against the free space of their file systems. */
static int space_check(runner *r, coli_err *e)
{
	const run_opts *o = r->o;
	const coli_model *c = r->m.cfg;
	int n = r->s.n_tokens - r->kv.n, gen = o->teacher_force ? 0 : o->n_gen;
	output_sizes z = {0};
	r->space_checked = 1;
	if (!o->chat)
		z.session = 4096.0 + (double)(r->s.n_tokens + gen) * (4.0 + (double)coli_kv_token_bytes(c)) +
			    (double)coli_model_state_fixed_bytes(c);
	z.usage = 4096.0 + 8.0 * (c->n_layers + c->n_mtp_layers) * (double)c->n_experts;
	z.logits = 4.0 * c->vocab_size * (double)(o->teacher_force ? n : gen);
	z.routing = 4.0 * coli_engine_moe_layers(&r->m) * (double)n * c->top_k;
	return outputs_space(o, &z, e);
}

/* One prompt: feed it (with a pending token of a resumed session), then generate. */
static int turn(runner *r, const char *text, int first, float *logits, coli_err *e)
{
	int32_t *ids = NULL;
	int n = 0;
	int rc = input_ids(r, text, first, &ids, &n, e);
	if (rc == 0)
		rc = session_push(&r->s, ids, n, e);
	free(ids);
	if (rc == 0 && r->s.n_tokens + r->o->n_gen > r->kv.cap)
		rc = context_full(r, e);
	if (rc == 0)
		rc = route_covers(r, e);
	if (rc == 0)
		warn_positions(r);
	if (rc == 0 && !r->space_checked)
		rc = space_check(r, e);
	if (rc == 0)
		rc = r->o->teacher_force ? teacher_force(r, e) : feed(r, logits, e);
	if (rc == 0 && !r->o->teacher_force)
		rc = generate(r, logits, e);
	return rc;
}

/* A chat line must be UTF-8: one that is not is reported (line n, the byte offset in it) and
 * skipped, and the chat goes on (the run ends with exit 1 after the session is saved). */
static int valid_line(runner *r, const char *line, int n)
{
	size_t len = strlen(line), bad = coli_tok_utf8_invalid(line, len);
	if (bad == len)
		return 1;
	r->bad_lines++;
	fflush(stdout);
	fprintf(stderr, "coli-run: stdin line %d: invalid UTF-8 at byte offset %zu (0x%02x): line skipped\n", n, bad,
		(unsigned char)line[bad]);
	return 0;
}

/* stdin read line by line on its file descriptor, so that the prompt can wait on it and on the
 * signal pipe at once (a signal wakes the prompt whichever thread it lands on). */
typedef struct line_reader {
	char *buf;
	size_t start, len, cap;     /* the unread bytes: buf[start .. len) */
	int eof;
} line_reader;

/* Reads more of stdin into lr, or waits for a signal: 1 on a signal (taken into *sig), 0, or -1
 * with e filled. */
static int fill_line(line_reader *lr, int *sig, coli_err *e)
{
	if (lr->start) {
		memmove(lr->buf, lr->buf + lr->start, lr->len - lr->start);
		lr->len -= lr->start, lr->start = 0;
	}
	if (lr->len + 4096 + 1 > lr->cap) {
		size_t cap = lr->cap * 2 + 8192;
		char *b = realloc(lr->buf, cap);
		if (!b)
			return coli_errf(e, COLI_ENOMEM, "out of memory for a chat line of %zu bytes", cap);
		lr->buf = b, lr->cap = cap;
	}
	struct pollfd p[2] = {{0, POLLIN, 0}, {run_signal_fd(), POLLIN, 0}};
	if (poll(p, 2, -1) < 0)
		return errno == EINTR ? 0 : coli_errf(e, COLI_EIO, "stdin: poll: %s", strerror(errno));
	if (p[1].revents && (*sig = run_signal_take()))
		return 1;
	if (p[0].revents & POLLNVAL) /* stdin closed */
		lr->eof = 1;
	if (!p[0].revents || lr->eof)
		return 0;
	ssize_t n = read(0, lr->buf + lr->len, lr->cap - lr->len - 1);
	if (n < 0 && errno != EINTR && errno != EAGAIN)
		return coli_errf(e, COLI_EIO, "stdin: %s", strerror(errno));
	if (n == 0)
		lr->eof = 1;
	lr->len += n > 0 ? (size_t)n : 0;
	return 0;
}

/* The next line of stdin, its newline removed, into *line (valid until the next call): 1; 0 at
 * the end of stdin; 2 when a signal came first (taken into *sig); -1 with e filled. */
static int read_line(line_reader *lr, char **line, int *sig, coli_err *e)
{
	for (;;) {
		if ((*sig = run_signal_take()))
			return 2;
		char *nl = lr->len > lr->start ? memchr(lr->buf + lr->start, '\n', lr->len - lr->start) : NULL;
		if (nl || (lr->eof && lr->len > lr->start)) { /* the last line may lack its newline */
			size_t end = nl ? (size_t)(nl - lr->buf) : lr->len;
			lr->buf[end] = 0;
			*line = lr->buf + lr->start;
			lr->start = nl ? end + 1 : end;
			return 1;
		}
		if (lr->eof)
			return 0;
		int rc = fill_line(lr, sig, e);
		if (rc != 0)
			return rc < 0 ? -1 : 2;
	}
}

/* After an answer: a signal that came during it stopped it. SIGTERM ends the chat; SIGINT only
 * the answer (a second one at the prompt ends the chat). 1 when the chat ends. */
static int answer_stopped(runner *r)
{
	int sig = run_signal_take();
	if (!sig)
		return 0;
	if (sig != SIGINT) {
		r->sig = sig;
		return 1;
	}
	fflush(stdout);
	fprintf(stderr, "coli-run: answer stopped (SIGINT) after %d %s; another Ctrl-C at the prompt ends the chat\n",
		r->made, run_plural(r->made, "token", "tokens"));
	return 0;
}

/* --chat: one user line after another on stdin, each answered in the family's chat format. At
 * the prompt, a signal ends the chat (the caller saves it); during an answer, see answer_stopped. */
static int chat(runner *r, float *logits, coli_err *e)
{
	line_reader lr = {NULL, 0, 0, 0, 0};
	char *line;
	int rc = 0, first = r->s.n_tokens == 0, tty = isatty(0), got, sig;
	while (rc == 0) {
		fflush(stdout); /* the last answer whole before waiting for the next line */
		if (tty)
			fputs("> ", stderr);
		if ((got = read_line(&lr, &line, &sig, e)) != 1) {
			if (tty && got >= 0) /* Ctrl-D or ^C: what follows starts a line of its own */
				fputc('\n', stderr);
			if (got == 2)
				r->sig = sig, r->at_prompt = 1;
			rc = got < 0 ? -1 : 0;
			break;
		}
		r->lines++;
		if (!*line || !valid_line(r, line, r->lines))
			continue;
		rc = turn(r, line, first, logits, e);
		first = 0;
		r->turns++;
		putchar('\n');
		if (rc == 0 && answer_stopped(r))
			break;
	}
	free(lr.buf);
	return rc;
}

static const char *store_kind_name(coli_store_kind k)
{
	return k == COLI_STORE_STREAM ? "stream" : k == COLI_STORE_MMAP ? "mmap" : "ram";
}

/* The closing figures: the streaming store's counters over the decode (the whole run without
 * one), as text on stderr or JSON on stdout. */
static int report(const runner *r, coli_err *e)
{
	struct rusage ru;
	fflush(stdout); /* the text or ids, then the figures on stderr */
	getrusage(RUSAGE_SELF, &ru);
	run_report p = {
		.prefilled = r->prefilled, .decoded = r->decoded, .prefill_s = r->prefill_s, .decode_s = r->decode_s,
		.weights_per_token = (double)coli_engine_bytes_per_token(&r->m), .isa = coli_kernels_isa(r->m.kc),
		.threads = coli_kernels_threads(r->m.kc),
		.precision = coli_precision_name(coli_kernels_precision(r->m.kc)), .q8_isa = coli_kernels_q8_isa(r->m.kc),
		.q8_share = (double)coli_engine_q8_bytes_per_token(&r->m) / (double)coli_engine_bytes_per_token(&r->m),
		.peak_rss = (double)ru.ru_maxrss * 1024,
		.store_kind = store_kind_name(coli_store_kind_of(r->m.store)), .per_token = r->decoded ? r->decoded : r->prefilled,
		.wall = r->decoded ? r->decode_s : r->prefill_s, .prefetch = r->o->prefetch != 0, .pauto = r->pa_on ? &r->pa : NULL,
		.ram = r->o->ram > 0 ? &r->plan : NULL, .ram_gib = r->o->ram, .trace = r->o->trace,
		.route_from = r->o->route_from, .plan = r->o->planned, .plan_path = r->o->plan,
		.ids = r->s.tokens + r->gen0, .n_ids = r->s.n_tokens - r->gen0,
		.draft = r->o->draft != 0 ? &r->dr : NULL, .draft_oracle = r->o->draft_oracle,
		.draft_oracle_rate = r->o->draft_oracle_rate,
	};
	p.streaming = coli_store_get_stats(r->m.store, &p.all) == 0;
	p.st = p.all;
	if (p.streaming && r->decoded)
		coli_store_stats_sub(&p.all, &r->st0, &p.st);
	if (!r->o->json) {
		report_text(&p);
		return 0;
	}
	return report_json(&p, e);
}

/* --usage: the earlier statistics read (a foreign or corrupt file refused before any work)
 * and this run's counters set up for the MoE blocks. Runs before the model opens (the store
 * pins by the counts read). */
static int usage_open(runner *r, const coli_container *ct, coli_err *e)
{
	const char *path = r->o->usage;
	if (!path)
		return 0;
	const coli_model *c = &ct->model;
	int L = c->n_layers + c->n_mtp_layers, E = c->n_experts, rc = 0;
	if (E <= 0)
		rc = coli_errf(e, COLI_EUSAGE, "--usage: %s has no routed experts", ct->dir);
	else if (access(path, F_OK) == 0 || errno != ENOENT) {
		if ((rc = coli_usage_read(path, ct->identity, &r->usage, e)) == 0 &&
		    (r->usage.n_layers != L || r->usage.n_experts != E))
			rc = coli_errf(e, COLI_EDATA, "%s: n_layers x n_experts %d x %d, the model has %d x %d", path,
				       r->usage.n_layers, r->usage.n_experts, L, E);
	} else {
		rc = coli_usage_init(&r->usage, ct->identity, L, E, e);
	}
	if (rc == 0 && !(r->counts = coli_calloc((size_t)L * (size_t)E, sizeof(double), e)))
		rc = -1;
	return rc;
}

/* The most tokens this run's prompt takes: --prompt-ids counted, a --prompt text at most a token
 * per byte and its special tokens. */
static int prompt_tokens(const run_opts *o, int vocab, int *n, coli_err *e)
{
	int32_t *ids = NULL;
	*n = 0;
	if (o->prompt_ids && parse_ids(o->prompt_ids, vocab, "--prompt-ids", &ids, n, e) < 0)
		return -1;
	free(ids);
	*n += o->prompt ? (int)strlen(o->prompt) + 16 : 0;
	return 0;
}

/* Tokens the KV cache gets room for beyond a resumed session: --ctx, else the prompt's n and
 * the tokens to generate, or a chat's default. */
static int context_extra(const run_opts *o, int n)
{
	return o->ctx > 0 ? o->ctx : o->chat ? 4096 : n + o->n_gen;
}

/* Tokens per forward call the engine's working memory is sized for: the prompt's n (and a
 * resumed session's pending token) up to COLI_MAX_BATCH; a chat's turns are not known:
 * COLI_MAX_BATCH. */
static int batch_tokens(const run_opts *o, int n)
{
	if (o->draft != 0 && n + 1 < COLI_DRAFT_MAX + 1) /* a verify's k + 1 tokens in one batch */
		n = COLI_DRAFT_MAX;
	return o->chat || n + 1 > COLI_MAX_BATCH ? COLI_MAX_BATCH : n + 1;
}

/* --cache-slots LIST / --pins LIST: one count per MoE layer of the container, into the sizing's
 * lists; r->lists holds the per-layer pins and slots the split returns. */
static int cache_lists(runner *r, const coli_container *ct, coli_run_ask *a, coli_err *e)
{
	const run_opts *o = r->o;
	int n = ct->layout.n_elayers;
	if (!o->cache_list && !o->pins_list)
		return 0;
	if ((o->cache_list && o->n_cache_list != n) || (o->pins_list && o->n_pins_list != n))
		return coli_errf(e, COLI_EUSAGE, "%s: %d counts, the container has %d MoE layers (MTP included)",
				 o->cache_list && o->n_cache_list != n ? "--cache-slots" : "--pins",
				 o->cache_list && o->n_cache_list != n ? o->n_cache_list : o->n_pins_list, n);
	if (!(r->lists = coli_calloc((size_t)n * 2, sizeof(*r->lists), e)))
		return -1;
	a->n_lists = n, a->list_cache = o->cache_list, a->list_pins = o->pins_list;
	a->out_pins = r->lists, a->out_slots = r->lists + n;
	return 0;
}

/* The split's per-layer figures as the store takes them: indexed by container layer. */
static int store_lists(runner *r, const coli_container *ct, coli_engine_opts *mo, coli_err *e)
{
	int n = ct->layout.n_elayers, layers = ct->model.n_layers + ct->model.n_mtp_layers;
	if (!r->lists)
		return 0;
	if (!(r->layer_cache = coli_calloc((size_t)layers * 2, sizeof(int), e)))
		return -1;
	for (int i = 0; i < n; i++) {
		int l = ct->layout.elayers[i].layer;
		r->layer_cache[l] = r->lists[n + i], r->layer_cache[layers + l] = r->lists[i];
	}
	mo->so.layer_slots = r->layer_cache, mo->so.layer_pins = r->layer_cache + layers;
	return 0;
}

/* --pins N (or a list) pins fewer experts in some layer than asked: a layer pins at most its
 * experts, and never an expert the usage table has not seen routed. Said once, with the figures
 * (not with -q). */
static void pins_note(const runner *r, const coli_container *ct, const coli_budget *b)
{
	const run_opts *o = r->o;
	int n = ct->layout.n_elayers, E = r->usage.n_experts, lo = INT_MAX, hi = 0, fewer = 0;
	if (o->quiet || (o->pins < 0 && !o->pins_list) || !r->usage.counts)
		return;
	for (int i = 0; i < n; i++) {
		const coli_lexperts *x = &ct->layout.elayers[i];
		int asked = r->lists ? r->lists[i] : o->pins, store = r->lists ? asked : b->pins, seen = 0;
		for (int k = 0; k < x->n_experts && k < E; k++)
			seen += r->usage.counts[(size_t)x->layer * E + k] > 0;
		int got = store < seen ? store : seen;
		fewer |= got < asked;
		lo = got < lo ? got : lo, hi = got > hi ? got : hi;
	}
	if (!fewer)
		return;
	char asked[32] = "", got[32];
	if (!r->lists)
		snprintf(asked, sizeof(asked), " %d", o->pins);
	if (lo == hi)
		snprintf(got, sizeof(got), "%d", lo);
	else
		snprintf(got, sizeof(got), "%d to %d", lo, hi);
	fprintf(stderr, "coli-run: note: --pins%s: %s experts pinned per layer, fewer than asked in some layers (a layer "
		"pins at most its experts, and only those %s has seen routed)\n", asked, got, o->usage);
}

/* The expert cache per MoE layer (streaming): policy.h's sizing (coli_run_sizing) of this run
 * over ct, and its split of --ram, --cache-slots and --pins. Sets mo's slots and pins, and the
 * figures of the --ram report. */
static int cache_plan(runner *r, const coli_container *ct, coli_engine_opts *mo, coli_err *e)
{
	const run_opts *o = r->o;
	int n = 0;
	struct stat sb;
	if (prompt_tokens(o, ct->model.vocab_size, &n, e) < 0)
		return -1;
	mo->max_batch = batch_tokens(o, n);
	coli_run_ask a = {.ctx = context_extra(o, n) + 1, .batch = mo->max_batch, .threads = o->threads,
			  .draft = o->draft != 0, .oracle = o->draft_oracle != NULL, .budget = o->ram * 1073741824.0,
			  .tok = r->tok ? (double)coli_tok_bytes(r->tok) : 0,
			  .cache_slots = o->cache_slots, .pins = o->pins, .usage = o->usage ? r->usage.counts : NULL};
	if (o->session && stat(o->session, &sb) == 0) /* the resumed tokens' state: at most the file */
		a.resumed = (double)sb.st_size;
	coli_budget b;
	if (cache_lists(r, ct, &a, e) < 0 || coli_run_sizing(ct, &a, &b, e) < 0)
		return -1;
	mo->so.pins = b.pins, mo->so.cache_slots = b.slots;
	r->plan = b;
	if (store_lists(r, ct, mo, e) < 0)
		return -1;
	pins_note(r, ct, &b);
	return 0;
}

/* The engine's events, on stderr after what stdout holds so far. */
static void print_event(void *ctx, const coli_event *ev)
{
	(void)ctx;
	fflush(stdout);
	fprintf(stderr, "coli-run: %s\n", ev->msg);
}

/* COLI_ISA names a variant unknown, or one this CPU lacks: the variants it runs, as the kernels
 * say (never a list written here). */
static int isa_refused(const char *isa, coli_err *e)
{
	static const char *const names[] = {"scalar", "avx2", "avx512", "amx"};
	char runs[64] = "";
	int known = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		known |= strcmp(isa, names[i]) == 0;
		if (coli_kernels_available(names[i])) {
			size_t at = strlen(runs);
			snprintf(runs + at, sizeof(runs) - at, "%s%s", at ? ", " : "", names[i]);
		}
	}
	if (known)
		return coli_errf(e, COLI_EUSAGE, "COLI_ISA=%s: this CPU lacks it; the variants it runs: %s", isa, runs);
	return coli_errf(e, COLI_EUSAGE, "COLI_ISA=%s: not a kernel variant (scalar, avx2, avx512, amx); this CPU runs %s", isa,
			 runs);
}

/* --precision q8 where no weight has int4/int8 codes would change nothing: refused, naming the
 * encodings that stay float32. */
static int q8_applies(const runner *r, coli_err *e)
{
	if (r->o->precision != COLI_PREC_Q8 || coli_engine_q8_bytes_per_token(&r->m) > 0)
		return 0;
	const coli_container *ct = r->m.ct;
	return coli_errf(e, COLI_EUSAGE, "--precision q8: %s: no weight is stored as int4 or int8 codes (experts %d "
			 "bits, dense %d bits): its products stay float32; convert with --expert-bits 4 or 8",
			 r->o->model, ct->bits[0], ct->bits[1]);
}

/* The environment's hooks into the engine: COLI_ISA (the kernels), and for tests
 * COLI_TEST_CHUNK (bytes per streamed chunk) and COLI_TEST_NO_URING (io_uring refused). */
static int test_hooks(coli_engine_opts *mo, coli_err *e)
{
	const char *isa = getenv("COLI_ISA"), *chunk = getenv("COLI_TEST_CHUNK");
	mo->isa = isa && *isa ? isa : NULL;
	if (mo->isa && !coli_kernels_available(isa))
		return isa_refused(isa, e);
	mo->so.no_uring = getenv("COLI_TEST_NO_URING") != NULL;
	if (!chunk)
		return 0;
	char *end;
	unsigned long long v = strtoull(chunk, &end, 10);
	if (!*chunk || *end || v == 0 || v % 4096)
		return coli_errf(e, COLI_EUSAGE, "COLI_TEST_CHUNK: '%s' is not a positive multiple of 4096", chunk);
	mo->so.chunk = v;
	return 0;
}

/* What generation prints: text through the container's tokenizer, else ids (said once in a
 * note, unless -q or --print-ids asked for them). Chat needs the tokenizer. */
static int ids_or_text(runner *r, coli_err *e)
{
	const run_opts *o = r->o;
	r->print_ids = o->print_ids || !r->tok;
	if (r->tok)
		return 0;
	if (o->chat)
		return coli_errf(e, COLI_EUSAGE, "--chat: %s has no tokenizer.json: chat needs the container's tokenizer.json "
				 "(its turns are text)", r->m.ct->dir);
	if (o->prompt)
		return coli_errf(e, COLI_EUSAGE, "--prompt: %s has no tokenizer.json to encode the text with; give the prompt "
				 "as ids (--prompt-ids)", r->m.ct->dir);
	if (!o->print_ids && !o->quiet && !o->teacher_force && o->n_gen > 0)
		fprintf(stderr, "coli-run: note: %s has no tokenizer.json: printing the generated ids (as --print-ids)\n",
			r->m.ct->dir);
	return 0;
}

/* With a tokenizer, ids it has no token for (a vocabulary padded beyond it: Qwen3's 151936
 * ids for 151669 tokens) are never chosen. */
static int mask_untokened(runner *r, coli_err *e)
{
	int V = r->m.cfg->vocab_size, rc = 0;
	if (!r->tok)
		return 0;
	uint8_t *ok = coli_malloc((size_t)V, e);
	if (!ok)
		return -1;
	for (int id = 0; id < V; id++)
		ok[id] = coli_tok_token(r->tok, id) != NULL;
	if (coli_sampler_mask(&r->smp, ok) < 0)
		rc = coli_errf(e, COLI_EDATA, "%s/tokenizer.json: no token below the model's vocab_size %d (or out of memory "
			       "for the mask)", r->m.ct->dir, V);
	free(ok);
	return rc;
}

/* The KV cache could not be allocated: its size and where it comes from, when memory ran out. */
static int kv_failed(const runner *r, int extra, coli_err *e)
{
	if (e->code != COLI_ENOMEM)
		return -1;
	double gib = (double)coli_kv_token_bytes(r->m.cfg) * ((double)extra + 1) / 1073741824.0;
	return coli_errf(e, COLI_ENOMEM, "out of memory for the KV cache of %d tokens (%.2f GiB%s): give a smaller %s",
			 extra + 1, gib, r->o->session ? ", beyond the session" : "", r->o->ctx ? "--ctx" : "-n");
}

/* --draft, --draft-oracle FILE (its ids, as --print-ids printed them). */
static int draft_setup(runner *r, coli_err *e)
{
	const run_opts *o = r->o;
	char *text = NULL;
	size_t len;
	if (o->draft_oracle) {
		if (coli_read_file(o->draft_oracle, &text, &len, e) < 0)
			return -1;
		int rc = parse_ids(text, r->m.cfg->vocab_size, o->draft_oracle, &r->oracle, &r->n_oracle, e);
		free(text);
		if (rc < 0)
			return -1;
	}
	if (o->draft > 0 && !r->oracle && r->m.cfg->n_mtp_layers < 1)
		return coli_errf(e, COLI_EUSAGE, "--draft %d: %s has no MTP layers to draft with (num_nextn_predict_layers "
				 "0, or none stored); give --draft 0 or auto", o->draft, r->m.ct->dir);
	coli_spec_opts so = {o->draft, r->oracle, r->n_oracle, o->draft_oracle_rate, o->seed};
	return coli_spec_open(&r->dr, &r->m, &r->kv, &so, e);
}

/* The trace's temporary goes if a signal ends the loading. */
static void trace_cleanup(const char *path)
{
	char tmp[4096];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) < (int)sizeof(tmp))
		run_signals_cleanup(tmp);
}

/* The outputs checked and locked, the tokenizer and the usage read, the engine opened (its
 * threads made), the sampler and session loaded. A signal meanwhile ends the process (signals.c). */
static int setup(runner *r, coli_err *e)
{
	const run_opts *o = r->o;
	int n = 0;
	if (outputs_check(o, e) < 0)
		return -1;
	if (o->session && run_lock_take(&r->session_lock, "--session", o->session, e) < 0)
		return -1;
	if (o->usage && run_lock_take(&r->usage_lock, "--usage", o->usage, e) < 0)
		return -1;
	coli_container *ct = NULL;
	if (coli_container_open(&ct, o->model, e) < 0)
		return -1;
	/* Before any work, chat's family checked; then the tokenizer, whose load's peak (the JSON's
	 * tree) passes before the engine allocates and whose tables the budget counts. */
	if ((o->chat && chat_check(ct->model.family, e) < 0) || coli_tok_load_dir(&r->tok, ct->dir, e) < 0) {
		coli_container_close(ct);
		return -1;
	}
	coli_engine_opts mo = {.stream = o->stream, .mmap = o->io == STORE_IO_MMAP, .threads = o->threads,
			       .precision = (coli_precision)o->precision};
	mo.so = (store_stream_opts){.cache_slots = o->cache_slots, .io = o->io, .qd = o->qd, .cache_policy = o->cache_policy,
				    .mirrors = o->mirrors, .n_mirrors = o->n_mirrors, .no_crc = o->no_crc,
				    .events = {print_event, NULL}};
	if (o->planned && o->planned->n_copies == 1 + o->n_mirrors) /* the plan's rates: its shares */
		mo.so.copy_bps = o->planned->copy_bps;
	int rc = usage_open(r, ct, e);
	if (rc == 0)
		rc = test_hooks(&mo, e);
	if (rc == 0 && o->route_from)
		rc = coli_route_open(&r->route, o->route_from, e);
	mo.route_from = r->route, mo.so.usage = r->usage.counts, mo.usage = r->counts;
	if (rc == 0 && o->stream)
		rc = cache_plan(r, ct, &mo, e);
	if (rc < 0) {
		coli_container_close(ct);
		return -1;
	}
	if (o->trace)
		run_trace_prepare(&r->tr), mo.tracer = &r->tr.t;
	if (coli_engine_open_container(&r->m, ct, &mo, e) < 0 || q8_applies(r, e) < 0)
		return -1;
	if (o->trace && run_trace_open(&r->tr, o->trace, &r->m, o, e) < 0)
		return -1;
	if (o->trace)
		trace_cleanup(o->trace);
	if (coli_store_set_predict(r->m.store, o->prefetch != 0) == 0 && (o->prefetch < 0 || o->prefetch == PREFETCH_AUTO))
		r->pa_on = 1, prefetch_auto_init(&r->pa); /* set_predict: -1 (nothing to do) in RAM */
	if (prompt_tokens(o, r->m.cfg->vocab_size, &n, e) < 0)
		return -1;
	if (eos_ids(r->m.ct, r->eos, 16, &r->n_eos, e) < 0 || ids_or_text(r, e) < 0)
		return -1;
	if (coli_sampler_init(&r->smp, r->m.cfg->vocab_size, o->temperature, o->top_k, o->top_p, o->seed) < 0)
		return coli_errf(e, COLI_ENOMEM, "out of memory for the sampler");
	if (mask_untokened(r, e) < 0)
		return -1;
	if (session_load(&r->s, &r->kv, &r->m, o->session, context_extra(o, n), e) < 0)
		return kv_failed(r, context_extra(o, n), e);
	r->resumed = r->s.n_tokens;
	return draft_setup(r, e);
}

/* The end of a run that worked (a signal may have stopped it): the session and the usage
 * written, the closing figures (none for a chat that ran nothing), skipped chat lines counted. */
static int finish(runner *r, coli_err *e)
{
	const run_opts *o = r->o;
	int rc = 0;
	if (o->session)
		rc = not_written(session_save(&r->s, &r->kv, &r->m, o->session, e), "--session", o->session, e);
	if (rc == 0 && o->usage) {
		coli_usage_fold(&r->usage, r->counts, COLI_USAGE_DECAY);
		rc = not_written(coli_usage_write(o->usage, &r->usage, e), "--usage", o->usage, e);
	}
	if (rc == 0 && !r->sig)
		r->sig = run_signal_take();
	if (rc == 0 && o->chat && !r->prefilled && !o->json) { /* no figures of nothing */
		fflush(stdout);
		if (!r->sig && !o->quiet)
			fprintf(stderr, "coli-run: no chat turn on stdin: nothing run\n");
	} else if (rc == 0 && (!o->quiet || o->json)) {
		rc = report(r, e);
	}
	if (rc == 0 && r->bad_lines && !r->sig)
		rc = coli_errf(e, COLI_EDATA, "stdin: %d of %d chat %s skipped (invalid UTF-8)", r->bad_lines, r->lines,
			       run_plural(r->lines, "line", "lines"));
	return rc;
}

/* The one line a signal ends the run with: where it stopped, and what was kept. */
static void say_kept(const runner *r)
{
	const run_opts *o = r->o;
	char where[160], kept[1024] = "";
	size_t at = 0;
	if (o->chat)
		snprintf(where, sizeof(where), "%s, after %d chat %s", r->at_prompt ? "at the prompt" : "during an answer",
			 r->turns, run_plural(r->turns, "turn", "turns"));
	else if (o->teacher_force)
		snprintf(where, sizeof(where), "after the prompt's forward pass");
	else
		snprintf(where, sizeof(where), "after %d of %d generated %s", r->made, o->n_gen,
			 run_plural(o->n_gen, "token", "tokens"));
	if (o->session)
		at += (size_t)snprintf(kept + at, sizeof(kept) - at, ", session %s saved (%d %s)", o->session, r->s.n_tokens,
				       run_plural(r->s.n_tokens, "token", "tokens"));
	const char *files[][2] = {{"usage", o->usage}, {"trace", o->trace}, {"logits", o->dump_logits},
				  {"routing", o->dump_routing}};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]) && at < sizeof(kept); i++)
		if (files[i][1])
			at += (size_t)snprintf(kept + at, sizeof(kept) - at, ", %s %s written", files[i][0], files[i][1]);
	fflush(stdout);
	fprintf(stderr, "coli-run: %s (%s) %s: %s\n", r->sig == SIGINT ? "interrupted" : "terminated",
		r->sig == SIGINT ? "SIGINT" : r->sig == SIGTERM ? "SIGTERM" : "a signal", where,
		at ? kept + 2 : "nothing saved (no --session)");
}

int run_main(const run_opts *o, coli_err *e)
{
	if (o->encode || o->decode)
		return run_tokenizer_mode(o, e);
	runner r;
	memset(&r, 0, sizeof(r));
	r.o = o;
	r.session_lock.fd = r.usage_lock.fd = -1;
	int rc = run_signals_install(e) < 0 ? -1 : setup(&r, e);
	if (rc == 0)
		run_signals_running(); /* from here a signal stops the run between tokens; it is saved */
	float *logits = rc == 0 ? coli_malloc((size_t)r.m.cfg->vocab_size * sizeof(float), e) : NULL;
	if (rc == 0 && !logits)
		rc = -1;
	if (rc == 0)
		rc = o->chat ? chat(&r, logits, e) : turn(&r, o->prompt, r.s.n_tokens == 0, logits, e);
	if (rc == 0)
		rc = finish(&r, e);
	free(logits);
	free(r.counts), free(r.lists), free(r.layer_cache);
	coli_usage_release(&r.usage);
	free(r.s.tokens);
	coli_sampler_release(&r.smp);
	coli_spec_close(&r.dr);
	free(r.oracle);
	coli_kv_release(&r.kv);
	coli_tok_free(r.tok);
	if (r.m.ct)
		coli_engine_close(&r.m);
	coli_route_close(r.route);
	if (o->trace && run_trace_close(&r.tr, rc == 0, e) < 0)
		rc = -1;
	run_lock_release(&r.session_lock);
	run_lock_release(&r.usage_lock);
	if (rc == 0 && r.sig) {
		say_kept(&r);
		rc = 128 + r.sig;
	}
	return rc;
}
