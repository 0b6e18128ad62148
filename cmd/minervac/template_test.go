package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/chat"
	"github.com/minerva-llm/minerva/internal/shared"
)

// goldenChat is a ../shared/golden/chat/<model>.json file, its messages and
// tools kept as written (key order, numbers such as 3.0).
type goldenChat struct {
	Model         string            `json:"model"`
	ChatTemplate  string            `json:"chat_template"`
	SpecialTokens map[string]string `json:"special_tokens"`
	Cases         []struct {
		Name                string                     `json:"name"`
		AddGenerationPrompt bool                       `json:"add_generation_prompt"`
		Messages            json.RawMessage            `json:"messages"`
		Tools               json.RawMessage            `json:"tools"`
		ExtraKwargs         map[string]json.RawMessage `json:"extra_kwargs"`
		Expected            *string                    `json:"expected"`
		Error               *string                    `json:"error"`
	} `json:"cases"`
}

func readGoldenChat(t *testing.T, name string) goldenChat {
	t.Helper()
	b, err := os.ReadFile(shared.Path(t, "golden/chat/"+name+".json"))
	require.NoError(t, err)
	var g goldenChat
	require.NoError(t, json.Unmarshal(b, &g))
	return g
}

// goldenClock is the fixed clock the goldens were rendered with.
const goldenClock = "2026-11-24T12:00:00Z"

// minervac template prints, byte for byte, what transformers renders for
// every conversation of every golden chat file: the template from
// --chat-template, the special tokens and extra variables as --var, the
// conversation as an OpenAI request body.
func TestTemplateGoldenChats(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(shared.Path(t, "golden/chat"), "*.json"))
	require.NoError(t, err)
	n := 0
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if name == "harmony-parse" {
			continue
		}
		g := readGoldenChat(t, name)
		dir := t.TempDir()
		tpl := filepath.Join(dir, "template.jinja")
		require.NoError(t, os.WriteFile(tpl, []byte(g.ChatTemplate), 0o644))
		for i, c := range g.Cases {
			conv := filepath.Join(dir, "conv.json")
			body := `{"messages": ` + string(c.Messages) + `, "tools": ` + string(c.Tools) + `}`
			require.NoError(t, os.WriteFile(conv, []byte(body), 0o644))
			args := []string{"template", "--chat-template", tpl, "--messages", conv, "--now", goldenClock}
			if c.AddGenerationPrompt {
				args = append(args, "--add-generation-prompt")
			}
			for k, v := range g.SpecialTokens {
				js, _ := json.Marshal(v)
				args = append(args, "--var", k+"="+string(js))
			}
			for k, v := range c.ExtraKwargs {
				args = append(args, "--var", k+"="+string(v))
			}
			stdout, stderr, code := minervac(t, args...)
			if c.Error != nil {
				require.Equal(t, 1, code, "%s %s #%d", name, c.Name, i)
				require.Contains(t, stderr, *c.Error)
				continue
			}
			require.Equal(t, 0, code, "%s %s #%d: %s", name, c.Name, i, stderr)
			require.Equal(t, *c.Expected, stdout, "%s %s (add_generation_prompt %v)", name, c.Name, c.AddGenerationPrompt)
			n++
		}
	}
	require.Greater(t, n, 70)
	t.Logf("%d conversations rendered byte for byte", n)
}

// The template and special tokens can come from a model: a GGUF file's
// tokenizer.chat_template (o200k-harmony.gguf carries gpt-oss's), a Hugging
// Face tokenizer directory's tokenizer_config.json (llama-2-tiny-random
// carries TinyLlama's zephyr template, eos_token </s>), or, for gpt-oss
// without a template, the built-in harmony renderer (fixture G1). Each
// gives the golden strings; --messages - reads standard input.
func TestTemplateFromModel(t *testing.T) {
	for _, c := range []struct {
		model, golden string
		vars          []string
	}{
		{"models/gguf/vocab/o200k-harmony.gguf", "gpt-oss", nil},
		{"models/gguf/synthetic/gptoss-g1-q8emb.gguf", "gpt-oss", nil},
		{"models/hf/llama-2-tiny-random", "tinyllama-chat", nil},
		{"models/hf/llama-2-tiny-random/tokenizer.json", "tinyllama-chat", nil},
	} {
		g := readGoldenChat(t, c.golden)
		// Every third case: the chat package renders all of them, and each
		// run here loads the model's vocabulary (o200k's takes a while).
		for i, gc := range g.Cases {
			if i%3 != 0 {
				continue
			}
			body := `{"messages": ` + string(gc.Messages) + `, "tools": ` + string(gc.Tools) + `}`
			args := []string{"template", shared.Path(t, c.model), "--messages", "-", "--now", goldenClock}
			if gc.AddGenerationPrompt {
				args = append(args, "--add-generation-prompt")
			}
			for k, v := range gc.ExtraKwargs {
				args = append(args, "--var", k+"="+string(v))
			}
			stdout, stderr, code := minervacIn(t, body, args...)
			require.Equal(t, 0, code, "%s %s: %s", c.model, gc.Name, stderr)
			require.Equal(t, *gc.Expected, stdout, "%s %s (add_generation_prompt %v)", c.model, gc.Name, gc.AddGenerationPrompt)
		}
	}
}

// Bad input is one line naming what is wrong.
func TestTemplateBadInput(t *testing.T) {
	dir := t.TempDir()
	conv := filepath.Join(dir, "conv.json")
	require.NoError(t, os.WriteFile(conv, []byte(`{"messages": [{"role": "user", "content": "hi"}]}`), 0o644))
	notConv := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(notConv, []byte(`{"messages": [{"content": "hi"}]}`), 0o644))
	tpl := filepath.Join(dir, "t.jinja")
	require.NoError(t, os.WriteFile(tpl, []byte(`{{ raise_exception("roles must alternate") }}`), 0o644))
	stories := shared.Path(t, "models/gguf/stories260K.gguf")
	for _, c := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"--messages", conv}, "give a MODEL whose chat template to use, or --chat-template FILE", 2},
		{[]string{stories, "--messages", conv}, chat.ErrNoTemplate.Error(), 1},
		{[]string{"--chat-template", tpl, "--messages", notConv}, notConv + `: message 0 has no "role"`, 1},
		{[]string{"--chat-template", tpl, "--messages", filepath.Join(dir, "none.json")}, "--messages: open", 1},
		{[]string{"--chat-template", tpl, "--messages", conv}, "chat template error: roles must alternate", 1},
		{[]string{"--chat-template", tpl, "--messages", conv, "--var", "messages=[]"}, `variable "messages" comes from the conversation`, 1},
	} {
		_, stderr, code := minervac(t, append([]string{"template"}, c.args...)...)
		require.Equal(t, c.code, code, "%v: %s", c.args, stderr)
		require.Contains(t, stderr, c.want, c.args)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
	}
}
