/* release.c: the dtype a family's released checkpoint stores each tensor of the table in: what
 * coli-synth writes, and what a container described from config.json alone (coli-plan) assumes
 * the safetensors hold. */
#include <string.h>

#include "model.h"

/* The checkpoint's float type: config.json's dtype (torch_dtype), bf16 when absent. */
static int float_dtype(const coli_model *m)
{
	return !strcmp(m->dtype, "float16") ? COLI_DT_F16 : !strcmp(m->dtype, "float32") ? COLI_DT_F32 : COLI_DT_BF16;
}

/* deepseek_v4 as V4 Flash ships (docs/deepseek_v4.md, section 2): F32 for mHC, the sinks, the
 * position biases and gate.bias; I64 the hash table; in an fp8 checkpoint the attention's and
 * the shared expert's matrices (and the MTP layer's e_proj/h_proj) F8_E4M3 with UE8M0 .scale;
 * the routed experts FP4 (I8) with expert_dtype fp4; the checkpoint's float type the rest (the
 * compressors, the indexer's weights_proj, the routers, norms, embeddings, head). */
static int v4_dtype(const coli_model *m, const coli_tensor_spec *s)
{
	switch (s->role) {
	case COLI_R_TID2EID: return COLI_DT_I64;
	case COLI_R_HC_ATTN_FN: case COLI_R_HC_ATTN_BASE: case COLI_R_HC_ATTN_SCALE:
	case COLI_R_HC_FFN_FN: case COLI_R_HC_FFN_BASE: case COLI_R_HC_FFN_SCALE:
	case COLI_R_HC_HEAD_FN: case COLI_R_HC_HEAD_BASE: case COLI_R_HC_HEAD_SCALE:
	case COLI_R_SINK: case COLI_R_CMP_APE: case COLI_R_IDX_CMP_APE: case COLI_R_CORR_BIAS: return COLI_DT_F32;
	case COLI_R_Q_A: case COLI_R_Q_B: case COLI_R_WKV: case COLI_R_WO_A: case COLI_R_WO_B: case COLI_R_IDX_WQ_B:
	case COLI_R_SH_GATE: case COLI_R_SH_UP: case COLI_R_SH_DOWN: case COLI_R_E_PROJ: case COLI_R_H_PROJ:
		return m->fp8 ? COLI_DT_F8_E4M3 : float_dtype(m);
	case COLI_R_EXPERT: return m->fp4_experts ? COLI_DT_I8 : float_dtype(m);
	default: return float_dtype(m);
	}
}

/* The other families as DeepSeek-V3's fp8 release stores them: routers, the MTP layer's
 * eh_proj, embed_tokens and shared_head and every 1-D tensor in the float type (the correction
 * bias F32), so the DSA indexer's weights_proj (a small tensor) and qwen3_5_moe's Gated DeltaNet
 * a/b projections, conv taps and shared-expert gate; the other matrices of the layers F8_E4M3.
 * Fused experts stay in the float type: a fused tensor has no per-expert block scales in the
 * release's naming, which libcoli reads (only per-expert weights carry them). */
int coli_model_release_dtype(const coli_model *m, const coli_tensor_spec *s, int fused)
{
	if (m->family == COLI_FAM_DEEPSEEK_V4)
		return v4_dtype(m, s);
	if (s->role == COLI_R_CORR_BIAS)
		return COLI_DT_F32;
	if (fused && s->cls == COLI_TC_EXPERT)
		return float_dtype(m);
	if (m->fp8 && s->ndim == 2 && s->cls != COLI_TC_SMALL && s->layer >= 0 && s->role != COLI_R_MTP_EMBED &&
	    s->role != COLI_R_HEAD && s->role != COLI_R_EH_PROJ)
		return COLI_DT_F8_E4M3;
	return float_dtype(m);
}
