package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"

	"golang.org/x/term"

	"github.com/minerva-llm/minerva/chat"
	"github.com/minerva-llm/minerva/runtime"
)

type chatCmd struct {
	Model         string  `arg:"" optional:"" help:"Plan file or model file (.gguf, compiled once and cached). Without one, the built-in synthetic llama (which needs --chat-template)." type:"path"`
	System        string  `help:"System prompt (for gpt-oss: the developer message's instructions)."`
	ShowReasoning bool    `name:"show-reasoning" help:"Show the model's reasoning (gpt-oss's analysis channel, <think> blocks): dim on a terminal, on stderr otherwise. Hidden by default."`
	Tokenizer     string  `help:"Use this tokenizer, and its chat template when it has one, instead of the model's: a vocab-only GGUF (o200k-harmony.gguf), a model, a plan, or a tokenizer.json. It must have as many tokens as the model has logits." type:"path"`
	N             int     `short:"n" help:"Most tokens in one answer (0: until the model ends its turn or the context is full)." default:"1024"`
	Temp          float64 `help:"Sampling temperature; 0 is greedy." default:"0.8"`
	TopK          int     `help:"Keep the k most likely tokens (0 = off)." default:"40"`
	TopP          float64 `help:"Keep the smallest set of tokens whose probability reaches p (1 = off)." default:"0.95"`
	MinP          float64 `help:"Drop tokens less likely than min-p times the top one (0 = off)." default:"0.05"`
	RepeatPenalty float64 `help:"Penalty for tokens seen in the last 64 (1 = off)." default:"1"`
	Seed          uint64  `help:"Random seed for sampling." default:"0"`
	Ctx           int     `help:"KV cache size in positions: the whole conversation must fit (default: the model's context length, at most 4096)."`
	UBatch        int     `name:"ubatch" help:"Most prompt tokens evaluated in one step." default:"512"`
	cacheFlags    `embed:""`
	Target        string `short:"t" help:"Backend for a .gguf model: goasm (the CPU) or reference (the interpreter); a plan runs on the target it was compiled for." default:"goasm"`
	JSON          bool   `help:"Print one JSON object per turn (prompt_tokens, reused, evaluated, tokens, text, reasoning, stop, timings) instead of streaming text."`
	Verbose       bool   `short:"v" help:"Print load times, and after each answer how many prompt tokens came from the KV cache and how many were evaluated."`
	templateFlags
}

const chatHelp = "/reset starts over, /system TEXT sets the system prompt, /exit quits; Ctrl-C stops an answer"

func (c *chatCmd) Run(bo *runtime.Options) error {
	if c.N < 0 {
		return usageError{fmt.Sprintf("-n %d: the number of tokens per answer must be ≥ 0", c.N)}
	}
	if c.Ctx < 0 {
		return usageError{fmt.Sprintf("--ctx %d must be positive", c.Ctx)}
	}
	if c.UBatch < 1 {
		return usageError{fmt.Sprintf("--ubatch %d must be ≥ 1", c.UBatch)}
	}
	sc := runtime.SamplerConfig{Temperature: c.Temp, TopK: c.TopK, TopP: c.TopP, MinP: c.MinP, RepeatPenalty: c.RepeatPenalty, Seed: c.Seed}
	if err := sc.Validate(); err != nil {
		return usageError{err.Error()}
	}
	if _, err := c.templateFlags.options(); err != nil {
		return err // before the model is loaded
	}
	tm := &timer{on: c.Verbose}
	tm.reset()
	m, err := openRunnable(c.Model, c.Target, c.cacheFlags, bo, tm)
	if err != nil {
		return err
	}
	defer m.Close()
	tok, mc := m.tok, m.chat
	if c.Tokenizer != "" {
		t, tmc, err := loadTokenizerFile(c.Tokenizer)
		if err != nil {
			return err
		}
		tok = t
		if tmc.template != "" {
			mc.template, mc.specials = tmc.template, tmc.specials
		}
	}
	p, err := newPrompter(tok, mc, c.templateFlags)
	if errors.Is(err, chat.ErrNoTemplate) {
		return fmt.Errorf("%s: %w", displayName(c.Model), err)
	}
	if err != nil {
		return err
	}
	sess, ctxLen, err := m.loadSession(c.Ctx)
	if err != nil {
		return err
	}
	if c.Tokenizer != "" && tok.VocabSize() != sess.VocabSize() {
		return fmt.Errorf("--tokenizer %s has %d tokens but the model's output has %d logits: they must be equal", c.Tokenizer, tok.VocabSize(), sess.VocabSize())
	}
	// The session runs on a counting view of the program: each turn
	// reports the tokens it evaluated as the program saw them.
	steps := new(int)
	if sess, err = runtime.NewProgramSession(countSteps(sess.Program(), steps), 0); err != nil {
		return err
	}
	defer sess.Close()
	tm.say("ready: KV cache of %d positions", ctxLen)

	ch := newChatter(p, sess, steps, runtime.GenerateOptions{MaxTokens: c.N, Sampler: sc, UBatch: c.UBatch})
	ch.system = c.System
	return c.loop(ch, os.Stdin, os.Stdout, os.Stderr, ctxLen)
}

// loop reads the user's messages, one a line, and answers each. On a
// terminal it prompts with "> "; from a pipe or file it is a script: one
// message per line, each answer on stdout followed by a newline.
func (c *chatCmd) loop(ch *chatter, in, stdout, stderr *os.File, ctxLen int) error {
	interactive := term.IsTerminal(int(in.Fd()))
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	sink := &consoleSink{out: out, side: stderr, show: c.ShowReasoning, dim: term.IsTerminal(int(stdout.Fd())), json: c.JSON}

	// Ctrl-C cancels the answer being generated. At the prompt it says how
	// to quit; a script waiting for its next line ends, as SIGINT ends a
	// program in a pipeline (exit status 130).
	var mu sync.Mutex
	var cancel context.CancelFunc
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	go func() {
		for range sig {
			mu.Lock()
			if cancel != nil {
				cancel()
			} else if interactive {
				fmt.Fprintf(stderr, "\n(%s; Ctrl-D also quits)\n> ", chatHelp)
			} else {
				out.Flush()
				os.Exit(130)
			}
			mu.Unlock()
		}
	}()

	if interactive {
		fmt.Fprintf(stderr, "minervac: chatting with %s (context %d positions). %s.\n", displayName(c.Model), ctxLen, chatHelp)
	}
	r := bufio.NewReader(in)
	for {
		if interactive {
			out.WriteString("> ")
			out.Flush()
		}
		line, err := r.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		eof := err != nil
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			if eof {
				if interactive {
					out.WriteString("\n")
				}
				return nil
			}
			continue
		}
		if strings.HasPrefix(line, "/") {
			quit, err := c.command(ch, line, stderr)
			if err != nil {
				fmt.Fprintln(stderr, "minervac:", err)
			}
			if quit {
				return nil
			}
			if eof {
				return nil
			}
			continue
		}

		ctx, stop := context.WithCancel(context.Background())
		mu.Lock()
		cancel = stop
		mu.Unlock()
		res, err := ch.turn(ctx, line, sink)
		mu.Lock()
		cancel = nil
		mu.Unlock()
		stop()
		var te turnError
		if errors.As(err, &te) {
			fmt.Fprintln(stderr, "minervac:", te.msg)
			if eof {
				return nil
			}
			continue
		}
		if err != nil {
			return err
		}
		if err := c.report(ch, res, sink, out, stderr); err != nil {
			return err
		}
		if eof {
			return nil
		}
	}
}

// report ends an answer: the newline after the streamed text (or the turn
// as JSON), and why it ended when that is news.
func (c *chatCmd) report(ch *chatter, res *turnResult, sink *consoleSink, out *bufio.Writer, stderr *os.File) error {
	if c.JSON {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		out.Write(append(b, '\n'))
	} else {
		sink.end()
	}
	if err := out.Flush(); err != nil {
		return err
	}
	switch res.Stop {
	case "interrupted":
		fmt.Fprintln(stderr, "minervac: answer interrupted")
	case string(runtime.StopContext):
		fmt.Fprintf(stderr, "minervac: the context of %d positions is full: /reset to start over (or raise --ctx)\n", ch.sess.Context())
	case string(runtime.StopLength):
		if !c.JSON {
			fmt.Fprintf(stderr, "minervac: the answer reached -n %d tokens\n", c.N)
		}
	}
	if c.Verbose {
		fmt.Fprintf(stderr, "minervac: turn %d: prompt %d tokens, %d from the KV cache, %d evaluated in %.1f ms; generated %d tokens in %.1f ms (%.1f tok/s)\n",
			res.Turn, res.PromptTokens, res.Reused, res.Evaluated, res.PromptMS, len(res.Tokens), res.GenMS, rate(len(res.Tokens), res.GenMS/1e3))
	}
	return nil
}

// command runs a /command; quit says the chat is over.
func (c *chatCmd) command(ch *chatter, line string, stderr io.Writer) (quit bool, err error) {
	name, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "/exit", "/quit", "/bye":
		return true, nil
	case "/reset":
		ch.reset()
		fmt.Fprintln(stderr, "minervac: conversation reset")
	case "/system":
		// A new system prompt changes the start of every later prompt; the
		// next turn re-evaluates from there.
		ch.system = arg
		if arg == "" {
			fmt.Fprintln(stderr, "minervac: system prompt cleared")
		} else {
			fmt.Fprintln(stderr, "minervac: system prompt set")
		}
	case "/help", "/?":
		fmt.Fprintln(stderr, chatHelp)
	default:
		return false, fmt.Errorf("unknown command %s (%s)", name, chatHelp)
	}
	return false, nil
}

// consoleSink prints an answer as it streams: the content on stdout, the
// reasoning (with --show-reasoning) dim on a terminal, or on stderr when
// stdout is not one, so that a script reads answers alone.
type consoleSink struct {
	out       *bufio.Writer
	side      io.Writer
	show, dim bool
	json      bool // --json: nothing streams
	reasoning bool // the last text shown was reasoning
	sideOpen  bool // reasoning written to side without its final newline
}

const (
	sgrDim   = "\x1b[2m"
	sgrReset = "\x1b[0m"
)

func (s *consoleSink) Reasoning(text string) {
	if !s.show || s.json {
		return
	}
	if !s.dim {
		io.WriteString(s.side, text)
		s.sideOpen = true
		return
	}
	if !s.reasoning {
		s.out.WriteString(sgrDim)
		s.reasoning = true
	}
	s.out.WriteString(text)
	s.out.Flush()
}

func (s *consoleSink) Content(text string) {
	if s.json {
		return
	}
	s.closeReasoning()
	s.out.WriteString(text)
	s.out.Flush()
}

// closeReasoning ends shown reasoning before the answer: the dim text with
// its line, or the stderr line.
func (s *consoleSink) closeReasoning() {
	if s.reasoning {
		s.out.WriteString(sgrReset + "\n")
		s.reasoning = false
	}
	if s.sideOpen {
		io.WriteString(s.side, "\n")
		s.sideOpen = false
	}
}

// end finishes the answer's line.
func (s *consoleSink) end() {
	if s.json {
		return
	}
	if s.reasoning {
		s.out.WriteString(sgrReset)
		s.reasoning = false
	}
	if s.sideOpen {
		io.WriteString(s.side, "\n")
		s.sideOpen = false
	}
	s.out.WriteString("\n")
}
