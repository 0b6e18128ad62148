package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/runtime/serve"
)

// apiErr is the error body every failure has.
type apiErr struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// Every bad request is a 4xx with OpenAI's error shape, a one-line message
// saying what is wrong and, for a bad field, the field's name — never a
// 500, never a dropped connection.
func TestErrorTable(t *testing.T) {
	ts := startServer(t, serverConfig{slots: 1, ctx: 128, opts: serve.Options{APIKey: "k", MaxBody: 1 << 20}})
	long := strings.Repeat("the cat sat on the mat and ", 40) // well over 128 tokens
	auth := []string{"Authorization", "Bearer k"}
	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		param, msg               string
	}{
		{"no auth", "POST", "/v1/completions", `{"prompt":"x"}`, []string{}, 401, "", "missing or wrong API key"},
		{"wrong key", "POST", "/v1/completions", `{"prompt":"x"}`, []string{"Authorization", "Bearer nope"}, 401, "", "missing or wrong API key"},
		{"not bearer", "GET", "/v1/models", ``, []string{"Authorization", "Basic az"}, 401, "", "Authorization: Bearer KEY"},
		{"unknown path", "GET", "/v1/nothing", ``, auth, 404, "", "no endpoint GET /v1/nothing"},
		{"wrong method", "GET", "/v1/completions", ``, auth, 405, "", "/v1/completions takes POST, not GET"},
		{"unknown model", "POST", "/v1/completions", `{"model":"gpt-4","prompt":"x"}`, auth, 404, "model", `the model "gpt-4" does not exist`},
		{"empty body", "POST", "/v1/completions", ``, auth, 400, "", "the request body is empty"},
		{"not json", "POST", "/v1/completions", `prompt=x`, auth, 400, "", "not valid JSON"},
		{"truncated json", "POST", "/v1/completions", `{"prompt": "x"`, auth, 400, "", "ends early"},
		{"array body", "POST", "/v1/completions", `[1,2]`, auth, 400, "", "must be a JSON object, not an array"},
		{"two values", "POST", "/v1/completions", `{"prompt":"x"} {}`, auth, 400, "", "more than one JSON value"},
		{"invalid utf-8", "POST", "/v1/completions", "{\"prompt\":\"a\xff\xfeb\"}", auth, 400, "", "not valid UTF-8 (byte offset 12)"},
		{"body over the limit", "POST", "/v1/completions", `{"prompt":"` + strings.Repeat("a", 10<<20) + `"}`, auth, 413, "", "larger than 1048576 bytes"},
		{"prompt missing", "POST", "/v1/completions", `{"max_tokens":3}`, auth, 400, "prompt", "prompt is required"},
		{"prompt a number", "POST", "/v1/completions", `{"prompt":5}`, auth, 400, "prompt", "expected a string or an array of token ids"},
		{"prompt bad token", "POST", "/v1/completions", `{"prompt":[1, 99999]}`, auth, 400, "prompt", "prompt[1]: token 99999 is outside the vocabulary of 512"},
		{"prompt batch", "POST", "/v1/completions", `{"prompt":["a","b"]}`, auth, 400, "prompt", "holds 2 prompts"},
		{"prompt over the context", "POST", "/v1/completions", `{"prompt":"` + long + `"}`, auth, 400, "prompt", "the context is 128 tokens"},
		{"max_tokens over the context", "POST", "/v1/completions", `{"prompt":"Once upon a time","max_tokens":126}`, auth, 400, "max_tokens", "lower max_tokens to at most 123"},
		{"max_tokens a string", "POST", "/v1/completions", `{"prompt":"x","max_tokens":"ten"}`, auth, 400, "max_tokens", "max_tokens: expected an integer, got a string"},
		{"max_tokens negative", "POST", "/v1/completions", `{"prompt":"x","max_tokens":-5}`, auth, 400, "max_tokens", "max_tokens is -5: it must be at least 1"},
		{"max_tokens zero", "POST", "/v1/completions", `{"prompt":"x","max_tokens":0}`, auth, 400, "max_tokens", "at least 1"},
		{"max_tokens fraction", "POST", "/v1/completions", `{"prompt":"x","max_tokens":1.5}`, auth, 400, "max_tokens", "expected an integer, got a number"},
		{"max_completion_tokens huge", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":1e12}`, auth, 400, "max_completion_tokens", "max_completion_tokens"},
		{"temperature a string", "POST", "/v1/completions", `{"prompt":"x","temperature":"hot"}`, auth, 400, "temperature", "temperature: expected a number, got a string"},
		{"temperature negative", "POST", "/v1/completions", `{"prompt":"x","temperature":-1}`, auth, 400, "temperature", "temperature -1 must be ≥ 0"},
		{"temperature too high", "POST", "/v1/completions", `{"prompt":"x","temperature":3}`, auth, 400, "temperature", "must be in [0, 2]"},
		{"top_p over 1", "POST", "/v1/completions", `{"prompt":"x","top_p":1.5}`, auth, 400, "top_p", "top_p 1.5 must be in [0, 1]"},
		{"top_k negative", "POST", "/v1/completions", `{"prompt":"x","top_k":-3}`, auth, 400, "top_k", "top_k -3"},
		{"min_p one", "POST", "/v1/completions", `{"prompt":"x","min_p":1}`, auth, 400, "min_p", "min_p 1 must be in [0, 1)"},
		{"frequency_penalty", "POST", "/v1/completions", `{"prompt":"x","frequency_penalty":5}`, auth, 400, "frequency_penalty", "must be in [-2, 2]"},
		{"presence_penalty type", "POST", "/v1/completions", `{"prompt":"x","presence_penalty":true}`, auth, 400, "presence_penalty", "expected a number, got a boolean"},
		{"repetition_penalty", "POST", "/v1/completions", `{"prompt":"x","repetition_penalty":-1}`, auth, 400, "repetition_penalty", "must be > 0"},
		{"seed a string", "POST", "/v1/completions", `{"prompt":"x","seed":"abc"}`, auth, 400, "seed", "seed: expected an integer"},
		{"logit_bias key", "POST", "/v1/completions", `{"prompt":"x","logit_bias":{"abc":1}}`, auth, 400, "logit_bias", `logit_bias key "abc" is not a token id`},
		{"logit_bias value", "POST", "/v1/completions", `{"prompt":"x","logit_bias":{"5":500}}`, auth, 400, "logit_bias", "biases lie in [-100, 100]"},
		{"stop a number", "POST", "/v1/completions", `{"prompt":"x","stop":5}`, auth, 400, "stop", "expected a string or an array of strings"},
		{"stop empty", "POST", "/v1/completions", `{"prompt":"x","stop":["a",""]}`, auth, 400, "stop", "stop[1] is empty"},
		{"n", "POST", "/v1/completions", `{"prompt":"x","n":3}`, auth, 400, "n", "one choice per request"},
		{"logprobs", "POST", "/v1/completions", `{"prompt":"x","logprobs":5}`, auth, 400, "logprobs", "not supported"},
		{"stream_options alone", "POST", "/v1/completions", `{"prompt":"x","stream_options":{"include_usage":true}}`, auth, 400, "stream_options", "only allowed with stream: true"},
		{"stream a string", "POST", "/v1/completions", `{"prompt":"x","stream":"yes"}`, auth, 400, "stream", "stream: expected a boolean, got a string"},
		{"messages missing", "POST", "/v1/chat/completions", `{"model":"stories260K"}`, auth, 400, "messages", "messages is required"},
		{"messages an object", "POST", "/v1/chat/completions", `{"messages":{"role":"user"}}`, auth, 400, "messages", `"messages" must be an array`},
		{"messages empty", "POST", "/v1/chat/completions", `{"messages":[]}`, auth, 400, "messages", "messages is empty"},
		{"message not an object", "POST", "/v1/chat/completions", `{"messages":["hi"]}`, auth, 400, "messages", "message 0 must be an object"},
		{"role missing", "POST", "/v1/chat/completions", `{"messages":[{"content":"hi"}]}`, auth, 400, "messages", `message 0 has no "role"`},
		{"role unknown", "POST", "/v1/chat/completions", `{"messages":[{"role":"robot","content":"hi"}]}`, auth, 400, "messages[0].role", `messages[0].role is "robot"`},
		{"content a number", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":7}]}`, auth, 400, "messages[0].content", "expected a string or an array of text parts"},
		{"content image", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, auth, 400, "messages[0].content[0].type", "only text parts are supported"},
		{"user content null", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":null}]}`, auth, 400, "messages[0].content", "only an assistant message may omit it"},
		{"tools an object", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tools":{}}`, auth, 400, "messages", `"tools" must be an array or null`},
		{"reasoning_effort", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"extreme"}`, auth, 400, "reasoning_effort", "low, medium or high"},
		{"response_format json", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`, auth, 400, "response_format", "not supported"},
		{"tokenize without content", "POST", "/tokenize", `{}`, auth, 400, "content", "content is required"},
		{"detokenize bad id", "POST", "/detokenize", `{"tokens":[1,-1]}`, auth, 400, "tokens", "tokens[1] is -1, outside the vocabulary of 512"},
		{"detokenize ids as strings", "POST", "/detokenize", `{"tokens":["a"]}`, auth, 400, "tokens", "expected an integer, got a string"},
	}
	require.GreaterOrEqual(t, len(cases), 20)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(c.body))
			require.NoError(t, err)
			for i := 0; i+1 < len(c.hdr); i += 2 {
				req.Header.Set(c.hdr[i], c.hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, c.status, resp.StatusCode, "%s", b)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			var e apiErr
			require.NoError(t, json.Unmarshal(b, &e), "%s", b)
			require.Contains(t, e.Error.Message, c.msg)
			require.NotContains(t, e.Error.Message, "\n")
			require.NotEmpty(t, e.Error.Type)
			if c.param != "" {
				require.NotNil(t, e.Error.Param, "%s", b)
				require.Equal(t, c.param, *e.Error.Param)
			}
		})
	}
	// The server still answers after all of that.
	code, b := post(t, ts.URL+"/v1/completions", `{"prompt":"Once","max_tokens":2}`, auth...)
	require.Equal(t, 200, code, "%s", b)
}

// A full queue is a 429 and a server still loading a 503, each with the
// error shape; /health says loading (503) and then ok (200).
func TestQueueFullAndLoading(t *testing.T) {
	m := loadStories(t)
	srv := serve.NewServer(serve.Options{Model: "stories260K", Logger: discardLogger()})
	hs := newLoopback(t, srv)
	code, b := get(t, hs+"/health")
	require.Equal(t, 503, code)
	require.JSONEq(t, `{"status":"loading"}`, string(b))
	code, b = post(t, hs+"/v1/completions", `{"prompt":"x"}`)
	require.Equal(t, 503, code)
	require.Contains(t, string(b), "the model is loading")

	p := newGateProgram(1, 64, m.tok.VocabSize())
	sched, err := serve.New(p, m.tok, serve.Config{Queue: 1, Observer: srv.Observer()})
	require.NoError(t, err)
	require.NoError(t, srv.Ready(sched))
	code, b = get(t, hs+"/health")
	require.Equal(t, 200, code, "%s", b)

	// One request runs (its steps wait at the gate), one waits, the third
	// finds the queue full.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < 2; i++ {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", hs+"/v1/completions", strings.NewReader(`{"prompt":"x","max_tokens":50,"stream":true}`))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	for {
		if q, busy := sched.Load(); q == 1 && busy == 1 {
			break
		}
		yield()
	}
	code, b = post(t, hs+"/v1/completions", `{"prompt":"x","max_tokens":5}`)
	require.Equal(t, 429, code, "%s", b)
	var e apiErr
	require.NoError(t, json.Unmarshal(b, &e))
	require.Equal(t, "rate_limit_error", e.Error.Type)
	require.Contains(t, e.Error.Message, "the queue is full")
	cancel()
	shutdownGate(t, p, srv, sched)
	code, _ = get(t, hs+"/health")
	require.Equal(t, 503, code)
	code, b = post(t, hs+"/v1/completions", `{"prompt":"x"}`)
	require.Equal(t, 503, code)
	require.Contains(t, string(b), "shutting down")
}

// Shutting down ends a running stream with a last chunk whose
// finish_reason is "cancelled", then [DONE].
func TestShutdownEndsStreamsWithFinalChunk(t *testing.T) {
	m := loadStories(t)
	srv := serve.NewServer(serve.Options{Model: "stories260K", Logger: discardLogger()})
	url := newLoopback(t, srv)
	p := newGateProgram(1, 256, m.tok.VocabSize())
	sched, err := serve.New(p, m.tok, serve.Config{Observer: srv.Observer()})
	require.NoError(t, err)
	require.NoError(t, srv.Ready(sched))
	resp, err := http.Post(url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":50,"temperature":0,"stream":true}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	for {
		if _, busy := sched.Load(); busy == 1 {
			break
		}
		yield()
	}
	p.step() // one token
	shutdownGate(t, p, srv, sched)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	events := strings.Split(strings.TrimSpace(string(body)), "\n\n")
	require.Equal(t, "data: [DONE]", events[len(events)-1])
	var last struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(events[len(events)-2], "data: ")), &last))
	require.Equal(t, "cancelled", last.Choices[0].FinishReason, "%s", body)
}
