package cuda

import (
	"fmt"

	"github.com/minerva-llm/minerva/codegen/gpu"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// decoders are the CUDA C bodies of the dq_<name> functions (gpu.Decoder
// says what a unit is); the formulas follow the quant package (ggml's
// dequantize_row_*), which ir/eval multiplies with.
var decoders = map[ir.DType]gpu.Decoder{
	ir.F32: {Name: "f32", Unit: 1, Body: `
    w[0] = ((const float*)row)[u];`},
	ir.F16: {Name: "f16", Unit: 1, Body: `
    w[0] = h2f(((const f16*)row)[u]);`},
	ir.BF16: {Name: "bf16", Unit: 1, Body: `
    w[0] = __uint_as_float(u32(((const u16*)row)[u]) << 16);`},
	ir.Q4_0: {Name: "q4_0", Unit: 32, Body: `
    const u8* b = row + u * 18;
    const float d = ld_f16(b);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        w[j]      = float(int(b[2 + j] & 15) - 8) * d;
        w[j + 16] = float(int(b[2 + j] >> 4) - 8) * d;
    }`},
	ir.Q4_1: {Name: "q4_1", Unit: 32, Body: `
    const u8* b = row + u * 20;
    const float d = ld_f16(b), m = ld_f16(b + 2);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        w[j]      = float(b[4 + j] & 15) * d + m;
        w[j + 16] = float(b[4 + j] >> 4) * d + m;
    }`},
	ir.Q5_0: {Name: "q5_0", Unit: 32, Helpers: []string{"ld_u32"}, Body: `
    const u8* b = row + u * 22;
    const float d = ld_f16(b);
    const u32 qh = ld_u32(b + 2);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const u32 h0 = ((qh >> j) << 4) & 16, h1 = (qh >> (j + 12)) & 16;
        w[j]      = float(int((b[6 + j] & 15) | h0) - 16) * d;
        w[j + 16] = float(int((b[6 + j] >> 4) | h1) - 16) * d;
    }`},
	ir.Q5_1: {Name: "q5_1", Unit: 32, Helpers: []string{"ld_u32"}, Body: `
    const u8* b = row + u * 24;
    const float d = ld_f16(b), m = ld_f16(b + 2);
    const u32 qh = ld_u32(b + 4);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const u32 h0 = ((qh >> j) << 4) & 16, h1 = (qh >> (j + 12)) & 16;
        w[j]      = float((b[8 + j] & 15) | h0) * d + m;
        w[j + 16] = float((b[8 + j] >> 4) | h1) * d + m;
    }`},
	ir.Q8_0: {Name: "q8_0", Unit: 32, Body: `
    const u8* b = row + u * 34;
    const float d = ld_f16(b);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        w[j] = float((int(b[2 + j]) ^ 128) - 128) * d;
    }`},
	ir.MXFP4: {Name: "mxfp4", Unit: 32, Helpers: []string{"kv_mxfp4"}, Body: `
    const u8* b = row + u * 17;
    const u32 e = b[0];
    // ggml_e8m0_to_fp32_half: 2^(e-128), subnormal for e < 2.
    const float d = __uint_as_float(e < 2 ? (0x00200000u << e) : ((e - 1) << 23));
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        w[j]      = kv_mxfp4(b[1 + j] & 15u) * d;
        w[j + 16] = kv_mxfp4(b[1 + j] >> 4) * d;
    }`},
	ir.Q2_K: {Name: "q2_k", Unit: 32, Body: `
    const u8* b = row + (u / 8) * 84;
    const u32 s = u % 8, n = s / 4, shift = 2 * (s % 4), is = 8 * n + 2 * (s % 4);
    const float d = ld_f16(b + 80), dmin = ld_f16(b + 82);
    const u8* q = b + 16 + 32 * n;
#pragma unroll
    for (int l = 0; l < 32; ++l) {
        const u32 sc = b[is + (l >= 16 ? 1 : 0)];
        w[l] = d * float(sc & 15) * float((q[l] >> shift) & 3) - dmin * float(sc >> 4);
    }`},
	ir.Q3_K: {Name: "q3_k", Unit: 32, Helpers: []string{"q3_scale"}, Body: `
    const u8* b = row + (u / 8) * 110;
    const u32 s = u % 8, n = s / 4, shift = 2 * (s % 4), is = 8 * n + 2 * (s % 4);
    const float d = ld_f16(b + 108);
    const u8* q = b + 32 + 32 * n;
    const float d1 = d * float(q3_scale(b + 96, is) - 32), d2 = d * float(q3_scale(b + 96, is + 1) - 32);
#pragma unroll
    for (int l = 0; l < 32; ++l) {
        // A clear high bit means the value is 4 lower: q - 4 + 4*h.
        const int v = int((q[l] >> shift) & 3) - 4 + int(((b[l] >> s) & 1) << 2);
        w[l] = (l < 16 ? d1 : d2) * float(v);
    }`},
	ir.Q4_K: {Name: "q4_k", Unit: 32, Helpers: []string{"scale_min_k4"}, Body: `
    const u8* b = row + (u / 8) * 144;
    const u32 s = u % 8, g = s / 2;
    const float d = ld_f16(b), dmin = ld_f16(b + 2);
    u32 sc, mn;
    scale_min_k4(s, b + 4, sc, mn);
    const float d1 = d * float(sc), m1 = dmin * float(mn);
    const u8* q = b + 16 + 32 * g;
#pragma unroll
    for (int l = 0; l < 32; ++l) {
        w[l] = d1 * float((s & 1) ? (q[l] >> 4) : (q[l] & 15)) - m1;
    }`},
	ir.Q5_K: {Name: "q5_k", Unit: 32, Helpers: []string{"scale_min_k4"}, Body: `
    const u8* b = row + (u / 8) * 176;
    const u32 s = u % 8, g = s / 2;
    const float d = ld_f16(b), dmin = ld_f16(b + 2);
    u32 sc, mn;
    scale_min_k4(s, b + 4, sc, mn);
    const float d1 = d * float(sc), m1 = dmin * float(mn);
    const u8* qh = b + 16;
    const u8* q = b + 48 + 32 * g;
#pragma unroll
    for (int l = 0; l < 32; ++l) {
        const u32 v = ((s & 1) ? (q[l] >> 4) : (q[l] & 15)) | (((qh[l] >> s) & 1) << 4);
        w[l] = d1 * float(v) - m1;
    }`},
	ir.Q6_K: {Name: "q6_k", Unit: 32, Body: `
    const u8* b = row + (u / 8) * 210;
    const u32 s = u % 8, n = s / 4, part = s % 4;
    const float d = ld_f16(b + 208);
    const u8* ql = b + 64 * n + 32 * (part & 1);
    const u8* qh = b + 128 + 32 * n;
    const u8* sc = b + 192 + 8 * n + 2 * part;
#pragma unroll
    for (int l = 0; l < 32; ++l) {
        const u32 nib = part >= 2 ? (ql[l] >> 4) : (ql[l] & 15);
        const int q = int(nib | (((qh[l] >> (2 * part)) & 3) << 4)) - 32;
        w[l] = d * float((int(sc[l / 16]) ^ 128) - 128) * float(q);
    }`},
}

func init() { gpu.AddAffineDecoders(decoders, affineBody) }

// affineBody decodes one unit of an MLX affine block (gpu.AffineUnit).
func affineBody(g gpu.AffineUnit) string {
	body := fmt.Sprintf(`
    const u8* b = row + (u / %du) * %du;
    const float s = __uint_as_float(ld_u32(b)), m = __uint_as_float(ld_u32(b + 4));
    const u8* q = b + 8 + (u %% %du) * %du;`, g.Per, g.BlockBytes, g.Per, g.UnitBytes)
	if g.Bits == 4 {
		return body + `
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        w[2 * j]     = fmaf(float(q[j] & 15), s, m);
        w[2 * j + 1] = fmaf(float(q[j] >> 4), s, m);
    }`
	}
	return body + `
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        w[j] = fmaf(float(q[j]), s, m);
    }`
}

// helperSource holds the helpers the decoders may call, by name.
var helperSource = map[string]string{
	"ld_u32": `
// ld_u32 reads a little-endian u32 at any byte alignment (Q5 blocks place it at 2 mod 4).
__device__ __forceinline__ u32 ld_u32(const u8* p) {
    return u32(p[0]) | (u32(p[1]) << 8) | (u32(p[2]) << 16) | (u32(p[3]) << 24);
}
`,
	"kv_mxfp4": `
// kv_mxfp4 is ggml's kvalues_mxfp4[c] (` + quant.MXFP4ValuesC() + `): twice the E2M1 value of
// code c (the scale is halved). The magnitude m = c & 7 is m below 2, else (2 + (m & 1)) << ((m >> 1) - 1);
// c & 8 is the sign. Computed, not read from a table: a warp's lanes decode different codes, and a __constant__
// table serialises divergent reads (the first H100 run measured the MXFP4 expert kernels at 0.15 TB/s).
__device__ __forceinline__ float kv_mxfp4(u32 c) {
    const u32 m = c & 7u;
    const u32 mag = m < 2u ? m : (2u + (m & 1u)) << ((m >> 1) - 1u);
    return (c & 8u) != 0u && mag != 0u ? -float(mag) : float(mag);
}
`,
	"q3_scale": `
// q3_scale is the unsigned 6-bit scale j of a Q3_K block: low 4 bits from nibbles of s[0:8], high 2 from s[8:12].
__device__ __forceinline__ int q3_scale(const u8* s, u32 j) {
    const u32 lo = j < 8 ? (s[j] & 15) : (s[j - 8] >> 4);
    const u32 hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return int(lo | (hi << 4));
}
`,
	"scale_min_k4": `
// scale_min_k4 is ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j of a Q4_K/Q5_K block.
__device__ __forceinline__ void scale_min_k4(u32 j, const u8* q, u32& sc, u32& mn) {
    if (j < 4) {
        sc = q[j] & 63;
        mn = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}
`,
}

// helperOrder fixes the order helpers appear in, so output is deterministic.
var helperOrder = []string{"ld_u32", "kv_mxfp4", "q3_scale", "scale_min_k4"}
