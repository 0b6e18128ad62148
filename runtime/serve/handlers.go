package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/minerva-llm/minerva/chat"
	"github.com/minerva-llm/minerva/tokenizer"
)

// usage is the token count of a response.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func usageOf(prompt, completion int) *usage {
	return &usage{prompt, completion, prompt + completion}
}

// sse writes server-sent events.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w)}
}

func (e *sse) data(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.raw(b)
}

func (e *sse) raw(b []byte) error {
	if _, err := fmt.Fprintf(e.w, "data: %s\n\n", b); err != nil {
		return err
	}
	return e.rc.Flush()
}

func (e *sse) done() error { return e.raw([]byte("[DONE]")) }

// finishString is the finish_reason a client sees.
func finishString(f FinishReason) string {
	if f == FinishError {
		return "error"
	}
	return string(f)
}

// completions is POST /v1/completions.
func (s *Server) completions(w http.ResponseWriter, r *http.Request, m *model) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	var req completionRequest
	if aerr := decodeBody(body, &req); aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	gen, aerr := req.toGeneration(*s.opts.Sampling, s.opts.Limits, m.tok.VocabSize())
	if aerr == nil {
		aerr = s.checkModel(gen.model)
	}
	var in promptInput
	if aerr == nil {
		in, aerr = parsePrompt(req.Prompt, m.tok.VocabSize())
	}
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	ids := in.tokens
	if in.isText {
		// As `minervac run --prompt` encodes it: plain text, BOS when the
		// vocabulary asks for one.
		ids = m.tok.Encode(in.text, m.tok.AddBOS())
	}
	if len(ids) == 0 {
		s.fail(w, r, badRequest("prompt", "the prompt is empty"))
		return
	}
	st, aerr := s.submit(r, m, &Request{Prompt: ids, MaxTokens: s.maxTokensFor(gen, len(ids), m), Sampling: gen.sampling,
		Stop: gen.stop, IgnoreEOS: gen.ignoreEOS}, "prompt")
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	id := s.newID("cmpl")
	created := timeNow()
	chunk := func(text string, finish *string) map[string]any {
		return map[string]any{"id": id, "object": "text_completion", "created": created, "model": s.opts.Model,
			"choices": []any{map[string]any{"index": 0, "text": text, "logprobs": nil, "finish_reason": finish}}}
	}
	rl := logOf(r)
	rl.prompt = st.PromptTokens
	if !gen.stream {
		var text strings.Builder
		ev, err := s.collect(r, st, func(ev Event) { text.WriteString(ev.Text) })
		if err != nil {
			return
		}
		rl.completion, rl.finish = ev.Tokens, string(ev.Finish)
		if ev.Finish == FinishError {
			s.fail(w, r, &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: ev.Err.Error()})
			return
		}
		f := finishString(ev.Finish)
		resp := chunk(text.String(), &f)
		resp["usage"] = usageOf(st.PromptTokens, ev.Tokens)
		writeJSON(w, http.StatusOK, resp)
		return
	}
	out := startSSE(w)
	for {
		ev, err := st.Next(r.Context())
		if err != nil {
			st.Cancel()
			rl.finish = "client gone"
			return
		}
		rl.completion = ev.Tokens
		if ev.Text != "" || ev.Done {
			var f *string
			if ev.Done {
				s := finishString(ev.Finish)
				f = &s
				rl.finish = s
			}
			c := chunk(ev.Text, f)
			if ev.Done && ev.Err != nil {
				c["error"] = map[string]any{"message": ev.Err.Error(), "type": "server_error"}
			}
			if err := out.data(c); err != nil {
				st.Cancel()
				rl.finish = "client gone"
				return
			}
		}
		if ev.Done {
			if gen.includeUsage {
				_ = out.data(map[string]any{"id": id, "object": "text_completion", "created": created, "model": s.opts.Model,
					"choices": []any{}, "usage": usageOf(st.PromptTokens, ev.Tokens)})
			}
			_ = out.done()
			return
		}
	}
}

// submit queues a request, counting it.
func (s *Server) submit(r *http.Request, m *model, req *Request, promptField string) (*Stream, *apiError) {
	st, err := m.sched.Submit(r.Context(), req)
	if err != nil {
		return nil, submitError(err, promptField)
	}
	s.met.promptTokens.Add(float64(len(req.Prompt)))
	return st, nil
}

// collect reads a stream to its end for a non-streaming response; the
// error says the client went away (the request is cancelled).
func (s *Server) collect(r *http.Request, st *Stream, each func(Event)) (Event, error) {
	for {
		ev, err := st.Next(r.Context())
		if err != nil {
			st.Cancel()
			logOf(r).finish = "client gone"
			return ev, err
		}
		each(ev)
		if ev.Done {
			return ev, nil
		}
	}
}

// chatOutput turns generated text into a message: as it is, or through a
// parser (harmony's, or the <think> one) into reasoning, content and tool
// calls.
type chatOutput struct {
	parser  outputParser
	content strings.Builder
	reason  strings.Builder
	calls   []chat.ToolCall
	ids     func() string
}

// delta is one streamed piece of a chat message.
type delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	Reasoning *string    `json:"reasoning_content,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

// outputParser splits output into events: chat.HarmonyParser and
// chat.ThinkParser.
type outputParser interface {
	Push(text string) []chat.HarmonyEvent
	Finish() []chat.HarmonyEvent
}

type toolCall struct {
	Index    int          `json:"index"`
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// add feeds text (final=true: the output ended) and returns the deltas it
// made.
func (o *chatOutput) add(text string, final bool) []delta {
	if o.parser == nil {
		if text == "" {
			return nil
		}
		o.content.WriteString(text)
		return []delta{{Content: &text}}
	}
	var evs []chat.HarmonyEvent
	if text != "" {
		evs = o.parser.Push(text)
	}
	if final {
		evs = append(evs, o.parser.Finish()...)
	}
	var out []delta
	for _, ev := range evs {
		switch ev.Kind {
		case chat.HarmonyReasoning:
			t := ev.Text
			o.reason.WriteString(t)
			out = append(out, delta{Reasoning: &t})
		case chat.HarmonyContent:
			t := ev.Text
			o.content.WriteString(t)
			out = append(out, delta{Content: &t})
		case chat.HarmonyToolCall:
			c := ev.ToolCall
			if c.ID == "" {
				c.ID = o.ids()
			}
			o.calls = append(o.calls, c)
			out = append(out, delta{ToolCalls: []toolCall{{Index: len(o.calls) - 1, ID: c.ID, Type: "function",
				Function: toolFunction{Name: c.Name, Arguments: c.Arguments}}}})
		}
	}
	return out
}

// chatFinish is the finish_reason of a chat response.
func (o *chatOutput) finish(f FinishReason) string {
	if f == FinishStop && len(o.calls) > 0 {
		return "tool_calls"
	}
	return finishString(f)
}

// chatPrompt renders the request's conversation and tokenizes it.
func (s *Server) chatPrompt(body []byte, req *chatRequest, m *model) ([]int32, *apiError) {
	conv, aerr := parseMessages(body)
	if aerr != nil {
		return nil, aerr
	}
	opts := chat.Options{AddGenerationPrompt: true, SpecialTokens: m.special, Vars: map[string]any{}}
	for k, v := range req.ChatTemplateKwargs {
		opts.Vars[k] = v
	}
	if req.ReasoningEffort != nil {
		if err := chat.CheckReasoningEffort(*req.ReasoningEffort); err != nil {
			return nil, badRequest("reasoning_effort", "%s", err.Error())
		}
		opts.Vars["reasoning_effort"] = *req.ReasoningEffort
	}
	var text string
	var err error
	if m.tpl != nil {
		text, err = m.tpl.Render(conv, opts)
	} else {
		text, err = chat.RenderHarmony(conv, opts)
	}
	if err != nil {
		var te *chat.TemplateError
		if errors.As(err, &te) {
			return nil, badRequest("messages", "the chat template refused the conversation: %s", oneLine(te.Message))
		}
		return nil, badRequest("messages", "%s", oneLine(err.Error()))
	}
	req.thinkInside = m.think && chat.PromptOpensThink(text)
	// The template writes the control tokens on purpose, and BOS is added
	// when the vocabulary wants it unless the template wrote it already
	// (as transformers does not add special tokens to a rendered chat).
	ids := m.tok.EncodeWith(text, tokenizer.EncodeOptions{ParseSpecial: true})
	if bos := m.tok.BOS(); m.tok.AddBOS() && bos >= 0 && (len(ids) == 0 || ids[0] != bos) {
		ids = append([]int32{bos}, ids...)
	}
	return ids, nil
}

// chatCompletions is POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request, m *model) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	req, gen, ids, aerr := s.parseChat(body, m)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	stops := append(append([]string(nil), gen.stop...), m.stops...)
	st, aerr := s.submit(r, m, &Request{Prompt: ids, MaxTokens: s.maxTokensFor(gen, len(ids), m), Sampling: gen.sampling,
		Stop: stops, IgnoreEOS: gen.ignoreEOS, Special: m.harmony}, "messages")
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	id := s.newID("chatcmpl")
	created := timeNow()
	calls := 0
	out := &chatOutput{ids: func() string { calls++; return fmt.Sprintf("call_%s_%d", id, calls) }}
	switch {
	case m.harmony:
		out.parser = chat.NewHarmonyParser()
	case m.think:
		out.parser = chat.NewThinkParser(req.thinkInside)
	}
	rl := logOf(r)
	rl.prompt = st.PromptTokens
	if !gen.stream {
		ev, err := s.collect(r, st, func(ev Event) { out.add(ev.Text, ev.Done) })
		if err != nil {
			return
		}
		rl.completion, rl.finish = ev.Tokens, string(ev.Finish)
		if ev.Finish == FinishError {
			s.fail(w, r, &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: ev.Err.Error()})
			return
		}
		msg := map[string]any{"role": "assistant", "content": out.content.String()}
		if out.reason.Len() > 0 {
			msg["reasoning_content"] = out.reason.String()
		}
		if len(out.calls) > 0 {
			var tcs []toolCall
			for i, c := range out.calls {
				tcs = append(tcs, toolCall{Index: i, ID: c.ID, Type: "function", Function: toolFunction{Name: c.Name, Arguments: c.Arguments}})
			}
			msg["tool_calls"] = tcs
			if out.content.Len() == 0 {
				msg["content"] = nil
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": s.opts.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": out.finish(ev.Finish), "logprobs": nil}},
			"usage":   usageOf(st.PromptTokens, ev.Tokens)})
		return
	}
	sw := startSSE(w)
	chunk := func(d delta, finish *string) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": s.opts.Model,
			"choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish, "logprobs": nil}}}
	}
	empty := ""
	if sw.data(chunk(delta{Role: "assistant", Content: &empty}, nil)) != nil {
		st.Cancel()
		return
	}
	for {
		ev, err := st.Next(r.Context())
		if err != nil {
			st.Cancel()
			rl.finish = "client gone"
			return
		}
		rl.completion = ev.Tokens
		for _, d := range out.add(ev.Text, ev.Done) {
			if sw.data(chunk(d, nil)) != nil {
				st.Cancel()
				rl.finish = "client gone"
				return
			}
		}
		if !ev.Done {
			continue
		}
		f := out.finish(ev.Finish)
		rl.finish = f
		c := chunk(delta{}, &f)
		if ev.Err != nil {
			c["error"] = map[string]any{"message": ev.Err.Error(), "type": "server_error"}
		}
		_ = sw.data(c)
		if gen.includeUsage {
			_ = sw.data(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": s.opts.Model,
				"choices": []any{}, "usage": usageOf(st.PromptTokens, ev.Tokens)})
		}
		_ = sw.done()
		return
	}
}

// parseChat decodes and checks a chat request and renders its prompt.
func (s *Server) parseChat(body []byte, m *model) (*chatRequest, generation, []int32, *apiError) {
	var req chatRequest
	if aerr := decodeBody(body, &req); aerr != nil {
		return nil, generation{}, nil, aerr
	}
	if !isSet(req.Messages) || string(req.Messages) == "null" {
		return nil, generation{}, nil, badRequest("messages", "messages is required")
	}
	gen, aerr := req.toGeneration(*s.opts.Sampling, s.opts.Limits, m.tok.VocabSize())
	if aerr == nil {
		aerr = s.checkModel(gen.model)
	}
	if aerr != nil {
		return nil, gen, nil, aerr
	}
	if isSet(req.ResponseFormat) {
		var rf struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(req.ResponseFormat, &rf) != nil || (rf.Type != "" && rf.Type != "text") {
			return nil, gen, nil, badRequest("response_format", "response_format %s is not supported (only text)", oneLine(string(req.ResponseFormat)))
		}
	}
	ids, aerr := s.chatPrompt(body, &req, m)
	if aerr != nil {
		return nil, gen, nil, aerr
	}
	if len(ids) == 0 {
		return nil, gen, nil, badRequest("messages", "the conversation renders to an empty prompt")
	}
	return &req, gen, ids, nil
}

// tokenize is POST /tokenize (llama-server's): {"content": TEXT,
// "add_special": BOOL, "parse_special": BOOL, "with_pieces": BOOL}.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request, m *model) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	var req struct {
		Content      *string `json:"content"`
		AddSpecial   bool    `json:"add_special"`
		ParseSpecial bool    `json:"parse_special"`
		WithPieces   bool    `json:"with_pieces"`
	}
	if aerr := decodeBody(body, &req); aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	if req.Content == nil {
		s.fail(w, r, badRequest("content", "content is required"))
		return
	}
	ids := m.tok.EncodeWith(*req.Content, tokenizer.EncodeOptions{AddBOS: req.AddSpecial, ParseSpecial: req.ParseSpecial})
	if !req.WithPieces {
		if ids == nil {
			ids = []int32{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"tokens": ids})
		return
	}
	type piece struct {
		ID    int32  `json:"id"`
		Piece string `json:"piece"`
	}
	pieces := make([]piece, len(ids))
	for i, id := range ids {
		pieces[i] = piece{id, strings.ToValidUTF8(string(m.tok.TokenBytes(id)), "\uFFFD")}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": pieces})
}

// detokenize is POST /detokenize: {"tokens": [ids]} → {"content": TEXT}.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request, m *model) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	var req struct {
		Tokens *[]int64 `json:"tokens"`
	}
	if aerr := decodeBody(body, &req); aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	if req.Tokens == nil {
		s.fail(w, r, badRequest("tokens", "tokens is required"))
		return
	}
	ids := make([]int32, len(*req.Tokens))
	for i, id := range *req.Tokens {
		if id < 0 || id >= int64(m.tok.VocabSize()) {
			s.fail(w, r, badRequest("tokens", "tokens[%d] is %d, outside the vocabulary of %d", i, id, m.tok.VocabSize()))
			return
		}
		ids[i] = int32(id)
	}
	writeJSON(w, http.StatusOK, map[string]any{"content": strings.ToValidUTF8(m.tok.Decode(ids), "\uFFFD")})
}
