package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzParseConversation: any request body is parsed or refused with an
// error, never a panic, and what parses renders with the built-in harmony
// renderer and a template without a panic.
func FuzzParseConversation(f *testing.F) {
	f.Add([]byte(`{"messages": [{"role": "user", "content": "hi"}], "tools": null}`))
	f.Add([]byte(`{"messages": [{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": {"a": [1.5, null]}}}]}, {"role": "tool", "content": "x"}], "tools": [{"function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "array", "items": {"oneOf": [{"type": "object"}]}}}}}}]}`))
	f.Add([]byte(`{"messages": [], "tools": [{}]}`))
	tpl, err := Compile(`{% for m in messages %}{{ m.role }}:{{ m.content|tojson }}{% if m.tool_calls %}{{ m.tool_calls|tojson(indent=1) }}{% endif %}{% endfor %}{{ tools|tojson }}`)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		conv, err := ParseConversation(body)
		if err != nil {
			return
		}
		_, _ = RenderHarmony(conv, Options{Now: goldenClock})
		if _, err := tpl.Render(conv, Options{}); err != nil {
			t.Fatalf("a parsed conversation must render with tojson: %v", err)
		}
	})
}

// FuzzTemplate: any template source compiles or fails with an error, and
// renders or fails with an error, never a panic (the golden templates seed it).
func FuzzTemplate(f *testing.F) {
	paths, _ := filepath.Glob("../../shared/golden/chat/*.json")
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			var g goldenChatFile
			if json.Unmarshal(data, &g) == nil && g.ChatTemplate != "" {
				f.Add(g.ChatTemplate)
			}
		}
	}
	f.Add(`{{ (a if b else c)|tojson }}{% for x in [1, 2] if x %}{{ x[-1] }}{% endfor %}`)
	conv, err := ParseConversation([]byte(`{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a", "thinking": "t"}], "tools": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {"p": {"type": "string"}}}}}]}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src string) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			tpl, err := Compile(src)
			if err != nil {
				return
			}
			_, _ = tpl.Render(conv, Options{AddGenerationPrompt: true, Now: goldenClock})
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("template did not finish in 10s: %q", src)
		}
	})
}
