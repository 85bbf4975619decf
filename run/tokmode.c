/* tokmode.c: the tokenizer on its own: --encode reads UTF-8 text from stdin and prints its ids
 * (no special tokens added) on one line; --decode "ids" prints the text. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fileio.h"
#include "run.h"

static int read_stdin(char **out, size_t *len, coli_err *e)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = coli_malloc(cap, e);
	while (buf) {
		n += fread(buf + n, 1, cap - n, stdin);
		if (n < cap)
			break;
		char *b = realloc(buf, cap *= 2);
		if (!b) {
			free(buf);
			return coli_errf(e, COLI_ENOMEM, "out of memory reading stdin (%zu bytes)", cap);
		}
		buf = b;
	}
	*out = buf;
	*len = n;
	return buf ? 0 : -1;
}

static int encode(coli_tok *t, coli_err *e)
{
	char *text = NULL;
	size_t len = 0;
	int32_t *ids = NULL;
	int n = 0;
	int rc = read_stdin(&text, &len, e);
	if (rc == 0)
		rc = coli_tok_encode(t, text, len, 1, &ids, &n, e);
	for (int i = 0; rc == 0 && i < n; i++)
		printf("%d%s", ids[i], i + 1 < n ? " " : "");
	if (rc == 0)
		putchar('\n');
	free(text);
	free(ids);
	return rc;
}

static int decode(coli_tok *t, const char *s, coli_err *e)
{
	int32_t *ids = NULL;
	int n = 0;
	char *text = NULL;
	size_t len = 0;
	int rc = parse_ids(s, coli_tok_vocab_size(t), "--decode", &ids, &n, e);
	if (rc == 0)
		rc = coli_tok_decode(t, ids, n, 0, &text, &len, e);
	if (rc == 0)
		fwrite(text, 1, len, stdout);
	free(ids);
	free(text);
	return rc;
}

int run_tokenizer_mode(const run_opts *o, coli_err *e)
{
	coli_tok *t = NULL;
	struct stat st;
	if (!o->tokenizer)
		return coli_errf(e, COLI_EUSAGE, "--encode and --decode need --tokenizer tokenizer.json");
	if (stat(o->tokenizer, &st) == 0 && S_ISDIR(st.st_mode))
		return coli_errf(e, COLI_EUSAGE, "--tokenizer %s: a folder, not a tokenizer.json (the file inside it, "
				 "%s/tokenizer.json?)", o->tokenizer, o->tokenizer);
	if (coli_tok_load(&t, o->tokenizer, e) < 0)
		return -1;
	int rc = o->encode ? encode(t, e) : decode(t, o->decode, e);
	coli_tok_free(t);
	return rc;
}
