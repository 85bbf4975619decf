/* pipeline.c: worker threads encode jobs into a ring of slots; the calling thread writes the
 * slots in job order (sequential output), keeps the CRCs and checkpoints the journal. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "crc32.h"
#include "clock.h"
#include "convert.h"
#include "fileio.h"

#define CHECKPOINT_BYTES (1ull << 30)
#define CHECKPOINT_SECONDS 5.0

/* Test hooks (tests/cli/t0110-convert-resume.sh, t0140-convert-signals.sh):
 * COLI_TEST_CHECKPOINT_JOBS=N checkpoints after every N jobs; COLI_TEST_KILL_AT_JOB=K sends
 * SIGKILL to the process right after job K is written (before the checkpoint that would follow
 * it); COLI_TEST_PAUSE_AT_JOB=K waits right after job K is written, having said so on stderr,
 * until SIGINT or SIGTERM comes. */
static int env_int(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : -1;
}

enum { SLOT_FREE, SLOT_BUSY, SLOT_DONE, SLOT_FAILED };

typedef struct slot {
	int state;
	int job;
	job_out out;
	coli_err err;
} slot;

typedef struct pipe_state {
	conv *cv;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	slot *slots;
	int n_slots;
	int n_workers;   /* twice the compute threads: a worker waiting on the disk leaves its core */
	int next_claim;  /* next job a worker takes */
	int written;     /* jobs below this are written */
	int stop;
	uint64_t buf_bytes, in_bytes, scratch_floats;
} pipe_state;

/* Claims the next job whose slot is free; -1 when there is nothing left to do. */
static int claim(pipe_state *p)
{
	pthread_mutex_lock(&p->mu);
	while (!p->stop && p->next_claim < p->cv->n_jobs && p->next_claim >= p->written + p->n_slots)
		pthread_cond_wait(&p->cond, &p->mu);
	int j = p->stop || p->next_claim >= p->cv->n_jobs ? -1 : p->next_claim++;
	if (j >= 0) {
		p->slots[j % p->n_slots].state = SLOT_BUSY;
		p->slots[j % p->n_slots].job = j;
	}
	pthread_mutex_unlock(&p->mu);
	return j;
}

static void *worker(void *arg)
{
	pipe_state *p = arg;
	float *scratch = malloc(p->scratch_floats * sizeof(float));
	inbuf in = {NULL, 0, 0};
	coli_err ierr = {0, ""};
	int ok = scratch && inbuf_init(&in, p->in_bytes, &ierr) == 0;
	for (int j; (j = claim(p)) >= 0;) {
		slot *s = &p->slots[j % p->n_slots];
		int rc = ok ? encode_job(p->cv, &p->cv->jobs[j], &s->out, scratch, &in, &s->err)
			    : scratch ? (s->err = ierr, -1)
				      : coli_errf(&s->err, COLI_ENOMEM, "out of memory allocating %llu floats",
						  (unsigned long long)p->scratch_floats);
		pthread_mutex_lock(&p->mu);
		s->state = rc < 0 ? SLOT_FAILED : SLOT_DONE;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->mu);
	}
	free(scratch);
	free(in.base);
	return NULL;
}

/* Offset of a tensor chunk's scales inside the section file. */
static uint64_t scales_at(const coli_ltensor *t, const job *j)
{
	const coli_blob *b = &t->blob;
	uint64_t base = t->offset + b->scales_off;
	if (b->enc == COLI_ENC_FP8)
		return base + (uint64_t)(j->row0 / b->block[0]) *
				      (uint64_t)((b->cols + b->block[1] - 1) / b->block[1]) * 4;
	return base + (uint64_t)j->row0 * ((uint64_t)(b->cols + 63) / 64) * 2;
}

static uint32_t zeros_crc(uint64_t n)
{
	static const uint8_t z[COLI_TENSOR_ALIGN];
	return coli_crc32(0, z, n);
}

/* Writes and starts the writeback at once (without waiting for it), so that the checkpoint's
 * fdatasync finds little left to flush and does not stall the pipeline. */
static int write_out(int fd, const void *buf, size_t n, uint64_t off, const char *file, coli_err *e)
{
	if (coli_pwrite_full(fd, buf, n, off, file, e) < 0)
		return -1;
	if (n)
		sync_file_range(fd, (off_t)off, (off_t)n, SYNC_FILE_RANGE_WRITE);
	return 0;
}

/* Writes a finished tensor chunk and folds its CRCs into the tensor's. */
static int write_chunk(conv *cv, journal *jr, const job *j, const job_out *o, coli_err *e)
{
	coli_ltensor *t = &cv->ct.layout.tensors[j->tensor];
	const char *file = coli_section_file(t->section);
	int fd = cv->fd[t->section];
	if (write_out(fd, o->buf, o->codes_len, t->offset + (uint64_t)j->row0 * t->blob.row_bytes, file, e) < 0 ||
	    write_out(fd, o->buf + o->codes_len, o->scales_len, scales_at(t, j), file, e) < 0)
		return -1;
	if (j->row0 == 0)
		jr->codes_crc = jr->scales_crc = 0;
	jr->codes_crc = (uint32_t)crc32_combine(jr->codes_crc, o->codes_crc, (z_off_t)o->codes_len);
	jr->scales_crc = (uint32_t)crc32_combine(jr->scales_crc, o->scales_crc, (z_off_t)o->scales_len);
	if (j->row0 + j->nrows < t->blob.rows)
		return 0;
	uint32_t crc = jr->codes_crc;
	if (t->blob.scales_bytes) {
		uint64_t pad = t->blob.scales_off - t->blob.codes_bytes;
		crc = (uint32_t)crc32_combine(crc, zeros_crc(pad), (z_off_t)pad);
		crc = (uint32_t)crc32_combine(crc, jr->scales_crc, (z_off_t)t->blob.scales_bytes);
	}
	t->crc = crc;
	return 0;
}

static int write_job(conv *cv, journal *jr, int k, const job_out *o, coli_err *e)
{
	const job *j = &cv->jobs[k];
	if (j->tensor >= 0)
		return write_chunk(cv, jr, j, o, e);
	coli_lexperts *x = &cv->ct.layout.elayers[j->elayer];
	x->crc[j->expert] = o->codes_crc;
	if (cv->direct_experts >= 0) /* aligned record from an aligned buffer: no page-cache copy */
		return coli_pwrite_full(cv->direct_experts, o->buf, o->codes_len, coli_record_offset(x, j->expert),
					"experts.bin", e);
	return write_out(cv->fd[COLI_SEC_EXPERTS], o->buf, o->codes_len,
				coli_record_offset(x, j->expert), "experts.bin", e);
}

/* Makes written data durable before the journal claims it. */
static int checkpoint(conv *cv, journal *jr, int next, coli_err *e)
{
	for (int s = 0; s < COLI_SEC_COUNT; s++)
		if (fdatasync(cv->fd[s]) < 0)
			return coli_errf(e, COLI_EIO, "%s: fdatasync failed", coli_section_file((coli_section)s));
	jr->next_job = next;
	return journal_save(cv, jr, e);
}

/* Waits for job k's slot; returns the slot, or NULL after copying a worker's error. */
static slot *wait_slot(pipe_state *p, int k, coli_err *e)
{
	slot *s = &p->slots[k % p->n_slots];
	pthread_mutex_lock(&p->mu);
	while (!(s->job == k && (s->state == SLOT_DONE || s->state == SLOT_FAILED)))
		pthread_cond_wait(&p->cond, &p->mu);
	pthread_mutex_unlock(&p->mu);
	if (s->state == SLOT_DONE)
		return s;
	*e = s->err;
	return NULL;
}

static void release_slot(pipe_state *p, slot *s, int k)
{
	pthread_mutex_lock(&p->mu);
	s->state = SLOT_FREE;
	p->written = k + 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->mu);
}

/* A signal asked to stop: what is written is made durable and the journal says so; -1 with e
 * naming the signal (convert.c adds what the folder keeps). */
static int stopped(conv *cv, journal *jr, int next, coli_err *e)
{
	if (checkpoint(cv, jr, next, e) < 0)
		return -1;
	return coli_errf(e, COLI_EIO, "%s", convert_stop_name());
}

/* After job k is written: the test hook's pause there, then whether a signal asks to stop. */
static int stop_after(int k, int pause_at)
{
	if (k == pause_at) {
		fprintf(stderr, "coli-convert: test hook: paused after job %d\n", k);
		convert_stop_wait();
	}
	return convert_stop_signal() != 0;
}

static int write_all(pipe_state *p, journal *jr, coli_err *e)
{
	conv *cv = p->cv;
	uint64_t done = 0, since = 0;
	double last = coli_now();
	int every = env_int("COLI_TEST_CHECKPOINT_JOBS"), kill_at = env_int("COLI_TEST_KILL_AT_JOB");
	int pause_at = env_int("COLI_TEST_PAUSE_AT_JOB");
	if (convert_stop_signal()) /* while the folder was prepared */
		return stopped(cv, jr, jr->next_job, e);
	uint64_t todo = 0; /* progress counts this run's work: a resumed run's rate stays honest */
	for (int k = jr->next_job; k < cv->n_jobs; k++)
		todo += cv->jobs[k].in_bytes;
	for (int k = jr->next_job; k < cv->n_jobs; k++) {
		slot *s = wait_slot(p, k, e);
		if (!s) { /* bad source data: keep what is done, so a resume starts at job k */
			coli_err ignored;
			checkpoint(cv, jr, k, &ignored);
			return -1;
		}
		if (write_job(cv, jr, k, &s->out, e) < 0)
			return -1;
		release_slot(p, s, k);
		done += cv->jobs[k].in_bytes;
		since += cv->jobs[k].out_bytes;
		if (!cv->o->quiet)
			progress_update(done, todo, 0);
		if (k == kill_at)
			raise(SIGKILL);
		if (stop_after(k, pause_at)) {
			if (!cv->o->quiet)
				progress_update(done, todo, 1);
			return stopped(cv, jr, k + 1, e);
		}
		if (since >= CHECKPOINT_BYTES || coli_now() - last >= CHECKPOINT_SECONDS ||
		    (every > 0 && (k + 1) % every == 0)) {
			if (checkpoint(cv, jr, k + 1, e) < 0)
				return -1;
			since = 0;
			last = coli_now();
		}
	}
	if (!cv->o->quiet)
		progress_update(done, todo, 1);
	return checkpoint(cv, jr, cv->n_jobs, e);
}

/* Workers (each with a read buffer) and output slots: two workers per thread and two slots
 * more than workers, fewer when jobs are huge, so that all buffers stay near 768 MiB. */
static int slots_init(pipe_state *p, int threads, coli_err *e)
{
	for (int k = 0; k < p->cv->n_jobs; k++) {
		if (p->cv->jobs[k].out_bytes > p->buf_bytes)
			p->buf_bytes = p->cv->jobs[k].out_bytes;
		if (p->cv->jobs[k].in_span > p->in_bytes)
			p->in_bytes = p->cv->jobs[k].in_span;
	}
	const uint64_t budget = 768ull << 20;
	p->n_workers = 2 * threads;
	p->n_slots = p->n_workers + 2;
	while (p->n_slots > threads + 1 &&
	       (uint64_t)p->n_slots * p->buf_bytes + (uint64_t)p->n_workers * p->in_bytes > budget) {
		p->n_slots--;
		p->n_workers = p->n_workers > threads ? p->n_workers - 1 : threads;
	}
	if (!(p->slots = coli_calloc((size_t)p->n_slots, sizeof(slot), e)))
		return -1;
	for (int i = 0; i < p->n_slots; i++) {
		p->slots[i].job = -1;
		void *buf = NULL;
		if (posix_memalign(&buf, COLI_RECORD_ALIGN, p->buf_bytes ? p->buf_bytes : 1) != 0)
			return coli_errf(e, COLI_ENOMEM, "out of memory allocating a %llu-byte output slot",
					 (unsigned long long)p->buf_bytes);
		p->slots[i].out.buf = buf;
	}
	return 0;
}

/* Cores this process may run on (affinity mask, as set by taskset or a cpuset cgroup). */
static int usable_cores(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

int pipeline_run(conv *cv, journal *jr, coli_err *e)
{
	int threads = cv->o->threads > 0 ? cv->o->threads : usable_cores();
	pipe_state p = {.cv = cv, .next_claim = jr->next_job, .written = jr->next_job,
			.scratch_floats = encode_scratch_floats(cv)};
	pthread_t *tid = coli_calloc(2 * (size_t)threads, sizeof(*tid), e);
	int rc = tid ? slots_init(&p, threads, e) : -1, started = 0;
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cond, NULL);
	while (rc == 0 && started < p.n_workers)
		if (pthread_create(&tid[started], NULL, worker, &p) == 0)
			started++;
		else
			rc = coli_errf(e, COLI_ENOMEM, "cannot start worker thread %d", started);
	if (rc == 0)
		rc = write_all(&p, jr, e);
	pthread_mutex_lock(&p.mu);
	p.stop = 1;
	pthread_cond_broadcast(&p.cond);
	pthread_mutex_unlock(&p.mu);
	for (int i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	for (int i = 0; p.slots && i < p.n_slots; i++)
		free(p.slots[i].out.buf);
	free(p.slots);
	free(tid);
	pthread_mutex_destroy(&p.mu);
	pthread_cond_destroy(&p.cond);
	return rc;
}
