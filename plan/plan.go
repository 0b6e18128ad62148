package plan

import (
	"errors"
	"fmt"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/tokenizer"
)

// FormatVersion is the plan format this package writes and the only one it
// reads. Any change to the layout described in doc.go bumps it. Version 2:
// the model reference may name a model directory (issue 16). Version 3: it
// records a digest of the tensor data (ModelRef.WeightsDigest, issue 19).
const FormatVersion = 3

// Magic opens every plan file.
const Magic = "MNRVPLAN"

// Align is the alignment of every section, and of every embedded tensor,
// within the file.
const Align = 64

// ModelRef identifies the model a plan was compiled from: a GGUF file or a
// model directory (Hugging Face SafeTensors). For a plan without embedded
// weights it is how frontend.Open finds the weights and checks that they
// are still the ones the plan was compiled against
// (frontend.Source.Identity computes it).
type ModelRef struct {
	Path string // absolute path of the model file or directory
	Size int64  // file size in bytes; for a directory, of the files read
	// HeaderSHA256 is the hex SHA-256 of the model file's bytes
	// [0, DataOffset): the GGUF header, metadata and tensor table. For a
	// directory it covers each file read (name, size, and a JSON file's
	// contents or a shard's header).
	HeaderSHA256 string
	Name         string // general.name ("" if absent); a directory's name
	Arch         string // general.architecture (the graph's family)
	// WeightsDigest is "crc32c:" and the hex CRC-32C of the tensor data
	// the graph uses (WeightsDigest), recorded at compile time; "" when
	// not recorded. Opening a plan does not check it (that would read
	// every weight): `minervac inspect --verify` does.
	WeightsDigest string
}

// Sampling holds the sampling defaults stored in a plan.
type Sampling struct {
	Temperature   float64 `json:"temperature"`
	TopP          float64 `json:"top_p"`
	MinP          float64 `json:"min_p"`
	RepeatPenalty float64 `json:"repeat_penalty"`
	TopK          int     `json:"top_k"`
}

// Memory is the memory plan summary: what a runtime must allocate besides
// the weights. The arena figures come from the plan-memory pass (the graph
// attributes of the same names); the others are computed from the graph.
type Memory struct {
	// ArenaBytesPerToken is the activation arena size per token of a step.
	ArenaBytesPerToken int64 `json:"arena_bytes_per_token"`
	// ArenaLowerBoundBytesPerToken is the planner's lower bound.
	ArenaLowerBoundBytesPerToken int64 `json:"arena_lower_bound_bytes_per_token"`
	// NaiveBytesPerToken is the sum of all intermediates, unplanned.
	NaiveBytesPerToken int64 `json:"naive_bytes_per_token"`
	// KVBytesPerPosition is one row of every state buffer (KV caches), in
	// their storage types: multiply by the context length.
	KVBytesPerPosition int64 `json:"kv_bytes_per_position"`
	// WeightBytes is the size of every weight tensor the graph uses, as
	// stored (quantized).
	WeightBytes int64 `json:"weight_bytes"`
	// Unplanned is why the planner left the graph without an arena ("" when
	// it planned one): the backend then allocates each value on its own.
	Unplanned string `json:"unplanned,omitempty"`
}

// Graph attributes recorded by the plan-memory pass.
const (
	attrArena      = "arena_bytes_per_token"
	attrLowerBound = "arena_lower_bound_bytes_per_token"
	attrNaive      = "naive_bytes_per_token"
	attrUnplanned  = "memory_unplanned"
)

// Plan is a compiled model: everything the runtime needs except, unless
// Embedded, the weights, which stay in the model file named by Model.
type Plan struct {
	Compiler string // compiler version string, e.g. "minervac dev"
	Target   string // "reference" (later "goasm", "cuda", "metal")
	Model    ModelRef
	Graph    *ir.Graph // the compiled (fused) graph
	Vocab    tokenizer.Vocab
	Config   Config
	Context  int // default KV cache length
	Sampling Sampling
	// Kernels holds opaque per-target bytes (none for reference). Parse
	// copies them out of the file, so they outlive Loaded.Close.
	Kernels map[string][]byte
	// Memory is the memory plan summary. Write derives it from Graph (any
	// value given is ignored); Parse reads it and checks it against Graph.
	Memory Memory
	// Embedded reports whether the weights are inside the plan. Write sets
	// the flag from its weights argument, not from this field.
	Embedded bool

	// weights maps tensor names to their bytes inside the plan (embedded
	// plans read by Parse): slices of the data given to Parse.
	weights map[string][]byte
}

// Sentinel errors: every error of this package wraps one of them (as its
// *Error's Kind), so callers can tell the cases apart with errors.Is.
var (
	ErrNotPlan   = errors.New("not a plan file")
	ErrVersion   = errors.New("unsupported plan format version")
	ErrTruncated = errors.New("plan file is truncated")
	ErrChecksum  = errors.New("plan checksum mismatch")
	ErrCorrupt   = errors.New("plan file is corrupt")
	ErrTarget    = errors.New("plan is for another target")
)

// Error is a plan error: one line, naming the file when known.
type Error struct {
	Path string // plan file; "" when the error came from Parse
	Kind error  // one of the Err* sentinels
	Msg  string // what is wrong, without the file name
}

func (e *Error) Error() string {
	if e.Path == "" {
		return "plan: " + e.Msg
	}
	return "plan " + e.Path + ": " + e.Msg
}

// Unwrap returns the sentinel, for errors.Is.
func (e *Error) Unwrap() error { return e.Kind }

func errorf(kind error, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// withPath names the plan file in a plan error; other errors pass through.
func withPath(err error, path string) error {
	var e *Error
	if errors.As(err, &e) && e.Path == "" {
		e.Path = path
	}
	return err
}
