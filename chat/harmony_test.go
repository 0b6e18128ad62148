package chat

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The built-in renderer gives what the gpt-oss template gave under
// transformers for every golden conversation.
func TestRenderHarmonyGoldens(t *testing.T) {
	f := loadChatGoldens(t)["gpt-oss.json"]
	require.NotEmpty(t, f.Cases)
	for _, c := range f.Cases {
		name := c.Name
		if c.AddGenerationPrompt {
			name += "+gen"
		}
		t.Run(name, func(t *testing.T) {
			conv, opts := caseInputs(t, f, c)
			got, err := RenderHarmony(conv, opts)
			require.NoError(t, err)
			require.Equal(t, *c.Expected, got)
		})
	}
}

// Beyond the goldens, the renderer and the real gpt-oss template (through the
// template engine, itself checked against the goldens) agree on the schema
// shapes and turn orders the goldens do not reach.
func TestRenderHarmonyMatchesTemplate(t *testing.T) {
	f := loadChatGoldens(t)["gpt-oss.json"]
	tpl, err := Compile(f.ChatTemplate)
	require.NoError(t, err)

	const tools = `[
	  {"type": "function", "function": {"name": "search", "description": "Search the web",
	    "parameters": {"type": "object", "properties": {
	      "q": {"type": "string", "description": "query"},
	      "mode": {"type": "string", "enum": ["fast", "deep"], "default": "fast"},
	      "tags": {"type": "array", "items": {"type": "string"}, "nullable": true},
	      "ids": {"type": "array", "items": {"type": "integer"}},
	      "flags": {"type": "array", "items": {"type": "boolean"}},
	      "scores": {"type": "array", "items": {"type": "number"}},
	      "anything": {"type": "array"},
	      "points": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x"]}},
	      "blobs": {"type": "array", "items": {"type": "object"}},
	      "either": {"type": ["string", "number"]},
	      "single": {"type": ["boolean"]},
	      "choice": {"oneOf": [{"type": "string", "description": "a name"}, {"type": "integer", "default": 3}], "default": "x"},
	      "objs": {"oneOf": [{"type": "object"}, {"type": "string"}]},
	      "nested": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "object", "properties": {"c": {"type": "boolean"}}}}, "required": ["a"]},
	      "plain": {"type": "object"},
	      "maybe": {"type": "string", "nullable": true},
	      "limit": {"type": "integer", "default": 10},
	      "ratio": {"type": "number", "default": 0.25},
	      "unknown": {}
	    }, "required": ["q"]}}},
	  {"type": "function", "function": {"name": "now", "description": "The time", "parameters": {"type": "object", "properties": {}}}},
	  {"type": "function", "function": {"name": "noparams", "description": "No parameters at all"}}
	]`
	convs := []struct{ name, body string }{
		{"tools and a call with content, then a final answer", `{"messages": [
			{"role": "developer", "content": "Be brief."},
			{"role": "user", "content": "find cats"},
			{"role": "assistant", "content": "I should search.", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": {"q": "cats"}}}]},
			{"role": "tool", "tool_call_id": "c1", "content": "many cats"},
			{"role": "assistant", "content": "There are many cats."},
			{"role": "user", "content": "thanks"}], "tools": ` + tools + `}`},
		{"a call whose thinking is kept (no final answer after it)", `{"messages": [
			{"role": "user", "content": "time?"},
			{"role": "assistant", "thinking": "Call now.", "tool_calls": [{"function": {"name": "now", "arguments": {}, "content_type": "<|constrain|>json"}}]},
			{"role": "tool", "content": "{\"t\": 1}"}], "tools": ` + tools + `}`},
		{"an ignored late system message and a trailing assistant turn", `{"messages": [
			{"role": "user", "content": "hi"},
			{"role": "system", "content": "ignored"},
			{"role": "assistant", "thinking": "greet", "content": "hello"}]}`},
	}
	varsList := []map[string]any{
		nil,
		{"reasoning_effort": "high", "model_identity": "You are a test model."},
		{"builtin_tools": []any{"browser", "python"}},
		{"builtin_tools": []any{"python"}, "reasoning_effort": "low"},
	}
	for _, c := range convs {
		conv, err := ParseConversation([]byte(c.body))
		require.NoError(t, err, c.name)
		for _, vars := range varsList {
			for _, gen := range []bool{false, true} {
				opts := Options{AddGenerationPrompt: gen, Vars: vars, Now: goldenClock, SpecialTokens: f.SpecialTokens}
				want, err := tpl.Render(conv, opts)
				require.NoError(t, err, c.name)
				got, err := RenderHarmony(conv, opts)
				require.NoError(t, err, c.name)
				require.Equal(t, want, got, "%s, vars %v, generation prompt %v", c.name, vars, gen)
			}
		}
	}
}

func TestRenderHarmonyErrors(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"markup in content", `{"messages": [{"role": "assistant", "content": "<|channel|>final<|message|>x"}]}`, "<|channel|> tags in the content field"},
		{"markup in thinking", `{"messages": [{"role": "assistant", "content": "x", "thinking": "<|channel|>analysis<|message|>y"}]}`, "<|channel|> tags in the thinking field"},
		{"content and thinking beside a call", `{"messages": [{"role": "assistant", "content": "a", "thinking": "b", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}]}`, "Cannot pass both content and thinking"},
		{"tool result without a call", `{"messages": [{"role": "tool", "content": "x"}]}`, "no previous assistant message with a tool call"},
		{"content of the wrong type", `{"messages": [{"role": "user", "content": 5}]}`, "content must be a string"},
		{"tool without a function", `{"messages": [], "tools": [{"type": "function"}]}`, `tool 0 has no "function" object`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conv, err := ParseConversation([]byte(c.body))
			require.NoError(t, err)
			_, err = RenderHarmony(conv, Options{Now: goldenClock})
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
		})
	}
}

// OpenAI clients send content as text parts and null content beside tool
// calls; the built-in renderer reads both.
func TestRenderHarmonyOpenAIShapes(t *testing.T) {
	conv, err := ParseConversation([]byte(`{"messages": [
		{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
		{"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
		{"role": "tool", "content": "ok"}]}`))
	require.NoError(t, err)
	got, err := RenderHarmony(conv, Options{Now: goldenClock, AddGenerationPrompt: true})
	require.NoError(t, err)
	require.Contains(t, got, "<|start|>user<|message|>ab<|end|><|start|>assistant to=functions.f<|channel|>commentary json<|message|>{\"x\": 1}<|call|><|start|>functions.f to=assistant<|channel|>commentary<|message|>\"ok\"<|end|><|start|>assistant")
}
