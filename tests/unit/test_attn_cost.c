/* test_attn_cost.c: decode attention's cost as the planner reads it: the multiply-adds per token
 * counted by hand for GQA and MLA shapes, the threading threshold, and a timing that is positive
 * and equal to the engine's loop's work. */
#include <string.h>

#include "engine.h"
#include "model.h"
#include "t.h"

static void check_gqa(void)
{
	coli_model c;
	memset(&c, 0, sizeof(c));
	c.attn = COLI_ATTN_GQA, c.n_layers = 3, c.n_heads = 32, c.n_kv_heads = 4, c.head_dim = 128;
	int threaded = -1;
	double f = coli_attn_decode_fmas(&c, 99, &threaded);
	T_CHECK("gqa: layers x heads x positions x 2 head_dim", f == 3.0 * 32 * 100 * 256 && threaded == 0, "%g %d", f,
		threaded);
	/* 32 heads x 128: positions x 4096 reaches 2^22 at 1024 positions (position 1023) */
	coli_attn_decode_fmas(&c, 1022, &threaded);
	T_CHECK("gqa: one thread below 2^22 of work", threaded == 0, "%d", threaded);
	coli_attn_decode_fmas(&c, 1023, &threaded);
	T_CHECK("gqa: shared over the threads from 2^22 of work on", threaded == 1, "%d", threaded);
}

static void check_mla(void)
{
	coli_model c;
	memset(&c, 0, sizeof(c));
	c.attn = COLI_ATTN_MLA, c.n_layers = 2, c.n_heads = 16, c.kv_lora_rank = 512, c.qk_rope_head_dim = 64;
	int threaded = -1;
	double f = coli_attn_decode_fmas(&c, 9999, &threaded);
	T_CHECK("mla: layers x heads x positions x (2 kv_lora_rank + rope dims), one thread",
		f == 2.0 * 16 * 10000 * (2 * 512 + 64) && threaded == 0, "%g %d", f, threaded);
}

int main(void)
{
	check_gqa();
	check_mla();
	double r = coli_attn_core_rate(128, 256, 0.01);
	T_CHECK("rate: the core's timing gives multiply-adds per second", r > 1e6 && r < 1e13, "%g", r);
	T_EXIT();
}
