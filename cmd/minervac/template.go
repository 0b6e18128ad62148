package main

import (
	"fmt"
	"io"
	"os"

	"github.com/minerva-llm/minerva/chat"
	"github.com/minerva-llm/minerva/tokenizer"
)

type templateCmd struct {
	Model               string `arg:"" optional:"" help:"Model file (.gguf), plan, vocab-only GGUF or Hugging Face tokenizer.json (or its directory): its chat template and special tokens. Optional with --chat-template." type:"path"`
	Messages            string `help:"The conversation: a JSON file holding {\"messages\": [...], \"tools\": [...]} as the OpenAI API takes it; - reads standard input." required:""`
	AddGenerationPrompt bool   `name:"add-generation-prompt" help:"End with the header of an assistant turn, as a prompt for the model's answer."`
	templateFlags
}

// Run prints the rendered prompt exactly, without a newline of its own: the
// way to see what a model is given, byte for byte.
func (c *templateCmd) Run() error {
	if c.Model == "" && c.ChatTemplate == "" {
		return usageError{"give a MODEL whose chat template to use, or --chat-template FILE"}
	}
	body, err := readMessages(c.Messages)
	if err != nil {
		return err
	}
	conv, err := chat.ParseConversation(body)
	if err != nil {
		return fmt.Errorf("%s: %s", c.Messages, trimChat(err))
	}
	var tok *tokenizer.Tokenizer
	var mc modelChat
	if c.Model != "" {
		if tok, mc, err = loadTokenizerFile(c.Model); err != nil {
			return err
		}
	}
	p, err := newPrompter(tok, mc, c.templateFlags)
	if err != nil {
		return err
	}
	out, err := p.render(conv, c.AddGenerationPrompt)
	if err != nil {
		return err
	}
	_, err = io.WriteString(os.Stdout, out)
	return err
}

// readMessages reads the conversation file, or standard input for "-".
func readMessages(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--messages: %w", err)
	}
	return b, nil
}

// trimChat drops the package prefix of a chat error: the caller names the
// file instead.
func trimChat(err error) string {
	s := err.Error()
	if len(s) > 6 && s[:6] == "chat: " {
		return s[6:]
	}
	return s
}
