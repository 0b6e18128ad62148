package kern

//go:generate go run ../../../codegen/goasm/gen/kerndot -dir .

import (
	"fmt"

	"github.com/minerva-llm/minerva/ir"
	"sort"
	"sync/atomic"
)

// A variant is a set of SIMD dot kernels that replace generic ones. A nil
// entry keeps the generic kernel. The variants sum floats in their own order
// (ggml's SIMD block arithmetic, with the blocks split over two
// accumulators), so their results differ from the generic ones in the last
// bits; the integer sums inside a block are the same.
//
// The x4 kernels compute one weight row against four activation rows and
// give exactly the one-row kernel's result for each.
type variant struct {
	name           string
	q8_0, q4_0     func(nb int, w, a []byte) float32
	q8_0x4, q4_0x4 func(nb int, w, a []byte, stride int, dst *[4]float32)
	// Group kernels over eight interleaved rows (see Packed).
	gemvQ4_0, gemvQ8_0     func(nb int, w, a []byte, dst []float32)
	gemmQ4_0x4, gemmQ8_0x4 func(nb int, w, a []byte, stride int, dst []float32, ld int)
	// MXFP4 group kernels (VNNI only): one and four activation rows.
	gemvMXFP4   func(nb int, w, a []byte, dst []float32)
	gemmMXFP4x4 func(nb int, w, a []byte, stride int, dst []float32, ld int)
	// K-quant weights against Q8_K activations: dst[r] = row r of w (rows
	// rows of nb super-blocks of 256, one after another) · a.
	// The VNNI ones give the AVX2 ones' bits.
	gemvQ2_K, gemvQ3_K, gemvQ4_K, gemvQ5_K, gemvQ6_K func(rows, nb int, w, a []byte, dst []float32)
	// Group kernels over eight interleaved Q4_K rows (see Packed).
	groupQ4_K   func(nb int, w, a []byte, dst []float32)
	groupQ4_Kx4 func(nb int, w, a []byte, stride int, dst []float32, ld int)
	// The same against eight activation rows, for one group and for two
	// adjacent ones gstride bytes apart (nil: the four-row kernel serves).
	groupQ4_Kx8  func(nb int, w, a []byte, stride int, dst []float32, ld int)
	groupQ4_Kx16 func(nb int, w []byte, gstride int, a []byte, stride int, dst []float32, ld int)
	// Group kernels over eight interleaved Q5_K rows (see Packed).
	groupQ5_K   func(nb int, w, a []byte, dst []float32)
	groupQ5_Kx4 func(nb int, w, a []byte, stride int, dst []float32, ld int)
	// The same against eight activation rows, for one group and for two
	// (nil: the four-row kernel serves).
	groupQ5_Kx8  func(nb int, w, a []byte, stride int, dst []float32, ld int)
	groupQ5_Kx16 func(nb int, w []byte, gstride int, a []byte, stride int, dst []float32, ld int)
	// Group kernels over eight interleaved Q6_K rows (see Packed).
	groupQ6_K   func(nb int, w, a []byte, dst []float32)
	groupQ6_Kx4 func(nb int, w, a []byte, stride int, dst []float32, ld int)
	// Two adjacent Q6_K groups against four activation rows (nil: the
	// group kernels serve).
	groupQ6_Kx16 func(nb int, w []byte, gstride int, a []byte, stride int, dst []float32, ld int)
	// groupQ6_Kx16x8: groupQ6_Kx16 against eight activation rows.
	groupQ6_Kx16x8 func(nb int, w []byte, gstride int, a []byte, stride int, dst []float32, ld int)
	// The same for eight interleaved Q3_K rows (see Packed).
	groupQ3_K    func(nb int, w, a []byte, dst []float32)
	groupQ3_Kx4  func(nb int, w, a []byte, stride int, dst []float32, ld int)
	groupQ3_Kx16 func(nb int, w []byte, gstride int, a []byte, stride int, dst []float32, ld int)
	// And for eight interleaved Q2_K rows.
	groupQ2_K    func(nb int, w, a []byte, dst []float32)
	groupQ2_Kx4  func(nb int, w, a []byte, stride int, dst []float32, ld int)
	groupQ2_Kx16 func(nb int, w []byte, gstride int, a []byte, stride int, dst []float32, ld int)
	// Q6_K, Q5_K, Q3_K and Q2_K against four activation rows (one weight
	// row).
	q6_Kx4, q5_Kx4, q3_Kx4, q2_Kx4 func(nb int, w, a []byte, stride int, dst *[4]float32)
	// kqDot is one row of those kernels (nb super-blocks of the k-quant wt
	// that has one), called directly so that its result stays on the stack.
	kqDot func(wt ir.DType, nb int, w, a []byte) float32
	// attnZMM: the grouped attention kernels' AVX-512 forms.
	attnZMM bool
	// unsignedQ8: the group kernels take packed Q8_0 weights as w+128.
	unsignedQ8 bool
	// Eight-activation-row group kernels (nil: the four-row ones serve).
	gemmQ4_0x8, gemmQ8_0x8 func(nb int, w, a []byte, stride int, dst []float32, ld int)
	// Pair kernels: two adjacent groups (w, w[gstride:]) against four
	// and eight activation rows, 16 outputs per row; zero where the
	// vectors are narrower than sixteen lanes.
	pairQ4_0, pairQ8_0 pairKernels
	// MXFP4 weights against Q8_0 activations (one row, four rows).
	mxfp4   func(nb int, w, a []byte) float32
	mxfp4x4 func(nb int, w, a []byte, stride int, dst *[4]float32)
	// Q5_0 weights against Q8_0 activations, Q4_1 and Q5_1 against Q8_1
	// (one row, four rows).
	q5_0, q4_1, q5_1       func(nb int, w, a []byte) float32
	q5_0x4, q4_1x4, q5_1x4 func(nb int, w, a []byte, stride int, dst *[4]float32)
	// MLX affine weights against float32 activations, ng groups, indexed
	// by dtype − ir.MLXQ4G32 (dot_mlx.go).
	mlx [mlxCount]func(ng int, w, a []byte) float32
	// mlxx: the same against mlxRows activation rows at once (0: none).
	mlxx    [mlxCount]func(ng int, w, a []byte, stride int, dst []float32)
	mlxRows int
	// One-head attention tile kernels over f16 caches (AVX2, NEON; nil:
	// the Go loops of attn.go), each bit for bit the others.
	scoresF16   func(q []float32, k []uint16, stride int, out []float32)
	axpyRowsF16 func(acc, w []float32, v []uint16, stride int)
}

var genericVariant = &variant{name: "generic"}

// variants lists the variants this CPU can run, generic included; filled in
// by the per-architecture init (dispatch_amd64.go).
var variants = map[string]*variant{"generic": genericVariant}

// best is the fastest variant this CPU runs, the default.
var best = genericVariant

// active is the process default (Current): best unless SetVariant changed it.
var active atomic.Pointer[variant]

func init() {
	archVariants()
	active.Store(best)
}

// Kernels is one variant's kernel set. A program holds its own (Use), so
// two programs in one process may run different variants; the package-level
// functions use Current.
type Kernels struct{ v *variant }

// Use returns the named variant's kernels; "" names the process default
// (Current: the best this CPU runs unless SetVariant chose another).
// An unknown name, or one this CPU cannot run, is an error naming the
// variants it has.
func Use(name string) (Kernels, error) {
	if name == "" {
		return Current(), nil
	}
	v, err := lookup(name)
	if err != nil {
		return Kernels{}, err
	}
	return Kernels{v}, nil
}

// Current is the process default kernels: the best variant, or the one
// SetVariant chose.
func Current() Kernels { return Kernels{active.Load()} }

// Name is the variant's name: "generic", "avx2", "avx512" or "neon".
func (ks Kernels) Name() string { return ks.v.name }

// Variant is the name of the process default variant (Current).
func Variant() string { return Current().Name() }

// Variants lists the kernel variants this CPU can run, sorted.
func Variants() []string {
	names := make([]string, 0, len(variants))
	for n := range variants {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SetVariant makes the named kernel variant the process default (Current) ("generic"; "avx2" on
// amd64 CPUs with AVX2, FMA and F16C; "avx512" on those with AVX-512 VNNI
// and VL too; "neon" on arm64 CPUs with the dot product extension). It is safe to call concurrently with
// Dot. The default is the fastest the CPU runs; a program picks its own with
// Use (the command line's --cpu-kernels, or $MINERVA_CPU).
func SetVariant(name string) error {
	v, err := lookup(name)
	if err != nil {
		return err
	}
	active.Store(v)
	return nil
}

func lookup(name string) (*variant, error) {
	v, ok := variants[name]
	if !ok {
		if knownVariant(name) {
			return nil, fmt.Errorf("kernel variant %q is not supported by this CPU (have %v)", name, Variants())
		}
		return nil, fmt.Errorf("unknown kernel variant %q (have %v)", name, Variants())
	}
	return v, nil
}

func knownVariant(name string) bool {
	return name == "generic" || name == "avx2" || name == "avx512" || name == "neon"
}

// pairKernels are a type's pair kernels for four and eight activation rows
// (see Packed.Dots).
type pairKernels [2]func(nb int, w []byte, gstride int, a []byte, stride int, dst []float32, ld int)
