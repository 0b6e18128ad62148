package hf

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir/rope"
)

// family is a transformers model class this package reads, and the
// frontend/arch family (GGUF general.architecture) that builds its graph.
// The defaults are transformers' own for a key the config leaves out.
type family struct {
	class     string // e.g. "LlamaForCausalLM"
	modelType string // config.json model_type, for configs without architectures
	arch      string // the GGUF family
	rmsEps    float64
	maxPos    int
	// headDim is head_dim's default; 0 means hidden_size/num_attention_heads.
	headDim int
	// qkvBias: q/k/v projections always carry biases (Qwen2).
	qkvBias bool
	// qkNorm: per-head q_norm/k_norm (Qwen3).
	qkNorm bool
	// fused: qkv_proj [q; k; v] and gate_up_proj [gate; up] (Phi-3).
	fused bool
	// attentionBias: config key attention_bias puts biases on q, k, v and
	// o (Llama); a family without it refuses the key set true.
	attentionBias bool
	// ropeScaling: rope_scaling linear and llama3 are read (Llama,
	// Mistral); the other families refuse any scaling.
	ropeScaling bool
	// window: how sliding_window is read (see windowRule).
	window windowRule
	// translate reads config.json for a family whose config is not a
	// llama-like decoder's (gpt-oss); nil: the shared translate.
	translate func(c *config, fam *family, dirName string) (*spec, error)
}

// windowRule is how a family's config states a sliding window.
type windowRule int

const (
	// windowAlways: sliding_window applies whenever it is set (Mistral).
	windowAlways windowRule = iota
	// windowFlag: only with use_sliding_window true (Qwen2, Qwen3).
	windowFlag
	// windowRequired: the graph applies it on every layer (Phi-3); null
	// means no window.
	windowRequired
)

var families = []*family{
	{class: "LlamaForCausalLM", modelType: "llama", arch: "llama", rmsEps: 1e-6, maxPos: 2048, attentionBias: true, ropeScaling: true},
	{class: "MistralForCausalLM", modelType: "mistral", arch: "llama", rmsEps: 1e-6, maxPos: 4096 * 32, ropeScaling: true},
	{class: "Qwen2ForCausalLM", modelType: "qwen2", arch: "qwen2", rmsEps: 1e-6, maxPos: 32768, qkvBias: true, window: windowFlag},
	{class: "Qwen3ForCausalLM", modelType: "qwen3", arch: "qwen3", rmsEps: 1e-6, maxPos: 32768, headDim: 128, qkNorm: true, window: windowFlag},
	{class: "Phi3ForCausalLM", modelType: "phi3", arch: "phi3", rmsEps: 1e-5, maxPos: 4096, fused: true, window: windowRequired},
	{class: "GptOssForCausalLM", modelType: "gpt_oss", arch: "gpt-oss", rmsEps: 1e-5, maxPos: 131072, translate: translateGPTOSS},
}

// supported names the classes, for messages.
func supported() string {
	var names []string
	for _, f := range families {
		names = append(names, f.class)
	}
	return strings.Join(names, ", ")
}

// findFamily picks the family from architectures[0], or from model_type
// when the config has no architectures (the tiny_qwen3 fixtures).
func findFamily(c *config) (*family, error) {
	class := ""
	if c.has("architectures") {
		var list []string
		if err := json.Unmarshal(c.raw["architectures"], &list); err != nil || len(list) == 0 {
			return nil, fmt.Errorf("%s: architectures is %s, not a list of class names", c.path, describe(c.raw["architectures"]))
		}
		class = list[0]
	}
	mt := c.str("model_type")
	if c.err != nil {
		return nil, c.err
	}
	for _, f := range families {
		if class == f.class || class == "" && mt == f.modelType {
			return f, nil
		}
	}
	name := class
	if name == "" {
		name = "model_type " + mt
	}
	switch {
	case class == "" && mt == "":
		return nil, fmt.Errorf("%s: neither architectures nor model_type says what model this is", c.path)
	}
	return nil, fmt.Errorf("%s: unsupported architecture %s (supported: %s)", c.path, name, supported())
}

// dim is one expected dimension of a tensor and the config keys it comes
// from, for messages.
type dim struct {
	n   int
	why string
}

func (d dim) String() string { return fmt.Sprintf("%d (%s)", d.n, d.why) }

// slot is a tensor the family's graph reads, under its HF name.
type slot struct {
	gguf  string
	shape []dim
	need  bool // required; otherwise optional
}

// spec is what a config.json says of a model: the GGUF metadata the arch
// builder reads, and the tensors the graph expects with their shapes.
type spec struct {
	fam   *family
	meta  map[string]gguf.Value
	slots map[string]slot // by HF tensor name
	// skip are tensors that are in the file but not read, each for a
	// stated reason (a tied lm_head, rotary_emb buffers).
	skip map[string]string
	// ropeFreqs is the Llama 3.1 rope_freqs tensor made from rope_scaling
	// (nil when there is none), as llama.cpp's converter makes it.
	ropeFreqs []float32
	tied      bool
	// experts are gpt-oss's experts, whose tensors depend on the layout
	// (resolveExperts); nil for the other families.
	experts *gptossExperts
}

// translate reads config.json for family fam into GGUF terms. Each key that
// changes the math is read or refused here; hyperparameters the arch
// builder then checks among themselves (GQA divisibility, head sizes) are
// checked again there.
func translate(c *config, fam *family, dirName string) (*spec, error) {
	if fam.translate != nil {
		return fam.translate(c, fam, dirName)
	}
	a := fam.arch
	s := &spec{fam: fam, meta: map[string]gguf.Value{}, slots: map[string]slot{}, skip: map[string]string{}}
	set := func(k string, v gguf.Value) { s.meta[a+"."+k] = v }
	u32 := func(n int) gguf.Value { return gguf.Uint32(uint32(n)) }

	layers := c.int("num_hidden_layers")
	hidden := c.int("hidden_size")
	ff := c.int("intermediate_size")
	heads := c.int("num_attention_heads")
	vocab := c.int("vocab_size")
	kv := c.intOr("num_key_value_heads", heads)
	hdDefault := fam.headDim
	if hdDefault == 0 && heads > 0 {
		hdDefault = hidden / heads
	}
	hd := c.intOr("head_dim", hdDefault)
	ctx := c.intOr("max_position_embeddings", fam.maxPos)
	// float32, as llama.cpp's converter writes them: the graph of a
	// directory and of its GGUF conversion then use the same eps and base.
	eps := c.floatOr("rms_norm_eps", fam.rmsEps)
	theta := c.floatOr("rope_theta", 10000)
	s.tied = c.boolOr("tie_word_embeddings", false)
	if act := c.str("hidden_act"); act != "" && act != "silu" {
		c.fail("hidden_act %q is not supported (%s uses silu)", act, fam.class)
	}
	if c.err != nil {
		return nil, c.err
	}
	if layers > 1<<16 || vocab > 1<<24 {
		return nil, fmt.Errorf("%s: num_hidden_layers %d or vocab_size %d is out of range", c.path, layers, vocab)
	}
	if hidden%heads != 0 && c.intOr("head_dim", 0) == 0 && fam.headDim == 0 {
		return nil, fmt.Errorf("%s: hidden_size %d is not a multiple of num_attention_heads %d", c.path, hidden, heads)
	}
	if heads%kv != 0 {
		return nil, fmt.Errorf("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", c.path, heads, kv)
	}

	if f := c.floatOr("partial_rotary_factor", 1); f != 1 {
		return nil, fmt.Errorf("%s: partial_rotary_factor %v is not supported (%s rotates whole heads)", c.path, f, fam.class)
	}
	if c.boolOr("mlp_bias", false) {
		return nil, fmt.Errorf("%s: mlp_bias true is not supported (the %s feed-forward has no biases)", c.path, a)
	}
	attnBias := c.boolOr("attention_bias", false)
	if attnBias && !fam.attentionBias {
		return nil, fmt.Errorf("%s: attention_bias true is not supported for %s", c.path, fam.class)
	}
	if c.err != nil {
		return nil, c.err
	}

	// rope_parameters is transformers 5's form of rope_theta and
	// rope_scaling together.
	scaling := c.object("rope_scaling")
	if p := c.object("rope_parameters"); p != nil {
		if p.has("rope_theta") {
			theta = p.float("rope_theta")
		}
		if t := p.str("rope_type"); t != "" && t != "default" {
			scaling = p
		}
		if p.err != nil {
			return nil, p.err
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	if scaling != nil {
		if err := s.ropeScaling(scaling, theta, hd); err != nil {
			return nil, err
		}
	}

	// A sliding window changes nothing while the context fits in it, so a
	// family whose graph has no window runs with its context capped at
	// the window: exact, where ignoring the window would not be.
	window := 0
	switch fam.window {
	case windowAlways:
		window = c.intOr("sliding_window", 0)
	case windowFlag:
		if c.boolOr("use_sliding_window", false) {
			window = c.intOr("sliding_window", 0)
		}
		if c.has("layer_types") {
			var types []string
			if err := json.Unmarshal(c.raw["layer_types"], &types); err != nil {
				return nil, fmt.Errorf("%s: layer_types is %s, not a list of strings", c.path, describe(c.raw["layer_types"]))
			}
			for _, t := range types {
				if t == "sliding_attention" {
					window = c.int("sliding_window")
				}
			}
		}
	case windowRequired:
		window = c.intOr("sliding_window", 0)
		if window > 0 {
			set("attention.sliding_window", u32(window))
		} else {
			// No window: one as long as the context has no effect.
			set("attention.sliding_window", u32(ctx))
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	if fam.window != windowRequired && window > 0 && window < ctx {
		ctx = window
	}

	s.meta["general.architecture"] = gguf.String(a)
	s.meta["general.name"] = gguf.String(dirName)
	set("block_count", u32(layers))
	set("embedding_length", u32(hidden))
	set("feed_forward_length", u32(ff))
	set("attention.head_count", u32(heads))
	set("attention.head_count_kv", u32(kv))
	set("attention.key_length", u32(hd))
	set("attention.value_length", u32(hd))
	set("context_length", u32(ctx))
	set("attention.layer_norm_rms_epsilon", gguf.Float32(float32(eps)))
	set("rope.freq_base", gguf.Float32(float32(theta)))
	set("vocab_size", u32(vocab))
	if !fam.qkNorm && hd*heads != hidden {
		return nil, fmt.Errorf("%s: head_dim %d × num_attention_heads %d is not hidden_size %d, which %s requires", c.path, hd, heads, hidden, fam.class)
	}

	// The tensors, with the shapes config.json implies ([out, in]).
	D := func(n int, why string) dim { return dim{n, why} }
	hid := D(hidden, "hidden_size")
	q := D(heads*hd, "num_attention_heads×head_dim")
	k := D(kv*hd, "num_key_value_heads×head_dim")
	put := func(hf, gg string, need bool, shape ...dim) { s.slots[hf] = slot{gguf: gg, shape: shape, need: need} }
	put("model.embed_tokens.weight", "token_embd.weight", true, D(vocab, "vocab_size"), hid)
	put("model.norm.weight", "output_norm.weight", true, hid)
	if s.tied {
		// transformers ties lm_head to the embedding, whatever the file
		// holds under the name.
		s.skip["lm_head.weight"] = "tie_word_embeddings is true: the embedding is the output matrix"
	} else {
		put("lm_head.weight", "output.weight", true, D(vocab, "vocab_size"), hid)
	}
	for l := 0; l < layers; l++ {
		p, g := fmt.Sprintf("model.layers.%d.", l), fmt.Sprintf("blk.%d.", l)
		put(p+"input_layernorm.weight", g+"attn_norm.weight", true, hid)
		put(p+"post_attention_layernorm.weight", g+"ffn_norm.weight", true, hid)
		put(p+"self_attn.o_proj.weight", g+"attn_output.weight", true, hid, q)
		if fam.fused {
			put(p+"self_attn.qkv_proj.weight", g+"attn_qkv.weight", true, D(heads*hd+2*kv*hd, "(num_attention_heads+2×num_key_value_heads)×head_dim"), hid)
			put(p+"mlp.gate_up_proj.weight", g+"ffn_up.weight", true, D(2*ff, "2×intermediate_size"), hid)
		} else {
			put(p+"self_attn.q_proj.weight", g+"attn_q.weight", true, q, hid)
			put(p+"self_attn.k_proj.weight", g+"attn_k.weight", true, k, hid)
			put(p+"self_attn.v_proj.weight", g+"attn_v.weight", true, k, hid)
			put(p+"mlp.gate_proj.weight", g+"ffn_gate.weight", true, D(ff, "intermediate_size"), hid)
			put(p+"mlp.up_proj.weight", g+"ffn_up.weight", true, D(ff, "intermediate_size"), hid)
		}
		put(p+"mlp.down_proj.weight", g+"ffn_down.weight", true, hid, D(ff, "intermediate_size"))
		if fam.qkvBias || attnBias {
			put(p+"self_attn.q_proj.bias", g+"attn_q.bias", true, q)
			put(p+"self_attn.k_proj.bias", g+"attn_k.bias", true, k)
			put(p+"self_attn.v_proj.bias", g+"attn_v.bias", true, k)
		}
		if attnBias {
			put(p+"self_attn.o_proj.bias", g+"attn_output.bias", true, hid)
		}
		if fam.qkNorm {
			put(p+"self_attn.q_norm.weight", g+"attn_q_norm.weight", true, D(hd, "head_dim"))
			put(p+"self_attn.k_norm.weight", g+"attn_k_norm.weight", true, D(hd, "head_dim"))
		}
		// Older llama checkpoints store the RoPE inverse frequencies as
		// a buffer; they are recomputed from rope_theta, as transformers
		// and llama.cpp's converter do.
		s.skip[p+"self_attn.rotary_emb.inv_freq"] = "a RoPE buffer computed from rope_theta"
	}
	return s, nil
}

// ropeScaling reads rope_scaling: "default" is none, "linear" divides the
// positions by factor (GGUF's rope.scaling keys), "llama3" becomes the
// rope_freqs tensor llama.cpp's converter makes; anything else changes more
// than the frequencies and is refused.
func (s *spec) ropeScaling(r *config, theta float64, hd int) error {
	typ := r.str("rope_type")
	if typ == "" {
		typ = r.str("type")
	}
	if r.err != nil {
		return r.err
	}
	fam := s.fam
	switch {
	case typ == "default" || typ == "":
		return nil
	case !fam.ropeScaling:
		return fmt.Errorf("%s %q is not supported for %s", r.path, typ, fam.class)
	case typ == "linear":
		f := r.float("factor")
		if r.err != nil {
			return r.err
		}
		s.meta[fam.arch+".rope.scaling.type"] = gguf.String("linear")
		s.meta[fam.arch+".rope.scaling.factor"] = gguf.Float32(float32(f))
		return nil
	case typ == "llama3":
		factor := r.floatOr("factor", 8)
		low := r.floatOr("low_freq_factor", 1)
		high := r.floatOr("high_freq_factor", 4)
		orig := r.floatOr("original_max_position_embeddings", 8192)
		if r.err != nil {
			return r.err
		}
		if high <= low {
			return fmt.Errorf("%s: high_freq_factor %v must exceed low_freq_factor %v", r.path, high, low)
		}
		s.ropeFreqs = rope.Llama3Factors(theta, hd, factor, low, high, orig)
		return nil
	}
	return fmt.Errorf("%s %q is not supported (default, linear, llama3)", r.path, typ)
}
