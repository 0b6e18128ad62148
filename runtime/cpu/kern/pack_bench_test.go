package kern

import (
	"testing"

	"github.com/minerva-llm/minerva/internal/mmap"
	"github.com/minerva-llm/minerva/ir"
)

// BenchmarkPack: bytes per second of Pack on a 75 MB Q4_0 matrix (packing
// runs once per weight at load; a 1B model has about 600 MB of it).
func BenchmarkPack(b *testing.B) { benchPack(b, "avx2", ir.Q4_0, 65536, 2048) }

// BenchmarkPackMXFP4: Pack on one gpt-oss-20b expert matrix shape (2880
// rows of 2880 MXFP4 weights, 4.4 MB) into its own mapping, and PackInto
// 32 of them into one mapping, as the MoE op packs a tensor's experts.
func BenchmarkPackMXFP4(b *testing.B) {
	b.Run("own", func(b *testing.B) { benchPack(b, "avx512", ir.MXFP4, 2880, 2880) })
	b.Run("into", func(b *testing.B) {
		useVariant(b, "avx512")
		if !PackedSupported(ir.MXFP4) {
			b.Skip("no MXFP4 group kernels in avx512")
		}
		const n, k, E = 2880, 2880, 32
		data := make([]byte, n*k/32*17)
		for i := range data {
			data[i] = byte(i * 7)
		}
		pb := PackedBytes(ir.MXFP4, n, k)
		for b.Loop() {
			arena, unmap, err := mmap.Anon(E * pb)
			if err != nil {
				b.Fatal(err)
			}
			for e := 0; e < E; e++ {
				PackInto(ir.MXFP4, n, k, data, arena[e*pb:(e+1)*pb])
			}
			_ = unmap()
		}
		b.ReportMetric(float64(E*len(data))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	})
}

// benchPack packs an n×k matrix of wt with the named variant's packing.
func benchPack(b *testing.B, variant string, wt ir.DType, n, k int) {
	useVariant(b, variant)
	if !PackedSupported(wt) {
		b.Skipf("no %s group kernels in %s", wt, variant)
	}
	data := make([]byte, n*k/32*wt.BlockBytes())
	for i := range data {
		data[i] = byte(i * 7)
	}
	for b.Loop() {
		Pack(wt, n, k, data).Free()
	}
	b.ReportMetric(float64(len(data))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
