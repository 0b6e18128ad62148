package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/synth"
	"github.com/minerva-llm/minerva/tokenizer"
)

// openSource opens what the user named through the one open path
// (frontend.Open: a GGUF model or a plan, each file opened, mapped and
// hashed once), or makes the built-in synthetic model when path is empty
// (and says so on stderr, since its output is gibberish by design).
func openSource(path string) (*frontend.Source, error) {
	if path != "" {
		return frontend.Open(path)
	}
	spec := synth.Default()
	fmt.Fprintf(os.Stderr, "minervac: no model given; using the built-in synthetic llama %q (random weights: the text is gibberish by design)\n", spec.Name)
	var buf bytes.Buffer
	if _, err := spec.Write(&buf); err != nil {
		return nil, err
	}
	return frontend.ParseGGUF(displayName(""), buf.Bytes())
}

// loaded is a model file with its graph built: ready to compile.
type loaded struct {
	src   *frontend.Source
	model *arch.Model
	tok   *tokenizer.Tokenizer
}

// build builds the graph and the tokenizer of a model source (not a plan:
// that is compiled already). The source stays the caller's.
func build(src *frontend.Source, opts arch.Options) (*loaded, error) {
	m, err := src.Build(opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.Name, err)
	}
	tok, err := newTokenizer(src.Name, m.Vocab)
	if err != nil {
		return nil, err
	}
	return &loaded{src: src, model: m, tok: tok}, nil
}

// loadModel opens path (openSource) and builds it. Close m.src when done.
func loadModel(path string, opts arch.Options) (*loaded, error) {
	src, err := openSource(path)
	if err != nil {
		return nil, err
	}
	m, err := build(src, opts)
	if err != nil {
		src.Close()
		return nil, err
	}
	return m, nil
}

func displayName(path string) string {
	if path == "" {
		return "built-in model"
	}
	return path
}
