package arch

// qwen2: Qwen2 and Qwen2.5. As llama, with the q/k/v biases required and
// NEOX RoPE (the converter keeps q/k as transformers' rotate-half layout).
var qwen2 = &decoder{
	arch:     "qwen2",
	ropeMode: "neox",
	biases:   required,
	output:   optional,
}

func init() { builders["qwen2"] = qwen2.build }
