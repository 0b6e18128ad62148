//go:build darwin

package metal

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego/objc"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/internal/devplan"
)

// maxStepTokens bounds the activation buffers: a longer prompt runs as
// several steps (chunks).
const maxStepTokens = 256

// program is a plan's library on the GPU. NEVER RUN on Apple hardware: see
// the package comment.
type program struct {
	mu      sync.Mutex
	cfg     runtime.ProgramConfig
	vocab   int
	l       *layout
	d       *device
	p       *pipelines
	bufs    []objc.ID
	keep    [][]byte       // weight bytes wrapped without a copy: kept alive
	icb     objc.ID        // the recorded decode step (T = 1), 0 until the first
	inputs  map[string]int // input name → buffer
	nDecode int            // commands in a decode ICB
	closed  bool
}

func compile(g *ir.Graph, w eval.Weights, cfg runtime.ProgramConfig) (runtime.Program, error) {
	if cfg.Slots <= 0 {
		cfg.Slots = 1
	}
	lib, err := library(g, cfg.Kernels)
	if err != nil {
		return nil, err
	}
	l, err := planLayout(g, lib, min(maxStepTokens, cfg.Context), cfg.Context, cfg.Slots)
	if err != nil {
		return nil, err
	}
	d, err := openDevice()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, k := range lib.Kernels {
		names = append(names, k.Name)
	}
	p, err := d.compileLibrary(lib.Source, names, true)
	if err != nil {
		return nil, err
	}
	pr := &program{cfg: cfg, l: l, d: d, p: p, inputs: map[string]int{}}
	byID := map[int]*ir.Value{}
	for _, v := range g.Values {
		byID[v.ID] = v
	}
	if lv := byID[l.Logits]; lv != nil {
		pr.vocab = int(lv.Type.Shape.Last().N)
	}
	if err := pr.allocate(g, byID, w); err != nil {
		pr.Close()
		return nil, err
	}
	return pr, nil
}

// allocate creates every buffer of the layout: weights wrapped without a
// copy where devplan.WeightRegions finds page-aligned regions Metal accepts
// (copied otherwise), folded constants computed at load, the rest zeroed.
func (pr *program) allocate(g *ir.Graph, byID map[int]*ir.Value, w eval.Weights) error {
	l := pr.l
	pr.bufs = make([]objc.ID, len(l.Bufs))
	get := devplan.Contents(w)
	raw := map[int][]byte{} // weight bytes by buffer index
	var spans []devplan.Span
	var spanBuf []int
	for i, s := range l.Bufs {
		switch s.Kind {
		case devplan.Weight, devplan.Const:
			b, err := get(byID[s.Value])
			if err != nil {
				return fmt.Errorf("metal: %w", err)
			}
			if int64(len(b)) != s.Bytes {
				return fmt.Errorf("metal: weight %s has %d bytes, want %d", s.Name, len(b), s.Bytes)
			}
			if s.Kind == devplan.Weight && len(b) > 0 {
				raw[i] = b
				spans = append(spans, devplan.Span{Addr: uintptr(unsafe.Pointer(&b[0])), Len: uintptr(len(b))})
				spanBuf = append(spanBuf, i)
				continue
			}
			buf, err := pr.d.newBuffer(s.Bytes)
			if err != nil {
				return err
			}
			copy(bytesOf(buf, 0, s.Bytes), b)
			pr.bufs[i] = buf
		default:
			buf, err := pr.d.newBuffer(s.Bytes)
			if err != nil {
				return err
			}
			pr.bufs[i] = buf
			if s.Kind == devplan.Input {
				pr.inputs[s.Name] = i
			}
		}
	}
	// Weights: one no-copy buffer per region; a weight bound at an offset
	// into its region needs the region's buffer and the offset, which the
	// layout expresses as the weight's own buffer — so each weight gets the
	// region's buffer object and the dispatch offsets are shifted below.
	regs, pls := devplan.WeightRegions(spans, uintptr(os.Getpagesize()), pr.d.maxBuffer)
	regBufs := make([]objc.ID, len(regs))
	for i, r := range regs {
		regBufs[i] = pr.d.wrap(r.Base, r.Len)
	}
	shift := map[int]int64{}
	for k, pl := range pls {
		i := spanBuf[k]
		if pl.Region >= 0 && regBufs[pl.Region] != 0 {
			pr.bufs[i] = regBufs[pl.Region]
			shift[i] = pl.Offset
			pr.keep = append(pr.keep, raw[i])
			continue
		}
		// Metal refused the wrap (or no page-aligned region fits): copy.
		b := raw[i]
		buf, err := pr.d.newBuffer(int64(len(b)))
		if err != nil {
			return err
		}
		copy(bytesOf(buf, 0, int64(len(b))), b)
		pr.bufs[i] = buf
	}
	l.WeightShift = shift
	return nil
}

func (pr *program) Config() runtime.ProgramConfig { return pr.cfg }
func (pr *program) VocabSize() int                { return pr.vocab }

func (pr *program) CacheBytes() int64 {
	return pr.l.CacheBytes()
}

// Step runs tokens in chunks of at most the layout's maxT; a one-token step
// replays the recorded indirect command buffer.
func (pr *program) Step(slot int, tokens, pos []int32) ([][]float32, error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return nil, runtime.ErrClosed
	}
	if err := runtime.CheckStep(pr.cfg, pr.vocab, slot, tokens, pos); err != nil {
		return nil, fmt.Errorf("metal: %w", err)
	}
	slots := make([]int32, len(tokens))
	for i := range slots {
		slots[i] = int32(slot)
	}
	return pr.stepRows(runtime.Rows{Slots: slots, Tokens: tokens, Pos: pos})
}

// StepRows runs rows of several slots in one step (runtime.BatchProgram),
// each row writing and reading its own slot's cache rows through the
// step's cache bases; more rows than the layout's maxT run in chunks.
func (pr *program) StepRows(r runtime.Rows) ([][]float32, error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return nil, runtime.ErrClosed
	}
	if err := runtime.CheckRows(pr.cfg, pr.vocab, r); err != nil {
		return nil, fmt.Errorf("metal: %w", err)
	}
	return pr.stepRows(r)
}

func (pr *program) stepRows(r runtime.Rows) ([][]float32, error) {
	var all [][]float32
	for _, c := range devplan.Chunks(r.Len(), pr.l.MaxT) {
		rows, err := pr.step(r.Tokens[c[0]:c[1]], r.Pos[c[0]:c[1]], r.Slots[c[0]:c[1]])
		if err != nil {
			return nil, err
		}
		all = append(all, rows...)
	}
	return runtime.PickRows(all, r.Logits), nil
}

func (pr *program) step(tokens, pos, slots []int32) ([][]float32, error) {
	T := len(tokens)
	bases := make([]int32, T)
	pr.l.KVBases(bases, slots)
	ins := map[int][]int32{pr.l.KVBaseI: bases}
	for name, vals := range map[string][]int32{"tokens": tokens, "pos": pos} {
		if i, ok := pr.inputs[name]; ok {
			ins[i] = vals
		}
	}
	for i, vals := range ins {
		if i < 0 {
			continue
		}
		b := bytesOf(pr.bufs[i], 0, int64(4*T))
		for k, x := range vals {
			binary.LittleEndian.PutUint32(b[4*k:], uint32(x))
		}
	}
	binary.LittleEndian.PutUint32(bytesOf(pr.bufs[pr.l.TBufI], 0, 4), uint32(T))
	ds, err := pr.l.Dispatches(T)
	if err != nil {
		return nil, err
	}
	pr.l.ShiftWeights(ds)
	if T == 1 {
		// One recording serves every slot: the caches are bound whole and
		// the row's slot is its cache base, read from its buffer.
		if pr.icb == 0 {
			if pr.icb, err = pr.d.recordICB(pr.p, pr.bufs, ds, pr.l.MaxBindings()); err != nil {
				return nil, err
			}
		}
		err = pr.d.replay(pr.icb, len(ds), pr.bufs)
	} else {
		err = pr.d.run(pr.p, pr.bufs, ds)
	}
	if err != nil {
		return nil, err
	}
	b, err := pr.l.Bind(pr.l.Logits, T)
	if err != nil {
		return nil, err
	}
	raw := bytesOf(pr.bufs[b.Buf], b.Offset, int64(4*T*pr.vocab))
	rows := make([][]float32, T)
	for t := range rows {
		rows[t] = make([]float32, pr.vocab)
		copy(rows[t], unsafe.Slice((*float32)(unsafe.Pointer(&raw[4*t*pr.vocab])), pr.vocab))
	}
	return rows, nil
}

func (pr *program) ResetSlot(slot int) error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return runtime.ErrClosed
	}
	if slot < 0 || slot >= pr.cfg.Slots {
		return fmt.Errorf("metal: slot %d outside 0..%d", slot, pr.cfg.Slots-1)
	}
	for i, s := range pr.l.Bufs {
		if s.Kind == devplan.State {
			rb := pr.l.StateRow[s.Value] * int64(pr.cfg.Context)
			clear(bytesOf(pr.bufs[i], int64(slot)*rb, rb))
		}
	}
	return nil
}

func (pr *program) Close() error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return nil
	}
	pr.closed = true
	seen := map[objc.ID]bool{}
	for _, b := range pr.bufs {
		if b != 0 && !seen[b] {
			seen[b] = true
			release(b)
		}
	}
	if pr.icb != 0 {
		release(pr.icb)
	}
	pr.keep = nil
	return nil
}
