package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/minerva-llm/minerva/chat"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/tokenizer"
)

type runCmd struct {
	Model         string  `arg:"" optional:"" help:"Plan file (from minervac compile -o) or model file (.gguf, compiled once and cached). Without one, a built-in synthetic llama runs." type:"path"`
	Prompt        string  `help:"Prompt text." default:"Once upon a time"`
	Tokens        string  `help:"Prompt as comma-separated token ids (instead of --prompt)."`
	N             int     `short:"n" help:"Tokens to generate." default:"64"`
	Temp          float64 `help:"Sampling temperature; 0 is greedy (ties go to the lowest id)." default:"0"`
	TopK          int     `help:"Keep the k most likely tokens (0 = off)." default:"0"`
	TopP          float64 `help:"Keep the smallest set of tokens whose probability reaches p (1 = off)." default:"1"`
	MinP          float64 `help:"Drop tokens less likely than min-p times the top one (0 = off)." default:"0"`
	RepeatPenalty float64 `help:"Penalty for tokens seen in the last 64 (1 = off)." default:"1"`
	Seed          uint64  `help:"Random seed for sampling." default:"0"`
	IgnoreEOS     bool    `help:"Keep generating after the end-of-sequence token."`
	NoBOS         bool    `help:"Do not add the beginning-of-sequence token."`
	Ctx           int     `help:"KV cache size in positions (default: the model's context length, at most 4096)."`
	UBatch        int     `name:"ubatch" help:"Most prompt tokens evaluated in one step: a longer prompt runs as several, bounding activation memory." default:"512"`
	cacheFlags    `embed:""`
	JSON          bool     `help:"Print one JSON object (prompt_tokens, tokens, text, timings) instead of streaming text."`
	DumpLogits    string   `help:"Write logits_all.f32 (every prompt position) and gen_logits.f32 (every generated step) into this directory." type:"path"`
	Stop          []string `help:"Stop when the generated text contains this string (repeatable); the string itself is not printed." sep:"none"`
	Verbose       bool     `short:"v" help:"Print load and compile times on stderr."`
	Target        string   `short:"t" help:"Backend for a .gguf model: goasm (the CPU) or reference (the interpreter); a plan runs on the target it was compiled for." default:"goasm"`
	Chat          bool     `help:"Apply the model's chat template (or --chat-template) to --prompt, as one user message, and stop at the end of the model's turn; the output is printed as generated (minervac chat parses reasoning and channels)."`
	System        string   `help:"With --chat: a system message before the prompt."`
	Special       bool     `help:"Parse special-token text written in --prompt (<|start|>, <|im_start|>, </s> …) as those tokens; without it they are ordinary text. --chat always parses what the template writes."`
	templateFlags
}

func (c *runCmd) Run(bo *runtime.Options) error {
	if c.N < 0 {
		return usageError{fmt.Sprintf("-n %d: the number of tokens to generate must be ≥ 0", c.N)}
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
	if c.Tokens != "" && c.Prompt != "Once upon a time" {
		fmt.Fprintln(os.Stderr, "minervac: --prompt is ignored: --tokens gives the prompt")
	}
	tm := &timer{on: c.Verbose}
	tm.reset()
	m, err := openRunnable(c.Model, c.Target, c.cacheFlags, bo, tm)
	if err != nil {
		return err
	}
	defer m.Close()

	prompt, err := c.promptTokens(m)
	if err != nil {
		return err
	}
	sess, ctxLen, err := m.loadSession(c.Ctx)
	if err != nil {
		return err
	}
	defer sess.Close()
	tm.say("ready: KV cache of %d positions", ctxLen)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	opts := runtime.GenerateOptions{
		MaxTokens: c.N, Sampler: sc, EOS: m.tok.EOS(), EOG: m.tok.IsEOG, IgnoreEOS: c.IgnoreEOS,
		KeepLogits: c.DumpLogits != "", Decode: m.tok.Decode, Stop: c.Stop, UBatch: c.UBatch,
	}
	if !c.JSON {
		opts.OnText = func(text string) error {
			out.WriteString(text)
			return out.Flush()
		}
	}
	res, err := runtime.Generate(ctx, sess, prompt, opts)
	if err != nil && errors.Is(err, context.Canceled) && res != nil {
		// Ctrl-C: end the line, say what was done, exit 130 as a shell
		// expects of SIGINT.
		if !c.JSON {
			out.WriteString("\n")
		}
		out.Flush()
		t := res.Timings
		fmt.Fprintf(os.Stderr, "minervac: interrupted: prompt %d tokens in %.1f ms, generated %d tokens in %.1f ms (%.1f tok/s)\n",
			t.PromptTokens, ms(t.PromptTime.Seconds()), len(res.Tokens), ms(t.GenTime.Seconds()), rate(len(res.Tokens), t.GenTime.Seconds()))
		return exitCode(130)
	}
	if err != nil {
		return err
	}
	if !c.JSON {
		out.WriteString("\n")
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if res.Stop == runtime.StopContext {
		fmt.Fprintf(os.Stderr, "minervac: stopped after %d tokens: the context of %d positions is full (raise --ctx)\n", len(res.Tokens), ctxLen)
	}
	if c.DumpLogits != "" {
		if err := dumpLogits(c.DumpLogits, res); err != nil {
			return err
		}
	}
	t := res.Timings
	if c.JSON {
		return json.NewEncoder(out).Encode(map[string]any{
			"prompt_tokens": prompt,
			"tokens":        res.Tokens,
			"text":          res.Text,
			"stop":          res.Stop,
			"timings": map[string]any{
				"prompt_ms":       ms(t.PromptTime.Seconds()),
				"gen_ms":          ms(t.GenTime.Seconds()),
				"prompt_tokens_s": rate(t.PromptTokens, t.PromptTime.Seconds()),
				"gen_tokens_s":    rate(t.GenTokens, t.GenTime.Seconds()),
			},
		})
	}
	fmt.Fprintf(os.Stderr, "minervac: prompt %d tokens in %.1f ms (%.1f tok/s), generated %d tokens in %.1f ms (%.1f tok/s)\n",
		t.PromptTokens, ms(t.PromptTime.Seconds()), rate(t.PromptTokens, t.PromptTime.Seconds()),
		t.GenTokens, ms(t.GenTime.Seconds()), rate(t.GenTokens, t.GenTime.Seconds()))
	return nil
}

func (c *runCmd) promptTokens(m *runnable) ([]int32, error) {
	tok := m.tok
	if c.Chat {
		if c.Tokens != "" {
			return nil, usageError{"--chat renders --prompt with the chat template; --tokens gives the prompt as ids instead"}
		}
		p, err := newPrompter(tok, m.chat, c.templateFlags)
		if errors.Is(err, chat.ErrNoTemplate) {
			return nil, fmt.Errorf("%s: %w", displayName(c.Model), err)
		}
		if err != nil {
			return nil, err
		}
		var conv chat.Conversation
		if c.System != "" {
			conv.Add("system", c.System)
		}
		conv.Add("user", c.Prompt)
		text, err := p.render(conv, true)
		if err != nil {
			return nil, err
		}
		return p.encode(text, tok.AddBOS() && !c.NoBOS), nil
	}
	if c.System != "" || c.ChatTemplate != "" || len(c.Var) > 0 || c.ReasoningEffort != "" {
		fmt.Fprintln(os.Stderr, "minervac: --system, --chat-template, --var and --reasoning-effort are ignored without --chat")
	}
	if c.Tokens != "" {
		var ids []int32
		for _, f := range strings.Split(c.Tokens, ",") {
			id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
			if err != nil || id < 0 || int(id) >= tok.VocabSize() {
				return nil, usageError{fmt.Sprintf("--tokens: %q is not a token id in 0..%d", f, tok.VocabSize()-1)}
			}
			ids = append(ids, int32(id))
		}
		return ids, nil
	}
	ids := tok.EncodeWith(c.Prompt, tokenizer.EncodeOptions{AddBOS: tok.AddBOS() && !c.NoBOS, ParseSpecial: c.Special})
	if len(ids) == 0 {
		return nil, usageError{"the prompt is empty (give --prompt text, or drop --no-bos)"}
	}
	return ids, nil
}

func ms(s float64) float64 { return math.Round(s*1e4) / 10 }

func rate(n int, s float64) float64 {
	if s <= 0 {
		return 0
	}
	return math.Round(float64(n)/s*10) / 10
}

// dumpLogits writes the logits in the layout of ../shared/golden: raw
// float32 little endian, row-major [rows][n_vocab].
func dumpLogits(dir string, res *runtime.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(name string, rows [][]float32) error {
		var buf []byte
		for _, r := range rows {
			for _, v := range r {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			}
		}
		return os.WriteFile(filepath.Join(dir, name), buf, 0o644)
	}
	if err := write("logits_all.f32", res.PromptLogits); err != nil {
		return err
	}
	return write("gen_logits.f32", res.GenLogits)
}
