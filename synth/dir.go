package synth

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/minerva-llm/minerva/frontend/safetensors"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// Model directories. WriteDir writes a preset as a Hugging Face directory
// (transformers' save_pretrained: config.json, safetensors shards, the
// index when there is more than one, generation_config.json and the
// tokenizer files) when its matrices are F32, F16 or BF16, or as an MLX
// directory (mlx_lm.convert: affine-quantized modules as a U32 weight with
// BF16 scales and biases, MXFP4 experts as U32 words with U8 scales, a
// quantization block in config.json, unpadded headers, the index always)
// when they are MLX affine. The layouts are those frontend/hf reads
// (../shared/golden/README-hf.md, README-gptoss.md).
//
// The tensors are the ones Write draws for the GGUF file of the same spec
// and seed, converted while they are written: renamed to HF's names, dims
// reversed, a llama's q and k rows permuted to HF's rotate-half order, the
// 1-D gains and biases stored in the model's float dtype (BF16 for MLX),
// and each quantized block split into the weight words and the scales (and
// biases). So a float directory holds exactly the GGUF file's matrices, and
// an F32 one all of its values. Tensors are drawn a piece at a time while
// the shards are written; only the scales of the module being written wait
// in memory (1/8 of the module for 4-bit affine, 1/16 for MXFP4).

// DirOptions tunes WriteDir.
type DirOptions struct {
	// MaxShard is the most bytes of tensor data per shard (0: 5 GiB, as
	// mlx-lm and transformers split). A tensor larger than it gets a shard
	// of its own.
	MaxShard int64
	// Progress, if set, is told the bytes written as they are.
	Progress func(n int)
}

// defaultShard is mlx-lm's MAX_FILE_SIZE_GB (transformers' 5GB is 5e9).
const defaultShard = 5 << 30

// dirSpec is what the directory writer needs besides the tensors.
type dirSpec struct {
	config map[string]any // config.json less torch_dtype and quantization
	gen    map[string]any // generation_config.json
	tok    *tokenizerFiles
	// heads permutes the rows of the named GGUF tensors from GGUF's
	// interleaved RoPE order to HF's rotate-half order: heads and head size.
	heads map[string][2]int
	names func(gguf string) (string, bool)
}

// WriteDir writes m as a model directory dir (see DirOptions), which must
// not exist yet. It is written as dir.partial and renamed when complete.
// It returns the bytes written.
func (m Llama) WriteDir(dir string, opt DirOptions) (int64, error) {
	return writeDir(dir, opt, m.layout)
}

// layout is the directory WriteDir writes, before anything is drawn.
func (m Llama) layout(opt DirOptions) (*dirLayout, error) {
	fam, err := m.check()
	if err != nil {
		return nil, err
	}
	if m.arch() != "llama" {
		return nil, fmt.Errorf("synth: model directories are written for llama and gpt-oss presets, not %s", m.arch())
	}
	headDim := m.headDim()
	cfg := map[string]any{
		"architectures":           []string{"LlamaForCausalLM"},
		"model_type":              "llama",
		"hidden_size":             m.NEmbd,
		"intermediate_size":       m.NFF,
		"num_hidden_layers":       m.NLayer,
		"num_attention_heads":     m.NHead,
		"num_key_value_heads":     m.NHeadKV,
		"head_dim":                headDim,
		"rms_norm_eps":            m.RMSEps,
		"rope_theta":              m.RopeBase,
		"rope_scaling":            nil,
		"max_position_embeddings": m.ContextLength,
		"vocab_size":              len(m.Tokens),
		"tie_word_embeddings":     m.Tied,
		"hidden_act":              "silu",
		"attention_bias":          false,
		"mlp_bias":                false,
		"attention_dropout":       0.0,
		"initializer_range":       0.02,
		"pretraining_tp":          1,
		"use_cache":               true,
		"transformers_version":    "4.46.3",
	}
	gen := map[string]any{"transformers_version": "4.46.3"}
	var tok *tokenizerFiles
	if len(m.Merges) > 0 {
		cfg["bos_token_id"], cfg["eos_token_id"] = m.EOT, m.EOT
		gen["bos_token_id"], gen["eos_token_id"] = m.EOT, m.EOT
		tok = byteLevelTokenizer(m.Tokens, m.Types, m.Merges, m.EOT, m.ContextLength)
	} else {
		cfg["bos_token_id"], cfg["eos_token_id"] = 1, 2
		gen["bos_token_id"], gen["eos_token_id"] = 1, 2
		tok = spmTokenizer(m.Tokens, m.Scores, m.Types, m.ContextLength)
	}
	heads := map[string][2]int{}
	for l := 0; l < m.NLayer; l++ {
		heads[fmt.Sprintf("blk.%d.attn_q.weight", l)] = [2]int{m.NHead, headDim}
		heads[fmt.Sprintf("blk.%d.attn_k.weight", l)] = [2]int{m.NHeadKV, headDim}
	}
	spec := &dirSpec{config: cfg, gen: gen, tok: tok, heads: heads, names: hfName}
	return newLayout(opt, m.Matrix, spec, func(s tensorSink) error { return m.addTensors(s, fam) })
}

// WriteDir writes m as a model directory in mlx-lm's layout of gpt-oss:
// the experts' gate, up and down projections stacked per expert. With
// MXFP4 experts and MLX affine matrices (8-bit, group 64) it is
// mlx-community's gpt-oss-20b-MXFP4-Q8: MXFP4 experts, the router,
// attention, embedding and output affine, per-module entries in
// config.json's quantization. With float experts and matrices everything
// is stored as the GGUF file holds it. See Llama.WriteDir.
func (m GPTOSS) WriteDir(dir string, opt DirOptions) (int64, error) {
	return writeDir(dir, opt, m.layout)
}

// layout is the directory WriteDir writes, before anything is drawn.
func (m GPTOSS) layout(opt DirOptions) (*dirLayout, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	_, _, mlxMatrix := m.Matrix.MLXAffineParams()
	_, _, mlxExperts := m.Experts.MLXAffineParams()
	isFloat := func(t ir.DType) bool { return t == ir.F32 || t == ir.F16 || t == ir.BF16 }
	if !(mlxMatrix && (m.Experts == ir.MXFP4 || mlxExperts) || isFloat(m.Matrix) && isFloat(m.Experts)) {
		return nil, fmt.Errorf("synth: a gpt-oss directory holds MXFP4 or MLX affine experts with MLX affine matrices, or float ones with float matrices, not %s experts with %s matrices", m.Experts, m.Matrix)
	}
	layers := make([]string, m.NLayer)
	for l := range layers {
		layers[l] = "full_attention"
		if l%2 == 0 {
			layers[l] = "sliding_attention"
		}
	}
	cfg := map[string]any{
		"architectures":           []string{"GptOssForCausalLM"},
		"model_type":              "gpt_oss",
		"attention_bias":          true,
		"attention_dropout":       0.0,
		"eos_token_id":            m.EOT,
		"pad_token_id":            m.EOT,
		"experts_per_token":       m.NExpertUsed,
		"num_experts_per_tok":     m.NExpertUsed,
		"head_dim":                m.HeadDim,
		"hidden_act":              "silu",
		"hidden_size":             m.NEmbd,
		"intermediate_size":       m.NFFExp,
		"layer_types":             layers,
		"max_position_embeddings": m.ContextLength,
		"num_attention_heads":     m.NHead,
		"num_hidden_layers":       m.NLayer,
		"num_key_value_heads":     m.NHeadKV,
		"num_local_experts":       m.NExpert,
		"rms_norm_eps":            m.RMSEps,
		"rope_theta":              m.RopeBase,
		"rope_scaling":            nil,
		"sliding_window":          m.SlidingWindow,
		"swiglu_limit":            7.0,
		"tie_word_embeddings":     false,
		"vocab_size":              len(m.Tokens),
		"use_cache":               true,
		"transformers_version":    "4.55.0",
	}
	if m.YaRNFactor != 0 {
		cfg["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": m.YaRNFactor, "beta_fast": 32.0, "beta_slow": 1.0,
			"original_max_position_embeddings": m.YaRNOrigCtx, "truncate": false}
	}
	gen := map[string]any{"bos_token_id": m.EOT, "eos_token_id": m.EOT, "pad_token_id": m.EOT, "transformers_version": "4.55.0"}
	spec := &dirSpec{config: cfg, gen: gen, names: hfName,
		tok: byteLevelTokenizer(m.Tokens, m.Types, m.Merges, m.EOT, m.ContextLength)}
	return newLayout(opt, m.Matrix, spec, m.addTensors)
}

// tokenizerFiles are tokenizer.json and tokenizer_config.json.
type tokenizerFiles struct {
	json, config map[string]any
}

// writeDir lays out a directory and writes it, refusing one that exists
// before anything is drawn.
func writeDir(dir string, opt DirOptions, layout func(DirOptions) (*dirLayout, error)) (int64, error) {
	if err := absent(dir); err != nil {
		return 0, err
	}
	l, err := layout(opt)
	if err != nil {
		return 0, err
	}
	return l.write(dir, opt)
}

// absent refuses a directory that exists: WriteDir never overwrites.
func absent(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("synth: %s already exists (a model directory is written only where there is none)", dir)
	}
	return nil
}

// dirLayout is a directory to write: its tensors, with the producers
// that will draw them, split into shards; nothing is drawn yet.
type dirLayout struct {
	spec   *dirSpec
	sink   *dirSink
	shards [][]safetensors.WriteTensor
	total  int64 // bytes of tensor data
	mlx    bool
	float  ir.DType
}

// newLayout lays out the tensors add adds, through a dirSink, in shards of
// at most opt.MaxShard bytes.
func newLayout(opt DirOptions, matrix ir.DType, spec *dirSpec, add func(tensorSink) error) (*dirLayout, error) {
	_, _, mlx := matrix.MLXAffineParams()
	float := ir.F32
	switch {
	case mlx:
		float = ir.BF16
	case matrix == ir.F32 || matrix == ir.F16 || matrix == ir.BF16:
		float = matrix
	default:
		return nil, fmt.Errorf("synth: a model directory holds F32, F16 or BF16 matrices (Hugging Face) or MLX affine ones (mlx_q4_g64 …), not %s", matrix)
	}
	l := &dirLayout{spec: spec, mlx: mlx, float: float,
		sink: &dirSink{spec: spec, float: float, quant: map[string]quantEntry{}}}
	if err := add(l.sink); err != nil {
		return nil, err
	}
	if l.sink.err != nil {
		return nil, l.sink.err
	}
	limit := opt.MaxShard
	if limit <= 0 {
		limit = defaultShard
	}
	// Shards: tensors in order, a new shard when the next would pass limit.
	var size int64
	for _, t := range l.sink.tensors {
		n := int64(t.Size())
		if len(l.shards) == 0 || size > 0 && size+n > limit {
			l.shards = append(l.shards, nil)
			size = 0
		}
		l.shards[len(l.shards)-1] = append(l.shards[len(l.shards)-1], t)
		size += n
		l.total += n
	}
	return l, nil
}

// write draws the tensors into the shards, then writes the JSON files.
func (l *dirLayout) write(dir string, opt DirOptions) (int64, error) {
	if err := absent(dir); err != nil {
		return 0, err
	}
	spec, shards, total, mlx, float := l.spec, l.shards, l.total, l.mlx, l.float
	tmp := dir + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return 0, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	var written int64
	count := func(n int) {
		written += int64(n)
		if opt.Progress != nil {
			opt.Progress(n)
		}
	}
	writeJSON := func(name string, v any) error {
		indent := "  "
		if mlx {
			indent = "    " // mlx-lm's
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", indent)
		if err := enc.Encode(v); err != nil {
			return err
		}
		count(b.Len())
		return os.WriteFile(filepath.Join(tmp, name), b.Bytes(), 0o644)
	}
	meta, align := map[string]string{"format": "pt"}, 8
	if mlx {
		meta, align = map[string]string{"format": "mlx"}, 1
	}
	weightMap := map[string]string{}
	for i, ts := range shards {
		name := "model.safetensors"
		if len(shards) > 1 {
			name = fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		}
		for _, t := range ts {
			weightMap[t.Name] = name
		}
		if err := writeShard(filepath.Join(tmp, name), meta, ts, align, count); err != nil {
			return 0, err
		}
	}
	if len(shards) > 1 || mlx {
		// mlx-lm writes the index even for one shard.
		idx := map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}
		if err := writeJSON(safetensors.IndexName, idx); err != nil {
			return 0, err
		}
	}
	cfg := map[string]any{}
	for k, v := range spec.config {
		cfg[k] = v
	}
	cfg["torch_dtype"] = map[ir.DType]string{ir.F32: "float32", ir.F16: "float16", ir.BF16: "bfloat16"}[float]
	if q := l.sink.quantization(); q != nil {
		cfg["quantization"], cfg["quantization_config"] = q, q
	}
	files := []struct {
		name string
		v    any
	}{{"config.json", cfg}, {"generation_config.json", spec.gen}}
	if spec.tok != nil {
		files = append(files, struct {
			name string
			v    any
		}{"tokenizer.json", spec.tok.json}, struct {
			name string
			v    any
		}{"tokenizer_config.json", spec.tok.config})
	}
	for _, f := range files {
		if err := writeJSON(f.name, f.v); err != nil {
			return 0, err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return 0, err
	}
	ok = true
	return written, nil
}

// writeShard writes one safetensors file through a buffer.
func writeShard(path string, meta map[string]string, ts []safetensors.WriteTensor, align int, count func(int)) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 4<<20)
	err = safetensors.Write(progressWriter{bw, count}, meta, ts, align)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

type progressWriter struct {
	w     io.Writer
	count func(int)
}

func (p progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.count(n)
	return n, err
}

// quantEntry is one quantized module's setting in config.json.
type quantEntry struct {
	bits, group int
	mode        string
}

// dirSink turns the tensors a spec adds under GGUF names into the
// directory's safetensors tensors, each with a producer that converts the
// GGUF producer's bytes while they stream.
type dirSink struct {
	spec    *dirSpec
	float   ir.DType // the dtype of 1-D gains and biases
	tensors []safetensors.WriteTensor
	quant   map[string]quantEntry // by module
	err     error
}

func (s *dirSink) AddTensor(name string, typ ir.DType, dims []uint64, data []byte) error {
	return s.AddTensorFunc(name, typ, dims, func(w io.Writer) error { _, err := w.Write(data); return err })
}

func (s *dirSink) AddTensorFunc(name string, typ ir.DType, dims []uint64, produce func(io.Writer) error) error {
	if s.err != nil {
		return s.err
	}
	hf, ok := s.spec.names(name)
	if !ok {
		return fmt.Errorf("synth: %s has no Hugging Face name", name)
	}
	shape := make([]uint64, len(dims))
	for i, d := range dims {
		shape[len(dims)-1-i] = d
	}
	in := int(shape[len(shape)-1])
	if h, ok := s.spec.heads[name]; ok {
		rowBytes, err := typ.RowBytes(int64(in))
		if err != nil {
			return err
		}
		produce = permuted(produce, int(rowBytes), h[0], h[1])
	}
	module, isWeight := strings.CutSuffix(hf, ".weight")
	add := func(name string, dt safetensors.DType, shape []uint64, p func(io.Writer) error) {
		s.tensors = append(s.tensors, safetensors.WriteTensor{Name: name, DType: dt, Shape: shape, Produce: p})
	}
	lead := shape[:len(shape)-1]
	with := func(last uint64) []uint64 { return append(append([]uint64{}, lead...), last) }
	switch {
	case typ == ir.F32 && s.float != ir.F32 && (len(shape) == 1 || strings.HasSuffix(hf, ".bias") || !isWeight):
		// Gains, biases and sinks: F32 in GGUF, the model's dtype here.
		to := s.float
		add(hf, stDType(to), shape, func(w io.Writer) error {
			c := &chunker{size: 4, fn: func(b []byte) error {
				out := make([]byte, len(b)/2)
				for i := 0; i < len(b)/4; i++ {
					x := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
					h := quant.F32ToBF16(x)
					if to == ir.F16 {
						h = quant.F32ToF16(x)
					}
					binary.LittleEndian.PutUint16(out[2*i:], h)
				}
				_, err := w.Write(out)
				return err
			}}
			return c.run(produce)
		})
	case typ == ir.F32 || typ == ir.F16 || typ == ir.BF16:
		add(hf, stDType(typ), shape, produce)
	case typ == ir.MXFP4:
		if !isWeight || in%32 != 0 {
			return fmt.Errorf("synth: %s: MXFP4 needs a weight with rows of a multiple of 32", name)
		}
		scales := &pending{}
		s.quant[module] = quantEntry{bits: 4, group: 32, mode: "mxfp4"}
		add(hf, safetensors.U32, with(uint64(in/8)), func(w io.Writer) error {
			c := &chunker{size: 17, fn: func(b []byte) error {
				out := make([]byte, 16*(len(b)/17))
				for i := 0; i < len(b)/17; i++ {
					blk, o := b[17*i:17*i+17], out[16*i:16*i+16]
					scales.buf = append(scales.buf, blk[0])
					mxfp4ToHF(o, blk[1:])
				}
				_, err := w.Write(out)
				return err
			}}
			return c.run(produce)
		})
		add(module+".scales", safetensors.U8, with(uint64(in/32)), scales.produce)
	default:
		bits, group, ok := typ.MLXAffineParams()
		if !ok || !isWeight {
			return fmt.Errorf("synth: %s: %s cannot be written to a model directory (F32, F16, BF16, MLX affine, MXFP4)", name, typ)
		}
		s.quant[module] = quantEntry{bits: bits, group: group, mode: "affine"}
		scales, biases := &pending{}, &pending{}
		bb := 8 + group*bits/8
		add(hf, safetensors.U32, with(uint64(in*bits/32)), func(w io.Writer) error {
			c := &chunker{size: bb, fn: func(b []byte) error {
				out := make([]byte, 0, len(b))
				var h [2]byte
				for i := 0; i < len(b)/bb; i++ {
					blk := b[bb*i : bb*i+bb]
					binary.LittleEndian.PutUint16(h[:], quant.F32ToBF16(math.Float32frombits(binary.LittleEndian.Uint32(blk))))
					scales.buf = append(scales.buf, h[:]...)
					binary.LittleEndian.PutUint16(h[:], quant.F32ToBF16(math.Float32frombits(binary.LittleEndian.Uint32(blk[4:]))))
					biases.buf = append(biases.buf, h[:]...)
					out = append(out, blk[8:]...)
				}
				_, err := w.Write(out)
				return err
			}}
			return c.run(produce)
		})
		add(module+".scales", safetensors.BF16, with(uint64(in/group)), scales.produce)
		add(module+".biases", safetensors.BF16, with(uint64(in/group)), biases.produce)
	}
	return nil
}

// quantization is config.json's quantization block: nil when nothing is
// quantized; else the global setting (MXFP4's when there are MXFP4
// experts, as mlx-lm writes gpt-oss; else the affine one most modules
// have) and an entry for each module with another.
func (s *dirSink) quantization() map[string]any {
	if len(s.quant) == 0 {
		return nil
	}
	counts := map[quantEntry]int{}
	var global quantEntry
	for _, e := range s.quant {
		counts[e]++
	}
	for e, n := range counts {
		if e.mode == "mxfp4" || global.mode != "mxfp4" && (n > counts[global] || n == counts[global] && e.bits < global.bits) {
			global = e
		}
	}
	q := map[string]any{"group_size": global.group, "bits": global.bits, "mode": global.mode}
	for m, e := range s.quant {
		if e != global {
			// An override without mode is affine, as mlx-lm writes them.
			q[m] = map[string]any{"group_size": e.group, "bits": e.bits}
		}
	}
	return q
}

// stDType is the safetensors dtype of a float ir dtype.
func stDType(t ir.DType) safetensors.DType {
	switch t {
	case ir.F16:
		return safetensors.F16
	case ir.BF16:
		return safetensors.BF16
	}
	return safetensors.F32
}

// pending holds the scales (or biases) of the module being written until
// their tensor's turn, right after the weight's.
type pending struct{ buf []byte }

func (p *pending) produce(w io.Writer) error {
	_, err := w.Write(p.buf)
	p.buf = nil
	return err
}

// chunker hands fn the bytes written to it in whole multiples of size.
type chunker struct {
	size int
	fn   func([]byte) error
	buf  []byte
}

func (c *chunker) Write(p []byte) (int, error) {
	n := len(p)
	if len(c.buf) > 0 {
		k := min(len(p), c.size-len(c.buf))
		c.buf = append(c.buf, p[:k]...)
		p = p[k:]
		if len(c.buf) < c.size {
			return n, nil
		}
		if err := c.fn(c.buf); err != nil {
			return 0, err
		}
		c.buf = c.buf[:0]
	}
	whole := len(p) / c.size * c.size
	if whole > 0 {
		if err := c.fn(p[:whole]); err != nil {
			return 0, err
		}
	}
	c.buf = append(c.buf, p[whole:]...)
	return n, nil
}

// run runs produce into c and checks it ended on a whole chunk.
func (c *chunker) run(produce func(io.Writer) error) error {
	if err := produce(c); err != nil {
		return err
	}
	if len(c.buf) != 0 {
		return fmt.Errorf("synth: %d bytes left over, not a whole block of %d", len(c.buf), c.size)
	}
	return nil
}

// permuted wraps produce so that each head's rows (head of headDim rows of
// rowBytes bytes) come out in HF's rotate-half order: HF row i·d/2 + j is
// GGUF row 2j + i (i < 2, j < d/2), the inverse of convert_hf_to_gguf's
// permute.
func permuted(produce func(io.Writer) error, rowBytes, heads, headDim int) func(io.Writer) error {
	return func(w io.Writer) error {
		out := make([]byte, rowBytes*headDim)
		c := &chunker{size: rowBytes * headDim, fn: func(b []byte) error {
			for h := 0; h < len(b)/len(out); h++ {
				head := b[h*len(out) : (h+1)*len(out)]
				for i := 0; i < 2; i++ {
					for j := 0; j < headDim/2; j++ {
						copy(out[(i*headDim/2+j)*rowBytes:][:rowBytes], head[(2*j+i)*rowBytes:])
					}
				}
				if _, err := w.Write(out); err != nil {
					return err
				}
			}
			return nil
		}}
		return c.run(produce)
	}
}

// mxfp4ToHF writes the 16 code bytes of a ggml MXFP4 block (byte j holds
// elements j and j+16) in the Hugging Face order (byte b holds elements 2b
// and 2b+1), the inverse of quant.MXFP4FromHF.
func mxfp4ToHF(dst, codes []byte) {
	nib := func(e int) byte {
		if e < 16 {
			return codes[e] & 15
		}
		return codes[e-16] >> 4
	}
	for b := 0; b < 16; b++ {
		dst[b] = nib(2*b) | nib(2*b+1)<<4
	}
}

// hfNames maps GGUF tensor names to Hugging Face ones, llama's and
// gpt-oss's.
var hfNames = []struct {
	re  *regexp.Regexp
	out string
}{
	{regexp.MustCompile(`^token_embd\.weight$`), "model.embed_tokens.weight"},
	{regexp.MustCompile(`^output_norm\.weight$`), "model.norm.weight"},
	{regexp.MustCompile(`^output\.weight$`), "lm_head.weight"},
	{regexp.MustCompile(`^blk\.(\d+)\.attn_norm\.weight$`), "model.layers.$1.input_layernorm.weight"},
	{regexp.MustCompile(`^blk\.(\d+)\.(?:ffn_norm|post_attention_norm)\.weight$`), "model.layers.$1.post_attention_layernorm.weight"},
	{regexp.MustCompile(`^blk\.(\d+)\.attn_([qkv])\.(weight|bias)$`), "model.layers.$1.self_attn.${2}_proj.$3"},
	{regexp.MustCompile(`^blk\.(\d+)\.attn_output\.(weight|bias)$`), "model.layers.$1.self_attn.o_proj.$2"},
	{regexp.MustCompile(`^blk\.(\d+)\.attn_sinks\.weight$`), "model.layers.$1.self_attn.sinks"},
	{regexp.MustCompile(`^blk\.(\d+)\.ffn_(gate|up|down)\.weight$`), "model.layers.$1.mlp.${2}_proj.weight"},
	{regexp.MustCompile(`^blk\.(\d+)\.ffn_gate_inp\.(weight|bias)$`), "model.layers.$1.mlp.router.$2"},
	{regexp.MustCompile(`^blk\.(\d+)\.ffn_(gate|up|down)_exps\.(weight|bias)$`), "model.layers.$1.mlp.experts.${2}_proj.$3"},
}

func hfName(gguf string) (string, bool) {
	for _, n := range hfNames {
		if n.re.MatchString(gguf) {
			return n.re.ReplaceAllString(gguf, n.out), true
		}
	}
	return "", false
}
