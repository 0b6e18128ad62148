package runtime

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// GenerateOptions control one generation.
type GenerateOptions struct {
	MaxTokens int
	Sampler   SamplerConfig
	EOS       int32 // -1 for none
	// EOG, when set, names more tokens that end generation as EOS does
	// (a tokenizer's IsEOG: <|eot_id|>, <|im_end|>, <|return|> …): chat
	// models end a turn with tokens other than EOS. IgnoreEOS ignores
	// these too.
	EOG       func(id int32) bool
	IgnoreEOS bool
	// OnToken is called with every generated token as soon as it is chosen;
	// returning an error stops generation with that error.
	OnToken func(id int32) error
	// KeepLogits records the logits of every prompt position and every
	// generated step in the result (for --dump-logits and tests).
	KeepLogits bool
	// UBatch is the most prompt tokens evaluated in one step (0:
	// DefaultUBatch): a longer prompt runs as several steps, so that a
	// step's activations are bounded by UBatch tokens, not the prompt.
	UBatch int

	// Decode turns generated token ids into text (a tokenizer's Decode). It
	// must be prefix-stable: decoding more tokens only appends text. With
	// it, Result.Text holds the generated text, and Stop and OnText work.
	Decode func(ids []int32) string
	// Stop ends generation as soon as the generated text contains one of
	// these strings, wherever the token boundaries fall (a stop string may
	// span several tokens, or start inside one). Result.Text ends just
	// before the stop string, and the stop string is never streamed. Needs
	// Decode.
	Stop []string
	// OnText streams the generated text as it becomes final: text that
	// could still turn into a stop string is held back until it does not,
	// and so is an unfinished UTF-8 character. The pieces concatenate to
	// Result.Text (unless generation ends with an error). Needs Decode.
	OnText func(text string) error
}

// StopReason says why generation ended.
type StopReason string

const (
	StopLength  StopReason = "length"  // MaxTokens reached
	StopEOS     StopReason = "eos"     // the model produced EOS (or another EOG token)
	StopContext StopReason = "context" // the KV cache is full
	StopString  StopReason = "stop"    // the text contains a stop string (Result.StopMatch)
)

// Result is what Generate produced.
type Result struct {
	// Tokens are every generated token, the EOS that ended generation and
	// the tokens that completed a stop string included.
	Tokens       []int32
	PromptLogits [][]float32 // every prompt position (KeepLogits)
	GenLogits    [][]float32 // the logits each generated token was chosen from (KeepLogits)
	Stop         StopReason
	// Text is the generated text (with Decode): the tokens decoded, without
	// a final EOS, cut just before the stop string that ended generation.
	Text string
	// StopMatch is the stop string found (Stop == StopString).
	StopMatch string
	Timings   Timings
}

// Timings reports where the time went.
type Timings struct {
	PromptTokens int           `json:"prompt_tokens"`
	PromptTime   time.Duration `json:"prompt_ns"`
	GenTokens    int           `json:"gen_tokens"`
	GenTime      time.Duration `json:"gen_ns"`
}

// DefaultUBatch is GenerateOptions.UBatch's default, llama.cpp's ubatch.
const DefaultUBatch = 512

// Generate evaluates the prompt in steps of at most UBatch tokens, then
// samples up to MaxTokens tokens one step at a time. It stops early on EOS (unless IgnoreEOS), on a
// stop string, at the context limit (Stop = StopContext, no error), or when
// ctx is cancelled (checked before every step; the error is ctx's, and the
// result so far is returned with it).
//
// The prompt is appended at the session's current position, so a session
// can be continued; the last generated token is not evaluated (its logits
// are never needed), so to continue pass it at the start of the next prompt.
func Generate(ctx context.Context, s *Session, prompt []int32, opts GenerateOptions) (*Result, error) {
	sampler, err := NewSampler(opts.Sampler)
	if err != nil {
		return nil, err
	}
	if len(prompt) == 0 {
		return nil, fmt.Errorf("the prompt is empty")
	}
	if opts.Decode == nil && (len(opts.Stop) > 0 || opts.OnText != nil) {
		return nil, fmt.Errorf("stop strings and OnText need a Decode function")
	}
	for _, st := range opts.Stop {
		if st == "" {
			return nil, fmt.Errorf("a stop string is empty")
		}
	}
	if len(prompt) > s.Context()-s.Pos() {
		return nil, fmt.Errorf("%w: the prompt has %d tokens but only %d positions are left", ErrContextFull, len(prompt), s.Context()-s.Pos())
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := &Result{Stop: StopLength}
	var text *textWatcher
	if opts.Decode != nil {
		text = &textWatcher{decode: opts.Decode, stops: opts.Stop, onText: opts.OnText}
	}
	history := append([]int32(nil), prompt...)
	// Greedy decoding on a program that picks the token on the device
	// never copies the logits back (Session.EvalGreedy).
	_, onDevice := s.prog.(GreedyProgram)
	greedy := sampler.Greedy() && !opts.KeepLogits && onDevice
	var logits []float32
	var next int32 // the greedy token after the last step (greedy)
	start := time.Now()
	ub := opts.UBatch
	if ub <= 0 {
		ub = DefaultUBatch
	}
	for at := 0; at < len(prompt); at += ub {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		chunk := prompt[at:min(at+ub, len(prompt))]
		if greedy {
			if next, err = s.EvalGreedy(chunk); err != nil {
				return nil, err
			}
			continue
		}
		if !opts.KeepLogits {
			// Only the last row is sampled from: the program computes
			// that row of the output matmul alone.
			if logits, err = s.EvalLast(chunk); err != nil {
				return nil, err
			}
			continue
		}
		rows, err := s.Eval(chunk)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			res.PromptLogits = append(res.PromptLogits, append([]float32(nil), r...))
		}
		logits = rows[len(rows)-1]
	}
	res.Timings.PromptTokens, res.Timings.PromptTime = len(prompt), time.Since(start)
	start = time.Now()
	defer func() { res.Timings.GenTokens, res.Timings.GenTime = len(res.Tokens), time.Since(start) }()
	fail := func(err error) (*Result, error) {
		if text != nil {
			res.Text = text.final()
		}
		return res, err
	}
	for len(res.Tokens) < opts.MaxTokens {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		if opts.KeepLogits {
			res.GenLogits = append(res.GenLogits, append([]float32(nil), logits...))
		}
		id := next
		if !greedy {
			id = sampler.Sample(logits, history)
		}
		res.Tokens = append(res.Tokens, id)
		history = append(history, id)
		if opts.OnToken != nil {
			if err := opts.OnToken(id); err != nil {
				return fail(err)
			}
		}
		if !opts.IgnoreEOS && (id == opts.EOS && opts.EOS >= 0 || opts.EOG != nil && opts.EOG(id)) {
			res.Stop = StopEOS
			break
		}
		if text != nil {
			matched, err := text.add(res.Tokens)
			if err != nil {
				return fail(err)
			}
			if matched {
				res.Stop, res.StopMatch = StopString, text.match
				break
			}
		}
		if len(res.Tokens) == opts.MaxTokens {
			break
		}
		if s.Pos() >= s.Context() {
			res.Stop = StopContext
			break
		}
		if greedy {
			if next, err = s.EvalGreedy([]int32{id}); err != nil {
				return fail(err)
			}
			continue
		}
		if logits, err = s.EvalLast([]int32{id}); err != nil {
			return fail(err)
		}
	}
	if text != nil {
		res.Text = text.final()
		if err := text.flush(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// textWatcher decodes the generated tokens after every step, looks for stop
// strings and streams the text that can no longer change.
type textWatcher struct {
	decode func([]int32) string
	stops  []string
	onText func(string) error
	text   string // the generated tokens decoded
	sent   int    // bytes of text passed to onText
	cut    int    // where the stop string starts (with match)
	match  string
}

// add decodes tokens (all generated so far) and reports whether a stop
// string appeared.
func (w *textWatcher) add(tokens []int32) (bool, error) {
	w.text = w.decode(tokens)
	best := -1
	for _, s := range w.stops {
		if i := strings.Index(w.text, s); i >= 0 && (best < 0 || i < best) {
			best, w.match = i, s
		}
	}
	if best >= 0 {
		w.cut = best
		return true, nil
	}
	// No stop string yet: everything is final except a tail that begins
	// one, and an unfinished character.
	safe := len(w.text)
	for _, s := range w.stops {
		for k := min(len(s)-1, len(w.text)); k > 0; k-- {
			if strings.HasSuffix(w.text, s[:k]) {
				safe = min(safe, len(w.text)-k)
				break
			}
		}
	}
	safe = completeUTF8(w.text, safe)
	if w.onText != nil && safe > w.sent {
		piece := w.text[w.sent:safe]
		w.sent = safe
		return false, w.onText(piece)
	}
	return false, nil
}

// final is the text of the result.
func (w *textWatcher) final() string {
	if w.match != "" {
		return w.text[:w.cut]
	}
	return w.text
}

// flush streams what was held back.
func (w *textWatcher) flush() error {
	t := w.final()
	if w.onText == nil || len(t) <= w.sent {
		return nil
	}
	piece := t[w.sent:]
	w.sent = len(t)
	return w.onText(piece)
}

// completeUTF8 moves end back before an unfinished (but so far valid) UTF-8
// character at the end of s[:end].
func completeUTF8(s string, end int) int {
	for i := end - 1; i >= 0 && i >= end-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:end]) {
				return i
			}
			break
		}
	}
	return end
}
