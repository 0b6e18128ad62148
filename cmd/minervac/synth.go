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
	Quant  string `help:"Dtype of the matrices: f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k … q6_k, mxfp4, or llama.cpp's per-tensor mix q3_k_m, q4_k_m, q5_k_m (not gpt-oss). For gpt-oss the expert matrices (the other large ones are then q8_0, as in the real files)." default:"q4_0"`
	Vocab  string `help:"Take the vocabulary of this GGUF (its size replaces the preset's): SentencePiece for llama and phi3, byte-level BPE for qwen2, qwen3 and gpt-oss." type:"path"`
	Seed   uint64 `help:"Random seed." default:"1"`
	Output string `short:"o" help:"Output file." required:"" type:"path"`
}

func (c *synthCmd) Run() error {
	mix := slices.Contains(synth.KQuantMixes(), c.Quant)
	dt, ok := ir.ParseDType(c.Quant)
	if !mix && (!ok || !quant.CanQuantize(dt)) {
		return usageError{fmt.Sprintf("--quant %s: not a dtype minervac can write", c.Quant)}
	}
	archs := append([]string{"gpt-oss"}, synth.Families()...)
	if c.Arch != "" && !slices.Contains(archs, c.Arch) {
		return usageError{fmt.Sprintf("--arch %s: not an architecture minervac synth writes (%s)", c.Arch, strings.Join(archs, ", "))}
	}
	if c.Arch == "gpt-oss" || c.Arch == "" && synth.IsGPTOSSPreset(c.Preset) {
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

// write writes spec to the output file through a temporary file, so that an
// interrupted run leaves no truncated model behind.
func (c *synthCmd) write(spec interface {
	Write(io.Writer) (int64, error)
}, name string, matrices string) error {
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
