package runtime

import (
	"fmt"
	"sync"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/quant"
)

func init() { RegisterBackend(referenceBackend{}) }

// referenceBackend runs graphs on the interpreter of ir/eval: the oracle the
// other backends are checked against, so it favours the obviously right over
// the fast.
//
// One eval.Machine serves every slot: it holds the weights once (dequantized
// to float32 at Compile) and its state buffers are pointed at the rows of the
// slot being stepped. The caches themselves are one contiguous allocation
// per state, [Slots·C, W], in the state's dtype:
//
//   - f32 caches: the machine's state buffer is a view of the slot's rows,
//     so a step reads and writes the storage directly.
//   - f16 caches: the storage holds real IEEE half floats (2 bytes an
//     element); the machine's own [C, W] float32 buffer is a window that
//     the slot's used rows are decoded into before a step, and the rows the
//     step wrote (pos) are encoded back after it. The interpreter already
//     rounds what it writes into an f16 cache to f16, so the round trip is
//     exact and a slot reads exactly what a solo machine would.
type referenceBackend struct{}

func (referenceBackend) Name() string { return "reference" }

type refState struct {
	info StateInfo
	// buf is the machine's state tensor for this cache (eval.Machine.State):
	// its F32 slice is what the next Run reads and writes.
	buf *eval.Tensor
	f32 []float32 // f32 storage: Slots·C·W
	f16 []uint16  // f16 storage: Slots·C·W
	// dirty is the number of leading rows of the f16 window that may hold
	// non-zero values.
	dirty int
}

type refProgram struct {
	mu      sync.Mutex
	cfg     ProgramConfig
	sig     Signature
	m       *eval.Machine
	states  []*refState
	used    []int // per slot: 1 + the highest row written since the last reset
	current int   // the slot the f16 windows hold (-1: none)
	closed  bool
}

func (referenceBackend) Compile(g *ir.Graph, w eval.Weights, cfg ProgramConfig) (Program, error) {
	if cfg.Context <= 0 {
		return nil, fmt.Errorf("context length %d must be positive", cfg.Context)
	}
	if cfg.Slots < 0 {
		return nil, fmt.Errorf("slot count %d must be positive", cfg.Slots)
	}
	if cfg.Slots == 0 {
		cfg.Slots = 1
	}
	sig, err := CheckGraph(g)
	if err != nil {
		return nil, err
	}
	m, err := eval.New(g, w, int64(cfg.Context))
	if err != nil {
		return nil, err
	}
	p := &refProgram{cfg: cfg, sig: sig, m: m, used: make([]int, cfg.Slots), current: -1}
	rows := cfg.Slots * cfg.Context
	for _, info := range sig.States {
		n := rows * info.Width
		if n/info.Width != rows || n > 1<<40 {
			return nil, fmt.Errorf("state %q: %d slots × %d rows × %d overflow", info.Name, cfg.Slots, cfg.Context, info.Width)
		}
		st := &refState{info: info, buf: m.State(info.Name)}
		if st.buf == nil || len(st.buf.F32) != cfg.Context*info.Width {
			return nil, fmt.Errorf("state %q: the interpreter holds no [%d, %d] buffer for it", info.Name, cfg.Context, info.Width)
		}
		if info.DType == ir.F16 {
			st.f16 = make([]uint16, n)
		} else {
			// f32, and q8_0 as the values its blocks decode to (kvwrite
			// rounds them so): the oracle need not store the blocks.
			st.f32 = make([]float32, n)
			st.buf.F32 = nil // the machine's own buffer is replaced by slot views
		}
		p.states = append(p.states, st)
	}
	// Upload: one step runs every op once, so every weight is read and
	// dequantized (and every load-time fold computed) now, not on the first
	// real step; then the slot is cleared.
	if _, err := p.Step(0, []int32{0}, []int32{0}); err != nil {
		return nil, fmt.Errorf("loading weights: %w", err)
	}
	if err := p.ResetSlot(0); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *refProgram) Config() ProgramConfig { return p.cfg }
func (p *refProgram) VocabSize() int        { return p.sig.VocabSize }

func (p *refProgram) CacheBytes() int64 {
	return StatesBytes(p.sig.States, p.cfg.Slots*p.cfg.Context)
}

// rowsOf returns slot s's part of a [Slots·C, W] buffer.
func rowsOf[E any](buf []E, s, c, w int) []E {
	return buf[s*c*w : (s+1)*c*w : (s+1)*c*w]
}

// bind points the machine's state buffers at slot s.
func (p *refProgram) bind(s int) {
	c := p.cfg.Context
	for _, st := range p.states {
		w := st.info.Width
		if st.f32 != nil {
			st.buf.F32 = rowsOf(st.f32, s, c, w)
			continue
		}
		if p.current == s {
			continue
		}
		// Decode the rows the slot has used; zero what another slot left.
		win, src := st.buf.F32, rowsOf(st.f16, s, c, w)
		n := p.used[s] * w
		for i, h := range src[:n] {
			win[i] = quant.F16ToF32(h)
		}
		if st.dirty > p.used[s] {
			clear(win[n : st.dirty*w])
		}
		st.dirty = p.used[s]
	}
	p.current = s
}

func (p *refProgram) Step(slot int, tokens, pos []int32) ([][]float32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if err := CheckStep(p.cfg, p.sig.TokenLimit, slot, tokens, pos); err != nil {
		return nil, err
	}
	p.bind(slot)
	shape := []int64{int64(len(tokens))}
	res, err := p.m.Run(map[string]eval.Tensor{
		"tokens": {Shape: shape, I32: tokens},
		"pos":    {Shape: shape, I32: pos},
	})
	// The step may have written some rows before it failed: account for
	// them as for a finished step, so the slot's state stays well defined.
	c := p.cfg.Context
	for _, q := range pos {
		p.used[slot] = max(p.used[slot], int(q)+1)
	}
	for _, st := range p.states {
		if st.f16 == nil {
			continue
		}
		w := st.info.Width
		dst := rowsOf(st.f16, slot, c, w)
		for _, q := range pos {
			r := int(q) * w
			for j, x := range st.buf.F32[r : r+w] {
				dst[r+j] = quant.F32ToF16(x)
			}
		}
		st.dirty = max(st.dirty, p.used[slot])
	}
	if err != nil {
		return nil, err
	}
	logits := res["logits"].F32
	n := p.sig.VocabSize
	if len(logits) != len(tokens)*n {
		return nil, fmt.Errorf("logits have %d values, want %d×%d", len(logits), len(tokens), n)
	}
	rows := make([][]float32, len(tokens))
	for i := range rows {
		rows[i] = logits[i*n : (i+1)*n : (i+1)*n]
	}
	return rows, nil
}

func (p *refProgram) ResetSlot(slot int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if slot < 0 || slot >= p.cfg.Slots {
		return fmt.Errorf("slot %d is out of range (the program has %d)", slot, p.cfg.Slots)
	}
	c := p.cfg.Context
	for _, st := range p.states {
		w := st.info.Width
		if st.f32 != nil {
			clear(rowsOf(st.f32, slot, c, w))
		} else {
			clear(rowsOf(st.f16, slot, c, w))
		}
	}
	p.used[slot] = 0
	if p.current == slot {
		p.current = -1 // the f16 windows still hold the old rows
	}
	return nil
}

func (p *refProgram) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.m, p.states = nil, nil
	return nil
}
