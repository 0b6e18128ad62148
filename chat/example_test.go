package chat_test

import (
	"fmt"
	"strings"

	"github.com/minerva-llm/minerva/chat"
)

// A server or `minervac template` renders an OpenAI-style request with the
// model's template.
func ExampleTemplate_Render() {
	tpl, err := chat.Compile("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
	if err != nil {
		panic(err)
	}
	conv, err := chat.ParseConversation([]byte(`{"messages": [{"role": "user", "content": "Hi"}]}`))
	if err != nil {
		panic(err)
	}
	prompt, err := tpl.Render(conv, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		panic(err)
	}
	fmt.Println(prompt)
	// Output: <|user|>Hi<|assistant|>
}

// A chat loop feeds decoded pieces to the harmony parser as they come, shows
// reasoning and content, and stops when the parser says the turn is over.
func ExampleHarmonyParser() {
	pieces := []string{"<|channel|>analysis<|message|>", "Simple", ".", "<|end|><|start|>assistant<|ch", "annel|>final<|message|>", "4", "<|return|>"}
	p := chat.NewHarmonyParser()
	var shown strings.Builder
	for _, piece := range pieces {
		for _, ev := range p.Push(piece) {
			switch ev.Kind {
			case chat.HarmonyReasoning:
				shown.WriteString("[" + ev.Text + "]")
			case chat.HarmonyContent:
				shown.WriteString(ev.Text)
			}
		}
		if p.Done() {
			break
		}
	}
	fmt.Println(shown.String(), p.StopToken())
	// Output: [Simple][.]4 <|return|>
}
