package chat

import (
	"encoding/json"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
)

type harmonyParseGolden struct {
	Cases []struct {
		Name     string `json:"name"`
		Output   string `json:"output"`
		Expected struct {
			Reasoning string     `json:"reasoning"`
			Content   string     `json:"content"`
			ToolCalls []ToolCall `json:"tool_calls"`
		} `json:"expected"`
		Messages []struct {
			Role        string  `json:"role"`
			Channel     *string `json:"channel"`
			Recipient   *string `json:"recipient"`
			ContentType *string `json:"content_type"`
			Content     string  `json:"content"`
			Terminator  *string `json:"terminator"`
		} `json:"messages"`
	} `json:"cases"`
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// streamed feeds text to a fresh parser in pieces of 1..maxChunk bytes (cut
// anywhere, even inside a UTF-8 character or a control token) and returns the
// result with the events' text put back together.
func streamed(text string, rng *rand.Rand, maxChunk int) (HarmonyResult, string, string, []ToolCall, bool) {
	p := NewHarmonyParser()
	var got eventText
	for rest := text; rest != ""; {
		n := 1 + rng.Intn(maxChunk)
		if n > len(rest) {
			n = len(rest)
		}
		got.add(p.Push(rest[:n]))
		rest = rest[n:]
	}
	got.add(p.Finish())
	return p.Result(), got.reasoning.String(), got.content.String(), got.calls, p.Done()
}

// eventText puts parser events back together: the reasoning and content
// text, and the tool calls.
type eventText struct {
	reasoning, content strings.Builder
	calls              []ToolCall
}

func (e *eventText) add(evs []HarmonyEvent) {
	for _, ev := range evs {
		switch ev.Kind {
		case HarmonyReasoning:
			e.reasoning.WriteString(ev.Text)
		case HarmonyContent:
			e.content.WriteString(ev.Text)
		case HarmonyToolCall:
			e.calls = append(e.calls, ev.ToolCall)
		}
	}
}

func TestHarmonyParseGoldens(t *testing.T) {
	data, err := os.ReadFile(shared.Path(t, "golden/chat/harmony-parse.json"))
	require.NoError(t, err)
	var g harmonyParseGolden
	require.NoError(t, json.Unmarshal(data, &g))
	require.NotEmpty(t, g.Cases)
	for _, c := range g.Cases {
		t.Run(c.Name, func(t *testing.T) {
			check := func(t *testing.T, r HarmonyResult) {
				require.Equal(t, c.Expected.Reasoning, r.Reasoning)
				require.Equal(t, c.Expected.Content, r.Content)
				if len(c.Expected.ToolCalls) == 0 {
					require.Empty(t, r.ToolCalls)
				} else {
					require.Equal(t, c.Expected.ToolCalls, r.ToolCalls)
				}
				require.Len(t, r.Messages, len(c.Messages))
				for i, m := range c.Messages {
					require.Equal(t, HarmonyMessage{Role: m.Role, Channel: deref(m.Channel), Recipient: deref(m.Recipient),
						ContentType: deref(m.ContentType), Content: m.Content, Terminator: deref(m.Terminator)}, r.Messages[i])
				}
			}
			whole := ParseHarmony(c.Output)
			check(t, whole)
			rng := rand.New(rand.NewSource(int64(len(c.Output))))
			for trial := 0; trial < 200; trial++ {
				r, reasoning, content, calls, _ := streamed(c.Output, rng, 1+trial%12)
				check(t, r)
				// What was shown while streaming is the result, nothing held back or doubled.
				require.Equal(t, r.Reasoning, reasoning)
				require.Equal(t, r.Content, content)
				require.Equal(t, r.ToolCalls, calls)
			}
		})
	}
}

func TestHarmonyParserStreaming(t *testing.T) {
	t.Run("a partial control token is held back", func(t *testing.T) {
		p := NewHarmonyParser()
		require.Equal(t, []HarmonyEvent{{Kind: HarmonyContent, Text: "Hi"}}, p.Push("<|channel|>final<|message|>Hi"))
		ev := p.Push(" there<|en")
		require.Equal(t, []HarmonyEvent{{Kind: HarmonyContent, Text: " there"}}, ev)
		require.Empty(t, p.Push("d"))
		require.Empty(t, p.Push("|>"))
		require.False(t, p.Done(), "<|end|> ends a message, not the generation")
		ev = p.Push("<|start|>assistant<|channel|>final<|message|>!<|return|>ignored")
		require.Equal(t, []HarmonyEvent{{Kind: HarmonyContent, Text: "!"}}, ev)
		require.True(t, p.Done())
		require.Equal(t, "<|return|>", p.StopToken())
		require.Nil(t, p.Push("more"))
		require.Equal(t, "Hi there!", p.Result().Content)
	})
	t.Run("text that only looked like a control token is released", func(t *testing.T) {
		p := NewHarmonyParser()
		p.Push("<|channel|>final<|message|>a <|ch")
		ev := p.Push("air|> b")
		require.Equal(t, []HarmonyEvent{{Kind: HarmonyContent, Text: "<|chair|> b"}}, ev)
	})
	t.Run("a bare answer streams at once", func(t *testing.T) {
		p := NewHarmonyParser()
		require.Equal(t, []HarmonyEvent{{Kind: HarmonyContent, Text: "Hello"}}, p.Push("Hello"))
		require.Equal(t, []HarmonyEvent{{Kind: HarmonyContent, Text: " world"}}, p.Push(" world"))
		require.Empty(t, p.Finish())
		require.Equal(t, "Hello world", p.Result().Content)
		require.Empty(t, p.Result().Messages)
	})
	t.Run("a leading space waits until it cannot be a recipient", func(t *testing.T) {
		p := NewHarmonyParser()
		require.Empty(t, p.Push(" t"))
		require.Equal(t, []HarmonyEvent{{Kind: HarmonyContent, Text: " tea"}}, p.Push("ea"))
	})
	t.Run("reasoning then a tool call with the recipient in the role", func(t *testing.T) {
		p := NewHarmonyParser()
		ev := p.Push("<|channel|>analysis<|message|>think<|end|><|start|>assistant to=functions.f<|channel|>commentary json<|message|>{\"a\":1}")
		require.Equal(t, []HarmonyEvent{{Kind: HarmonyReasoning, Text: "think"}}, ev)
		ev = p.Push("<|call|>")
		require.Equal(t, []HarmonyEvent{{Kind: HarmonyToolCall, ToolCall: ToolCall{Name: "f", Arguments: `{"a":1}`}}}, ev)
		require.True(t, p.Done())
		require.Equal(t, "<|call|>", p.StopToken())
	})
}

func TestParseHarmonyLeniency(t *testing.T) {
	cases := []struct {
		name, output       string
		reasoning, content string
		calls              []ToolCall
		messages           int
	}{
		{"truncated final", "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b", "a", "b", nil, 2},
		{"no <|end|> before the next message", "<|channel|>analysis<|message|>a<|start|>assistant<|channel|>final<|message|>b<|return|>", "a", "b", nil, 2},
		{"channel without <|start|>", "<|channel|>analysis<|message|>a<|end|><|channel|>final<|message|>b", "a", "b", nil, 2},
		{"repeated role at the start", "assistant<|channel|>final<|message|>b<|return|>", "", "b", nil, 1},
		{"recipient before the channel at the start", " to=functions.g<|channel|>commentary <|constrain|>json<|message|>{}<|call|>", "", "", []ToolCall{{Name: "g", Arguments: "{}"}}, 1},
		{"a built-in tool is neither content nor a function call", "<|channel|>analysis to=python<|message|>print(1)<|call|>", "", "", nil, 1},
		{"bare text ended by a stop token", "Just text.<|return|>after", "", "Just text.", nil, 0},
		{"bare text ended by <|end|> then a message", "Hi<|end|>\n<|start|>assistant<|channel|>final<|message|>!", "", "Hi!", nil, 1},
		{"whitespace between messages is dropped", "<|channel|>final<|message|>a<|end|>\n \n<|start|>assistant<|channel|>final<|message|>b", "", "ab", nil, 2},
		{"<|message|> inside content is text", "<|channel|>final<|message|>x<|message|>y", "", "x<|message|>y", nil, 1},
		{"header with no content is dropped", "<|channel|>final<|message|>a<|end|><|start|>assistant<|channel|>fin", "", "a", nil, 1},
		{"empty output", "", "", "", nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ParseHarmony(c.output)
			require.Equal(t, c.reasoning, r.Reasoning)
			require.Equal(t, c.content, r.Content)
			require.Equal(t, c.calls, r.ToolCalls)
			require.Len(t, r.Messages, c.messages)
			rng := rand.New(rand.NewSource(1))
			for trial := 0; trial < 50; trial++ {
				s, _, _, _, _ := streamed(c.output, rng, 1+trial%6)
				require.Equal(t, r, s)
			}
		})
	}
}

// FuzzHarmonyParser: any text, cut anywhere, parses without a panic to the
// same result as the whole text, and the events streamed add up to it.
func FuzzHarmonyParser(f *testing.F) {
	f.Add("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b<|return|>", int64(1), uint8(3))
	f.Add(" to=functions.x<|channel|>commentary <|constrain|>json<|message|>{}<|call|>", int64(2), uint8(1))
	f.Add("plain <|ch text <|end|> more", int64(3), uint8(5))
	f.Add("<|start|><|start|>assistant<|channel|><|message|><|constrain|><|endoftext|>", int64(4), uint8(2))
	f.Fuzz(func(t *testing.T, text string, seed int64, maxChunk uint8) {
		whole := ParseHarmony(text)
		r, reasoning, content, calls, _ := streamed(text, rand.New(rand.NewSource(seed)), 1+int(maxChunk%16))
		if !equalResults(whole, r) {
			t.Fatalf("chunked result differs:\nwhole %+v\nchunks %+v", whole, r)
		}
		if r.Reasoning != reasoning || r.Content != content || !equalCalls(r.ToolCalls, calls) {
			t.Fatalf("events do not add up to the result: %q %q %v vs %+v", reasoning, content, calls, r)
		}
	})
}

func equalCalls(a, b []ToolCall) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalResults(a, b HarmonyResult) bool {
	if a.Reasoning != b.Reasoning || a.Content != b.Content || !equalCalls(a.ToolCalls, b.ToolCalls) || len(a.Messages) != len(b.Messages) {
		return false
	}
	for i := range a.Messages {
		if a.Messages[i] != b.Messages[i] {
			return false
		}
	}
	return true
}

// A parsed turn, appended to the conversation, renders back as the model
// wrote it: the next prompt continues where the output stopped.
func TestHarmonyResultMessageRoundTrip(t *testing.T) {
	var conv Conversation
	conv.Add("user", "Weather in Paris?")
	out := "<|channel|>analysis<|message|>Need the tool.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather json<|message|>{\"city\": \"Paris\"}<|call|>"
	r := ParseHarmony(out)
	conv.Messages = append(conv.Messages, r.Message())
	conv.Messages = append(conv.Messages, ToolResultMessage("", "get_weather", "sunny"))
	prompt, err := RenderHarmony(conv, Options{Now: goldenClock, AddGenerationPrompt: true})
	require.NoError(t, err)
	require.Contains(t, prompt, "<|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant<|channel|>analysis<|message|>Need the tool.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"sunny\"<|end|><|start|>assistant")

	final := ParseHarmony("<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.<|return|>")
	m := final.Message()
	require.Equal(t, "Sunny.", m.String("content"))
	require.Equal(t, "Easy.", m.String("thinking"))
}
