package kern

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/minerva-llm/minerva/internal/mmap"
	"github.com/minerva-llm/minerva/ir"
)

// Packed is a weight matrix with its rows interleaved in groups of eight for
// the active variant's group kernels: one SIMD lane per row, so a block's
// scales of eight rows load as one vector and each activation value is
// broadcast once for eight rows. In decode this cuts the instructions per
// weight block about threefold (the kernel then waits on memory, not on
// arithmetic); in prefill the unpacked weights are reused for four or
// eight activation rows.
//
// The group kernels sum a row's blocks in one float chain (see
// codegen/goasm/gen/kerndot/gemv.go), so their results differ from Dot's in
// the last bits; all group kernels of a type agree bit for bit.
type Packed struct {
	wt     ir.DType
	n, k   int
	groups []byte // n/8 groups
	rest   []byte // the last n%8 rows, in the original layout
	rb     int    // bytes of one original row
	nb     int    // blocks (super-blocks for Q4_K) per row
	gbb    int    // bytes of a group's block
	gemv   func(nb int, w, a []byte, dst []float32)
	gemm4  func(nb int, w, a []byte, stride int, dst []float32, ld int)
	gemm8  func(nb int, w, a []byte, stride int, dst []float32, ld int) // may be nil
	// pair: two adjacent groups against four ([0]) or eight ([1])
	// activation rows in one call, the group kernels' results for each
	// (either may be nil).
	pair pairKernels
	free func()
}

// groupKernels returns v's group kernels for wt, nil when it has none.
func groupKernels(v *variant, wt ir.DType) (func(nb int, w, a []byte, dst []float32), func(nb int, w, a []byte, stride int, dst []float32, ld int)) {
	switch wt {
	case ir.Q4_0:
		return v.gemvQ4_0, v.gemmQ4_0x4
	case ir.Q8_0:
		return v.gemvQ8_0, v.gemmQ8_0x4
	case ir.Q4_K:
		return v.groupQ4_K, v.groupQ4_Kx4
	case ir.Q5_K:
		return v.groupQ5_K, v.groupQ5_Kx4
	case ir.Q6_K:
		return v.groupQ6_K, v.groupQ6_Kx4
	case ir.Q3_K:
		return v.groupQ3_K, v.groupQ3_Kx4
	case ir.Q2_K:
		return v.groupQ2_K, v.groupQ2_Kx4
	case ir.MXFP4:
		return v.gemvMXFP4, v.gemmMXFP4x4
	}
	return nil, nil
}

// PackedSupported reports whether the active variant has group kernels for wt.
func (ks Kernels) PackedSupported(wt ir.DType) bool {
	gemv, gemm4 := groupKernels(ks.v, wt)
	return gemv != nil && gemm4 != nil
}

// Pack interleaves an n×k weight matrix (data: n rows of wt) for the active
// variant's group kernels. It returns nil when the variant has none for wt or
// k is not a whole number of blocks.
func (ks Kernels) Pack(wt ir.DType, n, k int, data []byte) *Packed {
	return ks.pack(wt, n, k, data, nil)
}

// PackInto is Pack into dst, PackedBytes(wt, n, k) bytes that the caller
// owns (Free leaves them alone): many matrices packed into one mapping
// that is made once, such as a MoE tensor's experts, each packed when first
// used. A mapping of a few MB per matrix gets few huge pages and packs at
// about 0.6 GB/s against 4–6 in one large mapping (BenchmarkPackMXFP4).
func (ks Kernels) PackInto(wt ir.DType, n, k int, data, dst []byte) *Packed {
	if len(dst) != PackedBytes(wt, n, k) {
		panic(fmt.Sprintf("kern: PackInto: %d bytes for %d×%d %s, want %d", len(dst), n, k, wt, PackedBytes(wt, n, k)))
	}
	return ks.pack(wt, n, k, data, dst)
}

// PackedBytes is the size of the whole groups of an n×k matrix of wt packed
// (its last n%8 rows stay in the original layout).
func PackedBytes(wt ir.DType, n, k int) int {
	blk := wt.BlockSize()
	if k <= 0 || k%blk != 0 || n <= 0 {
		return 0
	}
	return n / 8 * (k / blk) * groupBlockBytes(wt)
}

// groupBlockBytes is the bytes of one block of a group of eight rows.
func groupBlockBytes(wt ir.DType) int {
	if f, ok := kquantGroups[wt]; ok {
		return f.bytes
	}
	return 8 * wt.BlockBytes() // packGroup: eight blocks' bytes, interleaved
}

func (ks Kernels) pack(wt ir.DType, n, k int, data, dst []byte) *Packed {
	v := ks.v
	gemv, gemm4 := groupKernels(v, wt)
	blk := wt.BlockSize() // 32, or 256 for Q4_K
	if gemv == nil || gemm4 == nil || k <= 0 || k%blk != 0 || n <= 0 {
		return nil
	}
	nb := k / blk
	bb := wt.BlockBytes() // 18 or 34: f16 scale, then 16 or 32 quant bytes; Q4_K 144
	rb := nb * bb
	if len(data) < n*rb {
		panic(fmt.Sprintf("kern: Pack: %d bytes for %d×%d %s", len(data), n, k, wt))
	}
	g := n / 8
	gbb := groupBlockBytes(wt) // a group's block
	// The groups live outside the Go heap, on huge pages where the OS has
	// them: fewer page faults while packing, fewer TLB misses while
	// streaming. Free (or, failing that, the garbage collector) unmaps them
	// (not dst: its owner does).
	groups, unmap := dst, func() error { return nil }
	if dst == nil {
		var err error
		if groups, unmap, err = mmap.Anon(g * nb * gbb); err != nil {
			groups, unmap = make([]byte, g*nb*gbb), func() error { return nil }
		}
	}
	p := &Packed{wt: wt, n: n, k: k, rb: rb, nb: nb, gbb: gbb, gemv: gemv, gemm4: gemm4, groups: groups}
	switch wt {
	case ir.Q4_0:
		p.gemm8, p.pair = v.gemmQ4_0x8, v.pairQ4_0
	case ir.Q8_0:
		p.gemm8, p.pair = v.gemmQ8_0x8, v.pairQ8_0
	case ir.Q4_K:
		p.gemm8, p.pair = v.groupQ4_Kx8, pairKernels{nil, v.groupQ4_Kx16}
	case ir.Q5_K:
		p.gemm8, p.pair = v.groupQ5_Kx8, pairKernels{nil, v.groupQ5_Kx16}
	case ir.Q6_K:
		p.pair = pairKernels{v.groupQ6_Kx16, v.groupQ6_Kx16x8}
	case ir.Q3_K:
		p.pair = pairKernels{v.groupQ3_Kx16, nil}
	case ir.Q2_K:
		p.pair = pairKernels{v.groupQ2_Kx16, nil}
	}
	if n%8 != 0 {
		// Only a partial group keeps the original bytes alive.
		p.rest = data[g*8*rb : n*rb]
	}
	p.free = sync.OnceFunc(func() { _ = unmap() })
	runtime.AddCleanup(p, func(f func()) { f() }, p.free)
	// Groups are independent: pack them on all CPUs (a 1B-parameter model
	// has about 600 MB to move).
	workers := min(runtime.GOMAXPROCS(0), max(1, g/64))
	sb := 2 // a block's scale: f16, or MXFP4's E8M0 byte
	if wt == ir.MXFP4 {
		sb = 1
	}
	kq, isKQ := kquantGroups[wt] // a k-quant's own layout and packer
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for gi := w * g / workers; gi < (w+1)*g/workers; gi++ {
				dst := p.groups[gi*nb*gbb:][:nb*gbb]
				src := data[gi*8*rb:][:8*rb]
				if isKQ {
					kq.pack(dst, src, nb, rb)
					continue
				}
				packGroup(dst, src, nb, bb, sb, rb)
				if wt == ir.Q8_0 && v.unsignedQ8 {
					flipQ8Signs(dst, nb)
				}
			}
		}()
	}
	wg.Wait()
	return p
}

// packGroup interleaves the eight rows of src (rb bytes each, nb blocks of bb
// bytes, each a scale of sb bytes, then the quants) into dst: per block the
// eight scales, then the quants four bytes per row in turn. Q4_0 and Q8_0
// have f16 scales (sb 2), MXFP4 an E8M0 byte (sb 1). It is the whole cost of
// packing (a 1B model moves 600 MB through it at load, gpt-oss-20b's
// experts 11 GB), hence the unchecked moves after one bounds check per
// slice; Pack runs only on amd64 and arm64 (the variants with group
// kernels), which load unaligned words.
func packGroup(dst, src []byte, nb, bb, sb, rb int) {
	gbb := 8 * bb
	_ = dst[nb*gbb-1]
	_ = src[7*rb+nb*bb-1]
	vecs := (bb - sb) / 4
	for b := 0; b < nb; b++ {
		d := unsafe.Pointer(&dst[b*gbb])
		q := unsafe.Add(d, 8*sb) // the quants, after the eight scales
		for r := 0; r < 8; r++ {
			s := unsafe.Pointer(&src[r*rb+b*bb])
			if sb == 2 {
				*(*uint16)(unsafe.Add(d, 2*r)) = *(*uint16)(s)
			} else {
				*(*byte)(unsafe.Add(d, r)) = *(*byte)(s)
			}
			for t := 0; t < vecs; t++ {
				*(*uint32)(unsafe.Add(q, 32*t+4*r)) = *(*uint32)(unsafe.Add(s, sb+4*t))
			}
		}
	}
}

// q4KGroupBytes is a packed Q4_K group's super-block (see
// codegen/goasm/gen/kernvnni's kquants.go): f16 d[8], f16 dmin[8], the
// decoded 6-bit scales and minima as bytes [sub-block][row], then the
// quant bytes four per row in turn.
const q4KGroupBytes = 1184

// q5KGroupBytes is a packed Q5_K group's super-block: Q4_K's layout (the
// quants' low four bits), then the rows' qh bytes four per row in turn.
const q5KGroupBytes = q4KGroupBytes + 256

// packGroupQ45K interleaves eight Q4_K or Q5_K rows (rb bytes each, nb
// super-blocks) into dst.
func packGroupQ45K(wt ir.DType, dst, src []byte, nb, rb int) {
	var sc, mn [8]int32
	gb, bb, qs := q4KGroupBytes, 144, 16
	if wt == ir.Q5_K {
		gb, bb, qs = q5KGroupBytes, 176, 48
	}
	for b := 0; b < nb; b++ {
		d := dst[b*gb:][:gb]
		for r := 0; r < 8; r++ {
			x := src[r*rb+b*bb:][:bb]
			d[2*r], d[2*r+1] = x[0], x[1]
			d[16+2*r], d[16+2*r+1] = x[2], x[3]
			scalesK4((*[12]byte)(x[4:16]), &sc, &mn)
			for s := 0; s < 8; s++ {
				d[32+8*s+r] = byte(sc[s])
				d[96+8*s+r] = byte(mn[s])
			}
			interleave4(d[160:], x[qs:qs+128], r) // the quant bytes
			if wt == ir.Q5_K {
				interleave4(d[q4KGroupBytes:], x[16:48], r) // and the qh bytes
			}
		}
	}
}

// interleave4 writes row r's bytes src (a multiple of 4) into a packed
// group's vectors from dst on: piece t (src[4t:4t+4]) at 32t+4r, so that
// vector t holds four bytes of each of the eight rows in turn.
func interleave4(dst, src []byte, r int) {
	for t := 0; t < len(src)/4; t++ {
		copy(dst[32*t+4*r:][:4], src[4*t:])
	}
}

// kquantGroups are the k-quants with a packed group layout of their own:
// the bytes of a group's super-block and its packer. Their group kernels
// read Q8_K activation rows (packedQ8K).
var kquantGroups = map[ir.DType]struct {
	bytes int
	pack  func(dst, src []byte, nb, rb int)
}{
	ir.Q4_K: {q4KGroupBytes, func(dst, src []byte, nb, rb int) { packGroupQ45K(ir.Q4_K, dst, src, nb, rb) }},
	ir.Q5_K: {q5KGroupBytes, func(dst, src []byte, nb, rb int) { packGroupQ45K(ir.Q5_K, dst, src, nb, rb) }},
	ir.Q6_K: {q6KGroupBytes, packGroupQ6K},
	ir.Q3_K: {q3KGroupBytes, packGroupQ3K},
	ir.Q2_K: {q2KGroupBytes, packGroupQ2K},
}

// packedQ8K reports whether wt's group kernels read Q8_K activation rows
// (the k-quants'), not PackedActBytes ones.
func packedQ8K(wt ir.DType) bool {
	_, ok := kquantGroups[wt]
	return ok
}

// q6KGroupBytes is a packed Q6_K group's super-block (see
// codegen/goasm/gen/kernvnni's kquants.go): f16 d[8], the int8 scales
// [sub-block][row], then per half n of the super-block (768 bytes at
// 144+768n) three runs of eight 32-byte vectors, each holding four bytes
// per row in turn: ql[64n+4t…] (A, vector t), ql[64n+32+4t…] (B) and
// qh[32n+4t…] (H). A vector t of each run meets the same four element
// positions l = 4t…4t+3 of the half's four 32-element chunks.
const q6KGroupBytes = 1680

// packGroupQ6K interleaves eight Q6_K rows (rb bytes each, nb super-blocks)
// into dst.
func packGroupQ6K(dst, src []byte, nb, rb int) {
	for b := 0; b < nb; b++ {
		d := dst[b*q6KGroupBytes:][:q6KGroupBytes]
		for r := 0; r < 8; r++ {
			x := (*[210]byte)(src[r*rb+b*210:])
			d[2*r], d[2*r+1] = x[208], x[209]
			for s := 0; s < 16; s++ {
				d[16+8*s+r] = x[192+s]
			}
			for n := 0; n < 2; n++ {
				h := d[144+768*n:]
				interleave4(h, x[64*n:64*n+32], r)
				interleave4(h[256:], x[64*n+32:64*n+64], r)
				interleave4(h[512:], x[128+32*n:160+32*n], r)
			}
		}
	}
}

// q3KGroupBytes is a packed Q3_K group's super-block (see
// codegen/goasm/gen/kernvnni's kquants.go): f16 d[8], the int8 scales
// (the 6-bit ones minus 32) [sub-block][row], eight 32-byte vectors t
// holding four hmask bytes per row in turn (hmask[4t…]), then per half n
// of the super-block eight holding qs[32n+4t…]. Vector t of the hmask
// and of a half's qs meet the same element positions l = 4t…4t+3 of the
// half's four 32-element chunks.
const q3KGroupBytes = 912

// packGroupQ3K interleaves eight Q3_K rows (rb bytes each, nb super-blocks)
// into dst.
func packGroupQ3K(dst, src []byte, nb, rb int) {
	var sc [16]int32
	for b := 0; b < nb; b++ {
		d := dst[b*q3KGroupBytes:][:q3KGroupBytes]
		for r := 0; r < 8; r++ {
			x := (*[110]byte)(src[r*rb+b*110:])
			d[2*r], d[2*r+1] = x[108], x[109]
			q3Scales((*[12]byte)(x[96:]), &sc)
			for s := 0; s < 16; s++ {
				d[16+8*s+r] = byte(int8(sc[s]))
			}
			interleave4(d[144:], x[:96], r) // hmask, then qs: 24 vectors
		}
	}
}

// q2KGroupBytes is a packed Q2_K group's super-block (see
// codegen/goasm/gen/kernvnni's kquants.go), as many bytes as the eight
// rows': f16 d[8], f16 dmin[8], the scale bytes (a 4-bit scale and
// minimum each) [sub-block][row], then per half n of the super-block
// eight 32-byte vectors t holding four bytes per row in turn
// (qs[32n+4t…]).
const q2KGroupBytes = 8 * 84

// packGroupQ2K interleaves eight Q2_K rows (rb bytes each, nb super-blocks)
// into dst.
func packGroupQ2K(dst, src []byte, nb, rb int) {
	for b := 0; b < nb; b++ {
		d := dst[b*q2KGroupBytes:][:q2KGroupBytes]
		for r := 0; r < 8; r++ {
			x := (*[84]byte)(src[r*rb+b*84:])
			d[2*r], d[2*r+1] = x[80], x[81]
			d[16+2*r], d[16+2*r+1] = x[82], x[83]
			for s := 0; s < 16; s++ {
				d[32+8*s+r] = x[s]
			}
			interleave4(d[160:], x[16:80], r)
		}
	}
}

// ActBytes is the byte length of one activation row of p's kernels:
// PackedActBytes(k) for Q4_0 and Q8_0, a Q8_K row for the k-quants.
func (p *Packed) ActBytes() int {
	if packedQ8K(p.wt) {
		return ActBytes(p.wt, p.k)
	}
	return PackedActBytes(p.k)
}

// QuantizeActs encodes x (p's k floats) as p's kernels read it (ActBytes).
func (p *Packed) QuantizeActs(ks Kernels, x []float32, dst []byte) {
	if packedQ8K(p.wt) {
		ks.QuantizeActs(ir.Q8_K, x, dst)
		return
	}
	ks.QuantizePackedActs(x, dst)
}

// Free releases the packed rows; p must not be used afterwards.
func (p *Packed) Free() {
	p.groups = nil
	p.free()
}

// RowsBytes returns the packed bytes of the whole groups that rows [row0,
// row0+count) lie in (nil where none do: rows past the last whole group),
// for a caller that reads them ahead of Dots.
func (p *Packed) RowsBytes(row0, count int) []byte {
	gb := p.nb * p.gbb
	g0, g1 := row0/8, min((row0+count+7)/8, p.n/8)
	if count <= 0 || g0 >= g1 {
		return nil
	}
	return p.groups[g0*gb : g1*gb]
}

// Rows is the number of weight rows.
func (p *Packed) Rows() int { return p.n }

// PackedActBytes is the byte length of one activation row of n elements in
// the group kernels' format (Q4_0 and Q8_0 weights alike): Q8_0 blocks
// followed by {int32 8·Σq, float32 d} per block. Its first ActBytes(Q4_0, n)
// bytes are the plain Q8_0 row, so Dot reads it too.
func PackedActBytes(n int) int { return n/32*34 + n/32*8 }

// QuantizePackedActs encodes x (len a multiple of 32) as PackedActBytes.
func (ks Kernels) QuantizePackedActs(x []float32, dst []byte) {
	nb := len(x) / 32
	dst = dst[:PackedActBytes(len(x))]
	if ks.vec() && nb > 0 {
		quantQ8_0AVX2(x[:nb*32], dst[:nb*34], dst[nb*34:])
		return
	}
	ks.quantQ8_0(x, dst[:nb*34])
	side := dst[nb*34:]
	for b := 0; b < nb; b++ {
		blk := dst[b*34:][:34]
		var s int32
		for _, q := range blk[2:] {
			s += int32(int8(q))
		}
		binary.LittleEndian.PutUint32(side[8*b:], uint32(8*s))
		binary.LittleEndian.PutUint32(side[8*b+4:], math.Float32bits(f16(blk)))
	}
}

// Dots computes rows [row0, row0+count) against R activation rows in the
// packed format (stride bytes apart): dst[r*ld + j] = dot of row row0+j with
// activation row r. Ranges that start and end on multiples of 8 run the
// group kernels straight into dst; a partly wanted group is computed whole
// into a temporary.
func (p *Packed) Dots(row0, count int, a []byte, stride, R int, dst []float32, ld int) {
	nb := p.nb
	ab := p.ActBytes()
	if stride < ab || R <= 0 {
		if R <= 0 {
			return
		}
		panic(fmt.Sprintf("kern: Packed.Dots stride %d < %d", stride, ab))
	}
	a = a[:(R-1)*stride+ab]
	gb := nb * p.gbb
	full := p.n - p.n%8 // rows in whole groups
	j := 0
	for j < count && row0+j < full {
		g := (row0 + j) / 8
		off := row0 + j - 8*g // first wanted row of the group
		pairs := (p.pair[1] != nil && R >= 8) || (p.pair[0] != nil && R >= 4)
		if pairs && off == 0 && count-j >= 16 && row0+j+16 <= full {
			// Two whole groups: sixteen rows per call, the activation
			// rows no pair kernel takes group by group.
			w := p.groups[g*gb:][:2*gb]
			r := 0
			if p.pair[1] != nil {
				for ; r+8 <= R; r += 8 {
					p.pair[1](nb, w, gb, a[r*stride:], stride, dst[r*ld+j:][:7*ld+16], ld)
				}
			}
			if p.pair[0] != nil {
				for ; r+4 <= R; r += 4 {
					p.pair[0](nb, w, gb, a[r*stride:], stride, dst[r*ld+j:][:3*ld+16], ld)
				}
			}
			p.groupRows(w[:gb], a, stride, r, R, dst[j:], ld)
			p.groupRows(w[gb:], a, stride, r, R, dst[j+8:], ld)
			j += 16
			continue
		}
		take := min(8-off, count-j)
		w := p.groups[g*gb:][:gb]
		d, dld := dst[j:], ld
		if take < 8 {
			// Part of a group: compute all eight rows into a temporary
			// (allocated; the backend asks for whole groups).
			d, dld = make([]float32, 8*R), 8
		}
		p.groupRows(w, a, stride, 0, R, d, dld)
		if take < 8 {
			for r := 0; r < R; r++ {
				copy(dst[r*ld+j:][:take], d[r*8+off:])
			}
		}
		j += take
	}
	for ; j < count; j++ {
		row := row0 + j - (p.n - p.n%8)
		if row < 0 {
			panic("kern: Packed.Dots: rows past the matrix")
		}
		w := p.rest[row*p.rb:][:p.rb]
		for r := 0; r < R; r++ {
			dst[r*ld+j] = Dot(p.wt, p.k, w, a[r*stride:])
		}
	}
	// The groups are not Go memory: keep p (whose cleanup unmaps them)
	// alive until the last kernel has returned.
	runtime.KeepAlive(p)
}

// groupRows sets d[r*dld:r*dld+8] to the group w's eight rows against
// activation rows r0 <= r < R, eight, four or one row per kernel call.
func (p *Packed) groupRows(w, a []byte, stride, r0, R int, d []float32, dld int) {
	if r0 >= R {
		return
	}
	// The kernels' last write ends at d[(R-1)*dld+8].
	_ = d[(R-1)*dld+7]
	nb, r := p.nb, r0
	if p.gemm8 != nil {
		for ; r+8 <= R; r += 8 {
			p.gemm8(nb, w, a[r*stride:], stride, d[r*dld:][:7*dld+8], dld)
		}
	}
	for ; r+4 <= R; r += 4 {
		p.gemm4(nb, w, a[r*stride:], stride, d[r*dld:][:3*dld+8], dld)
	}
	for ; r < R; r++ {
		p.gemv(nb, w, a[r*stride:], d[r*dld:][:8])
	}
}

// flipQ8Signs turns the packed Q8_0 quants of g (nb blocks of a group) into
// w+128 (unsigned bytes), the form the VNNI kernels multiply.
func flipQ8Signs(g []byte, nb int) {
	for b := 0; b < nb; b++ {
		q := g[b*272+16:][:256]
		for i := range q {
			q[i] ^= 0x80
		}
	}
}
