/* store/ram.c: the expert stores addressing experts.bin in memory, views handed out with
 * nothing to release: read whole at open with every record's CRC checked, or mapped. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "crc32.h"
#include "fileio.h"
#include "store.h"

typedef struct ram_store {
	coli_store base;
	const coli_container *c;
	uint8_t *data;                  /* experts.bin */
	size_t mapped;                  /* bytes mapped at data; 0: data is malloc'd */
	coli_expert **experts;          /* [container layer] -> [n_experts] or NULL */
	int n_layers;
} ram_store;

static const coli_expert *ram_get(coli_store *s, int layer, int expert, coli_err *e)
{
	ram_store *r = (ram_store *)s;
	if (layer < 0 || layer >= r->n_layers || !r->experts[layer])
		return coli_errf(e, COLI_EUSAGE, "expert store: layer %d has no experts", layer), NULL;
	const coli_lexperts *x = coli_container_experts(r->c, layer);
	if (expert < 0 || expert >= x->n_experts)
		return coli_errf(e, COLI_EUSAGE, "expert store: expert %d of layer %d out of range", expert, layer), NULL;
	return &r->experts[layer][expert];
}

static void ram_release(coli_store *s, int layer, int expert)
{
	(void)s, (void)layer, (void)expert;
}

static void ram_close(coli_store *s)
{
	ram_store *r = (ram_store *)s;
	for (int l = 0; r->experts && l < r->n_layers; l++)
		free(r->experts[l]);
	free(r->experts);
	if (r->mapped)
		munmap(r->data, r->mapped);
	else
		free(r->data);
	free(r);
}

static const coli_store_ops ram_ops = {
	.kind = COLI_STORE_RAM, .get = ram_get, .try_get = ram_get, .release = ram_release, .close = ram_close};
static const coli_store_ops mmap_ops = {
	.kind = COLI_STORE_MMAP, .get = ram_get, .try_get = ram_get, .release = ram_release, .close = ram_close};

static int index_layer(ram_store *r, const coli_lexperts *x, coli_err *e)
{
	coli_expert *v = coli_calloc((size_t)x->n_experts, sizeof(*v), e);
	if (!v)
		return -1;
	r->experts[x->layer] = v;
	for (int k = 0; k < x->n_experts; k++) {
		const uint8_t *rec = r->data + coli_record_offset(x, k);
		uint32_t crc = r->mapped ? 0 : coli_crc32(0, rec, x->record_size);
		if (!r->mapped && crc != x->crc[k])
			return coli_errf(e, COLI_EDATA,
					 "%s/experts.bin: expert record [layer %d][expert %d] at offset %llu: crc32 0x%08x, expected 0x%08x",
					 r->c->dir, x->layer, k, (unsigned long long)coli_record_offset(x, k), crc, x->crc[k]);
		v[k].gate = coli_mat_of(&x->part[0], rec + x->part_off[0]);
		v[k].up = coli_mat_of(&x->part[1], rec + x->part_off[1]);
		v[k].down = coli_mat_of(&x->part[2], rec + x->part_off[2]);
	}
	return 0;
}

/* experts.bin read record by record, so that a failed read names its record; the section
 * header before the first record is not used (zeroed, not read). */
static int read_records(ram_store *r, coli_err *e)
{
	const coli_layout *lay = &r->c->layout;
	char what[4200];
	if (lay->n_elayers > 0)
		memset(r->data, 0, (size_t)lay->elayers[0].offset);
	for (int i = 0; i < lay->n_elayers; i++) {
		const coli_lexperts *x = &lay->elayers[i];
		for (int k = 0; k < x->n_experts; k++) {
			uint64_t off = coli_record_offset(x, k);
			snprintf(what, sizeof(what), "%s/experts.bin: expert record [layer %d][expert %d] at offset %llu",
				 r->c->dir, x->layer, k, (unsigned long long)off);
			if (coli_pread_full(r->c->fd[COLI_SEC_EXPERTS], r->data + off, (size_t)x->record_size, off, what, e) < 0)
				return -1;
		}
	}
	return 0;
}

/* experts.bin read whole (mapped: 0) or mapped (1), then indexed. */
static int open_store(coli_store **out, const coli_container *c, int mapped, coli_err *e)
{
	ram_store *r = coli_calloc(1, sizeof(*r), e);
	size_t n = (size_t)c->layout.section_size[COLI_SEC_EXPERTS];
	void *p = NULL;
	if (!r)
		return -1;
	r->base.ops = mapped ? &mmap_ops : &ram_ops;
	r->c = c;
	r->n_layers = c->model.n_layers + c->model.n_mtp_layers;
	int rc = (r->experts = coli_calloc((size_t)r->n_layers, sizeof(*r->experts), e)) ? 0 : -1;
	if (rc == 0 && mapped && n) {
		if ((p = mmap(NULL, n, PROT_READ, MAP_SHARED, c->fd[COLI_SEC_EXPERTS], 0)) == MAP_FAILED)
			rc = coli_errf(e, COLI_EIO, "%s/experts.bin: mmap of %zu bytes: %s", c->dir, n, strerror(errno));
		else
			r->data = p, r->mapped = n;
	} else if (rc == 0 && !mapped) {
		if (!(p = coli_weights_alloc(n)))
			rc = coli_errf(e, COLI_ENOMEM, "out of memory allocating %zu bytes for experts.bin", n);
		r->data = p;
		if (rc == 0)
			rc = read_records(r, e);
	}
	for (int i = 0; rc == 0 && i < c->layout.n_elayers; i++)
		rc = index_layer(r, &c->layout.elayers[i], e);
	if (rc < 0) {
		ram_close(&r->base);
		return -1;
	}
	*out = &r->base;
	return 0;
}

int coli_store_ram_open(coli_store **out, const coli_container *c, coli_err *e)
{
	return open_store(out, c, 0, e);
}

int coli_store_mmap_open(coli_store **out, const coli_container *c, coli_err *e)
{
	return open_store(out, c, 1, e);
}
