/* policy/evict.c: the order in which the expert cache evicts, LRU or LFU: the one
 * implementation that the streaming store (store/stream.c) and the cache simulator
 * (policy/cachesim.c) both call (policy.h). */
#include "policy.h"

int coli_evict_before(int policy, double a, uint64_t ta, double b, uint64_t tb)
{
	if (policy == COLI_SIM_LFU && a != b)
		return a < b;
	return ta < tb;
}
