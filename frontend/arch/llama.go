package arch

import (
	"fmt"
	"math"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
)

// buildLlama lowers the llama family (Llama 1/2/3, TinyLlama, Mistral, and
// llama2.c conversions such as stories260K) into one graph for prefill and
// decode:
//
//	x = embed(token_embd, tokens)
//	per layer: x += o(attention(rope(q(n)), rope(k(n)) → cache, v(n) → cache)), n = rmsnorm(x)
//	           x += down(silu(gate(n)) · up(n)),                                n = rmsnorm(x)
//	logits = output(rmsnorm(x))        (output = token_embd when tied)
//
// GGUF stores q and k permuted for the "normal" (adjacent pairs) RoPE layout.
func buildLlama(f *gguf.File, opts Options) (*Model, error) {
	m := &meta{f: f, arch: "llama"}
	c := Config{Arch: "llama"}
	c.NLayer = m.uint("block_count")
	c.NEmbd = m.uint("embedding_length")
	c.NFF = m.uint("feed_forward_length")
	c.NHead = m.uint("attention.head_count")
	c.NHeadKV = m.uintOr("attention.head_count_kv", c.NHead)
	c.ContextLength = m.uintOr("context_length", 2048)
	c.RMSEps = m.floatOr("attention.layer_norm_rms_epsilon", 1e-5)
	c.RopeBase = m.floatOr("rope.freq_base", 10000)
	// As llama.cpp: the factor is rope.scaling.factor, else the older
	// rope.scale_linear; the scaling type defaults to "linear", and "none"
	// means no scaling whatever the factor. Other types (yarn, longrope)
	// change more than the frequency scale, so they are refused rather than
	// silently run as linear.
	c.RopeFreqScale = 1
	factor := m.floatOr("rope.scaling.factor", 0)
	if factor == 0 {
		factor = m.floatOr("rope.scale_linear", 0)
	}
	scaling := "linear"
	if _, ok := f.Get("llama.rope.scaling.type"); ok {
		if scaling, ok = f.String("llama.rope.scaling.type"); !ok {
			m.fail("model metadata llama.rope.scaling.type is not a string")
		}
	}
	switch {
	case m.err != nil:
		return nil, m.err
	case scaling == "none":
	case scaling != "linear":
		return nil, fmt.Errorf("llama.rope.scaling.type %q is not supported (none, linear)", scaling)
	case factor < 0 || math.IsNaN(factor) || math.IsInf(factor, 0):
		return nil, fmt.Errorf("llama rope scaling factor %v is not a positive number", factor)
	case factor != 0:
		c.RopeFreqScale = 1 / factor
	}
	if c.NEmbd%c.NHead != 0 {
		return nil, fmt.Errorf("llama.embedding_length %d is not a multiple of llama.attention.head_count %d", c.NEmbd, c.NHead)
	}
	if c.NHead%c.NHeadKV != 0 {
		return nil, fmt.Errorf("llama.attention.head_count %d is not a multiple of head_count_kv %d", c.NHead, c.NHeadKV)
	}
	c.HeadDim = m.uintOr("attention.key_length", c.NEmbd/c.NHead)
	c.NRot = m.uintOr("rope.dimension_count", c.HeadDim)
	if m.err != nil {
		return nil, m.err
	}
	if c.NRot > c.HeadDim || c.NRot%2 != 0 {
		return nil, fmt.Errorf("llama.rope.dimension_count %d must be even and at most the head size %d", c.NRot, c.HeadDim)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) != 2 {
		return nil, fmt.Errorf("model file has no 2-D token_embd.weight")
	}
	c.NVocab = int(emb.Dims[1])
	if c.NVocab <= 0 || c.NVocab > 1<<24 {
		return nil, fmt.Errorf("token_embd.weight vocabulary size %d is out of range", emb.Dims[1])
	}
	if v, ok := f.Get("llama.vocab_size"); ok {
		// llama.cpp sizes token_embd.weight from this key when present.
		if n, ok := v.Uint(); !ok || n != uint64(c.NVocab) {
			return nil, fmt.Errorf("llama.vocab_size = %s does not match the %d rows of token_embd.weight", v, c.NVocab)
		}
	}
	_, hasOutput := f.Tensor("output.weight")
	c.TiedOutput = !hasOutput

	vocab, err := LoadVocab(f)
	if err != nil {
		return nil, err
	}
	if len(vocab.Tokens) != c.NVocab {
		return nil, fmt.Errorf("tokenizer has %d tokens but token_embd.weight has %d rows", len(vocab.Tokens), c.NVocab)
	}

	g, err := llamaGraph(f, c, opts)
	if err != nil {
		return nil, err
	}
	return &Model{Config: c, Graph: g, Vocab: vocab, Weights: &Weights{f: f}}, nil
}

func llamaGraph(f *gguf.File, c Config, opts Options) (*ir.Graph, error) {
	b := ir.NewBuilder("llama")
	qDim, kvDim := c.NHead*c.HeadDim, c.NHeadKV*c.HeadDim
	var firstErr error
	w := func(name string, shape ...int) *ir.Value {
		v, err := weight(b, f, name, shape...)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return v
	}
	bias := func(name string, n int) *ir.Value {
		v, err := optionalWeight(b, f, name, n)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return v
	}

	tokens := b.Input("tokens", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	pos := b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	embd := w("token_embd.weight", c.NVocab, c.NEmbd)
	if firstErr != nil {
		return nil, firstErr
	}
	x := b.Embed(embd, tokens)
	rope := ir.Attrs{"head_dim": c.HeadDim, "n_rot": c.NRot, "base": c.RopeBase, "freq_scale": c.RopeFreqScale, "mode": "normal"}
	attn := ir.Attrs{"n_head": c.NHead, "n_kv_head": c.NHeadKV, "head_dim": c.HeadDim, "scale": 1 / math.Sqrt(float64(c.HeadDim))}
	cache := ir.Type{DType: opts.CacheType, Shape: ir.S("C", kvDim)}
	vcache := ir.Type{DType: opts.VCacheType, Shape: ir.S("C", kvDim)}
	for l := 0; l < c.NLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		n := b.RMSNorm(x, w(p+"attn_norm.weight", c.NEmbd), c.RMSEps)
		q := b.MatMul(n, w(p+"attn_q.weight", qDim, c.NEmbd), bias(p+"attn_q.bias", qDim))
		k := b.MatMul(n, w(p+"attn_k.weight", kvDim, c.NEmbd), bias(p+"attn_k.bias", kvDim))
		v := b.MatMul(n, w(p+"attn_v.weight", kvDim, c.NEmbd), bias(p+"attn_v.bias", kvDim))
		q = b.RoPE(q, pos, rope)
		k = b.RoPE(k, pos, rope)
		kc := b.KVWrite(b.State(fmt.Sprintf("cache.%d.k", l), cache), k, pos)
		vc := b.KVWrite(b.State(fmt.Sprintf("cache.%d.v", l), vcache), v, pos)
		a := b.Attention(q, kc, vc, pos, nil, attn)
		x = b.AddV(x, b.MatMul(a, w(p+"attn_output.weight", c.NEmbd, qDim), bias(p+"attn_output.bias", c.NEmbd)))
		n = b.RMSNorm(x, w(p+"ffn_norm.weight", c.NEmbd), c.RMSEps)
		gate := b.SiLU(b.MatMul(n, w(p+"ffn_gate.weight", c.NFF, c.NEmbd), nil))
		up := b.MatMul(n, w(p+"ffn_up.weight", c.NFF, c.NEmbd), nil)
		x = b.AddV(x, b.MatMul(b.Mul(gate, up), w(p+"ffn_down.weight", c.NEmbd, c.NFF), nil))
		b.Output(fmt.Sprintf("cache.%d.k", l), kc)
		b.Output(fmt.Sprintf("cache.%d.v", l), vc)
		if firstErr != nil {
			return nil, firstErr
		}
	}
	x = b.RMSNorm(x, w("output_norm.weight", c.NEmbd), c.RMSEps)
	out := embd
	if !c.TiedOutput {
		out = w("output.weight", c.NVocab, c.NEmbd)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	b.Output("logits", b.MatMul(x, out, nil))
	return b.Finish()
}
