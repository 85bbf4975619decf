/* policy/arc.c: ARC's lists and its adaptive target for the cache simulator (arc.h). */
#include <stdlib.h>
#include <string.h>

#include "arc.h"

int sim_arc_open(sim_arc *a, int pools, size_t ge, double c)
{
	memset(a, 0, sizeof(*a));
	a->pools = pools, a->ge = ge, a->c = c;
	a->list = calloc(ge, 1), a->w = calloc(ge, sizeof(*a->w));
	a->prev = calloc(ge, sizeof(*a->prev)), a->next = calloc(ge, sizeof(*a->next));
	a->head = calloc((size_t)pools * 2, sizeof(*a->head)), a->tail = calloc((size_t)pools * 2, sizeof(*a->tail));
	a->size = calloc((size_t)pools * 4, sizeof(*a->size)), a->p = calloc((size_t)pools, sizeof(*a->p));
	if (!(a->list && a->w && a->prev && a->next && a->head && a->tail && a->size && a->p))
		return sim_arc_close(a), -1;
	sim_arc_reset(a);
	return 0;
}

void sim_arc_close(sim_arc *a)
{
	free(a->list), free(a->w), free(a->prev), free(a->next), free(a->head), free(a->tail), free(a->size), free(a->p);
	memset(a, 0, sizeof(*a));
}

void sim_arc_reset(sim_arc *a)
{
	memset(a->list, ARC_NONE, a->ge);
	memset(a->size, 0, (size_t)a->pools * 4 * sizeof(*a->size));
	memset(a->p, 0, (size_t)a->pools * sizeof(*a->p));
	for (int i = 0; i < a->pools * 2; i++)
		a->head[i] = a->tail[i] = -1;
	a->from_b2 = a->ghost_hit = 0;
}

static double *sz(sim_arc *a, int pool, int list) { return &a->size[pool * 4 + list - ARC_T1]; }

/* g moved to list (its cost leaving the old one). */
static void move(sim_arc *a, int pool, int g, int list)
{
	if (a->list[g] != ARC_NONE)
		*sz(a, pool, a->list[g]) -= a->w[g];
	if (list != ARC_NONE)
		*sz(a, pool, list) += a->w[g];
	a->list[g] = (char)list;
}

/* Ghost g unlinked from its list and from ARC. */
static void unghost(sim_arc *a, int pool, int g)
{
	int q = pool * 2 + (a->list[g] == ARC_B2);
	if (a->prev[g] >= 0)
		a->next[a->prev[g]] = a->next[g];
	else
		a->head[q] = a->next[g];
	if (a->next[g] >= 0)
		a->prev[a->next[g]] = a->prev[g];
	else
		a->tail[q] = a->prev[g];
	move(a, pool, g, ARC_NONE);
}

void sim_arc_hit(sim_arc *a, int pool, int g)
{
	move(a, pool, g, ARC_T2);
}

void sim_arc_miss(sim_arc *a, int pool, int g, double w)
{
	int list = a->list[g];
	double b1 = *sz(a, pool, ARC_B1), b2 = *sz(a, pool, ARC_B2), *p = &a->p[pool];
	a->from_b2 = list == ARC_B2;
	if (list == ARC_B1)
		*p += w * (b2 > b1 ? b2 / b1 : 1), *p = *p < a->c ? *p : a->c;
	else if (list == ARC_B2)
		*p -= w * (b1 > b2 ? b1 / b2 : 1), *p = *p > 0 ? *p : 0;
	a->ghost_hit = list == ARC_B1 || list == ARC_B2;
	if (a->ghost_hit)
		unghost(a, pool, g);
}

int sim_arc_take_t1(const sim_arc *a, int pool)
{
	double t1 = a->size[pool * 4], p = a->p[pool];
	return t1 > 0 && (t1 > p || (a->from_b2 && t1 == p));
}

void sim_arc_evicted(sim_arc *a, int pool, int g)
{
	int list = a->list[g] == ARC_T1 ? ARC_B1 : ARC_B2, q = pool * 2 + (list == ARC_B2);
	move(a, pool, g, list);
	a->prev[g] = a->tail[q], a->next[g] = -1;
	if (a->tail[q] >= 0)
		a->next[a->tail[q]] = g;
	else
		a->head[q] = g;
	a->tail[q] = g;
}

/* |T1| + |B1|, and all four lists. */
static double l1(sim_arc *a, int pool) { return *sz(a, pool, ARC_T1) + *sz(a, pool, ARC_B1); }
static double all(sim_arc *a, int pool) { return l1(a, pool) + *sz(a, pool, ARC_T2) + *sz(a, pool, ARC_B2); }

void sim_arc_insert(sim_arc *a, int pool, int g, double w)
{
	int ghost_hit = a->ghost_hit;
	if (!ghost_hit && l1(a, pool) + w > a->c)
		while (a->head[pool * 2] >= 0 && l1(a, pool) + w > a->c)
			unghost(a, pool, a->head[pool * 2]);
	else if (!ghost_hit)
		while (a->head[pool * 2 + 1] >= 0 && all(a, pool) + w > 2 * a->c)
			unghost(a, pool, a->head[pool * 2 + 1]);
	a->w[g] = w;
	move(a, pool, g, ghost_hit ? ARC_T2 : ARC_T1);
}

int sim_arc_list(const sim_arc *a, int g)
{
	return a->list[g];
}
