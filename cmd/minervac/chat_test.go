package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/chat"
	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/tokenizer"
)

// minervacIn runs the binary with stdin and returns stdout, stderr and the
// exit code.
func minervacIn(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return runProgram(t, minervacBin, nil, stdin, args...)
}

// turns parses chat --json output: one object per answered message.
func turns(t *testing.T, stdout string) []turnResult {
	t.Helper()
	var out []turnResult
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var r turnResult
		require.NoError(t, json.Unmarshal([]byte(line), &r), "stdout line %q", line)
		out = append(out, r)
	}
	return out
}

// vocabOf reads the tokenizer of a model file, as a test's independent
// view of what a prompt tokenizes to.
func vocabOf(t *testing.T, path string) *tokenizer.Tokenizer {
	t.Helper()
	src, err := frontend.Open(path)
	require.NoError(t, err)
	defer src.Close()
	v, err := src.Vocab()
	require.NoError(t, err)
	tok, err := tokenizer.New(v)
	require.NoError(t, err)
	return tok
}

// heldAfter is what the KV cache holds after a turn: its prompt and every
// generated token but the last, which was chosen and never evaluated.
func heldAfter(prompt []int32, r turnResult) []int32 {
	held := append(append([]int32(nil), prompt...), r.Tokens...)
	return held[:len(held)-1]
}

// A template for stories260K, which has none: "role:content" lines, and the
// assistant's header without a space, since the model writes its own.
const storiesTemplate = "{% for m in messages %}{{ m.role }}:{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"

// minervac chat on stories260K through a script on stdin: the second turn
// evaluates only its new tokens (the first turn's prompt and answer come
// from the KV cache), /reset starts over, and the answers stream to stdout
// one per line. The expected prompts are rendered and tokenized here, apart
// from the command: turn 2's prompt is the whole conversation, and what the
// command reports as evaluated (counted at the program) is exactly the part
// of it past the longest prefix the cache held.
func TestChatStoriesScripted(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	tpl := filepath.Join(t.TempDir(), "chat.jinja")
	require.NoError(t, os.WriteFile(tpl, []byte(storiesTemplate), 0o644))
	script := "Once upon a time\nThe dog ran to the park\n/reset\nOnce upon a time\n"
	args := []string{"chat", model, "--chat-template", tpl, "-n", "24", "--temp", "0"}
	stdout, stderr, code := minervacIn(t, script, append(args, "--json")...)
	require.Equal(t, 0, code, stderr)
	rs := turns(t, stdout)
	require.Len(t, rs, 3)

	tok := vocabOf(t, model)
	encode := func(conv chat.Conversation) []int32 {
		text, err := chat.Render(storiesTemplate, conv, chat.Options{AddGenerationPrompt: true})
		require.NoError(t, err)
		return tok.EncodeWith(text, tokenizer.EncodeOptions{AddBOS: true, ParseSpecial: true})
	}
	var conv chat.Conversation
	conv.Add("user", "Once upon a time")
	p1 := encode(conv)
	require.Equal(t, turnResult{Turn: 1, PromptTokens: len(p1), Reused: 0, Evaluated: len(p1)},
		turnResult{Turn: rs[0].Turn, PromptTokens: rs[0].PromptTokens, Reused: rs[0].Reused, Evaluated: rs[0].Evaluated})
	require.Len(t, rs[0].Tokens, 24)
	require.Equal(t, "length", rs[0].Stop)
	require.Equal(t, tok.Decode(rs[0].Tokens), rs[0].Text)

	conv.Add("assistant", rs[0].Text)
	conv.Add("user", "The dog ran to the park")
	p2 := encode(conv)
	held := heldAfter(p1, rs[0])
	reused := commonPrefix(held, p2)
	require.Equal(t, len(held), reused, "the whole first turn, prompt and answer, is reused")
	require.Equal(t, len(p2), rs[1].PromptTokens)
	require.Equal(t, reused, rs[1].Reused)
	require.Equal(t, len(p2)-reused, rs[1].Evaluated, "turn 2 evaluates only its new tokens")
	t.Logf("turn 2 evaluated %d new tokens of %d (%d from the KV cache)", rs[1].Evaluated, rs[1].PromptTokens, rs[1].Reused)

	// After /reset the first message gets the first answer again, from an
	// empty cache.
	require.Equal(t, 0, rs[2].Reused)
	require.Equal(t, len(p1), rs[2].Evaluated)
	require.Equal(t, rs[0].Tokens, rs[2].Tokens)
	require.Contains(t, stderr, "conversation reset")

	// Without --json the answers stream to stdout, one line each, and -v
	// reports the same counts.
	stdout, stderr, code = minervacIn(t, script, append(args, "-v")...)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, rs[0].Text+"\n"+rs[1].Text+"\n"+rs[2].Text+"\n", stdout)
	require.Contains(t, stderr, "turn 2: prompt "+itoa(int32(len(p2)))+" tokens, "+itoa(int32(reused))+" from the KV cache, "+itoa(int32(len(p2)-reused))+" evaluated")
}

// minervac chat on both gpt-oss fixtures, which carry no template: the
// harmony renderer writes the prompts (system prompt as the developer
// message, reasoning effort), and the second turn evaluates only what
// follows the prefix it shares with the cache. The harmony template renders
// the earlier answer inside a final-channel message, which the fixture's
// bare output did not write, so the cache's prefix ends at that answer: the
// first prompt is reused, the rest is new.
func TestChatGPTOSSScripted(t *testing.T) {
	for _, fixture := range []string{"gptoss-g1-q8emb", "gptoss-g1-mxfp4"} {
		t.Run(fixture, func(t *testing.T) {
			model := shared.Path(t, "models/gguf/synthetic/"+fixture+".gguf")
			now := "2026-11-24T12:00:00Z"
			stdout, stderr, code := minervacIn(t, "Hello!\nWhat is the capital of France?\n/reset\nHello!\n",
				"chat", model, "-n", "12", "--temp", "0", "--json", "--system", "Answer briefly.", "--reasoning-effort", "low", "--now", now)
			require.Equal(t, 0, code, stderr)
			rs := turns(t, stdout)
			require.Len(t, rs, 3)

			tok := vocabOf(t, model)
			clock, err := time.Parse(time.RFC3339, now)
			require.NoError(t, err)
			encode := func(conv chat.Conversation) []int32 {
				text, err := chat.RenderHarmony(conv, chat.Options{AddGenerationPrompt: true, Vars: map[string]any{"reasoning_effort": "low"}, Now: clock})
				require.NoError(t, err)
				require.Contains(t, text, "Reasoning: low")
				require.Contains(t, text, "# Instructions\n\nAnswer briefly.")
				return tok.EncodeWith(text, tokenizer.EncodeOptions{ParseSpecial: true}) // gpt-oss adds no BOS
			}
			var conv chat.Conversation
			conv.Add("system", "Answer briefly.")
			conv.Add("user", "Hello!")
			p1 := encode(conv)
			require.Equal(t, len(p1), rs[0].PromptTokens)
			require.Equal(t, len(p1), rs[0].Evaluated)
			require.NotEmpty(t, rs[0].Tokens)

			// The answer goes back as the harmony parser reads it.
			conv.Messages = append(conv.Messages, chat.ParseHarmony(rs[0].Text).Message())
			conv.Add("user", "What is the capital of France?")
			p2 := encode(conv)
			reused := commonPrefix(heldAfter(p1, rs[0]), p2)
			require.GreaterOrEqual(t, reused, len(p1), "the first prompt comes from the cache")
			require.Equal(t, len(p2), rs[1].PromptTokens)
			require.Equal(t, reused, rs[1].Reused)
			require.Equal(t, len(p2)-reused, rs[1].Evaluated, "turn 2 evaluates only its new tokens")
			t.Logf("turn 2 evaluated %d new tokens of %d (%d from the KV cache)", rs[1].Evaluated, rs[1].PromptTokens, rs[1].Reused)

			require.Equal(t, 0, rs[2].Reused, "after /reset")
			require.Equal(t, len(p1), rs[2].Evaluated)
			require.Equal(t, rs[0].Tokens, rs[2].Tokens)
		})
	}
}

// A model without a chat template gets chat.ErrNoTemplate's line, naming the
// flag; bad chat flags are one line each.
func TestChatBadInput(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	_, stderr, code := minervacIn(t, "hi\n", "chat", model)
	require.Equal(t, 1, code)
	require.Equal(t, "minervac: "+model+": "+chat.ErrNoTemplate.Error()+"\n", stderr)

	bad := filepath.Join(t.TempDir(), "bad.jinja")
	require.NoError(t, os.WriteFile(bad, []byte("{% for m in messages %}"), 0o644))
	for _, c := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"--reasoning-effort", "extreme"}, `--reasoning-effort: reasoning effort must be low, medium or high, not "extreme"`, 2},
		{[]string{"--var", "=x"}, `--var: variable "=x" is not KEY=VALUE`, 2},
		{[]string{"--now", "yesterday"}, `--now "yesterday" is not an RFC 3339 time`, 2},
		{[]string{"-n", "-1"}, "-n -1: the number of tokens per answer must be ≥ 0", 2},
		{[]string{"--chat-template", bad}, bad + ": chat template: cannot parse", 1},
		{[]string{"--chat-template", "/no/such/file"}, "--chat-template: open /no/such/file: no such file or directory", 1},
		{[]string{"--tokenizer", shared.Path(t, "models/gguf/vocab/o200k-harmony.gguf")}, "has 201088 tokens but the model's output has 512 logits: they must be equal", 1},
	} {
		_, stderr, code := minervacIn(t, "hi\n", append([]string{"chat", model, "--chat-template", writeTemplate(t)}, c.args...)...)
		require.Equal(t, c.code, code, "%v: %s", c.args, stderr)
		require.Contains(t, stderr, c.want, c.args)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
		require.NotContains(t, stderr, "panic")
	}
}

// writeTemplate writes storiesTemplate to a file of the test.
func writeTemplate(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "chat.jinja")
	require.NoError(t, os.WriteFile(p, []byte(storiesTemplate), 0o644))
	return p
}

// When the conversation outgrows the context, chat says so and offers
// /reset instead of crashing: the answer stops when the cache is full, the
// next message is refused in one line, and after /reset the chat goes on.
func TestChatContextFull(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	stdout, stderr, code := minervacIn(t, "Once upon a time\nAnd then?\n/reset\nOnce upon a time\n",
		"chat", model, "--chat-template", writeTemplate(t), "-n", "0", "--temp", "0", "--ctx", "40", "--json")
	require.Equal(t, 0, code, stderr)
	rs := turns(t, stdout)
	require.Len(t, rs, 2, "the second message does not fit")
	require.Equal(t, "context", rs[0].Stop)
	require.Equal(t, 40, rs[0].PromptTokens+len(rs[0].Tokens)-1, "the answer fills the cache")
	require.Contains(t, stderr, "minervac: the context of 40 positions is full: /reset to start over (or raise --ctx)")
	require.Regexp(t, `minervac: the conversation is \d+ tokens and the context holds 40: /reset to start over`, stderr)
	require.Equal(t, rs[0].Tokens, rs[1].Tokens, "after /reset, the first answer again")
	require.Equal(t, 0, rs[1].Reused)
}

// Ctrl-C stops the answer, not the program: the chat goes on with the next
// line of the script.
func TestChatInterrupt(t *testing.T) {
	cmd := exec.Command(minervacBin, "chat", "--chat-template", writeTemplate(t), "-n", "0", "--ctx", "100100", "--temp", "0")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	_, err = io.WriteString(in, "hello\n")
	require.NoError(t, err)
	// Interrupt once the answer streams: the turn (and its handler) runs.
	r := bufio.NewReader(out)
	_, err = r.ReadByte()
	require.NoError(t, err, stderr.String())
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	_, err = io.WriteString(in, "/reset\n/exit\n")
	require.NoError(t, err)
	require.NoError(t, in.Close())
	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, cmd.Wait(), stderr.String())
	require.True(t, strings.HasSuffix(string(rest), "\n"), "the answer's line is ended")
	require.Contains(t, stderr.String(), "minervac: answer interrupted\n")
	require.Contains(t, stderr.String(), "minervac: conversation reset\n", "the chat went on after Ctrl-C")
}

// A Hugging Face model directory chats with the template and special
// tokens of its tokenizer_config.json (stories260K's is TinyLlama's zephyr
// template, eos_token </s>, which the prompt holds as a token).
func TestChatHFDirectory(t *testing.T) {
	dir := shared.Path(t, "models/hf/stories260K")
	stdout, stderr, code := minervacIn(t, "Hello\nAnd then?\n", "chat", dir, "-n", "12", "--temp", "0", "--json")
	require.Equal(t, 0, code, stderr)
	rs := turns(t, stdout)
	require.Len(t, rs, 2)

	v, cfg, err := tokenizer.LoadHF(dir)
	require.NoError(t, err)
	require.NotEmpty(t, cfg.ChatTemplate)
	tok, err := tokenizer.New(v)
	require.NoError(t, err)
	var conv chat.Conversation
	conv.Add("user", "Hello")
	text, err := chat.Render(cfg.ChatTemplate, conv, chat.Options{AddGenerationPrompt: true, SpecialTokens: map[string]string{"eos_token": cfg.EOSToken}})
	require.NoError(t, err)
	p1 := tok.EncodeWith(text, tokenizer.EncodeOptions{AddBOS: true, ParseSpecial: true})
	require.Contains(t, p1, tok.EOS(), "</s> from the template is one token")
	require.Equal(t, len(p1), rs[0].PromptTokens)
	require.Greater(t, rs[1].Reused, len(p1), "turn 2 reuses turn 1")
	require.Equal(t, rs[1].PromptTokens-rs[1].Reused, rs[1].Evaluated)
}
