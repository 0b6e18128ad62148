package main

import (
	"bufio"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/chat"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/tokenizer"
)

// scriptedProgram is a model that answers each prompt with a script: its
// greedy token after a prompt step (several tokens) is script[0], after the
// next step script[1], and so on. It stands in for a chat model, whose
// control tokens (<|channel|>, <|end|>, <|return|>, <think>) a random-weight
// fixture never writes, so that the turn logic around them runs with the
// real vocabularies and templates.
type scriptedProgram struct {
	ctx, nVocab int
	script      []int32
	i           int
}

func (p *scriptedProgram) Config() runtime.ProgramConfig {
	return runtime.ProgramConfig{Context: p.ctx, Slots: 1}
}
func (p *scriptedProgram) VocabSize() int    { return p.nVocab }
func (p *scriptedProgram) CacheBytes() int64 { return 0 }
func (p *scriptedProgram) ResetSlot(int) error {
	return nil
}
func (p *scriptedProgram) Close() error { return nil }

func (p *scriptedProgram) Step(slot int, tokens, pos []int32) ([][]float32, error) {
	if len(tokens) > 1 {
		p.i = 0 // a new prompt
	}
	rows := make([][]float32, len(tokens))
	for i := range rows {
		rows[i] = make([]float32, p.nVocab)
	}
	if p.i < len(p.script) {
		rows[len(rows)-1][p.script[p.i]] = 1
	}
	p.i++
	return rows, nil
}

// recordSink keeps what a turn streamed.
type recordSink struct{ reasoning, content strings.Builder }

func (s *recordSink) Reasoning(t string) { s.reasoning.WriteString(t) }
func (s *recordSink) Content(t string)   { s.content.WriteString(t) }

// chatWith sets up a conversation with the tokenizer and template of a
// vocabulary file, answered by a scriptedProgram.
func chatWith(t *testing.T, vocabFile string) (*chatter, *scriptedProgram, *prompter) {
	t.Helper()
	tok, mc, err := loadTokenizerFile(shared.Path(t, vocabFile))
	require.NoError(t, err)
	require.NotEmpty(t, mc.template)
	p, err := newPrompter(tok, mc, templateFlags{Now: "2026-11-24T12:00:00Z"})
	require.NoError(t, err)
	prog := &scriptedProgram{ctx: 4096, nVocab: tok.VocabSize()}
	steps := new(int)
	sess, err := runtime.NewProgramSession(countSteps(prog, steps), 0)
	require.NoError(t, err)
	return newChatter(p, sess, steps, runtime.GenerateOptions{MaxTokens: 100, Sampler: runtime.DefaultSampler()}), prog, p
}

// gpt-oss with its real vocabulary and template: the analysis channel is
// reasoning, the final channel the answer; <|end|> ends a message and the
// generation goes on, <|return|> ends it; the answer goes back into the
// conversation with its reasoning as "thinking", which the template drops
// on the next turn, so turn 2 evaluates from there (exactly the tokens past
// the prefix it shares with the cache). A tool call ends at <|call|>.
func TestChatHarmonyTurns(t *testing.T) {
	ch, prog, p := chatWith(t, "models/gguf/vocab/o200k-harmony.gguf")
	require.True(t, p.harmony)
	require.NotNil(t, p.tpl, "the file's template, not the built-in renderer")
	tok := ch.tok
	script := func(s string) []int32 {
		return tok.EncodeWith(s, tokenizer.EncodeOptions{ParseSpecial: true})
	}
	prog.script = append(script("<|channel|>analysis<|message|>Let me think.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>"), script(" never")...)
	var sink recordSink
	r1, err := ch.turn(context.Background(), "Hi", &sink)
	require.NoError(t, err)
	require.Equal(t, "eos", r1.Stop)
	require.Len(t, r1.Tokens, len(prog.script)-1, "past <|end|>, up to <|return|>")
	require.Equal(t, "Hello!", r1.Text)
	require.Equal(t, "Let me think.", r1.Reasoning)
	require.Equal(t, "Hello!", sink.content.String())
	require.Equal(t, "Let me think.", sink.reasoning.String())
	last := ch.conv.Messages[len(ch.conv.Messages)-1]
	require.Equal(t, "Hello!", last.String("content"))
	require.Equal(t, "Let me think.", last.String("thinking"))
	require.Equal(t, r1.PromptTokens, r1.Evaluated)

	var conv chat.Conversation
	conv.Add("user", "Hi")
	p1, err := p.render(conv, true)
	require.NoError(t, err)
	conv.Messages = append(conv.Messages, last)
	conv.Add("user", "Weather in Paris?")
	text2, err := p.render(conv, true)
	require.NoError(t, err)
	require.NotContains(t, text2, "Let me think.", "the template drops earlier reasoning")
	p2 := p.encode(text2, false)
	held := heldAfter(p.encode(p1, false), *r1)
	reused := commonPrefix(held, p2)

	prog.script = script("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>")
	r2, err := ch.turn(context.Background(), "Weather in Paris?", &recordSink{})
	require.NoError(t, err)
	require.Equal(t, len(p2), r2.PromptTokens)
	require.Equal(t, reused, r2.Reused)
	require.Equal(t, len(p2)-reused, r2.Evaluated, "turn 2 evaluates only its new tokens")
	require.Less(t, r2.Evaluated, r2.PromptTokens)
	t.Logf("turn 2 evaluated %d new tokens of %d (%d from the KV cache)", r2.Evaluated, r2.PromptTokens, r2.Reused)
	require.Equal(t, "eos", r2.Stop)
	require.Equal(t, []chat.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}, r2.ToolCalls)
	require.Equal(t, held[:reused], ch.held[:reused])
	require.Equal(t, ch.sess.Pos(), len(ch.held))
}

// Qwen3 with its real vocabulary and template: the <think> block is
// reasoning and the blank lines after it are dropped; <|im_end|> ends the
// turn; the template drops the old block on the next turn, and turn 2
// evaluates exactly the tokens after the shared prefix.
func TestChatThinkTurns(t *testing.T) {
	ch, prog, p := chatWith(t, "models/gguf/vocab/qwen3-vocab.gguf")
	require.True(t, p.think)
	require.False(t, p.harmony)
	script := func(s string) []int32 {
		return ch.tok.EncodeWith(s, tokenizer.EncodeOptions{ParseSpecial: true})
	}
	prog.script = script("<think>\nThe user greets me.\n</think>\n\nHi there!<|im_end|>")
	var sink recordSink
	r1, err := ch.turn(context.Background(), "Hello", &sink)
	require.NoError(t, err)
	require.Equal(t, "eos", r1.Stop)
	require.Equal(t, "Hi there!", r1.Text)
	require.Equal(t, "\nThe user greets me.\n", r1.Reasoning)
	require.Equal(t, "Hi there!", sink.content.String())

	var conv chat.Conversation
	conv.Add("user", "Hello")
	conv.Add("assistant", "<think>\nThe user greets me.\n</think>\n\nHi there!")
	conv.Add("user", "Bye")
	text2, err := p.render(conv, true)
	require.NoError(t, err)
	require.NotContains(t, text2, "greets", "the template drops old reasoning")
	p1, err := p.render(chat.Conversation{Messages: conv.Messages[:1]}, true)
	require.NoError(t, err)
	p2 := p.encode(text2, false)
	reused := commonPrefix(heldAfter(p.encode(p1, false), *r1), p2)

	prog.script = script("Bye!<|im_end|>")
	r2, err := ch.turn(context.Background(), "Bye", &sink)
	require.NoError(t, err)
	require.Equal(t, "Bye!", r2.Text)
	require.Equal(t, reused, r2.Reused)
	require.Equal(t, len(p2)-reused, r2.Evaluated)
	require.Less(t, r2.Evaluated, r2.PromptTokens)
	t.Logf("turn 2 evaluated %d new tokens of %d (%d from the KV cache)", r2.Evaluated, r2.PromptTokens, r2.Reused)
}

// The splitter gives the same pieces whatever the chunks, tags cut
// anywhere; a prompt that opens <think> itself starts in reasoning.
func TestThinkSplitter(t *testing.T) {
	text := "<think>\nstep 1 < 2\n</think>\n\nThe answer </thin is 4"
	join := func(chunk int, in bool) (string, string) {
		s := &thinkSplitter{in: in}
		var r, c strings.Builder
		add := func(ps []thinkPiece) {
			for _, p := range ps {
				if p.reasoning {
					r.WriteString(p.text)
				} else {
					c.WriteString(p.text)
				}
			}
		}
		for i := 0; i < len(text); i += chunk {
			add(s.push(text[i:min(i+chunk, len(text))]))
		}
		add(s.flush())
		return r.String(), c.String()
	}
	for chunk := 1; chunk <= len(text); chunk++ {
		r, c := join(chunk, false)
		require.Equal(t, "\nstep 1 < 2\n", r, "chunk %d", chunk)
		require.Equal(t, "The answer </thin is 4", c, "chunk %d", chunk)
	}
	text = "reasoning first</think>answer"
	r, c := join(3, true)
	require.Equal(t, "reasoning first", r)
	require.Equal(t, "answer", c)
}

// What the console shows: reasoning hidden by default; with
// --show-reasoning dim on a terminal, on stderr otherwise, so that stdout
// holds only answers.
func TestConsoleSinkReasoning(t *testing.T) {
	for _, c := range []struct {
		show, dim   bool
		out, stderr string
	}{
		{false, true, "Hello!\n", ""},
		{true, true, sgrDim + "hmm" + sgrReset + "\nHello!\n", ""},
		{true, false, "Hello!\n", "hmm\n"},
	} {
		var out, side strings.Builder
		w := bufio.NewWriter(&out)
		s := &consoleSink{out: w, side: &side, show: c.show, dim: c.dim}
		s.Reasoning("hm")
		s.Reasoning("m")
		s.Content("Hello!")
		s.end()
		require.NoError(t, w.Flush())
		require.Equal(t, c.out, out.String(), "show %v, terminal %v", c.show, c.dim)
		require.Equal(t, c.stderr, side.String(), "show %v, terminal %v", c.show, c.dim)
	}
}
