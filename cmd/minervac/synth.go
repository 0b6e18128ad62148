package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
	"github.com/minerva-llm/minerva/synth"
)

type synthCmd struct {
	Arch   string `help:"Architecture family." default:"llama" enum:"llama"`
	Preset string `help:"Shape: stories15m, tinyllama-1.1b or llama-7b." required:""`
	Quant  string `help:"Dtype of the matrices: f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k … q6_k, mxfp4." default:"q4_0"`
	Vocab  string `help:"Take the vocabulary of this GGUF (its size replaces the preset's)." type:"path"`
	Seed   uint64 `help:"Random seed." default:"1"`
	Output string `short:"o" help:"Output file." required:"" type:"path"`
}

func (c *synthCmd) Run() error {
	dt, ok := ir.ParseDType(c.Quant)
	if !ok || !quant.CanQuantize(dt) {
		return usageError{fmt.Sprintf("--quant %s: not a dtype minervac can write", c.Quant)}
	}
	spec, err := synth.Preset(c.Preset, dt, c.Seed)
	if err != nil {
		return usageError{err.Error()}
	}
	if c.Vocab != "" {
		f, err := openGGUF(c.Vocab)
		if err != nil {
			return err
		}
		v, err := arch.LoadVocab(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", c.Vocab, err)
		}
		if v.Model != "llama" || len(v.Scores) != len(v.Tokens) || len(v.Types) != len(v.Tokens) {
			return fmt.Errorf("%s: --vocab needs a SentencePiece (llama) vocabulary with scores and token types", c.Vocab)
		}
		spec.Tokens, spec.Scores, spec.Types = v.Tokens, v.Scores, v.Types
	}
	tmp := c.Output + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	bw := bufio.NewWriterSize(f, 4<<20)
	bar := newProgress(-1, "writing "+strings.TrimSpace(c.Preset))
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
	fmt.Fprintf(os.Stderr, "minervac: wrote %s: %s, %s matrices, %d bytes\n", c.Output, spec.Name, dt, n)
	return nil
}

type countingWriter struct {
	w   *bufio.Writer
	bar *progress
}

func (c countingWriter) Write(b []byte) (int, error) {
	c.bar.Add(len(b))
	return c.w.Write(b)
}
