/* mirror_stage.c: coli-plan mirror stage: a container's experts copied to another disk, whole or the
 * hottest records first, CRC-checked, durable before the map claims them, resumable. */
#include "crc32.h"
#include "mirror_stage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fileio.h"
#include "mirrormap.h"
#include "policy.h"
#include "options.h"
#include "plan.h"
#include "usage.h"

#define GIB (1024.0 * 1024 * 1024)
#define BATCH_RECORDS 16              /* records per fdatasync and map update, */
#define BATCH_BYTES (64ull << 20)     /* or fewer when they reach this many bytes */
#define FILE_CHUNK (8u << 20)         /* the other files are copied in chunks of this */

/* One expert record of the container, by its number in the map. */
typedef struct rec {
	uint64_t off, size;
	uint32_t crc;
	int layer, expert, li;            /* li: index of its layer in layout.elayers */
} rec;

typedef struct stage {
	const stage_opts *o;
	coli_container *c;
	rec *rec;
	uint64_t n, max_size;             /* records; the largest */
	coli_mirror_map map;
	char *map_path, *src_path, *dst_path; /* DIR/mirror.coli, MODEL/experts.bin, DIR/experts.bin */
	int src, dst;
	uint8_t *buf;                     /* max_size bytes, 4096-aligned */
	uint64_t done, total;             /* bytes of this run, for the progress */
	int written;                      /* records written by this run (--kill-after) */
	int *pins;                        /* [MoE layer] the plan's pins (staged last); NULL: none */
	char *usage;                      /* the usage file: --usage, or the plan's */
	stage_report *r;
} stage;

static uint64_t blocks(uint64_t n)
{
	return (n + 4095) / 4096 * 4096;
}

static int records_of(stage *s, coli_err *e)
{
	const coli_layout *L = &s->c->layout;
	s->n = coli_mirror_records(s->c);
	if (!(s->rec = coli_calloc(s->n ? s->n : 1, sizeof(*s->rec), e)))
		return -1;
	uint64_t k = 0;
	for (int i = 0; i < L->n_elayers; i++)
		for (int x = 0; x < L->elayers[i].n_experts; x++, k++) {
			const coli_lexperts *l = &L->elayers[i];
			s->rec[k] = (rec){coli_record_offset(l, x), l->record_size, l->crc[x], l->layer, x, i};
			s->max_size = l->record_size > s->max_size ? l->record_size : s->max_size;
		}
	return s->n ? 0 : coli_errf(e, COLI_EDATA, "%s: the container has no expert records to mirror", s->c->dir);
}

/* ---- the order: hottest first, balanced across layers ---------------------------------------- */

typedef struct key {
	double share;                     /* the record's count over its layer's total */
	int rank, li;                     /* its place in the layer's pin order; its layer */
	uint64_t r;
} key;

static int cmp_key(const void *pa, const void *pb)
{
	const key *a = pa, *b = pb;
	if (a->share != b->share)
		return a->share > b->share ? -1 : 1;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return (a->li > b->li) - (a->li < b->li);
}

/* Keys of one layer's records from k on: the layer's pin order (coli_pin_next), then the
 * experts never routed to, by id. The first `pins` of the pin order, which the run keeps in RAM
 * and never reads from a disk, go after every other record. */
static void layer_keys(const coli_lexperts *x, int li, const double *cnt, int pins, key *k, uint64_t r0, int *rank)
{
	double total = 0;
	int pos = 0;
	for (int j = 0; j < x->n_experts; j++)
		rank[j] = -1, total += cnt && cnt[j] > 0 ? cnt[j] : 0;
	for (int p = -1; cnt && (p = coli_pin_next(cnt, x->n_experts, p)) >= 0;)
		rank[p] = pos++;
	for (int j = 0; j < x->n_experts; j++) {
		if (rank[j] < 0)
			rank[j] = pos++;
		k[j] = (key){total > 0 && cnt[j] > 0 ? cnt[j] / total : 0, rank[j], li, r0 + (uint64_t)j};
		if (cnt && rank[j] < pins && cnt[j] > 0)
			k[j].share -= 2; /* below every share in 0..1 */
	}
}

/* order[0..n): every record, the first to stage first. */
static int plan_order(stage *s, const coli_usage *u, uint64_t *order, coli_err *e)
{
	const coli_layout *L = &s->c->layout;
	key *k = coli_calloc(s->n, sizeof(*k), e);
	int *rank = k ? coli_calloc((size_t)s->c->model.n_experts + 1, sizeof(int), e) : NULL;
	uint64_t r0 = 0;
	for (int i = 0; rank && i < L->n_elayers; i++) {
		const coli_lexperts *x = &L->elayers[i];
		const double *cnt = u && x->layer < u->n_layers && x->n_experts == u->n_experts
				  ? u->counts + (size_t)x->layer * (size_t)u->n_experts : NULL;
		layer_keys(x, i, cnt, s->pins ? s->pins[i] : 0, k + r0, r0, rank);
		r0 += (uint64_t)x->n_experts;
	}
	if (rank) {
		qsort(k, s->n, sizeof(*k), cmp_key);
		for (uint64_t i = 0; i < s->n; i++)
			order[i] = k[i].r;
	}
	free(rank), free(k);
	return rank ? 0 : -1;
}

/* ---- the folder --------------------------------------------------------------------------- */

/* Whether name is one of the mirror's files, or its temporary (NAME.tmp, which a kill while it
 * was written leaves behind: the stage replaces it, so its space is the mirror's). */
static int is_ours(const coli_container *c, const char *name)
{
	char base[256];
	size_t len = strlen(name);
	if (len > 4 && len - 4 < sizeof(base) && !strcmp(name + len - 4, ".tmp")) {
		memcpy(base, name, len - 4);
		base[len - 4] = 0;
		name = base;
	}
	if (!strcmp(name, COLI_MANIFEST_FILE) || !strcmp(name, COLI_MIRROR_FILE))
		return 1;
	for (int s = 0; s < COLI_SEC_COUNT; s++)
		if (!strcmp(name, coli_section_file((coli_section)s)))
			return 1;
	for (int i = 0; i < c->n_carried; i++)
		if (!strcmp(name, c->carried[i].file))
			return 1;
	return 0;
}

/* Bytes the files of ours in dir take on its disk (what a resumed stage has already used); *any:
 * whether dir holds anything but the map's temporary (all a kill during a new mirror's first map
 * write leaves). */
static uint64_t own_bytes(const coli_container *c, const char *dir, int *any)
{
	DIR *d = opendir(dir);
	uint64_t n = 0;
	*any = 0;
	for (struct dirent *de; d && (de = readdir(d));) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		*any |= strcmp(de->d_name, COLI_MIRROR_FILE ".tmp") != 0;
		if (is_ours(c, de->d_name) && fstatat(dirfd(d), de->d_name, &st, 0) == 0 && S_ISREG(st.st_mode))
			n += (uint64_t)st.st_blocks * 512;
	}
	if (d)
		closedir(d);
	return n;
}

/* Whether dir/manifest.coli is byte-identical to the model's: 1 yes, 0 no, -1 absent. */
static int same_manifest(stage *s)
{
	char *a = coli_path_join(s->c->dir, COLI_MANIFEST_FILE), *b = coli_path_join(s->o->dir, COLI_MANIFEST_FILE);
	char *x = NULL, *y = NULL;
	size_t nx = 0, ny = 0;
	coli_err ignore;
	int rc = access(b, F_OK) < 0 ? -1 : 0;
	if (rc == 0 && coli_read_file(a, &x, &nx, &ignore) == 0 && coli_read_file(b, &y, &ny, &ignore) == 0)
		rc = nx == ny && !memcmp(x, y, nx);
	free(a), free(b), free(x), free(y);
	return rc;
}

/* What dir holds decides: resume (1: its map is this container's), a fresh stage (0), or a
 * refusal without --force. */
static int inspect(stage *s, int any, coli_err *e)
{
	const char *dir = s->o->dir;
	coli_err me = {0, ""};
	int has_map = access(s->map_path, F_OK) == 0, man = same_manifest(s);
	if (has_map && coli_mirror_map_read(s->map_path, NULL, 0, &s->map, &me) < 0)
		return s->o->force ? 0 : coli_errf(e, COLI_EDATA, "%s; --force restages the mirror from scratch", me.msg);
	if (has_map && (memcmp(s->map.identity, s->c->identity, 32) || s->map.n_records != s->n || man == 0)) {
		coli_mirror_map_release(&s->map);
		return s->o->force ? 0 : coli_errf(e, COLI_EUSAGE, "%s: holds a mirror of another container (%s): refusing "
						   "to replace it: choose another folder or use --force", dir,
						   man == 0 ? "manifest.coli differs" : "mirror.coli identity differs");
	}
	if (has_map)
		return 1;
	if (any && !s->o->force)
		return coli_errf(e, COLI_EUSAGE, "%s: %s: refusing to write there: choose an empty folder or use --force", dir,
				 man == 1 ? "holds a full copy of this container not staged by coli-plan (no mirror.coli)"
				 : man == 0 ? "holds another container" : "is not empty and holds no mirror (no mirror.coli)");
	return 0;
}

/* ---- the budget and the plan --------------------------------------------------------------- */

static uint64_t file_size(const char *dir, const char *name)
{
	char *p = coli_path_join(dir, name);
	struct stat st;
	uint64_t n = p && stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
	free(p);
	return n;
}

/* Bytes of the mirror's own files beside the records: manifest.coli, mirror.coli, the
 * experts.bin header; full: also dense.bin, mtp.bin and the carried files. */
static uint64_t fixed_bytes(const stage *s, int full)
{
	const coli_container *c = s->c;
	uint64_t n = blocks(file_size(c->dir, COLI_MANIFEST_FILE)) + blocks(COLI_MIRROR_HEADER + (s->n + 7) / 8) +
		     c->layout.elayers[0].offset;
	if (full) {
		n += c->layout.section_size[COLI_SEC_DENSE] + c->layout.section_size[COLI_SEC_MTP];
		for (int i = 0; i < c->n_carried; i++)
			n += blocks(c->carried[i].size);
	}
	return n;
}

/* The bytes the mirror may take: --max, and the free space (with what the mirror already
 * takes) less the reserve. */
static int budget(stage *s, uint64_t own, coli_err *e)
{
	struct statvfs v;
	if (statvfs(s->o->dir, &v) < 0)
		return coli_errf(e, COLI_EIO, "%s: statvfs: %s", s->o->dir, strerror(errno));
	double size = (double)v.f_blocks * (double)v.f_frsize;
	double avail = s->o->assume_free >= 0 ? s->o->assume_free : (double)v.f_bavail * (double)v.f_frsize;
	double reserve = s->o->reserve >= 0 ? s->o->reserve : (0.05 * size < GIB ? 0.05 * size : GIB);
	double b = avail + (double)own - reserve;
	s->r->budget = s->o->max > 0 && s->o->max < b ? s->o->max : b;
	double need = (double)fixed_bytes(s, 0) + (double)s->rec[0].size;
	if (s->r->budget < need && s->o->max > 0 && s->o->max < b)
		return coli_errf(e, COLI_EUSAGE, "--max %.3f: %.1f MiB, a mirror of %s needs at least %.1f MiB "
				 "(manifest, map, one record)", s->o->max / GIB, s->o->max / 1048576, s->c->dir, need / 1048576);
	if (s->r->budget < need)
		return coli_errf(e, COLI_EIO, "%s: %.1f MiB free, %.1f MiB with the reserve of %.1f MiB kept (--reserve): "
				 "a mirror of %s needs at least %.1f MiB", s->o->dir, avail / 1048576,
				 (avail + (double)own - reserve) / 1048576, reserve / 1048576, s->c->dir, need / 1048576);
	return 0;
}

/* The records to copy into jobs[0..*n_jobs), in order: every one not held when the whole
 * container fits the budget (r->full), else the records held stay and the order's next ones
 * are added while they fit. */
static void plan(stage *s, const uint64_t *order, uint64_t *jobs, uint64_t *n_jobs)
{
	uint64_t all = fixed_bytes(s, 1), used = fixed_bytes(s, 0);
	for (uint64_t i = 0; i < s->n; i++)
		all += s->rec[i].size, used += coli_mirror_has(&s->map, i) ? s->rec[i].size : 0;
	s->r->full = (double)all <= s->r->budget;
	*n_jobs = 0;
	for (uint64_t i = 0; i < s->n; i++) {
		uint64_t r = order[i];
		if (coli_mirror_has(&s->map, r))
			continue;
		if (!s->r->full && (double)(used + s->rec[r].size) > s->r->budget)
			break;
		used += s->rec[r].size;
		jobs[(*n_jobs)++] = r;
	}
	s->r->mirror_bytes = s->r->full ? all : used;
}

/* ---- writing ------------------------------------------------------------------------------- */

/* path opened with O_DIRECT where the filesystem allows it (tmpfs does not). */
static int open_direct(const char *path, int flags, coli_err *e)
{
	int fd = open(path, flags | O_DIRECT | O_CLOEXEC, 0644);
	if (fd < 0 && errno == EINVAL)
		fd = open(path, flags | O_CLOEXEC, 0644);
	if (fd < 0)
		return coli_errf(e, COLI_EIO, "%s: %s", path, strerror(errno));
	return fd;
}

/* A fresh mirror: the old manifest removed first (the folder is nobody's mirror meanwhile), the
 * empty map, experts.bin with its header and holes to its full length (a new file: an old one
 * is unlinked, never truncated, in case it is a hard link to the container's), then the manifest. */
static int start_fresh(stage *s, coli_err *e)
{
	char *man = coli_path_join(s->o->dir, COLI_MANIFEST_FILE), *src_man = coli_path_join(s->c->dir, COLI_MANIFEST_FILE);
	uint64_t head = s->c->layout.elayers[0].offset, size = s->c->layout.section_size[COLI_SEC_EXPERTS];
	char *text = NULL;
	size_t len = 0;
	int fd = -1, rc = man && src_man ? 0 : coli_errf(e, COLI_ENOMEM, "out of memory");
	if (rc == 0 && unlink(man) < 0 && errno != ENOENT)
		rc = coli_errf(e, COLI_EIO, "%s: %s", man, strerror(errno));
	coli_mirror_map_release(&s->map);
	if (rc == 0 && (rc = coli_mirror_map_init(&s->map, s->c->identity, s->n, e)) == 0)
		rc = coli_mirror_map_write(s->map_path, &s->map, e);
	if (rc == 0 && unlink(s->dst_path) < 0 && errno != ENOENT)
		rc = coli_errf(e, COLI_EIO, "%s: %s", s->dst_path, strerror(errno));
	if (rc == 0 && (fd = open(s->dst_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
		rc = coli_errf(e, COLI_EIO, "%s: %s", s->dst_path, strerror(errno));
	if (rc == 0)
		rc = coli_pread_full(s->src, s->buf, (size_t)head, 0, s->src_path, e);
	if (rc == 0)
		rc = coli_pwrite_full(fd, s->buf, (size_t)head, 0, s->dst_path, e);
	if (rc == 0 && (ftruncate(fd, (off_t)size) < 0 || fdatasync(fd) < 0))
		rc = coli_errf(e, COLI_EIO, "%s: %s", s->dst_path, strerror(errno));
	if (fd >= 0)
		close(fd);
	if (rc == 0)
		rc = coli_read_file(src_man, &text, &len, e);
	if (rc == 0)
		rc = coli_write_atomic(man, text, len, e);
	free(text), free(man), free(src_man);
	return rc;
}

/* Resuming: experts.bin must be the one a stage wrote (its length); a missing manifest (the
 * stage was stopped before copying it) is copied. */
static int resume(stage *s, coli_err *e)
{
	if (s->map.held == 0)
		return start_fresh(s, e);
	if (file_size(s->o->dir, "experts.bin") != s->c->layout.section_size[COLI_SEC_EXPERTS])
		return coli_errf(e, COLI_EDATA, "%s: size %llu, expected %llu: not the file a stage wrote; --force restages the mirror",
				 s->dst_path, (unsigned long long)file_size(s->o->dir, "experts.bin"),
				 (unsigned long long)s->c->layout.section_size[COLI_SEC_EXPERTS]);
	s->r->resumed = 1;
	char *man = coli_path_join(s->o->dir, COLI_MANIFEST_FILE), *src_man = coli_path_join(s->c->dir, COLI_MANIFEST_FILE);
	char *text = NULL;
	size_t len = 0;
	int rc = man && src_man ? 0 : coli_errf(e, COLI_ENOMEM, "out of memory");
	if (rc == 0 && access(man, F_OK) < 0 && (rc = coli_read_file(src_man, &text, &len, e)) == 0)
		rc = coli_write_atomic(man, text, len, e);
	free(text), free(man), free(src_man);
	return rc;
}

/* -1 with e when the stage is asked to stop (a signal), else 0. */
static int stopped(const stage *s, coli_err *e)
{
	if (!s->o->stop || !*s->o->stop)
		return 0;
	return coli_errf(e, COLI_EIO, "%s: stage stopped", s->o->dir);
}

static void progress(stage *s, uint64_t n)
{
	s->done += n;
	s->r->bytes += n;
	if (s->o->progress)
		s->o->progress(s->o->progress_ctx, s->done, s->total);
}

/* rc, and when it failed on a full disk (ENOSPC) outside a record's write (the map, the manifest,
 * a file of a full mirror), e's message completed with the space the stage still needs. */
static int disk_full(const stage *s, int rc, coli_err *e)
{
	if (rc < 0 && errno == ENOSPC && e) {
		char msg[sizeof(e->msg)], need[32];
		uint64_t left = s->total - s->done;
		if (left < 1048576)
			snprintf(need, sizeof(need), "%llu KiB", (unsigned long long)(left + 1023) / 1024);
		else
			snprintf(need, sizeof(need), "%.1f MiB", (double)left / 1048576);
		snprintf(msg, sizeof(msg), "%s", e->msg);
		coli_errf(e, COLI_EIO, "%s: the stage needs %s more: free space and rerun to resume", msg, need);
	}
	return rc;
}

/* The records of the batch made durable (fdatasync), then claimed by the map. */
static int flush(stage *s, const uint64_t *batch, int n, coli_err *e)
{
	if (n == 0)
		return 0;
	if (fdatasync(s->dst) < 0)
		return disk_full(s, coli_errf(e, COLI_EIO, "%s: fdatasync: %s", s->dst_path, strerror(errno)), e);
	for (int i = 0; i < n; i++)
		coli_mirror_set(&s->map, batch[i]);
	return disk_full(s, coli_mirror_map_write(s->map_path, &s->map, e), e);
}

/* Record r read from the model (O_DIRECT), checked against the manifest's CRC, written. */
static int copy_record(stage *s, uint64_t r, uint64_t left, coli_err *e)
{
	const rec *R = &s->rec[r];
	if (coli_pread_full(s->src, s->buf, (size_t)R->size, R->off, s->src_path, e) < 0)
		return -1;
	uint32_t crc = coli_crc32(0, s->buf, R->size);
	if (crc != R->crc)
		return coli_errf(e, COLI_EDATA, "%s: expert record [layer %d][expert %d] at offset %llu: crc32 0x%08x, expected "
				 "0x%08x: the model's copy is damaged (coli-convert --verify %s)", s->src_path, R->layer,
				 R->expert, (unsigned long long)R->off, crc, R->crc, s->c->dir);
	if (coli_pwrite_full(s->dst, s->buf, (size_t)R->size, R->off, s->dst_path, e) == 0)
		return 0;
	if (errno == ENOSPC)
		coli_errf(e, COLI_EIO, "%s: disk full writing expert record [layer %d][expert %d] at offset %llu: the stage "
			  "needs %.1f MiB more; the records written before it are claimed: free space and rerun to resume",
			  s->dst_path, R->layer, R->expert, (unsigned long long)R->off, (double)left / 1048576);
	return -1;
}

static int copy_records(stage *s, const uint64_t *jobs, uint64_t n_jobs, coli_err *e)
{
	uint64_t batch[BATCH_RECORDS], bytes = 0, left = s->total;
	int n = 0, rc = 0;
	for (uint64_t i = 0; rc == 0 && i < n_jobs; i++) {
		if ((rc = stopped(s, e)) < 0 || (rc = copy_record(s, jobs[i], left, e)) < 0)
			break;
		left -= s->rec[jobs[i]].size;
		batch[n++] = jobs[i], bytes += s->rec[jobs[i]].size;
		if (++s->written == s->o->kill_after)
			raise(SIGKILL);
		progress(s, s->rec[jobs[i]].size);
		if (n == BATCH_RECORDS || bytes >= BATCH_BYTES) {
			rc = flush(s, batch, n, e);
			s->r->copied += (uint64_t)n;
			n = 0, bytes = 0;
		}
	}
	coli_err fe;
	if (flush(s, batch, n, rc == 0 ? e : &fe) == 0) /* after an error: what was written before it */
		s->r->copied += (uint64_t)n;
	else
		rc = -1;
	return rc;
}

/* ---- the other files of a full mirror ------------------------------------------------------ */

typedef struct file_copy {
	stage *s;
	const char *src, *name;
	int sec;                          /* dense.bin or mtp.bin: the section; -1: a carried file */
	uint32_t want;                    /* carried: its CRC */
	uint64_t size;
} file_copy;

/* The tensors of section sec in buf (bytes [at, at + n) of the file) checked as they end. */
static int check_tensors(const file_copy *f, const uint8_t *buf, uint64_t at, uint64_t n, int *j, uint32_t *crc,
			 coli_err *e)
{
	const coli_layout *L = &f->s->c->layout;
	for (; *j < L->n_tensors; ++*j, *crc = 0) {
		const coli_ltensor *t = &L->tensors[*j];
		if ((int)t->section != f->sec)
			continue;
		uint64_t end = t->offset + t->blob.nbytes, lo = t->offset > at ? t->offset : at, hi = end < at + n ? end : at + n;
		if (t->offset >= at + n)
			return 0;
		*crc = coli_crc32(*crc, buf + (lo - at), (hi - lo));
		if (end > at + n)
			return 0;
		if (*crc != t->crc)
			return coli_errf(e, COLI_EDATA, "%s: tensor '%s' at offset %llu: crc32 0x%08x, expected 0x%08x: the "
					 "model's copy is damaged", f->src, t->name, (unsigned long long)t->offset, *crc, t->crc);
	}
	return 0;
}

static int fill_file(int fd, const char *tmp, void *ctx, coli_err *e)
{
	file_copy *f = ctx;
	int in = coli_open_regular(f->src, O_RDONLY, NULL, e), j = 0, rc = in < 0 ? -1 : 0;
	uint32_t crc = 0, whole = 0;
	for (uint64_t at = 0; rc == 0 && at < f->size; at += FILE_CHUNK) {
		size_t n = f->size - at < FILE_CHUNK ? (size_t)(f->size - at) : FILE_CHUNK;
		rc = stopped(f->s, e) < 0 ? -1 : coli_pread_full(in, f->s->buf, n, at, f->src, e);
		if (rc == 0 && f->sec >= 0)
			rc = check_tensors(f, f->s->buf, at, n, &j, &crc, e);
		whole = coli_crc32(whole, f->s->buf, n);
		if (rc == 0)
			rc = coli_pwrite_full(fd, f->s->buf, n, at, tmp, e);
		if (rc == 0)
			progress(f->s, n);
	}
	if (rc == 0 && f->sec < 0 && whole != f->want)
		rc = coli_errf(e, COLI_EDATA, "%s: crc32 0x%08x, the manifest says 0x%08x: the model's copy is damaged", f->src,
			       whole, f->want);
	if (in >= 0)
		close(in);
	return rc;
}

/* Copies one file of the container unless the mirror has it already (a file is renamed into
 * place only once copied and checked). */
static int copy_file(stage *s, const char *name, int sec, uint32_t want, uint64_t size, coli_err *e)
{
	char *src = coli_path_join(s->c->dir, name), *dst = coli_path_join(s->o->dir, name);
	struct stat st;
	int rc = src && dst ? 0 : coli_errf(e, COLI_ENOMEM, "out of memory");
	if (rc == 0 && !(stat(dst, &st) == 0 && (uint64_t)st.st_size == size)) {
		file_copy f = {s, src, name, sec, want, size};
		rc = disk_full(s, coli_write_atomic_by(dst, fill_file, &f, e), e);
	}
	free(src), free(dst);
	return rc;
}

static int copy_files(stage *s, coli_err *e)
{
	const coli_container *c = s->c;
	int rc = 0;
	for (int sec = COLI_SEC_DENSE; rc == 0 && sec <= COLI_SEC_MTP; sec++)
		rc = copy_file(s, coli_section_file((coli_section)sec), sec, 0, c->layout.section_size[sec], e);
	for (int i = 0; rc == 0 && i < c->n_carried; i++)
		rc = copy_file(s, c->carried[i].file, -1, c->carried[i].crc, c->carried[i].size, e);
	return rc;
}

/* ---- the whole stage ----------------------------------------------------------------------- */

/* The plan's pins knob: one count for every MoE layer, or a list of one per MoE layer. */
static int plan_pins(stage *s, const char *v, coli_err *e)
{
	int n = s->c->layout.n_elayers, k = 0, one;
	if (!strchr(v, ',')) {
		if (coli_opts_int(v, 0, 1 << 20, &one, e) < 0 || !(s->pins = coli_calloc((size_t)n, sizeof(int), e)))
			return -1;
		for (int i = 0; i < n; i++)
			s->pins[i] = one;
		return 0;
	}
	if (coli_opts_int_list(v, 0, 1 << 20, &s->pins, &k, e) < 0)
		return -1;
	return k == n ? 0 : coli_errf(e, COLI_EDATA, "%s: knobs.pins: %d counts, the container has %d MoE layers",
				      s->o->plan, k, n);
}

/* --plan: the plan of this container; its usage file orders the records, its pins go last. */
static int read_plan(stage *s, coli_err *e)
{
	s->usage = (char *)s->o->usage;
	if (!s->o->plan)
		return 0;
	coli_plan p;
	int rc = coli_plan_read(s->o->plan, &p, e);
	if (rc == 0 && strcmp(p.identity, s->c->identity_hex) != 0)
		rc = coli_errf(e, COLI_EDATA, "%s: container.identity: the plan is for another container than %s",
			       s->o->plan, s->o->model);
	for (int i = 0; rc == 0 && i < p.n_knobs; i++) {
		if (strcmp(p.knobs[i].name, "usage") == 0 && !(s->usage = strdup(p.knobs[i].value)))
			rc = coli_errf(e, COLI_ENOMEM, "out of memory");
		else if (strcmp(p.knobs[i].name, "pins") == 0)
			rc = plan_pins(s, p.knobs[i].value, e);
	}
	coli_plan_release(&p);
	return rc;
}

/* DIR must not be the container's own folder, however it is named (a symlink, "M/.", a bind
 * mount: the same device and inode): a fresh stage there would truncate the container's
 * experts.bin. Refused whatever the options. */
static int not_the_model(const stage *s, const struct stat *dir, coli_err *e)
{
	struct stat m;
	if (stat(s->c->dir, &m) < 0)
		return coli_errf(e, COLI_EIO, "%s: %s", s->c->dir, strerror(errno));
	if (m.st_dev == dir->st_dev && m.st_ino == dir->st_ino)
		return coli_errf(e, COLI_EUSAGE, "%s: the container's own folder%s%s%s: a mirror is a copy in another "
				 "folder, on another disk; refused whatever the options", s->o->dir,
				 strcmp(s->o->dir, s->c->dir) ? " (" : "", strcmp(s->o->dir, s->c->dir) ? s->c->dir : "",
				 strcmp(s->o->dir, s->c->dir) ? ", by another name)" : "");
	return 0;
}

/* Opens what the stage needs: the container, its records, the usage counts, the paths. */
static int stage_open(stage *s, coli_usage *u, coli_err *e)
{
	struct stat st;
	if (stat(s->o->dir, &st) < 0)
		return coli_errf(e, COLI_EIO, "%s: %s: give an existing folder on the disk that is to hold the mirror",
				 s->o->dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return coli_errf(e, COLI_EIO, "%s: not a folder", s->o->dir);
	if (coli_container_open(&s->c, s->o->model, e) < 0 || not_the_model(s, &st, e) < 0 || records_of(s, e) < 0)
		return -1;
	if (read_plan(s, e) < 0 || (s->usage && coli_usage_read(s->usage, s->c->identity, u, e) < 0))
		return -1;
	s->map_path = coli_path_join(s->o->dir, COLI_MIRROR_FILE);
	s->src_path = coli_path_join(s->c->dir, "experts.bin");
	s->dst_path = coli_path_join(s->o->dir, "experts.bin");
	if (!s->map_path || !s->src_path || !s->dst_path)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	uint64_t bufsize = s->max_size > FILE_CHUNK ? s->max_size : FILE_CHUNK;
	bufsize = bufsize > s->c->layout.elayers[0].offset ? bufsize : blocks(s->c->layout.elayers[0].offset);
	if (posix_memalign((void **)&s->buf, 4096, (size_t)bufsize) != 0)
		return coli_errf(e, COLI_ENOMEM, "out of memory allocating %llu bytes", (unsigned long long)bufsize);
	s->src = open_direct(s->src_path, O_RDONLY, e);
	return s->src < 0 ? -1 : 0;
}

static void stage_close(stage *s)
{
	if (s->src >= 0)
		close(s->src);
	if (s->dst >= 0)
		close(s->dst);
	coli_mirror_map_release(&s->map);
	free(s->buf), free(s->rec), free(s->map_path), free(s->src_path), free(s->dst_path), free(s->pins);
	if (s->usage != s->o->usage)
		free(s->usage);
	coli_container_close(s->c);
}

static int stage_copy(stage *s, const coli_usage *u, coli_err *e)
{
	int any = 0;
	uint64_t own = own_bytes(s->c, s->o->dir, &any), n_jobs = 0;
	int state = inspect(s, any, e);
	uint64_t *order = state < 0 ? NULL : coli_calloc(s->n, sizeof(uint64_t), e);
	uint64_t *jobs = order ? coli_calloc(s->n, sizeof(uint64_t), e) : NULL;
	int rc = jobs ? 0 : -1;
	if (rc == 0 && state == 0)
		coli_mirror_map_release(&s->map);
	if (rc == 0 && state == 0 && (rc = coli_mirror_map_init(&s->map, s->c->identity, s->n, e)) < 0)
		rc = -1;
	if (rc == 0)
		rc = plan_order(s, u->counts ? u : NULL, order, e);
	if (rc == 0)
		rc = budget(s, own, e);
	if (rc == 0)
		plan(s, order, jobs, &n_jobs);
	for (uint64_t i = 0; i < n_jobs; i++)
		s->total += s->rec[jobs[i]].size;
	if (rc == 0 && s->r->full)
		s->total += fixed_bytes(s, 1) - fixed_bytes(s, 0);
	if (rc == 0)
		rc = stopped(s, e);
	if (rc == 0)
		rc = disk_full(s, state == 1 ? resume(s, e) : start_fresh(s, e), e);
	if (rc == 0)
		rc = (s->dst = open_direct(s->dst_path, O_WRONLY, e)) < 0 ? -1 : 0;
	if (rc == 0)
		rc = copy_records(s, jobs, n_jobs, e);
	if (rc == 0 && s->r->full)
		rc = stopped(s, e) < 0 ? -1 : copy_files(s, e);
	s->r->held = s->map.held;
	s->r->kind = mirror_kind(s->c, s->o->dir, s->map.held);
	free(order), free(jobs);
	return rc;
}

int stage_run(const stage_opts *o, stage_report *r, coli_err *e)
{
	stage s = {.o = o, .src = -1, .dst = -1, .r = r};
	coli_usage u = {0};
	memset(r, 0, sizeof(*r));
	int rc = stage_open(&s, &u, e);
	if (rc == 0)
		r->n_records = s.n, rc = stage_copy(&s, &u, e);
	coli_usage_release(&u);
	stage_close(&s);
	return rc;
}
