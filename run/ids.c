/* ids.c: a list of token ids given as text (--prompt-ids, --decode, --draft-oracle's file). */
#include <stdlib.h>

#include "fileio.h"
#include "run.h"

int parse_ids(const char *s, int vocab, const char *what, int32_t **out, int *n, coli_err *e)
{
	int cap = 16, k = 0;
	int32_t *v = coli_malloc((size_t)cap * sizeof(*v), e);
	while (v && *s) {
		char *end;
		while (*s == ' ' || *s == ',' || *s == '\t' || *s == '\n')
			s++;
		if (!*s)
			break;
		long id = strtol(s, &end, 10);
		if (end == s || id < 0 || id >= vocab) {
			free(v);
			return coli_errf(e, COLI_EUSAGE, "%s: '%.20s' is not a token id in [0, %d)", what, s, vocab);
		}
		if (k == cap) {
			int32_t *w = realloc(v, (size_t)(cap *= 2) * sizeof(*v));
			if (!w) {
				free(v);
				return coli_errf(e, COLI_ENOMEM, "out of memory");
			}
			v = w;
		}
		v[k++] = (int32_t)id;
		s = end;
	}
	*out = v;
	*n = k;
	return v ? 0 : -1;
}
