package cuda

import (
	"fmt"

	"github.com/minerva-llm/minerva/codegen/gpu"

	"github.com/minerva-llm/minerva/ir"
)

// The matrix-vector kernels (matvec, swiglu, qkv_rope) read weight rows one
// of two ways, chosen per kernel at emit time:
//
//   - the vector path: the warp copies a chunk of the row (32·Per units)
//     into its own slice of a static __shared__ stage with 16-byte
//     read-only loads (lane l loads words l, l+32, …: one coalesced
//     ld.global.nc.v4.u32 per lane and round), __syncwarp, then each lane
//     decodes units lane, lane+32, … of the chunk with the dtype's dq_
//     decoder pointed at shared memory, and __syncwarp again before the
//     next chunk overwrites the stage. A quantized block is not 16-byte
//     aligned by itself (a Q4_0 block is 18 bytes), so the direct path's
//     byte loads cannot be widened; a chunk of whole blocks can.
//   - the direct path (the original one): lane l decodes units l, l+32, …
//     straight from global memory.
//
// The vector path needs every chunk to start 16-byte aligned: the weight
// allocation is (runtime/cuda aligns buffers to 256 bytes, and rows are
// contiguous), so a row's chunks are when the row's bytes and the chunk's
// bytes are multiples of 16. Per is the smallest number of 32-unit groups
// that makes the chunk a multiple of 16 bytes and at least 512 bytes (one
// 16-byte load per lane): 1 for the legacy quants, Q4_K, Q5_K and MXFP4; 2
// for Q2_K (a 32-unit chunk is 336 bytes), Q3_K and Q6_K (440 and 840, not
// multiples of 16); 4 for F32 and 8 for F16/BF16, whose 32-unit chunks
// (128 and 64 bytes) would leave most lanes idle. The full chunks of a row
// take the vector path and the tail (NU mod 32·Per units) the direct one.
// A kernel whose rows fail the test, or are shorter than one chunk, takes
// the direct path only; the emitted kernel says which in a comment.
// The chosen path is a gpu.VecLoad.

// prefetchWords bounds the 16-byte registers a lane holds for the chunks
// in flight (Depth·Rounds): a decode warp is latency-bound with one chunk
// in flight (the H200 measured 0.5–1.3 TB/s of 4.2), and each register
// more lowers occupancy.
const prefetchWords = 6

// wholeRowWords is the most 16-byte loads per lane with which a row is
// loaded whole before its first chunk is decoded, past prefetchWords: a
// 4096-wide Q4_0 row is 4 chunks of 2 loads. On an H100 (7B Q4_0 decode,
// same binary otherwise) qkv_rope went 661 → 532 µs a step and swiglu 881
// → 780; at 12 words for every row the 11008-wide down projections, 6 of
// 10 chunks deep, went 844 → 1000 µs.
const wholeRowWords = 8

// maxPer bounds Per: a chunk of 8·32 units of any dtype is 16-byte aligned
// (32·8 units hold a whole number of 256-element super-blocks, 256 being a
// multiple of every block size here, and every block size in bytes is
// even), so the search below always ends for the dtypes of decoders.
const maxPer = 8

// planVecLoad chooses the weight read path for rows of nu units of unit
// elements (rb bytes) of dtype dt.
func planVecLoad(dt ir.DType, unit, nu, rb int64) gpu.VecLoad {
	for per := int64(1); per <= maxPer; per++ {
		units := 32 * per
		cb, err := dt.RowBytes(units * unit)
		if err != nil || cb%16 != 0 || cb < 512 {
			continue
		}
		v := gpu.VecLoad{Per: per, Units: units, Bytes: cb, Words: cb / 16, Chunks: nu / units,
			Ragged: (cb/16)%32 != 0, Tail: nu%units != 0, TailFrom: nu / units * units}
		v.Rounds = (v.Words + 31) / 32
		v.Depth = max(1, min(v.Chunks, prefetchWords/v.Rounds))
		if v.Chunks*v.Rounds <= wholeRowWords {
			v.Depth = max(1, v.Chunks)
		}
		switch {
		case rb%16 != 0:
			v.Why = fmt.Sprintf("direct loads: a %s row is %d bytes, not a multiple of 16, so its chunks are not 16-byte aligned", dt, rb)
		case v.Chunks == 0:
			v.Why = fmt.Sprintf("direct loads: a row of %d units is shorter than one %d-unit chunk", nu, units)
		default:
			v.On = true
			v.Why = fmt.Sprintf("vec16 loads: %d chunk%s of %d units (%d bytes) per row through shared memory", v.Chunks, plural(v.Chunks), units, cb)
			if v.Tail {
				v.Why += fmt.Sprintf(", then %d units directly", nu%units)
			}
		}
		return v
	}
	return gpu.VecLoad{Why: fmt.Sprintf("direct loads: no chunk of %s units up to %d is a multiple of 16 bytes", dt, 32*maxPer)}
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}
