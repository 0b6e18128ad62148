package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/tokenizer"
)

// Model is what the runtime runs: a graph, its weights, and the tokenizer
// that turns text into the graph's tokens and back. NewModel makes one of
// what a frontend built; the fields may also be filled in directly.
//
// A Model is read-only once built and may be shared by several engines.
type Model struct {
	Graph   *ir.Graph
	Weights eval.Weights
	// Tokenizer may be nil for a model run on token ids only (then
	// Session.GenerateText is unavailable).
	Tokenizer *tokenizer.Tokenizer
	// ContextLength is the context the model was trained for: the default
	// (capped at DefaultMaxContext) when an engine names none.
	ContextLength int
	// Closer, when set, is closed by Close: the file the weights are
	// mapped from.
	Closer io.Closer
}

// DefaultMaxContext caps the default context of an engine: a model's
// trained context can be far larger than a KV cache one wants to allocate
// without asking.
const DefaultMaxContext = 4096

// NewModel makes a Model of a graph, the weights it names, the vocabulary
// of its tokenizer and the context it was trained for: what a frontend
// builds from a model file.
//
//	src, err := frontend.Open(path) // a GGUF file
//	...
//	defer src.Close()
//	m, err := src.Build(arch.Options{})
//	...
//	model, err := runtime.NewModel(m.Graph, m.Weights, m.Vocab, m.Config.ContextLength)
//
// The runtime takes the parts, not the file: reading model files is the
// frontend's, a floor below (docs/ARCHITECTURE.md, import floors), so the
// runtime does not import it. The weights stay the source's: close it after
// the model's engines.
func NewModel(g *ir.Graph, w eval.Weights, v tokenizer.Vocab, contextLength int) (*Model, error) {
	tok, err := tokenizer.New(v)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return &Model{Graph: g, Weights: w, Tokenizer: tok, ContextLength: contextLength}, nil
}

// Close closes Closer, when set: the file the weights are mapped from.
func (m *Model) Close() error {
	if m.Closer == nil {
		return nil
	}
	c := m.Closer
	m.Closer = nil
	return c.Close()
}

// EngineOptions choose where and how big a model runs.
type EngineOptions struct {
	// Backend names a registered backend (Backends()); "" is DefaultBackend.
	Backend string
	// Context is the number of positions of one sequence; 0 means the
	// model's ContextLength, at most DefaultMaxContext.
	Context int
	// Slots is the number of sequences that can be open at once; 0 means 1.
	Slots int
}

// ErrNoFreeSlot is returned by Engine.NewSession when every slot is taken.
var ErrNoFreeSlot = errors.New("every sequence slot of the engine is in use")

// Engine is a Model compiled on a backend: its weights uploaded and a KV
// cache of Slots sequences allocated. Each Session takes one slot. An Engine
// is safe for concurrent use, and so are its sessions as long as each is
// used by one goroutine at a time.
type Engine struct {
	model   *Model
	backend string
	prog    Program
	mu      sync.Mutex
	busy    []bool
}

// NewEngine compiles m on a backend.
func (m *Model) NewEngine(opts EngineOptions) (*Engine, error) {
	name := opts.Backend
	if name == "" {
		name = DefaultBackend
	}
	b, ok := LookupBackend(name)
	if !ok {
		return nil, fmt.Errorf("unknown backend %q (available: %v)", name, Backends())
	}
	ctx := opts.Context
	if ctx == 0 {
		ctx = min(m.ContextLength, DefaultMaxContext)
		if ctx <= 0 {
			return nil, fmt.Errorf("the model records no context length: give EngineOptions.Context")
		}
	}
	if ctx < 0 {
		return nil, fmt.Errorf("context length %d must be positive", ctx)
	}
	if opts.Slots < 0 {
		return nil, fmt.Errorf("slot count %d must be positive", opts.Slots)
	}
	p, err := b.Compile(m.Graph, m.Weights, ProgramConfig{Context: ctx, Slots: opts.Slots})
	if err != nil {
		return nil, fmt.Errorf("%s backend: %w", name, err)
	}
	return &Engine{model: m, backend: name, prog: p, busy: make([]bool, p.Config().Slots)}, nil
}

// Model is the model the engine runs.
func (e *Engine) Model() *Model { return e.model }

// Backend is the name of the backend the engine runs on.
func (e *Engine) Backend() string { return e.backend }

// Program is the compiled program (for stepping slots directly).
func (e *Engine) Program() Program { return e.prog }

// NewSession opens a sequence in a free slot (ErrNoFreeSlot if none).
// Close the session to give the slot back.
func (e *Engine) NewSession() (*Session, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.busy == nil {
		return nil, ErrClosed
	}
	for slot, busy := range e.busy {
		if busy {
			continue
		}
		if err := e.prog.ResetSlot(slot); err != nil {
			return nil, err
		}
		e.busy[slot] = true
		release := func() error {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.busy != nil {
				e.busy[slot] = false
			}
			return nil
		}
		return &Session{prog: e.prog, slot: slot, model: e.model, done: release}, nil
	}
	return nil, ErrNoFreeSlot
}

// Close frees the program; sessions still open fail from then on.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.busy == nil {
		return nil
	}
	e.busy = nil
	return e.prog.Close()
}

// Model is the model the session belongs to (nil for a session made by
// NewSession or NewProgramSession).
func (s *Session) Model() *Model { return s.model }

// GenerateText tokenizes prompt with the model's tokenizer (adding BOS when
// the tokenizer asks for it and the session is at position 0) and generates
// from it: Generate with EOS set to the tokenizer's, and Decode set to the
// tokenizer's unless opts has one. Result.Text is the generated text.
func (s *Session) GenerateText(ctx context.Context, prompt string, opts GenerateOptions) (*Result, error) {
	if s.model == nil || s.model.Tokenizer == nil {
		return nil, fmt.Errorf("the session has no tokenizer: open it from a Model's Engine")
	}
	tok := s.model.Tokenizer
	ids := tok.Encode(prompt, tok.AddBOS() && s.Pos() == 0)
	opts.EOS = tok.EOS()
	if opts.Decode == nil {
		opts.Decode = tok.Decode
	}
	return Generate(ctx, s, ids, opts)
}
