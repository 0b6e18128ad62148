package arch

// phi3: Phi-3 and Phi-3.5 (mini, medium). One attn_qkv [q; k; v] and one
// ffn_up [gate; up], consumed fused as stored; NEOX RoPE; the sliding
// window (attention.sliding_window) applies to every layer and is
// required; output.weight is not tied. Phi-3 "128k" files carry LongRoPE
// factors (rope_factors_long/short), which this family does not read, so
// they are refused as unconsumed tensors.
var phi3 = &decoder{
	arch:     "phi3",
	ropeMode: "neox",
	fusedQKV: true,
	fusedUp:  true,
	window:   required,
	output:   required,
}

func init() { builders["phi3"] = phi3.build }
