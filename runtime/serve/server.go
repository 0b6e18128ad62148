package serve

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/minerva-llm/minerva/chat"
	"github.com/minerva-llm/minerva/tokenizer"
)

// Options configure the HTTP server.
type Options struct {
	// Model is the model's id: what GET /v1/models lists and what a
	// request's "model" must be when it names one.
	Model string
	// ChatTemplate is the model's Jinja chat template ("": none; then a
	// harmony model renders with chat.RenderHarmony and any other with
	// ChatML).
	ChatTemplate string
	// Harmony: the model speaks gpt-oss's harmony format (rendered with
	// ChatTemplate, or chat.RenderHarmony when there is none); its output is
	// decoded with the control tokens and parsed into reasoning_content,
	// content and tool_calls. Another model whose template writes <think>
	// reasoning (Qwen3, DeepSeek-R1) has its output split by
	// chat.ThinkParser into reasoning_content and content.
	Harmony bool
	// SpecialTokens are template variables (bos_token, eos_token …) that
	// override the tokenizer's texts (a tokenizer_config.json's).
	SpecialTokens map[string]string
	// APIKey, when set, is required as "Authorization: Bearer KEY" on
	// every endpoint but /health.
	APIKey string
	// MaxBody is the largest request body in bytes (0: 4 MiB); a larger
	// one is refused with 413.
	MaxBody int64
	Limits  Limits
	// Sampling are the defaults of the fields a request leaves out (nil:
	// DefaultSampling).
	Sampling *Sampling
	// Logger gets one line per request (nil: slog.Default()).
	Logger *slog.Logger
}

// DefaultMaxBody is Options.MaxBody's default.
const DefaultMaxBody = 4 << 20

// chatMLTemplate is the template of a model that has none (llama-server
// falls back to ChatML too); its end-of-turn marker is a stop string.
const chatMLTemplate = `{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// model is what the server serves once loading is done.
type model struct {
	sched   *Scheduler
	tok     *tokenizer.Tokenizer
	tpl     *chat.Template // nil: harmony rendering
	harmony bool           // the output is harmony (Options.Harmony)
	think   bool           // the template writes <think> reasoning (chat.ThinkTemplate)
	stops   []string       // stop strings every chat request gets (ChatML's end of turn)
	special map[string]string
}

// Server is the OpenAI-compatible HTTP API over a Scheduler. It answers
// from the moment it is made: /health says 503 until Ready, and so does
// every other endpoint.
type Server struct {
	opts    Options
	log     *slog.Logger
	met     *metrics
	m       atomic.Pointer[model]
	closing atomic.Bool
	idBase  string
	ids     atomic.Uint64
	created int64
}

// NewServer makes a server that is loading.
func NewServer(opts Options) *Server {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.Sampling == nil {
		d := DefaultSampling()
		opts.Sampling = &d
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Model == "" {
		opts.Model = "minerva"
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Server{opts: opts, log: opts.Logger, met: newMetrics(), idBase: hex.EncodeToString(b[:]), created: time.Now().Unix()}
}

// Configure sets what the model file says about chatting, which a server
// started before the model is opened learns late: its chat template
// ("": none), whether it speaks harmony, and special-token texts. Call it
// before Ready.
func (s *Server) Configure(template string, harmony bool, special map[string]string) error {
	if s.m.Load() != nil {
		return errors.New("serve: Configure after Ready")
	}
	s.opts.ChatTemplate, s.opts.Harmony, s.opts.SpecialTokens = template, harmony, special
	return nil
}

// Observer is what the scheduler should report to (Config.Observer): the
// server's metrics.
func (s *Server) Observer() Observer { return s.met }

// Ready makes the server serve sched, whose tokenizer is the model's.
func (s *Server) Ready(sched *Scheduler) error {
	tok := sched.Tokenizer()
	m := &model{sched: sched, tok: tok, harmony: s.opts.Harmony, special: tok.TemplateSpecials()}
	for k, v := range s.opts.SpecialTokens {
		m.special[k] = v
	}
	switch {
	case s.opts.ChatTemplate != "":
		tpl, err := chat.Compile(s.opts.ChatTemplate)
		if err != nil {
			return err
		}
		m.tpl = tpl
		m.think = !s.opts.Harmony && chat.ThinkTemplate(s.opts.ChatTemplate)
	case s.opts.Harmony:
	default:
		tpl, err := chat.Compile(chatMLTemplate)
		if err != nil {
			return err
		}
		m.tpl, m.stops = tpl, []string{"<|im_end|>"}
	}
	s.met.slots.Set(float64(sched.Slots()))
	s.m.Store(m)
	return nil
}

// Shutdown refuses new requests from now on and shuts the scheduler down
// (Scheduler.Shutdown): running requests finish until ctx ends, then end
// with a final chunk whose finish_reason is "cancelled".
func (s *Server) Shutdown(ctx context.Context) {
	s.closing.Store(true)
	if m := s.m.Load(); m != nil {
		m.sched.Shutdown(ctx)
	}
}

// reqLog is what the request's log line reports besides method, path,
// status and duration.
type reqLog struct {
	prompt, completion int
	finish             string
	err                string
}

type logKey struct{}

func logOf(r *http.Request) *reqLog {
	if l, ok := r.Context().Value(logKey{}).(*reqLog); ok {
		return l
	}
	return &reqLog{}
}

// statusWriter remembers the status for the log and the metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		rl := &reqLog{}
		r = r.WithContext(context.WithValue(r.Context(), logKey{}, rl))
		endpoint := s.route(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		s.met.requests.WithLabelValues(endpoint, fmt.Sprint(sw.status)).Inc()
		attrs := []any{"method", r.Method, "path", r.URL.Path, "status", sw.status,
			"ms", float64(time.Since(start).Microseconds()) / 1000, "remote", r.RemoteAddr}
		if rl.prompt > 0 || rl.completion > 0 {
			attrs = append(attrs, "prompt_tokens", rl.prompt, "completion_tokens", rl.completion)
		}
		if rl.finish != "" {
			attrs = append(attrs, "finish", rl.finish)
		}
		if rl.err != "" {
			attrs = append(attrs, "error", rl.err)
		}
		s.log.Info("request", attrs...)
	})
}

// route dispatches one request and returns the endpoint's metric label.
func (s *Server) route(w http.ResponseWriter, r *http.Request) (endpoint string) {
	defer func() {
		// A handler bug must not take the server down; the client gets a
		// 500 if nothing was written yet.
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("handler panic", "path", r.URL.Path, "panic", fmt.Sprint(p))
			s.fail(w, r, &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: "internal error"})
			endpoint = "panic"
		}
	}()
	type route struct {
		method string
		fn     func(http.ResponseWriter, *http.Request, *model)
		open   bool // no API key needed, served while loading
	}
	routes := map[string]route{
		"/health":              {"GET", nil, true},
		"/metrics":             {"GET", nil, false},
		"/v1/models":           {"GET", s.models, false},
		"/v1/chat/completions": {"POST", s.chatCompletions, false},
		"/v1/completions":      {"POST", s.completions, false},
		"/tokenize":            {"POST", s.tokenize, false},
		"/detokenize":          {"POST", s.detokenize, false},
	}
	path := r.URL.Path
	rt, ok := routes[path]
	if !ok {
		s.fail(w, r, &apiError{status: http.StatusNotFound, typ: "not_found_error", msg: fmt.Sprintf("no endpoint %s %s", r.Method, path)})
		return "unknown"
	}
	if r.Method != rt.method && !(rt.method == "GET" && r.Method == "HEAD") {
		w.Header().Set("Allow", rt.method)
		s.fail(w, r, &apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error",
			msg: fmt.Sprintf("%s takes %s, not %s", path, rt.method, r.Method)})
		return path
	}
	if path == "/health" {
		s.health(w, r)
		return path
	}
	if !rt.open && s.opts.APIKey != "" && !s.authorized(r) {
		s.fail(w, r, &apiError{status: http.StatusUnauthorized, typ: "authentication_error", code: "invalid_api_key",
			msg: "missing or wrong API key: send the header Authorization: Bearer KEY"})
		return path
	}
	if path == "/metrics" {
		promhttp.HandlerFor(s.met.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
		return path
	}
	m := s.m.Load()
	if m == nil {
		s.fail(w, r, &apiError{status: http.StatusServiceUnavailable, typ: "unavailable_error", msg: "the model is loading; retry when GET /health says ok"})
		return path
	}
	if s.closing.Load() {
		s.fail(w, r, &apiError{status: http.StatusServiceUnavailable, typ: "unavailable_error", msg: "the server is shutting down"})
		return path
	}
	rt.fn(w, r, m)
	return path
}

func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	key, ok := strings.CutPrefix(h, "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(key)), []byte(s.opts.APIKey)) == 1
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	m := s.m.Load()
	switch {
	case m == nil:
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "loading"})
	case s.closing.Load():
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "shutting down"})
	default:
		q, busy := m.sched.Load()
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "slots_idle": m.sched.Slots() - busy, "slots_processing": busy, "queued": q})
	}
}

// fail writes e as the response.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, e *apiError) {
	logOf(r).err = e.msg
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_, _ = w.Write(e.body())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"cannot encode the response","type":"server_error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// readBody reads a bounded request body.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	tooLarge := &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
		msg: fmt.Sprintf("the request body is larger than %d bytes", s.opts.MaxBody)}
	if r.ContentLength > s.opts.MaxBody {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge
	case err != nil:
		return nil, badRequest("", "cannot read the request body: %s", oneLine(err.Error()))
	}
	return body, nil
}

func (s *Server) models(w http.ResponseWriter, r *http.Request, m *model) {
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []any{map[string]any{
			"id": s.opts.Model, "object": "model", "created": s.created, "owned_by": "minerva",
			"meta": map[string]any{"n_ctx": m.sched.Context(), "n_vocab": m.tok.VocabSize(), "slots": m.sched.Slots()},
		}},
	})
}

// newID is a request id, unique in this server's life.
func (s *Server) newID(prefix string) string {
	return fmt.Sprintf("%s-%s%06x", prefix, s.idBase, s.ids.Add(1))
}

func randomSeed() uint64 { return mrand.Uint64() }

// checkModel refuses a request for a model this server does not serve.
func (s *Server) checkModel(name string) *apiError {
	if name == "" || name == s.opts.Model {
		return nil
	}
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_found",
		msg: fmt.Sprintf("the model %q does not exist; this server serves %q", name, s.opts.Model)}
}

// submitError maps Submit's errors to responses; promptField names the
// request's prompt (prompt or messages).
func submitError(err error, promptField string) *apiError {
	var ce ContextError
	var fe fieldError
	switch {
	case errors.As(err, &ce):
		param := "max_tokens"
		if ce.Prompt >= ce.Context {
			param = promptField
		}
		return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, code: "context_length_exceeded", msg: ce.Error()}
	case errors.As(err, &fe):
		return badRequest(fe.field, "%s", fe.msg)
	case errors.Is(err, ErrQueueFull):
		return &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", msg: err.Error()}
	case errors.Is(err, ErrShuttingDown):
		return &apiError{status: http.StatusServiceUnavailable, typ: "unavailable_error", msg: err.Error()}
	}
	return &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: err.Error()}
}

// maxTokensFor fills in max_tokens: the rest of the context when the
// request left it out (bounded by Limits.MaxTokens).
func (s *Server) maxTokensFor(g generation, prompt int, m *model) int {
	if g.maxTokens > 0 {
		return g.maxTokens
	}
	n := m.sched.Context() - prompt
	if s.opts.Limits.MaxTokens > 0 {
		n = min(n, s.opts.Limits.MaxTokens)
	}
	return max(n, 1)
}
