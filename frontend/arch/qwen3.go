package arch

// qwen3: Qwen3 (dense). No biases; every head of q and k is RMS-normalised
// and scaled by attn_q_norm / attn_k_norm before NEOX RoPE; head_dim comes
// from attention.key_length, so n_head·head_dim may differ from n_embd.
var qwen3 = &decoder{
	arch:        "qwen3",
	ropeMode:    "neox",
	qkNorm:      true,
	output:      optional,
	headDimFree: true,
}

func init() { builders["qwen3"] = qwen3.build }
