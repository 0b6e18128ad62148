package kern

//go:generate go run ../../../codegen/goasm/gen/kerndot -dir .

import (
	"fmt"
	"os"
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
	// K-quant weights against Q8_K activations, nb super-blocks of 256.
	q4_K, q5_K, q6_K func(nb int, w, a []byte) float32
	// unsignedQ8: the group kernels take packed Q8_0 weights as w+128.
	unsignedQ8 bool
	// Eight-activation-row group kernels (nil: the four-row ones serve).
	gemmQ4_0x8, gemmQ8_0x8 func(nb int, w, a []byte, stride int, dst []float32, ld int)
	// MXFP4 weights against Q8_0 activations (one row, four rows).
	mxfp4   func(nb int, w, a []byte) float32
	mxfp4x4 func(nb int, w, a []byte, stride int, dst *[4]float32)
	// Q5_0 weights against Q8_0 activations, Q4_1 and Q5_1 against Q8_1
	// (one row, four rows).
	q5_0, q4_1, q5_1       func(nb int, w, a []byte) float32
	q5_0x4, q4_1x4, q5_1x4 func(nb int, w, a []byte, stride int, dst *[4]float32)
}

var genericVariant = &variant{name: "generic"}

// variants lists the variants this CPU can run, generic included; filled in
// by the per-architecture init (dispatch_amd64.go).
var variants = map[string]*variant{"generic": genericVariant}

// best is the variant picked when MINERVA_CPU is unset.
var best = genericVariant

var active atomic.Pointer[variant]

func init() {
	archVariants()
	active.Store(best)
	if name := os.Getenv("MINERVA_CPU"); name != "" {
		if err := SetVariant(name); err != nil {
			fmt.Fprintf(os.Stderr, "minerva: MINERVA_CPU: %v; using the generic kernels\n", err)
			active.Store(genericVariant)
		}
	}
}

// Variant is the name of the kernel variant Dot uses: "generic", "avx2",
// "avx512" or "neon".
func Variant() string { return active.Load().name }

// Variants lists the kernel variants this CPU can run, sorted.
func Variants() []string {
	names := make([]string, 0, len(variants))
	for n := range variants {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SetVariant makes Dot use the named kernel variant ("generic"; "avx2" on
// amd64 CPUs with AVX2, FMA and F16C; "avx512" on those with AVX-512 VNNI
// and VL too; "neon" on arm64 CPUs with the dot product extension). It is safe to call concurrently with
// Dot. The environment variable MINERVA_CPU selects the variant at start-up;
// the default is the fastest the CPU runs.
func SetVariant(name string) error {
	v, ok := variants[name]
	if !ok {
		if knownVariant(name) {
			return fmt.Errorf("kernel variant %q is not supported by this CPU (have %v)", name, Variants())
		}
		return fmt.Errorf("unknown kernel variant %q (have %v)", name, Variants())
	}
	active.Store(v)
	return nil
}

func knownVariant(name string) bool {
	return name == "generic" || name == "avx2" || name == "avx512" || name == "neon"
}
