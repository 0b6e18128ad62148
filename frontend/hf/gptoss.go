package hf

import (
	"encoding/json"
	"fmt"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/frontend/safetensors"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// gpt-oss (GptOssForCausalLM) directories, in the two layouts it is
// published in (README-gptoss.md):
//
//   - openai's (openai/gpt-oss-20b, transformers): the experts of a layer as
//     MXFP4 mlp.experts.gate_up_proj_blocks [E, 2·ff, in/32, 16] and
//     _scales [E, 2·ff, in/32] (U8, E8M0), gate and up interleaved by row
//     (row 2r is gate row r, 2r+1 up row r; the _bias likewise), and
//     down_proj_blocks/_scales/_bias; config.json's quantization_config is
//     {quant_method: mxfp4, modules_to_not_convert: …}, everything else
//     BF16;
//   - mlx-lm's (mlx-community/gpt-oss-20b-MXFP4-Q8): the experts split and
//     stacked, mlp.experts.{gate,up,down}_proj.weight U32 [E, out, in/8]
//     with .scales U8 [E, out, in/32] (mode mxfp4, no .biases) and .bias;
//     attention, router, embedding and output 8-bit affine (per-module
//     entries of config.json's quantization).
//
// Both become the graph frontend/arch's gpt-oss builder makes of a GGUF
// file, under GGUF's names: the experts repacked exactly into ggml's MXFP4
// blocks (the same codes and scale bytes, rearranged; the openai gate and
// up de-interleaved), the affine modules into the MLX dtypes, the 1-D
// tensors (norms, biases, sinks) widened to F32.

// gptossSlidingLayer mirrors frontend/arch's fixed pattern: the reference
// engine slides the even layers and reads no key for it, so a config whose
// layer_types says otherwise describes a model the graph would get wrong.
func gptossSlidingLayer(l int) bool { return l%2 == 0 }

// translateGPTOSS reads a gpt-oss config.json into the GGUF keys the
// gpt-oss builder reads. Values the builder hard-codes as the reference
// engine does (the SwiGLU clamp at 7, YaRN's betas 32 and 1, the sliding
// pattern) are checked here, and a config that states others is refused.
func translateGPTOSS(c *config, fam *family, dirName string) (*spec, error) {
	a := fam.arch
	s := &spec{fam: fam, meta: map[string]gguf.Value{}, slots: map[string]slot{}, skip: map[string]string{}}
	set := func(k string, v gguf.Value) { s.meta[a+"."+k] = v }
	u32 := func(n int) gguf.Value { return gguf.Uint32(uint32(n)) }

	layers := c.int("num_hidden_layers")
	hidden := c.int("hidden_size")
	ff := c.int("intermediate_size")
	heads := c.int("num_attention_heads")
	kv := c.intOr("num_key_value_heads", heads)
	hd := c.int("head_dim")
	vocab := c.int("vocab_size")
	experts := c.int("num_local_experts")
	window := c.int("sliding_window")
	ctx := c.intOr("max_position_embeddings", fam.maxPos)
	eps := c.floatOr("rms_norm_eps", fam.rmsEps)
	theta := c.floatOr("rope_theta", 150000)
	limit := c.floatOr("swiglu_limit", 7)
	// transformers reads num_experts_per_tok; openai's config also has
	// experts_per_token, the same number.
	used := c.intOr("num_experts_per_tok", 0)
	if alt := c.intOr("experts_per_token", 0); used == 0 {
		used = alt
	} else if alt != 0 && alt != used {
		c.fail("num_experts_per_tok %d and experts_per_token %d disagree", used, alt)
	}
	if act := c.str("hidden_act"); act != "" && act != "silu" {
		c.fail("hidden_act %q is not supported (gpt-oss's experts use the clamped SwiGLU its config calls silu)", act)
	}
	if c.err != nil {
		return nil, c.err
	}
	switch {
	case used == 0:
		return nil, fmt.Errorf("%s: num_experts_per_tok is missing", c.path)
	case used > experts:
		return nil, fmt.Errorf("%s: num_experts_per_tok %d exceeds num_local_experts %d", c.path, used, experts)
	case layers > 1<<16 || vocab > 1<<24 || experts > 1<<16:
		return nil, fmt.Errorf("%s: num_hidden_layers %d, vocab_size %d or num_local_experts %d is out of range", c.path, layers, vocab, experts)
	case heads%kv != 0:
		return nil, fmt.Errorf("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", c.path, heads, kv)
	case limit != 7:
		return nil, fmt.Errorf("%s: swiglu_limit %v is not supported (the gpt-oss graph clamps at 7, as the reference engine does)", c.path, limit)
	case !c.boolOr("attention_bias", true):
		return nil, fmt.Errorf("%s: attention_bias false is not supported (the gpt-oss graph has attention biases)", c.path)
	case c.boolOr("tie_word_embeddings", false):
		return nil, fmt.Errorf("%s: tie_word_embeddings true is not supported for %s (its output matrix is its own)", c.path, fam.class)
	}
	if c.has("layer_types") {
		var types []string
		if err := json.Unmarshal(c.raw["layer_types"], &types); err != nil {
			return nil, fmt.Errorf("%s: layer_types is %s, not a list of strings", c.path, describe(c.raw["layer_types"]))
		}
		if len(types) != layers {
			return nil, fmt.Errorf("%s: layer_types lists %d layers, num_hidden_layers is %d", c.path, len(types), layers)
		}
		for l, ty := range types {
			want := map[bool]string{true: "sliding_attention", false: "full_attention"}[gptossSlidingLayer(l)]
			if ty != want {
				return nil, fmt.Errorf("%s: layer_types[%d] is %q: the gpt-oss graph has sliding attention on the even layers and full attention on the odd ones, as the reference engine", c.path, l, ty)
			}
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	if r := c.object("rope_scaling"); r != nil {
		if err := gptossRopeScaling(r, set); err != nil {
			return nil, err
		}
	} else if c.err != nil {
		return nil, c.err
	}

	s.meta["general.architecture"] = gguf.String(a)
	s.meta["general.name"] = gguf.String(dirName)
	set("block_count", u32(layers))
	set("context_length", u32(ctx))
	set("embedding_length", u32(hidden))
	set("feed_forward_length", u32(ff))
	set("expert_feed_forward_length", u32(ff))
	set("expert_count", u32(experts))
	set("expert_used_count", u32(used))
	set("attention.head_count", u32(heads))
	set("attention.head_count_kv", u32(kv))
	set("attention.key_length", u32(hd))
	set("attention.value_length", u32(hd))
	set("attention.layer_norm_rms_epsilon", gguf.Float32(float32(eps)))
	set("attention.sliding_window", u32(window))
	set("rope.freq_base", gguf.Float32(float32(theta)))
	set("vocab_size", u32(vocab))

	D := func(n int, why string) dim { return dim{n, why} }
	hid := D(hidden, "hidden_size")
	q := D(heads*hd, "num_attention_heads×head_dim")
	k := D(kv*hd, "num_key_value_heads×head_dim")
	put := func(hf, gg string, shape ...dim) { s.slots[hf] = slot{gguf: gg, shape: shape, need: true} }
	put("model.embed_tokens.weight", "token_embd.weight", D(vocab, "vocab_size"), hid)
	put("model.norm.weight", "output_norm.weight", hid)
	put("lm_head.weight", "output.weight", D(vocab, "vocab_size"), hid)
	for l := 0; l < layers; l++ {
		p, g := fmt.Sprintf("model.layers.%d.", l), fmt.Sprintf("blk.%d.", l)
		put(p+"input_layernorm.weight", g+"attn_norm.weight", hid)
		put(p+"post_attention_layernorm.weight", g+"post_attention_norm.weight", hid)
		put(p+"self_attn.q_proj.weight", g+"attn_q.weight", q, hid)
		put(p+"self_attn.q_proj.bias", g+"attn_q.bias", q)
		put(p+"self_attn.k_proj.weight", g+"attn_k.weight", k, hid)
		put(p+"self_attn.k_proj.bias", g+"attn_k.bias", k)
		put(p+"self_attn.v_proj.weight", g+"attn_v.weight", k, hid)
		put(p+"self_attn.v_proj.bias", g+"attn_v.bias", k)
		put(p+"self_attn.o_proj.weight", g+"attn_output.weight", hid, q)
		put(p+"self_attn.o_proj.bias", g+"attn_output.bias", hid)
		put(p+"self_attn.sinks", g+"attn_sinks.weight", D(heads, "num_attention_heads"))
		put(p+"mlp.router.weight", g+"ffn_gate_inp.weight", D(experts, "num_local_experts"), hid)
		put(p+"mlp.router.bias", g+"ffn_gate_inp.bias", D(experts, "num_local_experts"))
	}
	// The experts' tensors depend on the layout, which the tensors say
	// (resolveExperts).
	s.experts = &gptossExperts{layers: layers, e: D(experts, "num_local_experts"), ff: D(ff, "intermediate_size"), hid: hid}
	return s, nil
}

// gptossRopeScaling reads rope_scaling: none (default) or YaRN with the
// betas the reference engine fixes.
func gptossRopeScaling(r *config, set func(string, gguf.Value)) error {
	typ := r.str("rope_type")
	if typ == "" {
		typ = r.str("type")
	}
	if r.err != nil {
		return r.err
	}
	switch typ {
	case "", "default":
		return nil
	case "yarn":
	default:
		return fmt.Errorf("%s %q is not supported for GptOssForCausalLM (default, yarn)", r.path, typ)
	}
	factor := r.float("factor")
	orig := r.intOr("original_max_position_embeddings", 4096)
	fast, slow := r.floatOr("beta_fast", 32), r.floatOr("beta_slow", 1)
	if r.err != nil {
		return r.err
	}
	// truncate (false in gpt-oss's config) is transformers' choice of
	// rounding the correction range; the reference engine (ggml's
	// rope_yarn_corr_dims) always rounds it, and the goldens follow it.
	switch {
	case fast != 32 || slow != 1:
		return fmt.Errorf("%s: beta_fast %v, beta_slow %v are not supported (the reference engine fixes 32 and 1)", r.path, fast, slow)
	case r.has("attention_factor") || r.has("mscale") || r.has("mscale_all_dim"):
		return fmt.Errorf("%s: attention_factor/mscale are not supported (YaRN's default 0.1·ln(factor)+1 is the graph's)", r.path)
	}
	set("rope.scaling.type", gguf.String("yarn"))
	set("rope.scaling.factor", gguf.Float32(float32(factor)))
	set("rope.scaling.original_context_length", gguf.Uint32(uint32(orig)))
	return nil
}

// gptossExperts is what config.json says of the experts, for the layout
// the tensors turn out to have.
type gptossExperts struct {
	layers     int
	e, ff, hid dim
}

// resolveExperts finds each layer's expert layout from its tensors: mlx-lm's
// stacked gate_proj/up_proj/down_proj modules become slots, decided like any
// other (mode mxfp4 or affine, or float); openai's blocks and scales become
// decisions here, repacked on first use.
func (m *Model) resolveExperts() ([]*decision, error) {
	x := m.spec.experts
	var out []*decision
	for l := 0; l < x.layers; l++ {
		p, g := fmt.Sprintf("model.layers.%d.mlp.experts.", l), fmt.Sprintf("blk.%d.", l)
		_, _, openai := m.Tensors.Tensor(p + "gate_up_proj_blocks")
		_, _, mlx := m.Tensors.Tensor(p + "gate_proj.weight")
		switch {
		case mlx:
			put := func(hf, gg string, shape ...dim) { m.spec.slots[hf] = slot{gguf: gg, shape: shape, need: true} }
			put(p+"gate_proj.weight", g+"ffn_gate_exps.weight", x.e, x.ff, x.hid)
			put(p+"up_proj.weight", g+"ffn_up_exps.weight", x.e, x.ff, x.hid)
			put(p+"down_proj.weight", g+"ffn_down_exps.weight", x.e, x.hid, x.ff)
			put(p+"gate_proj.bias", g+"ffn_gate_exps.bias", x.e, x.ff)
			put(p+"up_proj.bias", g+"ffn_up_exps.bias", x.e, x.ff)
			put(p+"down_proj.bias", g+"ffn_down_exps.bias", x.e, x.hid)
		case openai:
			if m.quant == nil || m.quant.method != "mxfp4" {
				t, f, _ := m.Tensors.Tensor(p + "gate_up_proj_blocks")
				return nil, &safetensors.Error{Path: f.Path, Tensor: t.Name, Offset: t.At,
					Msg: "is MXFP4 blocks, but config.json has no quantization_config with quant_method mxfp4: the weights and the config disagree"}
			}
			ds, err := m.openaiExperts(p, g, x)
			if err != nil {
				return nil, err
			}
			out = append(out, ds...)
		default:
			return nil, fmt.Errorf("%s: no tensor %q (openai's MXFP4 layout) or %q (mlx-lm's), which %s needs (config.json: %d experts)",
				m.Dir, p+"gate_up_proj_blocks", p+"gate_proj.weight", m.Class, x.e.n)
		}
	}
	return out, nil
}

// openaiExperts decides a layer's experts in openai's layout: MXFP4 blocks
// [E, rows, in/32, 16] and E8M0 scales [E, rows, in/32], gate and up
// interleaved by row in gate_up_proj, and their biases [E, rows].
func (m *Model) openaiExperts(p, g string, x *gptossExperts) ([]*decision, error) {
	type part struct {
		blocks, scales, bias *safetensors.Tensor
		bf, sf, biasf        *safetensors.File
	}
	load := func(name string, rows, in dim) (*part, error) {
		var pt part
		var ok [3]bool
		pt.blocks, pt.bf, ok[0] = m.Tensors.Tensor(p + name + "_blocks")
		pt.scales, pt.sf, ok[1] = m.Tensors.Tensor(p + name + "_scales")
		pt.bias, pt.biasf, ok[2] = m.Tensors.Tensor(p + name + "_bias")
		for i, suffix := range []string{"_blocks", "_scales", "_bias"} {
			if !ok[i] {
				return nil, fmt.Errorf("%s: no tensor %q, which %s's MXFP4 experts need beside %s", m.Dir, p+name+suffix, m.Class, p+name+"_blocks")
			}
		}
		E, R, K := uint64(x.e.n), uint64(rows.n), uint64(in.n)
		bad := func(t *safetensors.Tensor, f *safetensors.File, want string) error {
			return &safetensors.Error{Path: f.Path, Tensor: t.Name, Offset: t.At,
				Msg: fmt.Sprintf("is %s %v, but config.json makes it %s (%s, %s, %s)", t.DType, t.Shape, want, x.e, rows, in)}
		}
		switch {
		case K%32 != 0:
			return nil, bad(pt.blocks, pt.bf, fmt.Sprintf("MXFP4 rows of %d, not a multiple of 32", K))
		case pt.blocks.DType != safetensors.U8 || !equalDims(pt.blocks.Shape, []uint64{E, R, K / 32, 16}):
			return nil, bad(pt.blocks, pt.bf, fmt.Sprintf("U8 [%d %d %d 16]", E, R, K/32))
		case pt.scales.DType != safetensors.U8 && pt.scales.DType != safetensors.F8E8M0 || !equalDims(pt.scales.Shape, []uint64{E, R, K / 32}):
			return nil, bad(pt.scales, pt.sf, fmt.Sprintf("U8 [%d %d %d]", E, R, K/32))
		case !equalDims(pt.bias.Shape, []uint64{E, R}):
			return nil, bad(pt.bias, pt.biasf, fmt.Sprintf("[%d %d]", E, R))
		}
		if _, ok := pt.bias.DType.Float(); !ok {
			return nil, bad(pt.bias, pt.biasf, "F32, F16 or BF16")
		}
		return &pt, nil
	}
	gateUp, err := load("gate_up_proj", dim{2 * x.ff.n, "2×intermediate_size"}, x.hid)
	if err != nil {
		return nil, err
	}
	down, err := load("down_proj", x.hid, x.ff)
	if err != nil {
		return nil, err
	}
	// weight makes the MXFP4 experts [E, rows, in] from every step-th row
	// of pt starting at first (gate: 0 of 2, up: 1 of 2, down: 0 of 1).
	weight := func(gg string, pt *part, first, step int, rows, in dim) *decision {
		E, R, K := x.e.n, rows.n, in.n
		shape := []uint64{uint64(E), uint64(R), uint64(K)}
		nb := K / 32
		d := &decision{hf: pt.blocks.Name, file: pt.bf, t: pt.blocks, shape: shape,
			parts:  []string{pt.blocks.Name, pt.scales.Name},
			stored: "MXFP4 (openai _blocks and _scales)"}
		if step == 2 {
			d.stored += fmt.Sprintf(", %s rows of gate_up_proj", map[int]string{0: "even", 1: "odd"}[first])
		}
		d.info = gguf.TensorInfo{Name: gg, Dims: ggufDims(shape), Type: ir.MXFP4, Size: uint64(E * R * nb * 17)}
		d.build = func() ([]byte, error) {
			blocks, scales := pt.bf.Data(pt.blocks), pt.sf.Data(pt.scales)
			out := make([]byte, E*R*nb*17)
			for e := 0; e < E; e++ {
				for r := 0; r < R; r++ {
					src := (e*R*step + r*step + first) * nb
					dst := (e*R + r) * nb
					if err := quant.MXFP4FromHF(out[17*dst:17*(dst+nb)], blocks[16*src:16*(src+nb)], scales[src:src+nb]); err != nil {
						return nil, err
					}
				}
			}
			// gate and up share the blocks: the second refaults the pages
			// the first released, from the page cache.
			release(stored{pt.bf, pt.blocks}, stored{pt.sf, pt.scales})
			return out, nil
		}
		return d
	}
	// bias widens every step-th entry of pt's bias [E, rows·step] to F32.
	bias := func(gg string, pt *part, first, step int, rows dim) *decision {
		E, R := x.e.n, rows.n
		typ, _ := pt.bias.DType.Float()
		src := pt.biasf.Data(pt.bias)
		sz := int(pt.bias.DType.Size())
		picked := make([]byte, 0, E*R*sz)
		for i := 0; i < E*R; i++ {
			j := (i/R)*R*step + (i%R)*step + first
			picked = append(picked, src[j*sz:(j+1)*sz]...)
		}
		if typ != ir.F32 {
			picked = widen(picked, typ)
		}
		shape := []uint64{uint64(E), uint64(R)}
		return &decision{hf: pt.bias.Name, file: pt.biasf, t: pt.bias, shape: shape, parts: []string{pt.bias.Name}, data: picked,
			stored: string(pt.bias.DType),
			info:   gguf.TensorInfo{Name: gg, Dims: ggufDims(shape), Type: ir.F32, Size: uint64(len(picked))}}
	}
	return []*decision{
		weight(g+"ffn_gate_exps.weight", gateUp, 0, 2, x.ff, x.hid),
		weight(g+"ffn_up_exps.weight", gateUp, 1, 2, x.ff, x.hid),
		weight(g+"ffn_down_exps.weight", down, 0, 1, x.hid, x.ff),
		bias(g+"ffn_gate_exps.bias", gateUp, 0, 2, x.ff),
		bias(g+"ffn_up_exps.bias", gateUp, 1, 2, x.ff),
		bias(g+"ffn_down_exps.bias", down, 0, 1, x.hid),
	}, nil
}
