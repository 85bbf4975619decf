/* amx_tiles.h: the one tile configuration amx's GEMMs (body_amx.h) and coli-fmapeak's peak use;
 * internal. Palette 1, tiles 0-7 each 16 rows of 64 bytes: C 0-3, A 4-5, B 6-7. */
#ifndef COLI_KERNELS_AMX_TILES_H
#define COLI_KERNELS_AMX_TILES_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

typedef struct kern_amx_cfg {
	uint8_t palette, start;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} kern_amx_cfg;

/* This thread's tiles configured (released by _tile_release). */
static inline __attribute__((target("amx-tile"))) void kern_amx_config(void)
{
	kern_amx_cfg c;
	memset(&c, 0, sizeof(c));
	c.palette = 1;
	for (int i = 0; i < 8; i++) {
		c.colsb[i] = 64;
		c.rows[i] = 16;
	}
	/* GCC's _tile_loadconfig tells the compiler it reads one byte of c: without this barrier the
	 * other stores may be dropped as dead (coli-fmapeak faulted so) */
	__asm__ volatile("" : : "r"(&c) : "memory");
	_tile_loadconfig(&c);
}

#endif
