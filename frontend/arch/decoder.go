package arch

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/minerva-llm/minerva/ir"
)

// decoder describes a llama-like decoder family: pre-norm attention with
// RoPE and a KV cache, then a SwiGLU feed-forward, each added back to the
// residual stream. A family file (llama.go, qwen2.go, qwen3.go, phi3.go)
// fills one in and registers buildDecoder with it; what differs between
// them is listed here and nowhere else.
type decoder struct {
	arch string
	// ropeMode is "normal" (adjacent pairs: GGUF stores llama q/k permuted
	// for it) or "neox" (pairs i, i+n_rot/2).
	ropeMode string
	// biases: whether attn_q/k/v carry biases — optional (llama files may),
	// required (qwen2) or refused (an unexpected bias is a tensor the
	// family does not consume).
	biases rule
	// outBias: whether attn_output may carry a bias (llama conversions).
	outBias rule
	// qkNorm: attn_q_norm and attn_k_norm [head_dim] normalise each head
	// of q and k before RoPE (qwen3).
	qkNorm bool
	// fusedQKV: one attn_qkv [q; k; v] instead of attn_q/k/v; fusedUp:
	// ffn_up holds [gate; up] and there is no ffn_gate (phi3). The graph
	// consumes them fused (qkv_rope, swiglu), so they are not copied.
	fusedQKV, fusedUp bool
	// window: attention.sliding_window applies to every layer (phi3).
	window rule
	// ropeScaling: the rope.scaling.* keys (linear) and the rope_freqs
	// tensor of Llama 3.1 are read.
	ropeScaling bool
	// output: whether output.weight may be absent (tied to token_embd).
	output rule
	// headDimFree: attention.key_length may make n_head·head_dim differ
	// from n_embd (qwen3).
	headDimFree bool
}

// rule is how a family treats an optional part of the layout.
type rule int

const (
	refused rule = iota
	optional
	required
)

func (d *decoder) build(f File, opts Options) (*Model, error) {
	a := d.arch
	m := &meta{f: f, arch: a}
	c := Config{Arch: a}
	c.NLayer = m.uint("block_count")
	c.NEmbd = m.uint("embedding_length")
	c.NFF = m.uint("feed_forward_length")
	c.NHead = m.uint("attention.head_count")
	c.NHeadKV = m.uintOr("attention.head_count_kv", c.NHead)
	c.ContextLength = m.uintOr("context_length", 2048)
	c.RMSEps = m.floatOr("attention.layer_norm_rms_epsilon", 1e-5)
	c.RopeBase = m.floatOr("rope.freq_base", 10000)
	c.RopeFreqScale = 1
	switch d.window {
	case required:
		c.SlidingWindow = m.uint("attention.sliding_window")
	case refused:
		if _, ok := f.Get(m.key("attention.sliding_window")); ok {
			return nil, fmt.Errorf("model metadata %s is not supported for %s (no sliding window in this family)", m.key("attention.sliding_window"), a)
		}
	}
	if m.err != nil {
		return nil, m.err
	}
	if err := d.ropeScalingKeys(f, m, &c); err != nil {
		return nil, err
	}
	if c.NHead%c.NHeadKV != 0 {
		return nil, fmt.Errorf("%s.attention.head_count %d is not a multiple of head_count_kv %d", a, c.NHead, c.NHeadKV)
	}
	if !d.headDimFree || !hasKey(f, m.key("attention.key_length")) {
		if c.NEmbd%c.NHead != 0 {
			return nil, fmt.Errorf("%s.embedding_length %d is not a multiple of %s.attention.head_count %d", a, c.NEmbd, a, c.NHead)
		}
	}
	c.HeadDim = m.uintOr("attention.key_length", c.NEmbd/c.NHead)
	if v := m.uintOr("attention.value_length", c.HeadDim); m.err == nil && v != c.HeadDim {
		return nil, fmt.Errorf("%s.attention.value_length %d differs from key_length %d, which %s does not support", a, v, c.HeadDim, a)
	}
	if !d.headDimFree && c.HeadDim*c.NHead != c.NEmbd {
		return nil, fmt.Errorf("%s.attention.key_length %d times head_count %d is not embedding_length %d", a, c.HeadDim, c.NHead, c.NEmbd)
	}
	c.NRot = m.uintOr("rope.dimension_count", c.HeadDim)
	if m.err != nil {
		return nil, m.err
	}
	if c.NRot > c.HeadDim || c.NRot%2 != 0 {
		return nil, fmt.Errorf("%s.rope.dimension_count %d must be even and at most the head size %d", a, c.NRot, c.HeadDim)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) != 2 {
		return nil, fmt.Errorf("model file has no 2-D token_embd.weight")
	}
	c.NVocab = int(emb.Dims[1])
	if c.NVocab <= 0 || c.NVocab > 1<<24 {
		return nil, fmt.Errorf("token_embd.weight vocabulary size %d is out of range", emb.Dims[1])
	}
	if v, ok := f.Get(m.key("vocab_size")); ok {
		// llama.cpp sizes token_embd.weight from this key when present.
		if n, ok := v.Uint(); !ok || n != uint64(c.NVocab) {
			return nil, fmt.Errorf("%s = %s does not match the %d rows of token_embd.weight", m.key("vocab_size"), v, c.NVocab)
		}
	}
	_, hasOutput := f.Tensor("output.weight")
	c.TiedOutput = !hasOutput
	if c.TiedOutput && d.output == required {
		return nil, fmt.Errorf("model file has no tensor \"output.weight\" (%s does not tie it to token_embd)", a)
	}

	vocab, err := f.Vocab()
	if err != nil {
		return nil, err
	}
	if err := checkVocab(f, len(vocab.Tokens), c.NVocab); err != nil {
		return nil, err
	}
	g, err := d.graph(f, c, opts)
	if err != nil {
		return nil, err
	}
	return &Model{Config: c, Graph: g, Vocab: vocab, Weights: &Weights{f: f}}, nil
}

func hasKey(f File, k string) bool { _, ok := f.Get(k); return ok }

// ropeScalingKeys reads the rope.scaling keys as llama.cpp does: the factor
// is rope.scaling.factor, else the older rope.scale_linear; the type
// defaults to "linear", and "none" means no scaling whatever the factor.
// Other types (yarn, longrope) change more than the frequency scale, so
// they are refused rather than silently run as linear; so is any scaling
// key in a family that reads none.
func (d *decoder) ropeScalingKeys(f File, m *meta, c *Config) error {
	keys := []string{"rope.scaling.factor", "rope.scale_linear", "rope.scaling.type"}
	if !d.ropeScaling {
		// A family that reads no scaling keys refuses any that would scale.
		for _, k := range keys {
			v, ok := f.Get(m.key(k))
			if !ok {
				continue
			}
			if x, isNum := v.Float(); isNum && x != 0 && x != 1 {
				return fmt.Errorf("model metadata %s = %v is not supported for %s", m.key(k), x, d.arch)
			}
			if s, isStr := v.Str(); isStr && s != "none" && s != "linear" {
				return fmt.Errorf("model metadata %s = %q is not supported for %s", m.key(k), s, d.arch)
			}
		}
		return nil
	}
	factor := m.floatOr("rope.scaling.factor", 0)
	if factor == 0 {
		factor = m.floatOr("rope.scale_linear", 0)
	}
	scaling := "linear"
	if _, ok := f.Get(m.key("rope.scaling.type")); ok {
		if scaling, ok = f.String(m.key("rope.scaling.type")); !ok {
			m.fail("model metadata %s is not a string", m.key("rope.scaling.type"))
		}
	}
	switch {
	case m.err != nil:
		return m.err
	case scaling == "none":
	case scaling != "linear":
		return fmt.Errorf("%s %q is not supported (none, linear)", m.key("rope.scaling.type"), scaling)
	case factor < 0 || math.IsNaN(factor) || math.IsInf(factor, 0):
		return fmt.Errorf("%s rope scaling factor %v is not a positive number", d.arch, factor)
	case factor != 0:
		c.RopeFreqScale = 1 / factor
	}
	return nil
}

// graph builds the one graph for prefill and decode:
//
//	x = embed(token_embd, tokens)
//	per layer: n = rmsnorm(x)·attn_norm
//	           q, k, v = W·n (+ b); per-head norms of q and k (qwen3)
//	           x += o(attention(rope(q), rope(k) → cache, v → cache))
//	           n = rmsnorm(x)·ffn_norm
//	           x += down(silu(gate(n)) · up(n))
//	logits = output(rmsnorm(x)·output_norm)   (output = token_embd when tied)
//
// A fused attn_qkv becomes qkv_rope over the stored weight and a fused
// ffn_up becomes swiglu over it: the ops the fusion passes would have made,
// so the weights are used as stored.
func (d *decoder) graph(f File, c Config, opts Options) (*ir.Graph, error) {
	b := ir.NewBuilder(d.arch)
	qDim, kvDim := c.NHead*c.HeadDim, c.NHeadKV*c.HeadDim
	var firstErr error
	keep := func(v *ir.Value, err error) *ir.Value {
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return v
	}
	w := func(name string, shape ...int) *ir.Value { return keep(weight(b, f, name, shape...)) }
	bias := func(name string, n int, r rule) *ir.Value {
		switch r {
		case required:
			return w(name, n)
		case optional:
			return keep(optionalWeight(b, f, name, n))
		}
		return nil
	}

	tokens := b.Input("tokens", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	pos := b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	embd := w("token_embd.weight", c.NVocab, c.NEmbd)
	if firstErr != nil {
		return nil, firstErr
	}
	x := b.Embed(embd, tokens)
	mode := d.ropeMode
	if mode == "normal" && f.Layout().RotateHalf {
		// q/k rows in rotate-half order (Layout.RotateHalf): NEOX RoPE
		// pairs i with i + n_rot/2, the pairs GGUF's permutation would
		// have made adjacent, so this is the same rotation.
		mode = "neox"
	}
	rope := ir.Attrs{"head_dim": c.HeadDim, "n_rot": c.NRot, "base": c.RopeBase, "freq_scale": c.RopeFreqScale, "mode": mode}
	if d.ropeScaling {
		factors, err := ropeFreqs(f, c.NRot)
		if err != nil {
			return nil, err
		}
		if factors != nil {
			rope["freq_factors"] = factors
		}
	}
	attn := ir.Attrs{"n_head": c.NHead, "n_kv_head": c.NHeadKV, "head_dim": c.HeadDim, "scale": 1 / math.Sqrt(float64(c.HeadDim))}
	if c.SlidingWindow > 0 {
		attn["window"] = c.SlidingWindow
	}
	cache := ir.Type{DType: opts.CacheType, Shape: ir.S("C", kvDim)}
	vcache := ir.Type{DType: opts.VCacheType, Shape: ir.S("C", kvDim)}
	for l := 0; l < c.NLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		n := b.RMSNorm(x, w(p+"attn_norm.weight", c.NEmbd), c.RMSEps)
		kst := b.State(fmt.Sprintf("cache.%d.k", l), cache)
		vst := b.State(fmt.Sprintf("cache.%d.v", l), vcache)
		var q, kc, vc *ir.Value
		if d.fusedQKV {
			qa, err := rope.Clone()
			if err != nil {
				return nil, err
			}
			qa["n_head"], qa["n_kv_head"] = int64(c.NHead), int64(c.NHeadKV)
			q = b.Add(ir.OpQKVRoPE, qa, nil, n, w(p+"attn_qkv.weight", qDim+2*kvDim, c.NEmbd), pos, kst, vst)
			kc, vc = kst, vst
		} else {
			q = b.MatMul(n, w(p+"attn_q.weight", qDim, c.NEmbd), bias(p+"attn_q.bias", qDim, d.biases))
			k := b.MatMul(n, w(p+"attn_k.weight", kvDim, c.NEmbd), bias(p+"attn_k.bias", kvDim, d.biases))
			v := b.MatMul(n, w(p+"attn_v.weight", kvDim, c.NEmbd), bias(p+"attn_v.bias", kvDim, d.biases))
			if d.qkNorm {
				q = d.headNorm(b, q, w(p+"attn_q_norm.weight", c.HeadDim), c.NHead, c.HeadDim, c.RMSEps)
				k = d.headNorm(b, k, w(p+"attn_k_norm.weight", c.HeadDim), c.NHeadKV, c.HeadDim, c.RMSEps)
			}
			q = b.RoPE(q, pos, rope)
			k = b.RoPE(k, pos, rope)
			kc = b.KVWrite(kst, k, pos)
			vc = b.KVWrite(vst, v, pos)
		}
		if firstErr != nil {
			return nil, firstErr
		}
		a := b.Attention(q, kc, vc, pos, nil, attn)
		x = b.AddV(x, b.MatMul(a, w(p+"attn_output.weight", c.NEmbd, qDim), bias(p+"attn_output.bias", c.NEmbd, d.outBias)))
		n = b.RMSNorm(x, w(p+"ffn_norm.weight", c.NEmbd), c.RMSEps)
		var h *ir.Value
		if d.fusedUp {
			h = b.Add(ir.OpSwiGLU, nil, nil, n, w(p+"ffn_up.weight", 2*c.NFF, c.NEmbd))
		} else {
			gate := b.SiLU(b.MatMul(n, w(p+"ffn_gate.weight", c.NFF, c.NEmbd), nil))
			up := b.MatMul(n, w(p+"ffn_up.weight", c.NFF, c.NEmbd), nil)
			h = b.Mul(gate, up)
		}
		x = b.AddV(x, b.MatMul(h, w(p+"ffn_down.weight", c.NEmbd, c.NFF), nil))
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

// headNorm RMS-normalises each head of the [T, heads·hd] rows x and scales
// it by gain [hd]: reshape to heads, rmsnorm, reshape back (fuse-qkv folds
// the three into qkv_rope).
func (d *decoder) headNorm(b *ir.Builder, x, gain *ir.Value, heads, hd int, eps float64) *ir.Value {
	split := b.Reshape(x, ir.S("T", heads, hd))
	return b.Reshape(b.RMSNorm(split, gain, eps), ir.S("T", heads*hd))
}

// ropeFreqs reads Llama 3.1's rope_freqs.weight: one F32 divisor per
// rotated pair. Absent, nil.
func ropeFreqs(f File, nrot int) ([]float64, error) {
	t, ok := f.Tensor("rope_freqs.weight")
	if !ok {
		return nil, nil
	}
	if t.Type != ir.F32 || len(t.Dims) != 1 || t.Dims[0] != uint64(nrot/2) {
		return nil, fmt.Errorf("tensor \"rope_freqs.weight\" is %s %v, want f32 [%d] (one factor per rotated pair)", t.Type, t.Dims, nrot/2)
	}
	raw, err := f.WeightBytes("rope_freqs.weight")
	if err != nil {
		return nil, err
	}
	out := make([]float64, nrot/2)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		if !(out[i] > 0) || math.IsInf(out[i], 0) {
			return nil, fmt.Errorf("rope_freqs.weight[%d] = %v is not a positive number", i, out[i])
		}
	}
	return out, nil
}
