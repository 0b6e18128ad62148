package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
)

// goldenChatFile is one golden/chat/<model>.json (README-tokenizer-chat.md).
type goldenChatFile struct {
	Model         string            `json:"model"`
	ChatTemplate  string            `json:"chat_template"`
	SpecialTokens map[string]string `json:"special_tokens"`
	Cases         []goldenChatCase  `json:"cases"`
}

type goldenChatCase struct {
	Name                string          `json:"name"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	ExtraKwargs         json.RawMessage `json:"extra_kwargs"`
	Expected            *string         `json:"expected"`
	Error               *string         `json:"error"`
}

// goldenClock is the fixed clock the goldens were rendered with.
var goldenClock = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func loadChatGoldens(t *testing.T) map[string]goldenChatFile {
	t.Helper()
	dir := shared.Path(t, "golden/chat")
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	out := map[string]goldenChatFile{}
	for _, p := range paths {
		if filepath.Base(p) == "harmony-parse.json" {
			continue
		}
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		var f goldenChatFile
		require.NoError(t, json.Unmarshal(data, &f), p)
		out[filepath.Base(p)] = f
	}
	require.NotEmpty(t, out)
	return out
}

// caseInputs builds the conversation and options a golden case was rendered
// with: its messages and tools parsed in order, its extra_kwargs as variables,
// the file's special tokens and the fixed clock.
func caseInputs(t *testing.T, f goldenChatFile, c goldenChatCase) (Conversation, Options) {
	t.Helper()
	tools := c.Tools
	if len(tools) == 0 {
		tools = json.RawMessage("null")
	}
	body := `{"messages": ` + string(c.Messages) + `, "tools": ` + string(tools) + `}`
	conv, err := ParseConversation([]byte(body))
	require.NoError(t, err)
	opts := Options{AddGenerationPrompt: c.AddGenerationPrompt, SpecialTokens: f.SpecialTokens, Now: goldenClock}
	if len(c.ExtraKwargs) > 0 && string(c.ExtraKwargs) != "null" {
		v, err := ParseJSON(c.ExtraKwargs)
		require.NoError(t, err)
		obj := v.(*Object)
		opts.Vars = map[string]any{}
		for _, k := range obj.Keys() {
			opts.Vars[k], _ = obj.Get(k)
		}
	}
	return conv, opts
}

func TestTemplateGoldens(t *testing.T) {
	for file, f := range loadChatGoldens(t) {
		t.Run(file, func(t *testing.T) {
			tpl, err := Compile(f.ChatTemplate)
			require.NoError(t, err)
			pass := 0
			for _, c := range f.Cases {
				name := c.Name
				if c.AddGenerationPrompt {
					name += "+gen"
				}
				t.Run(name, func(t *testing.T) {
					conv, opts := caseInputs(t, f, c)
					got, err := tpl.Render(conv, opts)
					if c.Error != nil {
						require.Error(t, err)
						require.Contains(t, err.Error(), *c.Error)
						pass++
						return
					}
					require.NoError(t, err)
					require.NotNil(t, c.Expected)
					require.Equal(t, *c.Expected, got)
					pass++
				})
			}
			t.Logf("%s: %d/%d cases byte-identical", file, pass, len(f.Cases))
		})
	}
}
