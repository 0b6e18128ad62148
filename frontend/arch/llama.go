package arch

// llama: Llama 1/2/3, TinyLlama, Mistral and llama2.c conversions such as
// stories260K. GGUF stores q and k permuted for the "normal" (adjacent
// pairs) RoPE layout. Biases are optional (some conversions carry them);
// Llama 3.1+ files carry rope_freqs.weight, one divisor per frequency.
var llama = &decoder{
	arch:        "llama",
	ropeMode:    "normal",
	biases:      optional,
	outBias:     optional,
	ropeScaling: true,
	output:      optional,
	headDimFree: false,
}

func init() { builders["llama"] = llama.build }
