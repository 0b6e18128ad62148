package synth

import (
	"fmt"
	"strings"

	"github.com/minerva-llm/minerva/ir"
)

// kquantMixes are llama.cpp's mixed k-quant presets (llama_tensor_get_type
// for LLAMA_FTYPE_MOSTLY_Q{3,4,5}_K_M) by --quant name, with their base
// dtype.
var kquantMixes = map[string]ir.DType{"q3_k_m": ir.Q3_K, "q4_k_m": ir.Q4_K, "q5_k_m": ir.Q5_K}

// KQuantMixes lists the mixed presets KQuantMix knows, sorted.
func KQuantMixes() []string { return []string{"q3_k_m", "q4_k_m", "q5_k_m"} }

// useMoreBits is llama.cpp's use_more_bits: the first and last eighth of
// the layers and every third one between get the larger type.
func useMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// KQuantMix returns the base dtype of the named mixed preset (q4_k_m,
// q5_k_m or q3_k_m) and the dtype of each 2-D weight of an nLayer-layer
// model by tensor name, as llama.cpp's quantizer picks them for a llama,
// qwen or phi3 model: output.weight Q6_K; attn_v and ffn_down Q6_K in the
// layers useMoreBits picks (Q4_K_M, Q5_K_M), or for Q3_K_M attn_v Q5_K in
// the first two layers and Q4_K after, ffn_down Q5_K in the first
// sixteenth and Q4_K after, attn_output Q4_K; a fused attn_qkv one step up
// (Q4_K, Q5_K, Q6_K); everything else the base type.
func KQuantMix(name string, nLayer int) (ir.DType, func(tensor string) ir.DType, error) {
	base, ok := kquantMixes[name]
	if !ok {
		return 0, nil, fmt.Errorf("unknown mix %q (mixes: %s)", name, strings.Join(KQuantMixes(), ", "))
	}
	return base, func(tensor string) ir.DType {
		if tensor == "output.weight" {
			return ir.Q6_K
		}
		var layer int
		var kind string
		if _, err := fmt.Sscanf(tensor, "blk.%d.%s", &layer, &kind); err != nil {
			return base
		}
		switch strings.TrimSuffix(kind, ".weight") {
		case "attn_v":
			if base == ir.Q3_K {
				return map[bool]ir.DType{true: ir.Q5_K, false: ir.Q4_K}[layer < 2]
			}
			if useMoreBits(layer, nLayer) {
				return ir.Q6_K
			}
		case "ffn_down":
			if base == ir.Q3_K {
				return map[bool]ir.DType{true: ir.Q5_K, false: ir.Q4_K}[layer < nLayer/16]
			}
			if useMoreBits(layer, nLayer) {
				return ir.Q6_K
			}
		case "attn_output":
			if base == ir.Q3_K {
				return ir.Q4_K
			}
		case "attn_qkv":
			return map[ir.DType]ir.DType{ir.Q3_K: ir.Q4_K, ir.Q4_K: ir.Q5_K, ir.Q5_K: ir.Q6_K}[base]
		}
		return base
	}, nil
}
