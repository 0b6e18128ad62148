package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/minerva-llm/minerva/chat"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/tokenizer"
)

// chatter is one conversation with a model: its messages, the session whose
// KV cache holds their tokens, and which tokens those are. Each turn renders
// the whole conversation with the template (templates may rewrite earlier
// turns: gpt-oss drops old reasoning, Qwen3 old <think> blocks), keeps the
// longest prefix the cache already holds and evaluates only the rest, so a
// turn costs its new tokens, not the conversation.
type chatter struct {
	p      *prompter
	tok    *tokenizer.Tokenizer
	sess   *runtime.Session
	steps  *int // tokens the session's program has evaluated (countingProgram)
	system string
	conv   chat.Conversation // the turns, without the system message
	held   []int32           // the tokens in the KV cache, one per position: len(held) == sess.Pos()
	turns  int
	gen    runtime.GenerateOptions // sampling, MaxTokens, UBatch
}

// turnResult is what one turn did, measured: --json prints it, -v a line
// of it.
type turnResult struct {
	Turn int `json:"turn"`
	// PromptTokens is the whole conversation rendered and tokenized, Reused
	// the prefix of it already in the KV cache, Evaluated the tokens the
	// model evaluated before the first new one (counted at the program).
	PromptTokens int             `json:"prompt_tokens"`
	Reused       int             `json:"reused"`
	Evaluated    int             `json:"evaluated"`
	Tokens       []int32         `json:"tokens"` // generated, the end token included
	Text         string          `json:"text"`   // the answer shown
	Reasoning    string          `json:"reasoning,omitempty"`
	ToolCalls    []chat.ToolCall `json:"tool_calls,omitempty"`
	// Stop is why the answer ended: eos (an end-of-turn token), length
	// (-n), context (the KV cache is full) or interrupted (Ctrl-C).
	Stop     string  `json:"stop"`
	PromptMS float64 `json:"prompt_ms"`
	GenMS    float64 `json:"gen_ms"`
}

// turnSink receives an answer as it streams.
type turnSink interface {
	Reasoning(text string)
	Content(text string)
}

// turnError is a turn that could not run (the conversation no longer fits,
// the template refused it): the user is told and the chat goes on.
type turnError struct{ msg string }

func (e turnError) Error() string { return e.msg }

// errTurnDone ends generation when the harmony parser has seen a stop
// marker that the vocabulary has no token for (a stand-in vocabulary
// writes "<|return|>" as text).
var errTurnDone = errors.New("turn done")

func newChatter(p *prompter, sess *runtime.Session, steps *int, gen runtime.GenerateOptions) *chatter {
	return &chatter{p: p, tok: p.tok, sess: sess, steps: steps, gen: gen}
}

// conversation is the messages as the template sees them.
func (c *chatter) conversation() chat.Conversation {
	if c.system == "" {
		return c.conv
	}
	msgs := append([]*chat.Object{chat.NewMessage("system", c.system)}, c.conv.Messages...)
	return chat.Conversation{Messages: msgs, Tools: c.conv.Tools}
}

// reset forgets the conversation (the system prompt stays) and the cache.
func (c *chatter) reset() {
	c.conv = chat.Conversation{}
	c.sess.Reset()
	c.held = nil
}

// turn adds the user's message, answers it and adds the answer. A turn that
// cannot run leaves the conversation as it was and returns a turnError;
// Ctrl-C (ctx cancelled) ends the answer early, which is kept as far as it
// got. Other errors are the backend's and end the chat.
func (c *chatter) turn(ctx context.Context, user string, sink turnSink) (*turnResult, error) {
	c.conv.Add("user", user)
	undo := func() { c.conv.Messages = c.conv.Messages[:len(c.conv.Messages)-1] }
	text, err := c.p.render(c.conversation(), true)
	if err != nil {
		undo()
		return nil, turnError{err.Error()}
	}
	ids := c.p.encode(text, c.tok.AddBOS())
	if len(ids) == 0 {
		undo()
		return nil, turnError{"the chat template rendered an empty prompt"}
	}
	if n := c.sess.Context(); len(ids) >= n {
		undo()
		return nil, turnError{fmt.Sprintf("the conversation is %d tokens and the context holds %d: /reset to start over (or raise --ctx)", len(ids), n)}
	}
	// The cache keeps the longest common prefix; at least the last token is
	// evaluated again, for the logits of the first answer token.
	reuse := commonPrefix(c.held, ids)
	if reuse == len(ids) {
		reuse--
	}
	if err := c.sess.Truncate(reuse); err != nil {
		return nil, err
	}
	c.held = c.held[:reuse]
	c.turns++
	res := &turnResult{Turn: c.turns, PromptTokens: len(ids), Reused: reuse, Evaluated: -1}

	a := newAnswer(c.p, c.tok, sink, strings.HasSuffix(strings.TrimRight(text, " \n"), "<think>"))
	opts := c.gen
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = math.MaxInt32 // until the end of the turn or of the context
	}
	opts.EOS, opts.EOG = c.tok.EOS(), c.tok.IsEOG
	before := *c.steps
	opts.OnToken = func(id int32) error {
		if res.Evaluated < 0 {
			res.Evaluated = *c.steps - before // the prompt is evaluated before the first token is chosen
		}
		return a.add(id)
	}
	gres, err := runtime.Generate(ctx, c.sess, ids[reuse:], opts)
	if res.Evaluated < 0 {
		res.Evaluated = *c.steps - before
	}
	// The cache holds the prompt and the answer up to its last token,
	// which was chosen but not evaluated (or was, when Ctrl-C came after
	// its step).
	held := ids
	if gres != nil {
		held = append(held, gres.Tokens...)
	}
	if c.sess.Pos() > len(held) {
		return nil, fmt.Errorf("the KV cache holds %d positions but the turn gave only %d tokens", c.sess.Pos(), len(held))
	}
	c.held = held[:c.sess.Pos()]
	switch {
	case err == nil || errors.Is(err, errTurnDone):
		res.Stop = string(gres.Stop)
	case errors.Is(err, context.Canceled):
		res.Stop = "interrupted"
		if gres == nil { // during the prompt: no answer, and no turn
			undo()
			return res, nil
		}
	default:
		return nil, err
	}
	res.Tokens = gres.Tokens
	res.PromptMS, res.GenMS = ms(gres.Timings.PromptTime.Seconds()), ms(gres.Timings.GenTime.Seconds())
	a.finish(res)
	c.conv.Messages = append(c.conv.Messages, a.message())
	return res, nil
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// answer reads the generated tokens: it decodes them, splits reasoning from
// content (harmony channels or <think> blocks), streams both to the sink
// and builds the assistant message for the conversation.
type answer struct {
	tok     *tokenizer.Tokenizer
	sink    turnSink
	dec     *tokenizer.StreamDecoder
	harmony *chat.HarmonyParser // harmony output
	think   *thinkSplitter      // <think> output
	raw     strings.Builder     // everything decoded, for the message
	content strings.Builder
	reason  strings.Builder
}

func newAnswer(p *prompter, tok *tokenizer.Tokenizer, sink turnSink, inThink bool) *answer {
	a := &answer{tok: tok, sink: sink}
	// Harmony and <think> output are read with their control tokens
	// written out, as the parsers look for them; plain output prints
	// only text.
	a.dec = tok.NewStreamDecoderWith(tokenizer.DecodeOptions{Special: p.harmony || p.think})
	switch {
	case p.harmony:
		a.harmony = chat.NewHarmonyParser()
	case p.think:
		a.think = &thinkSplitter{in: inThink}
	}
	return a
}

// add takes the next generated token.
func (a *answer) add(id int32) error {
	if a.tok.IsEOG(id) {
		// The end of the turn, not part of the answer; the harmony parser
		// records its stop token (<|return|>, <|call|>) as the terminator.
		if text := a.tok.DecodeWith([]int32{id}, tokenizer.DecodeOptions{Special: true}); a.harmony != nil && slices.Contains(chat.HarmonyStopTokens, text) {
			a.push(a.dec.Flush() + text)
		}
		return nil
	}
	a.push(a.dec.Add(id))
	if a.harmony != nil && a.harmony.Done() {
		return errTurnDone
	}
	return nil
}

func (a *answer) push(text string) {
	if text == "" {
		return
	}
	switch {
	case a.harmony != nil:
		a.events(a.harmony.Push(text))
	case a.think != nil:
		a.raw.WriteString(text)
		for _, p := range a.think.push(text) {
			a.emit(p.reasoning, p.text)
		}
	default:
		a.raw.WriteString(text)
		a.emit(false, text)
	}
}

func (a *answer) events(ev []chat.HarmonyEvent) {
	for _, e := range ev {
		switch e.Kind {
		case chat.HarmonyReasoning:
			a.emit(true, e.Text)
		case chat.HarmonyContent:
			a.emit(false, e.Text)
		}
	}
}

func (a *answer) emit(reasoning bool, text string) {
	if text == "" {
		return
	}
	if reasoning {
		a.reason.WriteString(text)
		a.sink.Reasoning(text)
		return
	}
	a.content.WriteString(text)
	a.sink.Content(text)
}

// finish releases what the decoder and parsers held back and fills in the
// result.
func (a *answer) finish(res *turnResult) {
	a.push(a.dec.Flush())
	switch {
	case a.harmony != nil:
		a.events(a.harmony.Finish())
		r := a.harmony.Result()
		res.ToolCalls = r.ToolCalls
		for _, tc := range r.ToolCalls {
			a.sink.Content(fmt.Sprintf("[tool call %s(%s)]", tc.Name, tc.Arguments))
		}
	case a.think != nil:
		for _, p := range a.think.flush() {
			a.emit(p.reasoning, p.text)
		}
	}
	res.Text, res.Reasoning = a.content.String(), a.reason.String()
}

// message is the assistant turn for the conversation: for harmony the
// parsed message (the final answer, its reasoning as "thinking", or the
// tool calls), otherwise the text as generated, <think> block included,
// for the template to keep or drop.
func (a *answer) message() *chat.Object {
	if a.harmony != nil {
		return a.harmony.Result().Message()
	}
	return chat.NewMessage("assistant", a.raw.String())
}

// thinkSplitter splits streamed text at <think> and </think> into reasoning
// and content, holding back a tail that may be the start of a tag, and
// dropping the blank lines between the reasoning and the answer.
type thinkSplitter struct {
	in      bool   // inside <think>
	buf     string // held back: a possible partial tag
	trimmed bool   // content has started (leading whitespace after </think> is dropped until then)
}

type thinkPiece struct {
	reasoning bool
	text      string
}

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

func (s *thinkSplitter) push(text string) []thinkPiece {
	s.buf += text
	var out []thinkPiece
	for {
		tag := thinkOpen
		if s.in {
			tag = thinkClose
		}
		if i := strings.Index(s.buf, tag); i >= 0 {
			out = s.add(out, s.buf[:i])
			s.buf = s.buf[i+len(tag):]
			s.in = !s.in
			if !s.in {
				s.trimmed = false
			}
			continue
		}
		keep := partialSuffix(s.buf, tag)
		out = s.add(out, s.buf[:len(s.buf)-keep])
		s.buf = s.buf[len(s.buf)-keep:]
		return out
	}
}

func (s *thinkSplitter) flush() []thinkPiece {
	out := s.add(nil, s.buf)
	s.buf = ""
	return out
}

func (s *thinkSplitter) add(out []thinkPiece, text string) []thinkPiece {
	if !s.in && !s.trimmed {
		text = strings.TrimLeft(text, " \n")
		s.trimmed = text != ""
	}
	if text == "" {
		return out
	}
	return append(out, thinkPiece{reasoning: s.in, text: text})
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of tag.
func partialSuffix(s, tag string) int {
	for k := min(len(tag)-1, len(s)); k > 0; k-- {
		if strings.HasSuffix(s, tag[:k]) {
			return k
		}
	}
	return 0
}

// countingProgram counts the tokens its program evaluates, so that a chat
// turn reports what it evaluated as measured, not as intended.
type countingProgram struct {
	runtime.Program
	n *int
}

func (p countingProgram) Step(slot int, tokens, pos []int32) ([][]float32, error) {
	rows, err := p.Program.Step(slot, tokens, pos)
	if err == nil {
		*p.n += len(tokens)
	}
	return rows, err
}

// countingGreedy keeps a program's greedy step on the device (Generate
// uses it when the program has one).
type countingGreedy struct{ countingProgram }

func (p countingGreedy) StepGreedy(slot int, tokens, pos []int32) (int32, error) {
	id, err := p.Program.(runtime.GreedyProgram).StepGreedy(slot, tokens, pos)
	if err == nil {
		*p.n += len(tokens)
	}
	return id, err
}

// countSteps wraps a program with a counter of its evaluated tokens.
func countSteps(p runtime.Program, n *int) runtime.Program {
	c := countingProgram{p, n}
	if _, ok := p.(runtime.GreedyProgram); ok {
		return countingGreedy{c}
	}
	return c
}
