package arch

import (
	"fmt"
	"math"

	"github.com/minerva-llm/minerva/ir"
)

// gpt-oss constants that the reference engine (ik_llama.cpp, like llama.cpp)
// hard-codes rather than reads from the file.
const (
	gptossSwiGLUAlpha = 1.702 // σ(alpha·g) in the experts' gated activation
	gptossSwiGLULimit = 7.0   // gate clamped above, up clamped to ±limit
	yarnBetaFast      = 32.0
	yarnBetaSlow      = 1.0
)

// gptossSliding reports whether layer l uses the sliding window. The
// reference hard-codes the pattern (even layers slide) and reads no key for
// it.
func gptossSliding(l int) bool { return l%2 == 0 }

// buildGPTOSS lowers GGUF arch "gpt-oss" (GPT-OSS-20B/120B; ik_llama.cpp's
// LLM_ARCH_OPENAI_MOE) into one graph for prefill and decode:
//
//	x = embed(token_embd, tokens)                  (not scaled)
//	per layer: n = rmsnorm(x)·attn_norm
//	           q, k, v = W·n + b; rope(q), rope(k): NEOX pairs, YaRN
//	           a = attention(q, k, v) with a learned sink logit per head and,
//	               on even layers, a sliding window
//	           x += Wo·a + bo
//	           n = rmsnorm(x)·post_attention_norm
//	           r = topk_softmax(Wr·n + br)          (softmax over the chosen k)
//	           x += moe(n, r, experts)               (clamped SwiGLU, biases)
//	logits = output · (rmsnorm(x)·output_norm)
//
// The math follows ../shared/golden/README-gptoss.md, which was checked
// against the reference engine.
func buildGPTOSS(f File, opts Options) (*Model, error) {
	const name = "gpt-oss"
	m := &meta{f: f, arch: name}
	c := Config{Arch: name}
	c.NLayer = m.uint("block_count")
	c.ContextLength = m.uint("context_length")
	c.NEmbd = m.uint("embedding_length")
	c.NHead = m.uint("attention.head_count")
	c.RMSEps = m.float("attention.layer_norm_rms_epsilon")
	c.NFFExp = m.uint("expert_feed_forward_length")
	c.SlidingWindow = m.uint("attention.sliding_window")
	c.NExpert = m.uint("expert_count")
	c.NExpertUsed = m.uint("expert_used_count")
	c.NHeadKV = m.uintOr("attention.head_count_kv", c.NHead)
	c.RopeBase = m.floatOr("rope.freq_base", 10000)
	if m.err != nil {
		return nil, m.err
	}
	// As the reference: key and value lengths default to n_embd/n_head,
	// which is wrong for gpt-oss (n_head·head_dim ≠ n_embd), so real files
	// carry both keys; a file without them fails on the attn_q shape.
	if c.NEmbd%c.NHead != 0 {
		c.HeadDim = m.uint("attention.key_length")
		c.HeadDimV = m.uint("attention.value_length")
	} else {
		c.HeadDim = m.uintOr("attention.key_length", c.NEmbd/c.NHead)
		c.HeadDimV = m.uintOr("attention.value_length", c.NEmbd/c.NHead)
	}
	c.NRot = m.uintOr("rope.dimension_count", c.HeadDim)
	c.NFF = c.NFFExp
	if m.err != nil {
		return nil, m.err
	}
	switch {
	case c.NHead%c.NHeadKV != 0:
		return nil, fmt.Errorf("gpt-oss.attention.head_count %d is not a multiple of head_count_kv %d", c.NHead, c.NHeadKV)
	case c.NExpertUsed > c.NExpert:
		return nil, fmt.Errorf("gpt-oss.expert_used_count %d exceeds expert_count %d", c.NExpertUsed, c.NExpert)
	case c.NRot > c.HeadDim || c.NRot%2 != 0:
		return nil, fmt.Errorf("gpt-oss.rope.dimension_count %d must be even and at most the head size %d", c.NRot, c.HeadDim)
	case !(c.RMSEps > 0) || math.IsInf(c.RMSEps, 0):
		return nil, fmt.Errorf("gpt-oss.attention.layer_norm_rms_epsilon %v is not a positive number", c.RMSEps)
	case !(c.RopeBase > 0) || math.IsInf(c.RopeBase, 0):
		return nil, fmt.Errorf("gpt-oss.rope.freq_base %v is not a positive number", c.RopeBase)
	}
	if err := gptossRopeScaling(m, &c); err != nil {
		return nil, err
	}
	for l := 0; l < c.NLayer; l++ {
		if gptossSliding(l) {
			c.SlidingLayers = append(c.SlidingLayers, l)
		}
	}

	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) != 2 {
		return nil, fmt.Errorf("model file has no 2-D token_embd.weight")
	}
	c.NVocab = int(emb.Dims[1])
	if c.NVocab <= 0 || c.NVocab > 1<<24 {
		return nil, fmt.Errorf("token_embd.weight vocabulary size %d is out of range", emb.Dims[1])
	}
	vocab, err := f.Vocab()
	if err != nil {
		return nil, err
	}
	if err := checkVocab(f, len(vocab.Tokens), c.NVocab); err != nil {
		return nil, err
	}
	g, err := gptossGraph(f, c, opts)
	if err != nil {
		return nil, err
	}
	return &Model{Config: c, Graph: g, Vocab: vocab, Weights: &Weights{f: f}}, nil
}

// gptossRopeScaling reads the rope.scaling keys as the reference does: type
// yarn (gpt-oss), linear or none; factor gives freq_scale = 1/factor; YaRN
// also reads the original context (default: context_length) and an
// attention factor (default 1). The beta and ext_factor keys are not read:
// the reference fixes beta_fast 32, beta_slow 1 and ext_factor 1 for yarn.
func gptossRopeScaling(m *meta, c *Config) error {
	c.RopeFreqScale = 1
	c.RopeScaling = "none"
	if _, ok := m.f.Get(m.key("rope.scaling.type")); ok {
		s, ok := m.f.String(m.key("rope.scaling.type"))
		if !ok {
			return fmt.Errorf("model metadata %s is not a string", m.key("rope.scaling.type"))
		}
		c.RopeScaling = s
	}
	factor := m.floatOr("rope.scaling.factor", 0)
	c.RopeOrigCtx = m.uintOr("rope.scaling.original_context_length", c.ContextLength)
	c.RopeAttnFactor = m.floatOr("rope.scaling.attn_factor", 1)
	if m.err != nil {
		return m.err
	}
	switch c.RopeScaling {
	case "none":
		c.RopeOrigCtx, c.RopeAttnFactor = 0, 0
		return nil
	case "linear", "yarn":
	default:
		return fmt.Errorf("%s %q is not supported (none, linear, yarn)", m.key("rope.scaling.type"), c.RopeScaling)
	}
	if factor < 0 || math.IsNaN(factor) || math.IsInf(factor, 0) {
		return fmt.Errorf("%s %v is not a positive number", m.key("rope.scaling.factor"), factor)
	}
	if factor != 0 {
		c.RopeFreqScale = 1 / factor
	}
	if c.RopeScaling == "linear" {
		c.RopeOrigCtx, c.RopeAttnFactor = 0, 0
		return nil
	}
	if !(c.RopeAttnFactor > 0) || math.IsInf(c.RopeAttnFactor, 0) {
		return fmt.Errorf("%s %v is not a positive number", m.key("rope.scaling.attn_factor"), c.RopeAttnFactor)
	}
	return nil
}

// gptossRopeAttrs are the rope attributes of c: NEOX pairs, and for YaRN
// ext_factor 1 with ggml's fixed betas.
func gptossRopeAttrs(c Config) ir.Attrs {
	a := ir.Attrs{"head_dim": c.HeadDim, "n_rot": c.NRot, "base": c.RopeBase, "freq_scale": c.RopeFreqScale, "mode": "neox"}
	if c.RopeScaling == "yarn" {
		a["ext_factor"] = 1.0
		a["attn_factor"] = c.RopeAttnFactor
		a["beta_fast"] = yarnBetaFast
		a["beta_slow"] = yarnBetaSlow
		a["orig_ctx"] = c.RopeOrigCtx
	}
	return a
}

func gptossGraph(f File, c Config, opts Options) (*ir.Graph, error) {
	b := ir.NewBuilder("gpt-oss")
	qDim, kDim, vDim := c.NHead*c.HeadDim, c.NHeadKV*c.HeadDim, c.NHeadKV*c.HeadDimV
	var firstErr error
	w := func(name string, shape ...int) *ir.Value {
		v, err := weight(b, f, name, shape...)
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
	rope := gptossRopeAttrs(c)
	kcache := ir.Type{DType: opts.CacheType, Shape: ir.S("C", kDim)}
	vcache := ir.Type{DType: opts.VCacheType, Shape: ir.S("C", vDim)}
	act := ir.Attrs{"act": ir.MoEActSwiGLUOAI, "alpha": gptossSwiGLUAlpha, "limit": gptossSwiGLULimit}
	for l := 0; l < c.NLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		if _, fused := f.Tensor(p + "ffn_gate_up_exps.weight"); fused {
			if _, sep := f.Tensor(p + "ffn_gate_exps.weight"); !sep {
				return nil, fmt.Errorf("tensor %q (fused expert gate/up) is not supported yet: convert without the fuse option", p+"ffn_gate_up_exps.weight")
			}
		}
		n := b.RMSNorm(x, w(p+"attn_norm.weight", c.NEmbd), c.RMSEps)
		q := b.MatMul(n, w(p+"attn_q.weight", qDim, c.NEmbd), w(p+"attn_q.bias", qDim))
		k := b.MatMul(n, w(p+"attn_k.weight", kDim, c.NEmbd), w(p+"attn_k.bias", kDim))
		v := b.MatMul(n, w(p+"attn_v.weight", vDim, c.NEmbd), w(p+"attn_v.bias", vDim))
		q = b.RoPE(q, pos, rope)
		k = b.RoPE(k, pos, rope)
		kc := b.KVWrite(b.State(fmt.Sprintf("cache.%d.k", l), kcache), k, pos)
		vc := b.KVWrite(b.State(fmt.Sprintf("cache.%d.v", l), vcache), v, pos)
		attn := ir.Attrs{"n_head": c.NHead, "n_kv_head": c.NHeadKV, "head_dim": c.HeadDim, "scale": 1 / math.Sqrt(float64(c.HeadDim))}
		if gptossSliding(l) {
			attn["window"] = c.SlidingWindow
		}
		a := b.Attention(q, kc, vc, pos, w(p+"attn_sinks.weight", c.NHead), attn)
		x = b.AddV(x, b.MatMul(a, w(p+"attn_output.weight", c.NEmbd, c.NHead*c.HeadDimV), w(p+"attn_output.bias", c.NEmbd)))

		n = b.RMSNorm(x, w(p+"post_attention_norm.weight", c.NEmbd), c.RMSEps)
		logits := b.MatMul(n, w(p+"ffn_gate_inp.weight", c.NExpert, c.NEmbd), w(p+"ffn_gate_inp.bias", c.NExpert))
		route := b.TopKSoftmax(logits, c.NExpertUsed)
		experts := ir.MoEWeights{
			Gate:     w(p+"ffn_gate_exps.weight", c.NExpert, c.NFFExp, c.NEmbd),
			Up:       w(p+"ffn_up_exps.weight", c.NExpert, c.NFFExp, c.NEmbd),
			Down:     w(p+"ffn_down_exps.weight", c.NExpert, c.NEmbd, c.NFFExp),
			GateBias: w(p+"ffn_gate_exps.bias", c.NExpert, c.NFFExp),
			UpBias:   w(p+"ffn_up_exps.bias", c.NExpert, c.NFFExp),
			DownBias: w(p+"ffn_down_exps.bias", c.NExpert, c.NEmbd),
		}
		if firstErr != nil {
			return nil, firstErr
		}
		x = b.AddV(x, b.MoE(n, route, experts, act))
		b.Output(fmt.Sprintf("cache.%d.k", l), kc)
		b.Output(fmt.Sprintf("cache.%d.v", l), vc)
	}
	x = b.RMSNorm(x, w("output_norm.weight", c.NEmbd), c.RMSEps)
	out := w("output.weight", c.NVocab, c.NEmbd)
	if firstErr != nil {
		return nil, firstErr
	}
	b.Output("logits", b.MatMul(x, out, nil))
	g, err := b.Finish()
	if err != nil {
		return nil, err
	}
	// The goldens' engine (ik_llama.cpp) rounds the activations of its
	// Q8_0 and MXFP4 matmuls with its Q8_2 recipe, not ggml's Q8_0 one; a
	// backend that quantizes activations follows this to match it.
	if g.Attrs == nil {
		g.Attrs = ir.Attrs{}
	}
	g.Attrs[ir.AttrActRounding] = ir.ActRoundingQ8_2
	return g, nil
}

// float reads a required float.
func (m *meta) float(k string) float64 {
	v, ok := m.f.Float(m.key(k))
	if !ok {
		m.fail("model metadata %s is missing or not a number", m.key(k))
	}
	return v
}
