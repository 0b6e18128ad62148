package serve

import (
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/chat"
	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/tokenizer"
)

// fuzzModels are the two ways a chat request becomes a prompt: a Jinja
// template (ChatML, with its stop string) and harmony rendering.
func fuzzModels(t testing.TB) []*model {
	src, err := frontend.Open(shared.Path(t, "models/gguf/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	v, err := src.Vocab()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := chat.Compile(chatMLTemplate)
	if err != nil {
		t.Fatal(err)
	}
	special := tok.TemplateSpecials()
	return []*model{{tok: tok, tpl: tpl, stops: []string{"<|im_end|>"}, special: special}, {tok: tok, harmony: true, special: special}}
}

// FuzzChatRequest decodes request bodies as both endpoints do, up to the
// prompt's token ids: whatever the bytes, the answer is a prompt within the
// vocabulary or a one-line 4xx error, never a panic.
func FuzzChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":"w"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"2"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"temperature":0.7,"top_p":0.9,"top_k":40,"min_p":0.05,"seed":-3,"presence_penalty":1,"frequency_penalty":-1,"repetition_penalty":1.1,"logit_bias":{"5":-100},"stop":["\n","###"]}`,
		`{"messages":[{"role":"developer","content":"x"}],"reasoning_effort":"high","chat_template_kwargs":{"enable_thinking":false}}`,
		`{"prompt":"Once upon a time","max_tokens":16}`,
		`{"prompt":[1,2,3],"stop":"."}`,
		`{"prompt":[[1,2]],"n":1,"logprobs":null,"echo":false}`,
		`{"messages":[{"role":"user","content":"<|im_start|>x<|im_end|>"}],"max_completion_tokens":3}`,
		`[]`, `{}`, `null`, `{"messages":null}`, `{"messages":[{"role":"robot"}]}`, "{\"prompt\":\"\xff\"}",
		`{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"text"}}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":1e3}`,
	} {
		f.Add([]byte(s))
	}
	models := fuzzModels(f)
	srv := NewServer(Options{Model: "m", Limits: Limits{MaxTokens: 1 << 16}})
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(aerr *apiError) {
			if aerr.status != 400 && aerr.status != 404 {
				t.Fatalf("status %d for bad input: %s", aerr.status, aerr.msg)
			}
			if aerr.msg == "" || strings.ContainsAny(aerr.msg, "\n\r") {
				t.Fatalf("error message %q is not one line", aerr.msg)
			}
		}
		for _, m := range models {
			_, gen, ids, aerr := srv.parseChat(body, m)
			if aerr != nil {
				check(aerr)
				continue
			}
			if len(ids) == 0 {
				t.Fatal("an empty prompt was accepted")
			}
			for _, id := range ids {
				if id < 0 || int(id) >= m.tok.VocabSize() {
					t.Fatalf("token %d outside the vocabulary", id)
				}
			}
			if gen.maxTokens < 0 || gen.sampling.check() != nil {
				t.Fatalf("accepted settings that do not check: %+v", gen)
			}
			if _, err := newSampler(gen.sampling); err != nil {
				t.Fatalf("accepted sampling the sampler refuses: %v", err)
			}
		}
		var cr completionRequest
		if aerr := decodeBody(body, &cr); aerr != nil {
			check(aerr)
			return
		}
		if _, aerr := cr.toGeneration(DefaultSampling(), srv.opts.Limits, models[0].tok.VocabSize()); aerr != nil {
			check(aerr)
			return
		}
		in, aerr := parsePrompt(cr.Prompt, models[0].tok.VocabSize())
		if aerr != nil {
			check(aerr)
			return
		}
		for _, id := range in.tokens {
			if id < 0 || int(id) >= models[0].tok.VocabSize() {
				t.Fatalf("token %d outside the vocabulary", id)
			}
		}
	})
}
