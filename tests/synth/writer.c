/* writer.c: streams the safetensors shards and the index to disk.
 *
 * The data of every shard is cut into jobs of up to 8 MiB (whole tensors, or row ranges of
 * large ones; fp8 weights in whole 128-row blocks). Generator threads claim jobs in file order
 * and fill a ring of job buffers; the calling thread writes the buffers strictly in order with
 * large sequential writes, so memory stays at (2 x threads + 2) buffers whatever the model size.
 * Writeback is started every 64 MiB and pages two windows back are waited for and dropped from
 * the page cache, so the reported rate is the disk's. A shard is written to "<name>.tmp" and
 * renamed when complete.
 */
#include "synth.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "fileio.h"
#include "safetensors.h"

#define CHUNK (8u << 20)
#define WINDOW (64ull << 20)

volatile int synth_interrupted;

typedef struct seg {
	int t;
	int64_t row0, nrows;
	uint64_t off; /* inside the job buffer */
} seg;

typedef struct job {
	int shard, seg0, nseg;
	uint64_t nbytes;
} job;

typedef struct jobs {
	job *j;
	seg *s;
	int nj, ns, capj, caps;
	uint64_t maxbytes;
} jobs;

/* ---- jobs ---------------------------------------------------------------------------------- */

static int grow(void **p, int *cap, int need, size_t size, coli_err *e)
{
	if (need <= *cap)
		return 0;
	int c = *cap ? 2 * *cap : 256;
	void *q = realloc(*p, (size_t)c * size);
	if (!q)
		return coli_errf(e, COLI_ENOMEM, "out of memory allocating %zu bytes", (size_t)c * size);
	*p = q;
	*cap = c;
	return 0;
}

static int add_seg(jobs *J, int shard, int t, int64_t row0, int64_t nrows, uint64_t bytes,
		   coli_err *e)
{
	job *cur = J->nj ? &J->j[J->nj - 1] : NULL;
	if (!cur || cur->shard != shard || cur->nbytes + bytes > CHUNK) {
		if (grow((void **)&J->j, &J->capj, J->nj + 1, sizeof(job), e))
			return -1;
		cur = &J->j[J->nj++];
		*cur = (job){.shard = shard, .seg0 = J->ns};
	}
	if (grow((void **)&J->s, &J->caps, J->ns + 1, sizeof(seg), e))
		return -1;
	J->s[J->ns++] = (seg){t, row0, nrows, cur->nbytes};
	cur->nbytes += bytes;
	cur->nseg++;
	if (cur->nbytes > J->maxbytes)
		J->maxbytes = cur->nbytes;
	return 0;
}

/* Row ranges of one tensor: as many rows as fit a chunk, a multiple of the row alignment. */
static int add_tensor(jobs *J, const synth_table *tb, int shard, int i, coli_err *e)
{
	const synth_tensor *t = &tb->t[i];
	uint64_t rb = t->nbytes / (uint64_t)t->rows;
	int64_t align = synth_row_align(t), per = (int64_t)(CHUNK / rb) / align * align;
	if (per < align)
		per = align;
	for (int64_t r = 0; r < t->rows; r += per) {
		int64_t n = t->rows - r < per ? t->rows - r : per;
		if (add_seg(J, shard, i, r, n, (uint64_t)n * rb, e))
			return -1;
	}
	return 0;
}

static int jobs_build(jobs *J, const synth_table *tb, coli_err *e)
{
	memset(J, 0, sizeof(*J));
	for (int s = 0; s < tb->n_shards; s++)
		for (int k = 0; k < tb->count[s]; k++)
			if (add_tensor(J, tb, s, tb->order[s][k], e))
				return -1;
	return 0;
}

/* ---- generator pool ------------------------------------------------------------------------ */

typedef struct pool {
	const synth_table *tb;
	const synth_plan *p;
	const jobs *J;
	int nslots, next, stop, progress;
	uint8_t **buf;
	int *slot_job; /* job the slot may hold next */
	int *ready;
	int64_t scratch;
	pthread_mutex_t mu;
	pthread_cond_t cv_ready, cv_free;
} pool;

static void gen_job(pool *P, int j, uint8_t *buf, float *scratch)
{
	const job *jb = &P->J->j[j];
	for (int k = 0; k < jb->nseg; k++) {
		const seg *s = &P->J->s[jb->seg0 + k];
		const synth_tensor *t = &P->tb->t[s->t];
		if (t->kind != SK_SCALE || t->weight) /* scale_inv: copied by the writer once its weight is done */
			synth_encode_rows(P->p, t, s->row0, s->nrows, scratch, buf + s->off);
	}
}

static void *gen_worker(void *arg)
{
	pool *P = arg;
	float *scratch = malloc((size_t)P->scratch * sizeof(float));
	pthread_mutex_lock(&P->mu);
	while (scratch && !P->stop && P->next < P->J->nj) {
		int j = P->next++, s = j % P->nslots;
		while (!P->stop && P->slot_job[s] != j)
			pthread_cond_wait(&P->cv_free, &P->mu);
		if (P->stop)
			break;
		pthread_mutex_unlock(&P->mu);
		gen_job(P, j, P->buf[s], scratch);
		pthread_mutex_lock(&P->mu);
		P->ready[s] = 1;
		pthread_cond_broadcast(&P->cv_ready);
	}
	if (!scratch)
		P->stop = 2;
	pthread_cond_broadcast(&P->cv_ready);
	pthread_mutex_unlock(&P->mu);
	free(scratch);
	return NULL;
}

static int64_t max_scratch(const synth_table *tb)
{
	int64_t m = 1;
	for (int i = 0; i < tb->n; i++) {
		int64_t s = synth_scratch_floats(&tb->t[i], SYNTH_FP8_BLOCK);
		if (s > m)
			m = s;
	}
	return m;
}

static int pool_init(pool *P, const synth_table *tb, const synth_plan *p, const jobs *J,
		     int threads, coli_err *e)
{
	memset(P, 0, sizeof(*P));
	P->tb = tb;
	P->p = p;
	P->J = J;
	P->nslots = 2 * threads + 2;
	P->scratch = max_scratch(tb);
	P->buf = coli_calloc((size_t)P->nslots, sizeof(*P->buf), e);
	P->slot_job = P->buf ? coli_calloc((size_t)P->nslots, sizeof(int), e) : NULL;
	P->ready = P->slot_job ? coli_calloc((size_t)P->nslots, sizeof(int), e) : NULL;
	if (!P->ready)
		return -1;
	for (int s = 0; s < P->nslots; s++) {
		P->slot_job[s] = s;
		P->buf[s] = coli_malloc(J->maxbytes, e);
		if (!P->buf[s])
			return -1;
	}
	pthread_mutex_init(&P->mu, NULL);
	pthread_cond_init(&P->cv_ready, NULL);
	pthread_cond_init(&P->cv_free, NULL);
	return 0;
}

static void pool_release(pool *P)
{
	for (int s = 0; P->buf && s < P->nslots; s++)
		free(P->buf[s]);
	free(P->buf);
	free(P->slot_job);
	free(P->ready);
}

/* Waits for job j's buffer; NULL when the pool stopped. */
static uint8_t *take(pool *P, int j)
{
	int s = j % P->nslots;
	pthread_mutex_lock(&P->mu);
	while (!P->ready[s] && !P->stop)
		pthread_cond_wait(&P->cv_ready, &P->mu);
	uint8_t *b = P->ready[s] ? P->buf[s] : NULL;
	pthread_mutex_unlock(&P->mu);
	return b;
}

static void give_back(pool *P, int j)
{
	int s = j % P->nslots;
	pthread_mutex_lock(&P->mu);
	P->ready[s] = 0;
	P->slot_job[s] = j + P->nslots;
	pthread_cond_broadcast(&P->cv_free);
	pthread_mutex_unlock(&P->mu);
}

static void pool_stop(pool *P)
{
	pthread_mutex_lock(&P->mu);
	if (!P->stop)
		P->stop = 1;
	pthread_cond_broadcast(&P->cv_free);
	pthread_cond_broadcast(&P->cv_ready);
	pthread_mutex_unlock(&P->mu);
}

/* ---- files --------------------------------------------------------------------------------- */

typedef struct out {
	int fd;
	char path[4096], tmp[4100];
	uint64_t pos, kicked, dropped;
} out;

/* Starts writeback of each full window and waits for / drops the one before it. */
static void writeback(out *o, int final)
{
	while (o->pos - o->kicked >= WINDOW || (final && o->pos > o->kicked)) {
		uint64_t n = o->pos - o->kicked < WINDOW ? o->pos - o->kicked : WINDOW;
		sync_file_range(o->fd, (off64_t)o->kicked, (off64_t)n, SYNC_FILE_RANGE_WRITE);
		o->kicked += n;
	}
	uint64_t keep = final ? 0 : WINDOW;
	if (o->kicked > o->dropped + keep) {
		uint64_t n = o->kicked - keep - o->dropped;
		sync_file_range(o->fd, (off64_t)o->dropped, (off64_t)n,
				SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
					SYNC_FILE_RANGE_WAIT_AFTER);
		posix_fadvise(o->fd, (off_t)o->dropped, (off_t)n, POSIX_FADV_DONTNEED);
		o->dropped += n;
	}
}

static int out_write(out *o, const void *buf, uint64_t n, coli_err *e)
{
	if (coli_pwrite_full(o->fd, buf, n, o->pos, o->tmp, e))
		return -1;
	o->pos += n;
	writeback(o, 0);
	return 0;
}

/* The stored shape: [rows, cols], [cols] for 1-D, or the layout's own (fused, conv taps). */
static json_t *stored_shape(const synth_tensor *t)
{
	json_t *shape = json_array();
	for (int d = 0; d < t->sndim; d++)
		json_array_append_new(shape, json_integer(t->sshape[d]));
	if (!t->sndim && t->ndim == 2)
		json_array_append_new(shape, json_integer(t->rows));
	if (!t->sndim)
		json_array_append_new(shape, json_integer(t->cols));
	return shape;
}

/* One entry per stored tensor: a fused tensor's members after its lead are part of it. */
static char *shard_header(const synth_table *tb, int s, size_t *len, coli_err *e)
{
	json_t *root = json_object(), *meta = json_object();
	json_object_set_new(meta, "format", json_string("pt"));
	json_object_set_new(root, "__metadata__", meta);
	for (int k = 0; k < tb->count[s]; k++) {
		int i = tb->order[s][k];
		const synth_tensor *t = &tb->t[i];
		if (t->lead >= 0 && t->lead != i)
			continue;
		json_t *o = json_object();
		uint64_t bytes = t->lead == i ? t->fused_bytes : t->nbytes;
		json_object_set_new(o, "dtype", json_string(coli_dtype_name((coli_dtype)t->dtype)));
		json_object_set_new(o, "shape", stored_shape(t));
		json_object_set_new(o, "data_offsets",
				    json_pack("[II]", (json_int_t)t->offset, (json_int_t)(t->offset + bytes)));
		json_object_set_new(root, synth_stored_name(t), o);
	}
	char *txt = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (!txt)
		return coli_errf(e, COLI_ENOMEM, "out of memory building a shard header"), NULL;
	size_t n = strlen(txt), padded = (n + 7) & ~(size_t)7;
	char *h = coli_malloc(8 + padded, e);
	if (h) {
		for (int i = 0; i < 8; i++)
			h[i] = (char)(((uint64_t)padded >> (8 * i)) & 0xFF);
		memcpy(h + 8, txt, n);
		memset(h + 8 + n, ' ', padded - n);
		*len = 8 + padded;
	}
	free(txt);
	return h;
}

static int shard_open(out *o, const synth_table *tb, int s, const char *dir, synth_files *f,
		      coli_err *e)
{
	char name[64];
	synth_shard_name(tb, s, name, sizeof(name));
	snprintf(o->path, sizeof(o->path), "%s/%s", dir, name);
	snprintf(o->tmp, sizeof(o->tmp), "%s.tmp", o->path);
	o->pos = o->kicked = o->dropped = 0;
	if (synth_files_add(f, o->tmp, e) || synth_files_add(f, o->path, e))
		return -1;
	o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (o->fd < 0)
		return coli_errf(e, COLI_EIO, "%s: %s", o->tmp, strerror(errno));
	size_t n;
	char *h = shard_header(tb, s, &n, e);
	int rc = h ? out_write(o, h, n, e) : -1;
	free(h);
	return rc;
}

static int shard_close(out *o, coli_err *e)
{
	writeback(o, 1);
	int rc = close(o->fd);
	o->fd = -1;
	if (rc < 0)
		return coli_errf(e, COLI_EIO, "%s: close: %s", o->tmp, strerror(errno));
	if (rename(o->tmp, o->path) < 0)
		return coli_errf(e, COLI_EIO, "%s: rename: %s", o->path, strerror(errno));
	return 0;
}

/* Copies the scale_inv tensors of job j from their weights (all generated by now). */
static void fill_scales(const synth_table *tb, const jobs *J, int j, uint8_t *buf)
{
	const job *jb = &J->j[j];
	for (int k = 0; k < jb->nseg; k++) {
		const seg *s = &J->s[jb->seg0 + k];
		const synth_tensor *t = &tb->t[s->t];
		if (t->kind == SK_SCALE && !t->weight)
			memcpy(buf + s->off, tb->t[t->scale_of].scales, t->nbytes);
	}
}

/* "written / total GB, rate" on stderr, at most twice a second (callers check for a TTY). */
static void progress(const synth_table *tb, uint64_t done, double t0, double *last, int end)
{
	double now = coli_now();
	if (!end && now - *last < 0.5)
		return;
	*last = now;
	if (end) {
		fprintf(stderr, "\r%60s\r", "");
		return;
	}
	fprintf(stderr, "\r" SYNTH_TOOL ": %.2f / %.2f GB, %.2f GB/s   ", done / 1e9,
		tb->total_size / 1e9, now > t0 ? done / 1e9 / (now - t0) : 0);
}

/* The write loop: shard by shard, job by job, in order. */
static int write_all(pool *P, const char *dir, synth_files *f, uint64_t *bytes, coli_err *e)
{
	const synth_table *tb = P->tb;
	out o = {.fd = -1};
	int rc = 0;
	double t0 = coli_now(), last = t0;
	uint64_t done = 0;
	for (int j = 0; rc == 0 && j < P->J->nj; j++) {
		int s = P->J->j[j].shard;
		if ((j == 0 || P->J->j[j - 1].shard != s) && (rc = shard_open(&o, tb, s, dir, f, e)))
			break;
		uint8_t *b = take(P, j);
		if (synth_interrupted || !b) {
			rc = coli_errf(e, COLI_EIO, synth_interrupted ? "interrupted" :
				       "out of memory allocating generator scratch");
			break;
		}
		fill_scales(tb, P->J, j, b);
		rc = out_write(&o, b, P->J->j[j].nbytes, e);
		give_back(P, j);
		done += P->J->j[j].nbytes;
		if (P->progress)
			progress(tb, done, t0, &last, 0);
		if (rc == 0 && (j + 1 == P->J->nj || P->J->j[j + 1].shard != s)) {
			*bytes += o.pos;
			rc = shard_close(&o, e);
		}
	}
	if (o.fd >= 0)
		close(o.fd);
	if (P->progress)
		progress(tb, done, t0, &last, 1);
	return rc;
}

static int write_index(const synth_table *tb, const char *dir, synth_files *f, coli_err *e)
{
	json_t *root = json_object(), *map = json_object();
	json_object_set_new(root, "metadata",
			    json_pack("{sI}", "total_size", (json_int_t)tb->total_size));
	for (int i = 0; i < tb->n; i++) {
		char name[64];
		synth_shard_name(tb, tb->t[i].shard, name, sizeof(name));
		json_object_set_new(map, synth_stored_name(&tb->t[i]), json_string(name));
	}
	json_object_set_new(root, "weight_map", map);
	char *txt = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(root);
	if (!txt)
		return coli_errf(e, COLI_ENOMEM, "out of memory building the index");
	size_t n = strlen(txt);
	char *t2 = realloc(txt, n + 2);
	if (!t2) {
		free(txt);
		return coli_errf(e, COLI_ENOMEM, "out of memory building the index");
	}
	memcpy(t2 + n, "\n", 2);
	int rc = synth_write_small(f, dir, "model.safetensors.index.json", t2, n + 1, e);
	free(t2);
	return rc;
}

int synth_write_shards(const synth_table *tb, synth_plan *p, const char *dir, int threads,
		       int show_progress, synth_files *f, uint64_t *bytes, coli_err *e)
{
	jobs J = {0};
	pool P = {0};
	pthread_t tid[256];
	int started = 0, rc = -1;
	*bytes = 0;
	if (jobs_build(&J, tb, e) == 0 && pool_init(&P, tb, p, &J, threads, e) == 0) {
		P.progress = show_progress;
		for (; started < threads; started++)
			if (pthread_create(&tid[started], NULL, gen_worker, &P))
				break;
		rc = started ? write_all(&P, dir, f, bytes, e)
			     : coli_errf(e, COLI_ENOMEM, "cannot start generator threads");
		pool_stop(&P);
		for (int i = 0; i < started; i++)
			pthread_join(tid[i], NULL);
	}
	pool_release(&P);
	free(J.j);
	free(J.s);
	if (rc == 0 && tb->n_shards > 1)
		rc = write_index(tb, dir, f, e);
	return rc;
}
