package gpu

// Params are the fields the kernel templates read. Every number is baked
// into the source; names ending in D/K/N are element counts. A language's
// templates read the fields they need; the rest stay zero.
type Params struct {
	Name             string
	DT               string // decoder suffix
	Unit, NU         int64
	RowBytes         int64
	N, K, F, V, D    int64
	Norm, Gain, Bias bool
	Residual         bool
	Eps              string
	Extra            []Slot
	OutSlot, TSlot   int // argument indices of the output and of T (Metal binds buffers by index)
	NW, Threads      int // warps (simdgroups) per block, and threads
	UpRow            string
	Vec              VecLoad // CUDA: the matrix-vector weight read path
	XS               XStage  // CUDA: the activation row in shared memory
	Q8               Q8Stage // CUDA: the activation rows as Q8_0 blocks in the step's scratch
	ScratchOut       bool    // the product writes into the step's scratch (a later launch of its op reads it)
	TileN, TileT     int64   // tiled kernels: tile sizes, K chunk, weight units per chunk
	TileK, UPC       int64

	// qkv_rope
	Half, HalfHD, HD, NRot int64
	QD, KVD, QKD, Pairs    int64
	Neox                   bool
	Mode, Freqs, MScale    string
	CacheT                 string
	QKNorm                 bool   // rope_kv: per-head RMSNorm of q and k (Qwen3)
	QKEps, QNT             string // its eps literal and gain element type

	// attention
	Splits, DV, Group, Window int64
	QW, KW, VW, H, PartW, OW  int64
	Scale                     string
	Sinks                     bool
	QPer, VPer, Rows          int64 // CUDA attn_split: query and value dimensions per lane, rows per softmax step

	// eltwise
	Expr, BIndex string
	Binary       bool

	// topk_softmax, moe_up, moe_down
	E, TopK, Slots, ExpBytes int64
	Act, ActBody             string

	// element types (float, or the language's F16) of small operands
	GainT, SinkT, BT, BiasT string
}

// Slot is an optional operand of the matrix-vector kernels: its parameter
// name, argument index and element type.
type Slot struct {
	Name string
	Slot int
	T    string
}

// bind sets the argument indices of a kernel whose arguments are args, the
// output last.
func (p *Params) bind(args []Arg) {
	p.OutSlot, p.TSlot = len(args)-1, len(args)
}

// VecLoad is how a CUDA matrix-vector kernel reads its weight rows
// (codegen/cuda's planVecLoad says how it is chosen): chunks of whole units
// through shared memory with 16-byte loads, or unit by unit from global
// memory.
type VecLoad struct {
	On       bool
	Per      int64  // 32-unit groups per chunk: units per lane per chunk
	Units    int64  // units per chunk, 32·Per
	Bytes    int64  // bytes per chunk
	Words    int64  // 16-byte words per chunk
	Chunks   int64  // full chunks per row
	Ragged   bool   // Words is not a multiple of 32: the last round of loads is partial
	Rounds   int64  // 16-byte loads per lane per chunk, ceil(Words/32)
	Depth    int64  // chunks in flight in registers ahead of the one decoded
	Tail     bool   // the row has units after its last full chunk
	TailFrom int64  // the first unit after the full chunks
	Why      string // the choice, for the comment in the emitted kernel
}

// XStage is a CUDA matrix-vector kernel's copy of the activation row in
// shared memory (codegen/cuda's planXStage): Floats floats, with a float of
// padding after each unit when Pad.
type XStage struct {
	On     bool
	Pad    bool
	Floats int64
}

// Q8Stage is a CUDA matrix-vector kernel that multiplies 8-bit
// activations (codegen/cuda's planQ8): a q8_quant launch before it rounds
// the step's rows (normalised, times the gain) to Q8_0 blocks in the step's
// scratch, and the kernel takes each weight block's dot with its
// activation block in integers (dp4a), as the reference engines multiply
// Q4_0 and Q8_0 weights. Blocks is K/32; RowBytes the bytes of one
// rounded row: K values, Blocks scales (f32), Blocks sums (i32).
type Q8Stage struct {
	On       bool
	Blocks   int64
	RowBytes int64
	// Off is where the rows start in the scratch, in bytes per token of
	// the step (T·Off): a qkv_rope prefill product keeps its result h in
	// the scratch's first 4·N bytes per token, and its rounded rows after.
	Off int64
}
