/* policy/arc.h: the lists of ARC (adaptive replacement cache, Megiddo & Modha, FAST 2003) for the
 * cache simulator (cachesim.c): which residents are in T1 (seen once) or T2 (seen again), the
 * ghosts B1 and B2 of experts evicted from each, the adaptive target p of T1, per pool. Sizes
 * are in the simulator's costs (slots: 1 per expert), c the pool's capacity or budget. */
#ifndef COLI_POLICY_ARC_H
#define COLI_POLICY_ARC_H

#include <stddef.h>

enum { ARC_NONE, ARC_T1, ARC_T2, ARC_B1, ARC_B2 };

typedef struct sim_arc {
	int pools;
	size_t ge;            /* global ids g: layer x n_experts + expert */
	double c;             /* each pool's capacity, in costs */
	char *list;           /* [ge] ARC_* */
	double *w;            /* [ge] g's cost while listed */
	int *prev, *next;     /* [ge] a ghost's neighbours, older and newer (-1: none) */
	int *head, *tail;     /* [pools x 2] each ghost list's oldest and newest (-1: empty) */
	double *size;         /* [pools x 4] the costs listed in T1, T2, B1, B2 */
	double *p;            /* [pools] the target size of T1 */
	int from_b2;          /* the latest miss was in B2 */
	int ghost_hit;        /* the latest miss was in B1 or B2 */
} sim_arc;

/* The lists for pools pools over ge ids, all empty, p 0; -1 when out of memory. */
int sim_arc_open(sim_arc *a, int pools, size_t ge, double c);
void sim_arc_close(sim_arc *a);
void sim_arc_reset(sim_arc *a);

/* A hit on resident g: to T2 (the newest; the simulator keeps the residents' order). */
void sim_arc_hit(sim_arc *a, int pool, int g);

/* A miss on g of cost w, before any eviction it causes: a ghost hit adapts p (B1: toward T1,
 * B2: toward T2) and leaves its list. */
void sim_arc_miss(sim_arc *a, int pool, int g, double w);

/* Whether an eviction now should take T1's least recent (else T2's): ARC's REPLACE. */
int sim_arc_take_t1(const sim_arc *a, int pool);

/* Resident g evicted: the newest of its ghost list. */
void sim_arc_evicted(sim_arc *a, int pool, int g);

/* g of cost w made resident after its miss (and the eviction): a ghost hit goes to T2, a new
 * expert to T1 after the ghosts are trimmed to |T1| + |B1| <= c, or else all four <= 2c. */
void sim_arc_insert(sim_arc *a, int pool, int g, double w);

/* The list of g (ARC_*). */
int sim_arc_list(const sim_arc *a, int g);

#endif
