package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/minerva-llm/minerva/tokenizer"
)

type tokenizeCmd struct {
	File    string `arg:"" help:"Model or vocab-only GGUF file, a plan, or a Hugging Face tokenizer.json (or the directory holding it, with tokenizer_config.json)." type:"path"`
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
