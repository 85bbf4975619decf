/* session.c: the conversation's token list, and its save / resume through .coli_kv files. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "kvfile.h"
#include "run.h"

int session_push(session *s, const int32_t *ids, int n, coli_err *e)
{
	if (n <= 0)
		return 0;
	if (s->n_tokens + n > s->cap) {
		int cap = (s->n_tokens + n) * 2 + 16;
		int32_t *t = realloc(s->tokens, (size_t)cap * sizeof(*t));
		if (!t)
			return coli_errf(e, COLI_ENOMEM, "out of memory for %d tokens", cap);
		s->tokens = t;
		s->cap = cap;
	}
	memcpy(s->tokens + s->n_tokens, ids, (size_t)n * sizeof(*ids));
	s->n_tokens += n;
	return 0;
}

/* The main layers' state of m (what a session holds: coli_model_state), into *want (caller frees). */
static int model_state(const coli_engine *m, coli_state_part **want, int *n, coli_err *e)
{
	*n = coli_model_state(m->cfg, NULL);
	if (!(*want = coli_calloc((size_t)*n + 1, sizeof(**want), e)))
		return -1;
	coli_model_state(m->cfg, *want);
	return 0;
}

/* The state kv allocated must be the one the file was checked against; its tokens must fit. */
static int check_fit(const coli_kvfile *f, const coli_kv *kv, const char *path, coli_err *e)
{
	if (kv->n_parts != f->n_parts || memcmp(kv->parts, f->parts, (size_t)f->n_parts * sizeof(*f->parts)) != 0)
		return coli_errf(e, COLI_EUSAGE, "%s: the KV cache's %d parts are not the model's state of %d parts", path,
				 kv->n_parts, f->n_parts);
	if (f->n_cached > kv->cap)
		return coli_errf(e, COLI_EUSAGE, "%s: %d cached tokens exceed the context of %d", path, f->n_cached, kv->cap);
	return 0;
}

/* Each part's saved rows (growing) or whole state (fixed) into kv. */
static void restore(const coli_kvfile *f, coli_kv *kv)
{
	for (int i = 0; i < f->n_parts; i++) {
		const coli_state_part *p = &f->parts[i];
		size_t n = p->width ? (size_t)f->n_cached * (size_t)p->width : (size_t)p->fixed;
		memcpy(kv->part[i], f->data[i], n * sizeof(float));
	}
	kv->n = f->n_cached;
}

/* The file is checked against the model's state (coli_model_state) before the cache is sized
 * from its token count; the cache's parts are that same declaration. */
int session_load(session *s, coli_kv *kv, const coli_engine *m, const char *path, int extra, coli_err *e)
{
	coli_kvfile f;
	coli_state_part *want = NULL;
	int n_want = 0;
	memset(s, 0, sizeof(*s));
	memset(&f, 0, sizeof(f));
	int exists = path && access(path, F_OK) == 0;
	int rc = exists ? model_state(m, &want, &n_want, e) : 0;
	if (rc == 0 && exists)
		rc = coli_kvfile_load(path, m->ct->identity, m->cfg->vocab_size, want, n_want, &f, e);
	free(want);
	if (rc < 0)
		return -1;
	rc = coli_kv_init(kv, m, f.n_tokens + extra + 1, e);
	if (rc == 0 && exists)
		rc = check_fit(&f, kv, path, e);
	if (rc == 0 && exists)
		rc = session_push(s, f.tokens, f.n_tokens, e);
	if (rc == 0 && exists) {
		restore(&f, kv);
		s->pending = f.n_tokens - f.n_cached;
	}
	coli_kvfile_release(&f);
	return rc;
}

int session_save(const session *s, const coli_kv *kv, const coli_engine *m, const char *path, coli_err *e)
{
	coli_kvfile f = {.n_parts = kv->n_parts, .parts = kv->parts, .n_tokens = s->n_tokens, .n_cached = kv->n,
			 .tokens = s->tokens, .data = kv->part};
	memcpy(f.identity, m->ct->identity, 32);
	return coli_kvfile_write(path, &f, e);
}
