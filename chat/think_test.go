package chat

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/internal/shared"
)

// parseThink feeds out to a parser in the pieces cuts gives (byte offsets)
// and returns the reasoning and content its events carried.
func parseThink(inside bool, out string, cuts []int) (reasoning, content string) {
	p := NewThinkParser(inside)
	var got eventText
	at := 0
	for _, k := range cuts {
		got.add(p.Push(out[at:k]))
		at = k
	}
	got.add(p.Push(out[at:]))
	got.add(p.Finish())
	if got.calls != nil || got.reasoning.String() != p.Reasoning() || got.content.String() != p.Content() {
		panic("a tool call, or events and accumulated text differ")
	}
	return got.reasoning.String(), got.content.String()
}

func TestThinkParser(t *testing.T) {
	for _, c := range []struct {
		name, out        string
		inside           bool
		reasoning, reply string
	}{
		{"qwen3", "<think>\nThe user greets me.\n\nI greet back.\n</think>\n\nHello!", false, "The user greets me.\n\nI greet back.", "Hello!"},
		{"empty reasoning (enable_thinking off in the output)", "<think>\n\n</think>\n\nHi.", false, "", "Hi."},
		{"no think: content as it is", "  Hi <think>x</think>", false, "", "  Hi <think>x</think>"},
		{"opened by the prompt", "\nplan\n</think>\n\nanswer", true, "plan", "answer"},
		{"never closed", "<think>\nstill thinking  \n", false, "still thinking", ""},
		{"a tag inside the answer stays", "<think>a</think>b </think> c", false, "a", "b </think> c"},
		{"only whitespace", " \n", false, "", " \n"},
		{"a prefix of <think> that is not", "<thin", false, "", "<thin"},
		{"a prefix of </think> inside", "<think>a </thi b</think>c", false, "a </thi b", "c"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, a := parseThink(c.inside, c.out, nil)
			if r != c.reasoning || a != c.reply {
				t.Fatalf("whole: reasoning %q, content %q; want %q, %q", r, a, c.reasoning, c.reply)
			}
			// Every split into two pieces, and random splits into many,
			// give the same text.
			for k := 0; k <= len(c.out); k++ {
				if r, a := parseThink(c.inside, c.out, []int{k}); r != c.reasoning || a != c.reply {
					t.Fatalf("cut at %d: reasoning %q, content %q", k, r, a)
				}
			}
			rng := rand.New(rand.NewPCG(7, uint64(len(c.out))))
			for range 50 {
				var cuts []int
				for k := 0; k < len(c.out); k += 1 + rng.IntN(4) {
					cuts = append(cuts, k)
				}
				if r, a := parseThink(c.inside, c.out, cuts); r != c.reasoning || a != c.reply {
					t.Fatalf("cuts %v: reasoning %q, content %q", cuts, r, a)
				}
			}
		})
	}
}

// Qwen3's own chat template is a think template, and it opens (and at once
// closes) the reasoning in the prompt when thinking is switched off, so that
// the output is all answer.
func TestThinkQwen3Template(t *testing.T) {
	src := qwen3Template(t)
	if !ThinkTemplate(src) {
		t.Fatal("the Qwen3 template is not a think template")
	}
	if ThinkTemplate("{{ messages[0].content }}") {
		t.Fatal("a template without tags is a think template")
	}
	tpl, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	conv := Conversation{Messages: []*Object{NewMessage("user", "Hi")}}
	on, err := tpl.Render(conv, Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	off, err := tpl.Render(conv, Options{AddGenerationPrompt: true, Vars: map[string]any{"enable_thinking": false}})
	if err != nil {
		t.Fatal(err)
	}
	if PromptOpensThink(on) || PromptOpensThink(off) {
		t.Errorf("prompts %q, %q: Qwen3 leaves the reasoning closed", on, off)
	}
	if !strings.Contains(off, "<think>\n\n</think>") {
		t.Errorf("thinking off: prompt %q has no empty reasoning", off)
	}
	if !PromptOpensThink("<|im_start|>assistant\n<think>\n") {
		t.Error("a prompt ending in <think> does not open the reasoning")
	}
}

// qwen3Template is Qwen3's chat template from ../shared/golden/chat
// (README-tokenizer-chat.md), or the test skips.
func qwen3Template(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(shared.Path(t, "golden/chat/qwen3.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.ChatTemplate
}
