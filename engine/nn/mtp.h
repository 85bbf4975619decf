/* mtp.h: what the decoder stack (forward.c) hands the MTP head (mtp.c) (internal); the layer
 * both run is layer.h's, so mtp.c never calls back into forward.c. */
#ifndef COLI_MTP_H
#define COLI_MTP_H

#include "engine.h"

/* mtp.c: before a forward batch of n tokens whose first is next: the last queued row's token
 * set to next, and the queue taken in by the MTP layer when n more rows would not fit. */
int mtp_make_room(coli_engine *m, coli_mtp *s, int32_t next, int n, coli_err *e);
/* mtp.c: where the batch's first row goes in the queue ([hidden] per row; deepseek_v4's
 * [hc_mult][hidden] streams, which its batch writes there). */
float *mtp_slot(const coli_engine *m, coli_mtp *s);
/* mtp.c: after the batch (positions p0 ..): its n rows' final hidden states queued, copied from
 * rows (the working memory's N), or already in place (rows NULL: mtp_slot's). */
void mtp_take(coli_engine *m, coli_mtp *s, const int32_t *tokens, int n, int p0, const float *rows);
/* mtp.c: bytes coli_mtp_init allocates for a main state of cap tokens, batches of batch tokens and
 * threads compute threads (0 without MTP layers). */
uint64_t mtp_bytes(const coli_model *c, int cap, int batch, int threads);

#endif
