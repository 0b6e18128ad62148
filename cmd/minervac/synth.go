package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
	"github.com/minerva-llm/minerva/synth"
	"github.com/minerva-llm/minerva/tokenizer"
)

type synthCmd struct {
	Arch   string `help:"Architecture family: llama, qwen2, qwen3, phi3 or gpt-oss (default: the preset's)."`
	Preset string `help:"Shape: stories15m, tinyllama-1.1b, llama-7b, llama-3.1-8b (128K context through rope_freqs) and the test shape llama-3.1-tiny (llama); qwen2.5-7b, qwen3-8b, phi3-mini and the test shapes qwen2-tiny, qwen3-tiny, phi3-tiny; gpt-oss-20b, gpt-oss-120b, gpt-oss-tiny (gpt-oss)." required:""`
	Quant  string `help:"Dtype of the matrices: f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k … q6_k, mxfp4, or llama.cpp's per-tensor mix q3_k_m, q4_k_m, q5_k_m (GGUF; default q4_0; mixes not for gpt-oss); f32, f16, bf16 (--format hf; default bf16); mlx_q4_g32 … mlx_q8_g128 (--format mlx; default mlx_q4_g64). For gpt-oss the expert matrices: the other large ones are then q8_0 in GGUF and mlx_q8_g64 in MLX (default experts mxfp4), as in the real files."`
	Format string `help:"gguf: one GGUF file; hf: a Hugging Face directory (config.json, safetensors shards, tokenizer.json); mlx: an MLX directory (affine-quantized, gpt-oss as MXFP4-Q8). hf and mlx write llama and gpt-oss presets." enum:"gguf,hf,mlx" default:"gguf"`
	Vocab  string `help:"Take the vocabulary of this GGUF (its size replaces the preset's): SentencePiece for llama and phi3, byte-level BPE for qwen2, qwen3 and gpt-oss." type:"path"`
	Seed   uint64 `help:"Random seed." default:"1"`
	Output string `short:"o" help:"Output file (a directory, which must not exist, for --format hf and mlx)." required:"" type:"path"`
}

// dtype resolves --quant for the format: its default, and a usage error
// for a dtype the format cannot hold.
func (c *synthCmd) dtype(gptoss bool) (ir.DType, error) {
	name := c.Quant
	if name == "" {
		name = map[string]string{"gguf": "q4_0", "hf": "bf16", "mlx": "mlx_q4_g64"}[c.Format]
		if gptoss && c.Format != "hf" {
			name = "mxfp4" // the experts of the real files, as --quant says
		}
	}
	dt, ok := ir.ParseDType(name)
	if !ok || !quant.CanQuantize(dt) {
		return 0, usageError{fmt.Sprintf("--quant %s: not a dtype minervac can write", name)}
	}
	_, _, mlx := dt.MLXAffineParams()
	float := dt == ir.F32 || dt == ir.F16 || dt == ir.BF16
	switch {
	case c.Format == "gguf" && mlx:
		return 0, usageError{fmt.Sprintf("--quant %s is MLX's: use it with --format mlx", name)}
	case c.Format == "hf" && !float:
		return 0, usageError{fmt.Sprintf("--format hf holds f32, f16 or bf16 matrices, not %s (use --format mlx for MLX quantization, gguf for the others)", name)}
	case c.Format == "mlx" && !mlx && !(gptoss && dt == ir.MXFP4):
		return 0, usageError{fmt.Sprintf("--format mlx holds MLX affine matrices (mlx_q4_g64, mlx_q8_g64 …; mxfp4 experts for gpt-oss), not %s", name)}
	}
	return dt, nil
}

func (c *synthCmd) Run() error {
	mix := slices.Contains(synth.KQuantMixes(), c.Quant)
	if mix && c.Format != "gguf" {
		return usageError{fmt.Sprintf("--quant %s is one of llama.cpp's GGUF mixes: use it with --format gguf", c.Quant)}
	}
	archs := append([]string{"gpt-oss"}, synth.Families()...)
	gptoss := c.Arch == "gpt-oss" || c.Arch == "" && synth.IsGPTOSSPreset(c.Preset)
	var dt ir.DType // a mix's types are per tensor (synth.KQuantMix)
	if !mix {
		var err error
		if dt, err = c.dtype(gptoss); err != nil {
			return err
		}
	}
	if c.Arch != "" && !slices.Contains(archs, c.Arch) {
		return usageError{fmt.Sprintf("--arch %s: not an architecture minervac synth writes (%s)", c.Arch, strings.Join(archs, ", "))}
	}
	if gptoss {
		if mix {
			return usageError{fmt.Sprintf("--quant %s: the mixes are for llama, qwen and phi3 presets; gpt-oss takes one expert dtype", c.Quant)}
		}
		return c.runGPTOSS(dt)
	}
	spec, err := synth.Preset(c.Preset, dt, c.Seed)
	if err == nil && mix {
		spec.Matrix, spec.Mix, err = synth.KQuantMix(c.Quant, spec.NLayer)
	}
	if err == nil && c.Arch != "" && spec.Arch != c.Arch {
		err = fmt.Errorf("preset %q is a %s shape", c.Preset, spec.Arch)
	}
	if err != nil {
		if c.Arch != "" {
			// Name the presets of the family asked for, not every one.
			err = fmt.Errorf("--arch %s --preset %s: %s presets are %s", c.Arch, c.Preset, c.Arch, strings.Join(synth.PresetsOf(c.Arch), ", "))
		} else {
			err = fmt.Errorf("unknown preset %q (presets: %s)", c.Preset, strings.Join(append(synth.Presets(), synth.GPTOSSPresets()...), ", "))
		}
		return usageError{err.Error()}
	}
	if c.Vocab != "" {
		v, err := readVocab(c.Vocab)
		if err != nil {
			return err
		}
		switch {
		case spec.Merges != nil:
			// qwen2/qwen3: Qwen's files carry a byte-level BPE vocabulary.
			if v.Model != "gpt2" || len(v.Merges) == 0 || v.EOS < 0 {
				return fmt.Errorf("%s: --vocab for %s needs a byte-level BPE (gpt2) vocabulary with merges and an EOS id", c.Vocab, spec.Arch)
			}
			spec.Tokens, spec.Merges, spec.Pre, spec.EOT = v.Tokens, v.Merges, v.Pre, int(v.EOS)
			spec.Types = v.Types
			if spec.Types == nil {
				spec.Types = make([]int32, len(v.Tokens))
				for i := range spec.Types {
					spec.Types[i] = 1
				}
			}
		case v.Model != "llama" || len(v.Scores) != len(v.Tokens) || len(v.Types) != len(v.Tokens):
			return fmt.Errorf("%s: --vocab needs a SentencePiece (llama) vocabulary with scores and token types", c.Vocab)
		default:
			spec.Tokens, spec.Scores, spec.Types = v.Tokens, v.Scores, v.Types
		}
	}
	matrices := dt.String()
	if mix {
		matrices = c.Quant
	}
	return c.write(spec, spec.Name, matrices)
}

// runGPTOSS writes a gpt-oss preset; dt is the dtype of its experts.
func (c *synthCmd) runGPTOSS(dt ir.DType) error {
	spec, err := synth.GPTOSSPreset(c.Preset, dt, c.Seed)
	if err != nil {
		return usageError{err.Error()}
	}
	if c.Format == "mlx" {
		spec.Matrix = ir.MLXQ8G64 // mlx-community's gpt-oss-20b-MXFP4-Q8
	}
	if c.Vocab != "" {
		v, err := readVocab(c.Vocab)
		if err != nil {
			return err
		}
		if v.Model != "gpt2" || len(v.Merges) == 0 || v.EOS < 0 {
			return fmt.Errorf("%s: --vocab for gpt-oss needs a byte-level BPE (gpt2) vocabulary with merges and an EOS id", c.Vocab)
		}
		spec.Tokens, spec.Merges, spec.EOT = v.Tokens, v.Merges, int(v.EOS)
		spec.Types = v.Types
		if spec.Types == nil {
			spec.Types = make([]int32, len(v.Tokens))
			for i := range spec.Types {
				spec.Types[i] = 1
			}
		}
	}
	return c.write(spec, spec.Name, dt.String())
}

// write writes spec to the output file through a temporary file (or
// directory), so that an interrupted run leaves no truncated model behind.
func (c *synthCmd) write(spec interface {
	Write(io.Writer) (int64, error)
	WriteDir(string, synth.DirOptions) (int64, error)
}, name string, matrices string) error {
	if c.Format != "gguf" {
		bar := newProgress(-1, "writing "+strings.TrimSpace(c.Preset))
		n, err := spec.WriteDir(c.Output, synth.DirOptions{Progress: bar.Add})
		bar.Done()
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "minervac: wrote %s: %s, %s matrices, %s directory, %d bytes\n", c.Output, name, matrices, c.Format, n)
		return nil
	}
	tmp := c.Output + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	bw := bufio.NewWriterSize(f, 4<<20)
	bar := newBytesProgress(-1, "writing "+strings.TrimSpace(c.Preset))
	n, err := spec.Write(countingWriter{bw, bar})
	bar.Done()
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, c.Output); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "minervac: wrote %s: %s, %s matrices, %d bytes\n", c.Output, name, matrices, n)
	return nil
}

type countingWriter struct {
	w   *bufio.Writer
	bar *progress
}

// SetSize is told the file's size before it is written (gguf.Sizer): the
// bar's total.
func (c countingWriter) SetSize(n int64) { c.bar.SetTotal(n) }

func (c countingWriter) Write(b []byte) (int, error) {
	c.bar.Add(len(b))
	return c.w.Write(b)
}

// readVocab reads the tokenizer vocabulary of a model file or plan; errors
// name the file.
func readVocab(path string) (tokenizer.Vocab, error) {
	src, err := frontend.Open(path)
	if err != nil {
		return tokenizer.Vocab{}, err
	}
	defer src.Close()
	v, err := src.Vocab()
	if err != nil {
		return v, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
