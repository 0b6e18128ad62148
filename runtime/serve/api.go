package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/minerva-llm/minerva/chat"
)

// apiError is an OpenAI-style error: the status, the error's type, the
// request field it is about (param) and a one-line message.
type apiError struct {
	status int
	typ    string
	param  string
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, msg: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON OpenAI clients parse.
func (e *apiError) body() []byte {
	type inner struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	in := inner{Message: e.msg, Type: e.typ}
	if e.param != "" {
		in.Param = &e.param
	}
	if e.code != "" {
		in.Code = &e.code
	}
	b, _ := json.Marshal(struct {
		Error inner `json:"error"`
	}{in})
	return b
}

// streamOptions is stream_options.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// params are the fields chat and text completions share. Pointers tell a
// field left out from one set to its zero value.
type params struct {
	Model               *string            `json:"model"`
	MaxTokens           *int64             `json:"max_tokens"`
	MaxCompletionTokens *int64             `json:"max_completion_tokens"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	TopK                *int64             `json:"top_k"`
	MinP                *float64           `json:"min_p"`
	Seed                *int64             `json:"seed"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	RepetitionPenalty   *float64           `json:"repetition_penalty"`
	RepeatPenalty       *float64           `json:"repeat_penalty"` // llama-server's name
	RepeatLastN         *int64             `json:"repeat_last_n"`
	LogitBias           map[string]float64 `json:"logit_bias"`
	Stop                json.RawMessage    `json:"stop"`
	Stream              *bool              `json:"stream"`
	StreamOptions       *streamOptions     `json:"stream_options"`
	N                   *int64             `json:"n"`
	IgnoreEOS           *bool              `json:"ignore_eos"`
	Logprobs            json.RawMessage    `json:"logprobs"`
	TopLogprobs         json.RawMessage    `json:"top_logprobs"`
	Echo                *bool              `json:"echo"`
	BestOf              *int64             `json:"best_of"`
	Suffix              json.RawMessage    `json:"suffix"`
}

// chatRequest is POST /v1/chat/completions.
type chatRequest struct {
	params
	// thinkInside: the rendered prompt opened the reasoning
	// (chat.PromptOpensThink); not a field of the request.
	thinkInside        bool
	Messages           json.RawMessage `json:"messages"`
	Tools              json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ReasoningEffort    *string         `json:"reasoning_effort"`
	ChatTemplateKwargs map[string]any  `json:"chat_template_kwargs"`
	ResponseFormat     json.RawMessage `json:"response_format"`
}

// completionRequest is POST /v1/completions.
type completionRequest struct {
	params
	Prompt json.RawMessage `json:"prompt"`
}

// decodeBody unmarshals a request body into v, turning every failure into
// a 400 that names the field and what it should have been.
func decodeBody(body []byte, v any) *apiError {
	if !utf8.Valid(body) {
		i := 0
		for i < len(body) {
			r, n := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		return badRequest("", "the request body is not valid UTF-8 (byte offset %d)", i)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "the request body is empty: send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return badRequest("", "the request body holds more than one JSON value")
	}
	return nil
}

// jsonError explains an encoding/json error in one line.
func jsonError(err error) *apiError {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		// Fields of the embedded params come as "params.NAME".
		field := strings.TrimPrefix(te.Field, "params.")
		if field == "" {
			return badRequest("", "the request body must be a JSON object, not %s", jsonKindName(te.Value))
		}
		return badRequest(field, "%s: expected %s, got %s", field, goKindName(te.Type.String()), jsonKindName(te.Value))
	case errors.As(err, &se):
		return badRequest("", "the request body is not valid JSON: %s (byte offset %d)", se.Error(), se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "the request body is not valid JSON: it ends early")
	}
	return badRequest("", "the request body is not valid JSON: %s", oneLine(err.Error()))
}

func jsonKindName(v string) string {
	switch {
	case v == "number" || strings.HasPrefix(v, "number "):
		return "a number"
	case v == "string":
		return "a string"
	case v == "bool":
		return "a boolean"
	case v == "array":
		return "an array"
	case v == "object":
		return "an object"
	}
	return v
}

func goKindName(t string) string {
	t = strings.TrimPrefix(t, "*")
	switch {
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "serve."):
		return "an object"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	}
	return t
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Limits bound what a request may ask for.
type Limits struct {
	// MaxTokens caps max_tokens (0: the context).
	MaxTokens int
	// MaxStops is the most stop strings (0: 16), each at most 256 bytes.
	MaxStops int
}

// generation is what both endpoints turn their parameters into.
type generation struct {
	sampling      Sampling
	maxTokens     int // 0: the rest of the context
	stop          []string
	stream        bool
	includeUsage  bool
	ignoreEOS     bool
	model         string
	logitBiasKeys map[int32]float64
}

// toGeneration checks the shared parameters against defaults and limits.
func (p *params) toGeneration(def Sampling, lim Limits, vocab int) (generation, *apiError) {
	g := generation{sampling: def}
	if p.Model != nil {
		g.model = *p.Model
	}
	if p.N != nil && *p.N != 1 {
		return g, badRequest("n", "n is %d: this server generates one choice per request", *p.N)
	}
	if p.BestOf != nil && *p.BestOf != 1 {
		return g, badRequest("best_of", "best_of is %d: this server generates one choice per request", *p.BestOf)
	}
	if p.Echo != nil && *p.Echo {
		return g, badRequest("echo", "echo is not supported")
	}
	if isSet(p.Logprobs) && !isFalseOrNull(p.Logprobs) {
		return g, badRequest("logprobs", "logprobs are not supported")
	}
	if isSet(p.TopLogprobs) && string(p.TopLogprobs) != "null" && string(p.TopLogprobs) != "0" {
		return g, badRequest("top_logprobs", "top_logprobs are not supported")
	}
	if isSet(p.Suffix) && string(p.Suffix) != "null" && string(p.Suffix) != `""` {
		return g, badRequest("suffix", "suffix is not supported")
	}
	mt, field := p.MaxTokens, "max_tokens"
	if p.MaxCompletionTokens != nil {
		mt, field = p.MaxCompletionTokens, "max_completion_tokens"
	}
	if mt != nil {
		if *mt < 1 {
			return g, badRequest(field, "%s is %d: it must be at least 1", field, *mt)
		}
		if lim.MaxTokens > 0 && *mt > int64(lim.MaxTokens) {
			return g, badRequest(field, "%s is %d: this server allows at most %d", field, *mt, lim.MaxTokens)
		}
		if *mt > math.MaxInt32 {
			return g, badRequest(field, "%s is %d: too large", field, *mt)
		}
		g.maxTokens = int(*mt)
	}
	s := &g.sampling
	if p.Temperature != nil {
		if *p.Temperature > 2 {
			return g, badRequest("temperature", "temperature %v must be in [0, 2]", *p.Temperature)
		}
		s.Temperature = *p.Temperature
	}
	if p.TopP != nil {
		s.TopP = *p.TopP
	}
	if p.TopK != nil {
		if *p.TopK < 0 || *p.TopK > math.MaxInt32 {
			return g, badRequest("top_k", "top_k %d must be in [0, %d]", *p.TopK, math.MaxInt32)
		}
		s.TopK = int(*p.TopK)
	}
	if p.MinP != nil {
		s.MinP = *p.MinP
	}
	if p.Seed != nil {
		s.Seed = uint64(*p.Seed)
	} else {
		s.Seed = randomSeed()
	}
	if p.PresencePenalty != nil {
		s.PresencePenalty = *p.PresencePenalty
	}
	if p.FrequencyPenalty != nil {
		s.FrequencyPenalty = *p.FrequencyPenalty
	}
	if p.RepeatPenalty != nil {
		s.RepetitionPenalty = *p.RepeatPenalty
	}
	if p.RepetitionPenalty != nil {
		s.RepetitionPenalty = *p.RepetitionPenalty
	}
	if p.RepeatLastN != nil {
		if *p.RepeatLastN < 0 || *p.RepeatLastN > math.MaxInt32 {
			return g, badRequest("repeat_last_n", "repeat_last_n %d must be ≥ 0", *p.RepeatLastN)
		}
		s.PenaltyLastN = int(*p.RepeatLastN)
	}
	if len(p.LogitBias) > 0 {
		if len(p.LogitBias) > 1024 {
			return g, badRequest("logit_bias", "logit_bias has %d entries; at most 1024", len(p.LogitBias))
		}
		s.LogitBias = map[int32]float64{}
		for k, v := range p.LogitBias {
			id, err := strconv.ParseInt(k, 10, 32)
			if err != nil || id < 0 || int(id) >= vocab {
				return g, badRequest("logit_bias", "logit_bias key %q is not a token id in 0..%d", k, vocab-1)
			}
			s.LogitBias[int32(id)] = v
		}
	}
	if err := s.check(); err != nil {
		var fe fieldError
		if errors.As(err, &fe) {
			return g, badRequest(fe.field, "%s", fe.msg)
		}
		return g, badRequest("", "%s", err.Error())
	}
	stops, aerr := parseStop(p.Stop, lim)
	if aerr != nil {
		return g, aerr
	}
	g.stop = stops
	if p.Stream != nil {
		g.stream = *p.Stream
	}
	if p.StreamOptions != nil {
		if !g.stream {
			return g, badRequest("stream_options", "stream_options is only allowed with stream: true")
		}
		g.includeUsage = p.StreamOptions.IncludeUsage
	}
	if p.IgnoreEOS != nil {
		g.ignoreEOS = *p.IgnoreEOS
	}
	return g, nil
}

func isSet(raw json.RawMessage) bool { return len(raw) > 0 }

func isFalseOrNull(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	return s == "false" || s == "null"
}

// parseStop reads stop: a string, an array of strings, or null.
func parseStop(raw json.RawMessage, lim Limits) ([]string, *apiError) {
	if !isSet(raw) || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var one string
	var list []string
	if json.Unmarshal(raw, &one) == nil {
		list = []string{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest("stop", "stop: expected a string or an array of strings")
	}
	maxStops := lim.MaxStops
	if maxStops == 0 {
		maxStops = 16
	}
	if len(list) > maxStops {
		return nil, badRequest("stop", "stop has %d strings; at most %d", len(list), maxStops)
	}
	for i, s := range list {
		if s == "" {
			return nil, badRequest("stop", "stop[%d] is empty", i)
		}
		if len(s) > 256 {
			return nil, badRequest("stop", "stop[%d] is %d bytes; at most 256", i, len(s))
		}
	}
	return list, nil
}

// promptInput is a completion prompt: text, or token ids.
type promptInput struct {
	text   string
	tokens []int32
	isText bool
}

// parsePrompt reads prompt: a string, an array of one string, an array of
// token ids, or an array of one such array (what OpenAI's API accepts,
// less batches).
func parsePrompt(raw json.RawMessage, vocab int) (promptInput, *apiError) {
	if !isSet(raw) || string(bytes.TrimSpace(raw)) == "null" {
		return promptInput{}, badRequest("prompt", "prompt is required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return promptInput{text: s, isText: true}, nil
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(raw, &arr); err != nil {
		return promptInput{}, badRequest("prompt", "prompt: expected a string or an array of token ids")
	}
	if len(arr) == 0 {
		return promptInput{}, badRequest("prompt", "prompt is an empty array")
	}
	first := bytes.TrimSpace(arr[0])
	if len(first) > 0 && (first[0] == '"' || first[0] == '[') {
		if len(arr) != 1 {
			return promptInput{}, badRequest("prompt", "prompt holds %d prompts: this server takes one per request", len(arr))
		}
		return parsePrompt(arr[0], vocab)
	}
	ids := make([]int32, len(arr))
	for i, e := range arr {
		var id int64
		if err := json.Unmarshal(e, &id); err != nil {
			return promptInput{}, badRequest("prompt", "prompt[%d]: expected a token id (an integer)", i)
		}
		if id < 0 || id >= int64(vocab) {
			return promptInput{}, badRequest("prompt", "prompt[%d]: token %d is outside the vocabulary of %d", i, id, vocab)
		}
		ids[i] = int32(id)
	}
	return promptInput{tokens: ids}, nil
}

// chatRoles are the roles a message may have.
var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// parseMessages reads messages into a chat.Conversation (which keeps key
// order for the template), checking each message and flattening content
// given as an array of text parts into one string, which is what templates
// expect.
func parseMessages(body []byte) (chat.Conversation, *apiError) {
	conv, err := chat.ParseConversation(body)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "chat: ")
		return conv, badRequest("messages", "%s", msg)
	}
	if len(conv.Messages) == 0 {
		return conv, badRequest("messages", "messages is empty: send at least one message")
	}
	for i, m := range conv.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		role := m.String("role")
		if !chatRoles[role] {
			return conv, badRequest(field+".role", "%s.role is %q: expected system, developer, user, assistant or tool", field, role)
		}
		c, ok := m.Get("content")
		switch v := c.(type) {
		case string:
		case nil:
			if !ok && role != "assistant" {
				return conv, badRequest(field+".content", "%s has no content", field)
			}
			if role != "assistant" {
				return conv, badRequest(field+".content", "%s.content is null; only an assistant message may omit it", field)
			}
		case []any:
			var b strings.Builder
			for j, part := range v {
				po, ok := part.(*chat.Object)
				pf := fmt.Sprintf("%s.content[%d]", field, j)
				if !ok {
					return conv, badRequest(pf, "%s: expected a content part object", pf)
				}
				if t := po.String("type"); t != "text" {
					return conv, badRequest(pf+".type", "%s.type is %q: only text parts are supported", pf, t)
				}
				txt, ok := mustString(po, "text")
				if !ok {
					return conv, badRequest(pf+".text", "%s.text: expected a string", pf)
				}
				b.WriteString(txt)
			}
			m.Set("content", b.String())
		default:
			return conv, badRequest(field+".content", "%s.content: expected a string or an array of text parts", field)
		}
	}
	return conv, nil
}

func mustString(o *chat.Object, key string) (string, bool) {
	v, ok := o.Get(key)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}
