// Command minervac is Minerva's command line: it inspects model files,
// tokenizes text and runs models.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/alecthomas/kong"
)

type cli struct {
	Run      runCmd      `cmd:"" help:"Generate text with a model (a built-in synthetic llama when no model is given)."`
	Compile  compileCmd  `cmd:"" help:"Run the pass pipeline on a model and print the fused graph or a summary."`
	Inspect  inspectCmd  `cmd:"" help:"Print a model file's metadata, tensors and architecture."`
	Tokenize tokenizeCmd `cmd:"" help:"Print the token ids and pieces of a text."`
}

func main() {
	var c cli
	parser, err := kong.New(&c,
		kong.Name("minervac"),
		kong.Description("Minerva: a compiler for large language models."),
		kong.UsageOnError(),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "minervac:", err)
		os.Exit(2)
	}
	ctx, err := parser.Parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "minervac:", err)
		os.Exit(2)
	}
	if err := ctx.Run(); err != nil {
		var u usageError
		fmt.Fprintln(os.Stderr, "minervac:", err)
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError marks a bad flag combination (exit status 2, like a parse error).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }
