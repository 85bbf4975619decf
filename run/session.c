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

/* The saved KV shape must be this model's. */
static int check_shape(const coli_kvfile *f, const coli_kv *kv, const char *path, coli_err *e)
{
	if (f->n_layers != kv->n_layers || f->k_width != kv->k_width || f->v_width != kv->v_width)
		return coli_errf(e, COLI_EDATA, "%s: KV shape %d layers x %d/%d, this model has %d x %d/%d", path,
				 f->n_layers, f->k_width, f->v_width, kv->n_layers, kv->k_width, kv->v_width);
	if (f->n_cached > kv->cap)
		return coli_errf(e, COLI_EUSAGE, "%s: %d cached tokens exceed the context of %d", path, f->n_cached, kv->cap);
	if (f->n_tokens - f->n_cached > 1)
		return coli_errf(e, COLI_EDATA, "%s: %d tokens but only %d cached", path, f->n_tokens, f->n_cached);
	return 0;
}

int session_load(session *s, coli_kv *kv, const coli_engine *m, const char *path, int extra, coli_err *e)
{
	coli_kvfile f;
	memset(s, 0, sizeof(*s));
	memset(&f, 0, sizeof(f));
	int exists = path && access(path, F_OK) == 0;
	if (exists && coli_kvfile_load(path, m->ct->identity, m->cfg->vocab_size, &f, e) < 0)
		return -1;
	int rc = coli_kv_init(kv, m, f.n_tokens + extra + 1, e);
	if (rc < 0 || !exists) {
		coli_kvfile_release(&f);
		return rc;
	}
	rc = check_shape(&f, kv, path, e);
	if (rc == 0)
		rc = session_push(s, f.tokens, f.n_tokens, e);
	for (int l = 0; rc == 0 && l < kv->n_layers; l++) {
		memcpy(kv->k[l], f.k[l], (size_t)f.n_cached * kv->k_width * sizeof(float));
		memcpy(kv->v[l], f.v[l], (size_t)f.n_cached * kv->v_width * sizeof(float));
	}
	if (rc == 0) {
		kv->n = f.n_cached;
		s->pending = f.n_tokens - f.n_cached;
	}
	coli_kvfile_release(&f);
	return rc;
}

int session_save(const session *s, const coli_kv *kv, const coli_engine *m, const char *path, coli_err *e)
{
	coli_kvfile f = {.n_layers = kv->n_layers, .k_width = kv->k_width, .v_width = kv->v_width,
			 .n_tokens = s->n_tokens, .n_cached = kv->n, .tokens = s->tokens, .k = kv->k, .v = kv->v};
	memcpy(f.identity, m->ct->identity, 32);
	return coli_kvfile_write(path, &f, e);
}
