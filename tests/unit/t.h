/* t.h: the unit-test harness: each check prints "PASS <name>" or "FAIL <name>: <why>";
 * tests/run.sh counts those lines. A test binary exits 1 if any check failed. */
#ifndef COLI_T_H
#define COLI_T_H

#include <stdio.h>
#include <stdlib.h>

static int t_failed;

/* One named check; the message after the condition says what went wrong. */
#define T_CHECK(name, cond, ...)                                                  \
	do {                                                                      \
		if (cond) {                                                       \
			printf("PASS %s\n", name);                                \
		} else {                                                          \
			printf("FAIL %s: ", name);                                \
			printf(__VA_ARGS__);                                      \
			printf(" (%s:%d)\n", __FILE__, __LINE__);                 \
			t_failed = 1;                                             \
		}                                                                 \
		fflush(stdout);                                                   \
	} while (0)

#define T_EXIT() return t_failed ? 1 : 0

/* A reproducible xorshift stream for test data: the next 32 bits of *state (any nonzero start). */
static inline unsigned t_rand(unsigned long long *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return (unsigned)(*state >> 16);
}

/* Directory of the reference fixtures copied into the tree (tests/fixtures/hf). */
static inline const char *t_fixtures(void)
{
	const char *d = getenv("COLI_FIXTURES");
	return d ? d : "tests/fixtures/hf";
}

/* Converts fixture FAM-tiny into DIR/FAM.coli (its path into path[n]) with bin/coli-convert;
 * checked under the name FAM. Returns 0 when it converted. */
static inline int t_convert_fixture(const char *dir, const char *fam, char *path, size_t n)
{
	char cmd[1400];
	snprintf(path, n, "%s/%s.coli", dir, fam);
	snprintf(cmd, sizeof(cmd), "bin/coli-convert -q %s/%s-tiny/checkpoint %s", t_fixtures(), fam, path);
	int ok = system(cmd) == 0;
	T_CHECK(fam, ok, "coli-convert failed");
	return ok ? 0 : -1;
}

#endif
