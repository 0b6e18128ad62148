// Package sched is the launch schedule a GPU emitter (codegen/metal,
// codegen/cuda) hands its runtime: which kernel runs, on which graph values,
// over which grid, for steps of how many tokens. Both emitters and
// runtime/internal/devplan share these types, so a runtime plans a library
// without converting it.
package sched

// GridDim is a block (threadgroup) count along one grid axis: N, times the
// step's token count T when PerToken is set, or times ceil(T / Tile) when
// Tile > 1 as well (a block per tile of Tile tokens).
type GridDim struct {
	N        int64 `json:"n"`
	PerToken bool  `json:"per_token,omitempty"`
	Tile     int64 `json:"tile,omitempty"`
}

// Count binds T.
func (d GridDim) Count(T int) int64 {
	switch {
	case d.PerToken && d.Tile > 1:
		return d.N * ((int64(T) + d.Tile - 1) / d.Tile)
	case d.PerToken:
		return d.N * int64(T)
	}
	return d.N
}

// Arg is one buffer argument of a kernel: a graph value by ID (a weight, a
// weight-only value folded at load, an input, a state or an activation),
// the step's scratch of ScratchPerToken bytes per token (Value Scratch), or
// the step's cache bases (Value KVBase). The step's token count T follows
// the buffers and is not listed.
type Arg struct {
	Value           int   `json:"value"`
	ScratchPerToken int64 `json:"scratch_per_token,omitempty"`
}

// The values of an Arg that is not a graph value.
const (
	// Scratch is the step's scratch.
	Scratch = -1
	// KVBase is the step's cache bases, one int32 per row: the first cache
	// row of the row's slot (slot·context). A state (KV cache) is bound
	// whole, every slot's rows, and a kernel that reads or writes it
	// indexes row base[t] + position: the rows of one step may belong to
	// several slots (a batched step: the decode rows of every running
	// sequence beside chunks of new prompts).
	KVBase = -2
)

// Launch is one kernel launch of the step. MinT and MaxT (0: no bound)
// limit it to steps of that many tokens: a matrix product has a
// matrix-vector launch for T = 1 (MaxT 1) and a tiled matrix-matrix launch
// for prefill (MinT 2), and a step runs exactly one of them.
type Launch struct {
	Value   int        `json:"value"` // the graph value this launch (helps) compute
	Kernel  string     `json:"kernel"`
	Args    []Arg      `json:"args"`
	Grid    [3]GridDim `json:"grid"`
	Threads int        `json:"threads"` // per block, a multiple of 32
	MinT    int        `json:"min_t,omitempty"`
	MaxT    int        `json:"max_t,omitempty"`
}

// Runs reports whether the launch belongs to a step of T tokens.
func (l Launch) Runs(T int) bool {
	return T >= l.MinT && (l.MaxT == 0 || T <= l.MaxT)
}

// Step returns the launches of ls a step of T tokens runs, in order.
func Step(ls []Launch, T int) []Launch {
	var out []Launch
	for _, l := range ls {
		if l.Runs(T) {
			out = append(out, l)
		}
	}
	return out
}
