package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/serve"
)

type serveCmd struct {
	Model        string        `arg:"" optional:"" help:"Plan file or model file (.gguf, compiled once and cached). Without one, the built-in synthetic llama." type:"path"`
	Host         string        `help:"Address to listen on." default:"127.0.0.1"`
	Port         int           `help:"Port to listen on (0: any free port, printed on stderr)." default:"8080"`
	Parallel     int           `name:"parallel" help:"Sequences generated at once (KV cache slots); more requests wait in the queue." default:"4"`
	Ctx          int           `help:"Positions of each slot's KV cache (default: the model's context length, at most 4096)."`
	Queue        int           `help:"Most requests waiting for a slot; more get 429 (0: 4 × --parallel)." default:"0"`
	Chunk        int           `help:"Most prompt tokens read in one step, beside the running sequences' decode rows: a long prompt delays running streams by one chunk per step." default:"64"`
	APIKey       string        `name:"api-key" help:"Require Authorization: Bearer KEY on every endpoint but /health." env:"MINERVA_API_KEY"`
	Alias        string        `help:"The model's id in the API (default: the model file's name without extension)."`
	ChatTemplate string        `name:"chat-template" help:"Jinja chat template file to use instead of the model's (tokenizer.chat_template)." type:"path"`
	MaxTokens    int           `name:"max-tokens" help:"Largest max_tokens a request may ask for (0: the context)." default:"0"`
	MaxBody      int64         `name:"max-body" help:"Largest request body in bytes; larger ones get 413." default:"4194304"`
	Grace        time.Duration `help:"On SIGTERM or SIGINT, how long running requests may finish before they are cancelled." default:"10s"`
	LogFormat    string        `name:"log-format" help:"Request log lines on stderr: text or json." default:"text" enum:"text,json"`
	Target       string        `short:"t" help:"Backend for a .gguf model: goasm (the CPU), reference (the interpreter) or cuda (an NVIDIA GPU; batched steps, as the CPU)." default:"goasm"`
	cacheFlags   `embed:""`
	Verbose      bool `short:"v" help:"Print load and compile times on stderr."`
}

func (c *serveCmd) Run(bo *runtime.Options) error {
	switch {
	case c.Parallel < 1:
		return usageError{fmt.Sprintf("--parallel %d must be ≥ 1", c.Parallel)}
	case c.Ctx < 0:
		return usageError{fmt.Sprintf("--ctx %d must be positive", c.Ctx)}
	case c.Queue < 0:
		return usageError{fmt.Sprintf("--queue %d must be ≥ 0", c.Queue)}
	case c.Chunk < 1:
		return usageError{fmt.Sprintf("--chunk %d must be ≥ 1", c.Chunk)}
	case c.MaxTokens < 0:
		return usageError{fmt.Sprintf("--max-tokens %d must be ≥ 0", c.MaxTokens)}
	case c.MaxBody < 1:
		return usageError{fmt.Sprintf("--max-body %d must be ≥ 1", c.MaxBody)}
	case c.Port < 0 || c.Port > 65535:
		return usageError{fmt.Sprintf("--port %d is not a port number", c.Port)}
	case c.Grace < 0:
		return usageError{fmt.Sprintf("--grace %v must be ≥ 0", c.Grace)}
	}
	var tpl string
	if c.ChatTemplate != "" {
		b, err := os.ReadFile(c.ChatTemplate)
		if err != nil {
			return fmt.Errorf("--chat-template: %w", err)
		}
		tpl = string(b)
	}
	var handler slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if c.LogFormat == "json" {
		handler = slog.NewJSONHandler(os.Stderr, nil)
	}
	logger := slog.New(handler)
	alias := c.Alias
	if alias == "" {
		alias = "minerva-synthetic"
		if c.Model != "" {
			alias = strings.TrimSuffix(filepath.Base(c.Model), filepath.Ext(c.Model))
		}
	}
	opts := serve.Options{Model: alias, APIKey: c.APIKey, MaxBody: c.MaxBody, Limits: serve.Limits{MaxTokens: c.MaxTokens}, Logger: logger}
	// The server answers (/health: 503) while the model loads, so a
	// supervisor sees it up at once.
	srv := serve.NewServer(opts)
	ln, err := net.Listen("tcp", net.JoinHostPort(c.Host, strconv.Itoa(c.Port)))
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(handler, slog.LevelWarn)}
	fmt.Fprintf(os.Stderr, "minervac: serving %s on http://%s (loading)\n", alias, ln.Addr())
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	loaded := make(chan error, 1)
	var m *runnable
	go func() { loaded <- c.load(bo, srv, tpl, &m) }()
	defer func() {
		if m != nil {
			m.Close()
		}
	}()
	select {
	case err := <-loaded:
		if err != nil {
			hs.Close()
			return err
		}
	case <-ctx.Done():
		hs.Close()
		<-loaded // the program is closed with the runnable
		return exitCode(130)
	case err := <-served:
		return err
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	// Stop accepting, let running requests finish for --grace, then cancel
	// them (each stream gets a final chunk) and wait for the handlers.
	fmt.Fprintf(os.Stderr, "minervac: shutting down (running requests have %v to finish)\n", c.Grace)
	stop()
	grace, cancel := context.WithTimeout(context.Background(), c.Grace)
	defer cancel()
	done := make(chan struct{})
	go func() {
		srv.Shutdown(grace)
		close(done)
	}()
	if err := hs.Shutdown(context.Background()); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-done
	return nil
}

// load opens and compiles the model with --parallel slots, checking first
// that their KV caches fit, and makes srv serve it.
func (c *serveCmd) load(bo *runtime.Options, srv *serve.Server, tpl string, out **runnable) error {
	tm := &timer{on: c.Verbose}
	tm.reset()
	m, err := openRunnable(c.Model, c.Target, c.cacheFlags, bo, tm)
	if err != nil {
		return err
	}
	*out = m
	ctxLen := c.Ctx
	if ctxLen == 0 {
		ctxLen = m.ctx
	}
	if err := serve.CheckKVMemory(m.graph, ctxLen, c.Parallel, availableMemory()); err != nil {
		return usageError{err.Error()}
	}
	m.warnTrained(ctxLen)
	b, ok := runtime.LookupBackend(m.target)
	if !ok {
		return fmt.Errorf("target %s is not implemented in this build (implemented: %v)", m.target, runtime.Backends())
	}
	prog, err := b.Compile(m.graph, m.weights, runtime.ProgramConfig{Context: ctxLen, Slots: c.Parallel, Options: m.opts, Kernels: m.kernels})
	if err != nil {
		return err
	}
	m.closers = append(m.closers, closerFunc(prog.Close))
	if _, batched := prog.(runtime.BatchProgram); !batched && c.Parallel > 1 {
		fmt.Fprintf(os.Stderr, "minervac: the %s backend steps one slot at a time: the %d slots share the device but not the weight reads\n", m.target, c.Parallel)
	}
	if tpl == "" {
		tpl = m.chat.template
	}
	sched, err := serve.New(prog, m.tok, serve.Config{Queue: c.Queue, Chunk: c.Chunk, Observer: srv.Observer()})
	if err != nil {
		return err
	}
	harmony := m.chat.arch == "gpt-oss" || strings.Contains(tpl, "<|channel|>") && strings.Contains(tpl, "<|start|>")
	if err := srv.Configure(tpl, harmony, m.chat.specials); err != nil {
		return err
	}
	if err := srv.Ready(sched); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "minervac: ready: %d slots of %d positions (KV cache %.1f MB), %s backend\n",
		c.Parallel, ctxLen, float64(prog.CacheBytes())/1e6, m.target)
	return nil
}
