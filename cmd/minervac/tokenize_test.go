package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/chat"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/tokenizer"
)

func idsOf(t *testing.T, stdout string) []int32 {
	t.Helper()
	var res struct {
		IDs []int32 `json:"ids"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &res), "stdout: %q", stdout)
	return res.IDs
}

// tokenize reads a Hugging Face tokenizer.json, named as the file or as its
// directory, and gives the GGUF's ids for the same model (stories260K's
// golden prompt, BOS added as tokenizer_config.json says).
func TestTokenizeHFTokenizer(t *testing.T) {
	want := []int32{1, 403, 407, 261, 378} // golden prompt_tokens of stories260K__once_upon_a_time
	for _, path := range []string{"models/hf/stories260K", "models/hf/stories260K/tokenizer.json"} {
		stdout, stderr, code := minervac(t, "tokenize", shared.Path(t, path), "--text", "Once upon a time", "--json")
		require.Equal(t, 0, code, stderr)
		require.Equal(t, want, idsOf(t, stdout), path)
	}
	_, stderr, code := minervac(t, "tokenize", t.TempDir(), "--text", "x")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "tokenizer.json: no such file or directory")
}

// tokenize --special parses control tokens written in the text, without it
// they are text (except the five harmony tokens the reference always
// matches): the reference engine's ids from
// golden/tokenizer/o200k-harmony-special.jsonl.
func TestTokenizeSpecial(t *testing.T) {
	f, err := os.Open(shared.Path(t, "golden/tokenizer/o200k-harmony-special.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	var lines []struct {
		Text         string  `json:"text"`
		ParseSpecial bool    `json:"parse_special"`
		IDs          []int32 `json:"ids"`
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			Text         string  `json:"text"`
			ParseSpecial bool    `json:"parse_special"`
			IDs          []int32 `json:"ids"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		lines = append(lines, l)
	}
	// The pair with <|return|>, which only --special makes one token.
	vocab := shared.Path(t, "models/gguf/vocab/o200k-harmony.gguf")
	for _, l := range lines[2:4] {
		require.Contains(t, l.Text, "<|return|>")
		args := []string{"tokenize", vocab, "--text", l.Text, "--json"}
		if l.ParseSpecial {
			args = append(args, "--special")
		}
		stdout, stderr, code := minervac(t, args...)
		require.Equal(t, 0, code, stderr)
		require.Equal(t, l.IDs, idsOf(t, stdout), "parse_special %v", l.ParseSpecial)
	}
}

// run --special parses control tokens in --prompt; run --chat renders the
// prompt with the chat template once (the prompt tokens are the template's
// output, tokenized with its control tokens); gpt-oss without a template is
// rendered in harmony.
func TestRunChatAndSpecial(t *testing.T) {
	stories := shared.Path(t, "models/gguf/stories260K.gguf")
	promptOf := func(args ...string) []int32 {
		t.Helper()
		stdout, stderr, code := minervac(t, append([]string{"run", "-n", "4", "--json"}, args...)...)
		require.Equal(t, 0, code, stderr)
		var res struct {
			PromptTokens []int32 `json:"prompt_tokens"`
			Tokens       []int32 `json:"tokens"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &res))
		require.NotEmpty(t, res.Tokens)
		return res.PromptTokens
	}
	require.Equal(t, []int32{1, 2, 403, 407}, promptOf(stories, "--prompt", "</s>Once upon", "--special"), "BOS, </s> as one token")
	require.NotContains(t, promptOf(stories, "--prompt", "</s>Once upon"), int32(2), "</s> is text without --special")

	tpl := writeTemplate(t)
	tok := vocabOf(t, stories)
	var conv chat.Conversation
	conv.Add("system", "Be kind.")
	conv.Add("user", "Once upon a time")
	text, err := chat.Render(storiesTemplate, conv, chat.Options{AddGenerationPrompt: true})
	require.NoError(t, err)
	require.Equal(t, tok.EncodeWith(text, tokenizer.EncodeOptions{AddBOS: true, ParseSpecial: true}),
		promptOf(stories, "--chat", "--chat-template", tpl, "--system", "Be kind.", "--prompt", "Once upon a time"))

	g1 := shared.Path(t, "models/gguf/synthetic/gptoss-g1-q8emb.gguf")
	conv = chat.Conversation{}
	conv.Add("user", "Hello!")
	text, err = chat.RenderHarmony(conv, chat.Options{AddGenerationPrompt: true, Vars: map[string]any{"reasoning_effort": "high"}, Now: mustTime(t, goldenClock)})
	require.NoError(t, err)
	require.Equal(t, vocabOf(t, g1).EncodeWith(text, tokenizer.EncodeOptions{ParseSpecial: true}),
		promptOf(g1, "--chat", "--prompt", "Hello!", "--reasoning-effort", "high", "--now", goldenClock))

	_, stderr, code := minervac(t, "run", stories, "--chat", "--prompt", "hi")
	require.Equal(t, 1, code)
	require.Equal(t, "minervac: "+stories+": "+chat.ErrNoTemplate.Error()+"\n", stderr)
	_, stderr, code = minervac(t, "run", stories, "--chat", "--chat-template", tpl, "--tokens", "1,2")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--chat renders --prompt with the chat template; --tokens gives the prompt as ids instead")
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return tm
}

// TestTokenizeModelDir: tokenize opens a model directory (or a file in it)
// as run does, through frontend.Open, and gives the GGUF's ids; a model
// directory without tokenizer.json is a one-line error for tokenize and
// run alike, while a directory holding only the tokenizer files is read
// as a tokenizer.
func TestTokenizeModelDir(t *testing.T) {
	want := []int32{1, 403, 407, 261, 378} // golden prompt_tokens of stories260K__once_upon_a_time
	src := shared.Path(t, "models/hf/stories260K")
	for _, path := range []string{src, filepath.Join(src, "model.safetensors"), filepath.Join(src, "config.json")} {
		stdout, stderr, code := minervac(t, "tokenize", path, "--text", "Once upon a time", "--json")
		require.Equal(t, 0, code, stderr)
		require.Equal(t, want, idsOf(t, stdout), path)
	}

	bare := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		require.NoError(t, os.Symlink(filepath.Join(src, f), filepath.Join(bare, f)))
	}
	for _, args := range [][]string{
		{"tokenize", bare, "--text", "x"},
		{"run", bare, "--target", "reference", "-n", "2"},
		{"run", bare, "--target", "reference", "--tokens", "1,2", "-n", "2"},
	} {
		_, stderr, code := minervac(t, args...)
		require.Equal(t, 1, code, args)
		require.Contains(t, stderr, "no tokenizer.json", args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, stderr)
	}

	tokOnly := t.TempDir()
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		require.NoError(t, os.Symlink(filepath.Join(src, f), filepath.Join(tokOnly, f)))
	}
	stdout, stderr, code := minervac(t, "tokenize", tokOnly, "--text", "Once upon a time", "--json")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, want, idsOf(t, stdout))
}
