package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/tokenizer"
)

type tokenizeCmd struct {
	File  string `arg:"" help:"Model or vocab-only GGUF file, or a plan." type:"path"`
	Text  string `help:"Text to tokenize." required:""`
	NoBOS bool   `help:"Do not add the beginning-of-sequence token."`
	JSON  bool   `help:"Print {\"ids\": [...], \"pieces\": [...]} as JSON."`
}

func (c *tokenizeCmd) Run() error {
	// Only the vocabulary is read: a plan's model file stays closed.
	src, err := frontend.OpenWith(c.File, frontend.Options{Unresolved: true})
	if err != nil {
		return err
	}
	defer src.Close()
	v, err := src.Vocab()
	if err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		return fmt.Errorf("%s: tokenizer: %w", c.File, err)
	}
	ids := tok.Encode(c.Text, tok.AddBOS() && !c.NoBOS)
	pieces := make([]string, len(ids))
	for i, id := range ids {
		pieces[i] = tok.Piece(id)
	}
	if c.JSON {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"ids": ids, "pieces": pieces})
	}
	for i, id := range ids {
		fmt.Printf("%6d  %q\n", id, pieces[i])
	}
	return nil
}
