package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/minerva-llm/minerva/frontend/hf"
	"github.com/minerva-llm/minerva/tokenizer"
)

type tokenizeCmd struct {
	File    string `arg:"" help:"Model or vocab-only GGUF file, a plan, a model directory (opened as run opens it), or a Hugging Face tokenizer.json (or a directory holding only the tokenizer files)." type:"path"`
	Text    string `help:"Text to tokenize." required:""`
	NoBOS   bool   `help:"Do not add the beginning-of-sequence token."`
	Special bool   `help:"Parse special-token text written in TEXT (<|start|>, <|im_start|>, </s> …) as those tokens; without it they are ordinary text."`
	JSON    bool   `help:"Print {\"ids\": [...], \"pieces\": [...]} as JSON."`
}

func (c *tokenizeCmd) Run() error {
	tok, _, err := loadTokenizerFile(c.File)
	if err != nil {
		return err
	}
	ids := tok.EncodeWith(c.Text, tokenizer.EncodeOptions{AddBOS: tok.AddBOS() && !c.NoBOS, ParseSpecial: c.Special})
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

// newTokenizer makes the tokenizer of a vocabulary read from name. A model
// directory without tokenizer.json has no vocabulary: that is said in one
// line, with what to do about it.
func newTokenizer(name string, v tokenizer.Vocab) (*tokenizer.Tokenizer, error) {
	if len(v.Tokens) == 0 {
		if st, err := os.Stat(filepath.Join(name, hf.ConfigName)); err == nil && st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s has no %s: copy the model's %s and %s into it (minervac reads the prompt and prints text through them)", name, hf.TokenizerName, hf.TokenizerName, hf.TokenizerConfigName)
		}
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		return nil, fmt.Errorf("%s: tokenizer: %w", name, err)
	}
	return tok, nil
}

// isModelDir tells a model directory (it has config.json) from a
// directory holding only tokenizer files.
func isModelDir(path string) bool {
	st, err := os.Stat(filepath.Join(path, hf.ConfigName))
	return err == nil && st.Mode().IsRegular()
}
