package kern

import (
	"testing"

	"github.com/minerva-llm/minerva/ir"
)

// BenchmarkPack: bytes per second of Pack on a 75 MB Q4_0 matrix (packing
// runs once per weight at load; a 1B model has about 600 MB of it).
func BenchmarkPack(b *testing.B) {
	useVariant(b, "avx2")
	const n, k = 65536, 2048
	rb := k / 32 * 18
	data := make([]byte, n*rb)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for b.Loop() {
		Pack(ir.Q4_0, n, k, data).Free()
	}
	b.ReportMetric(float64(len(data))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

// BenchmarkPackMXFP4: Pack on one gpt-oss-20b expert matrix shape (2880
// rows of 2880 MXFP4 weights, 4.4 MB), as the MoE op packs 3·32 of them
// per layer at load.
func BenchmarkPackMXFP4(b *testing.B) {
	useVariant(b, "avx512")
	if !PackedSupported(ir.MXFP4) {
		b.Skip("no MXFP4 group kernels")
	}
	const n, k = 2880, 2880
	rb := k / 32 * 17
	data := make([]byte, n*rb)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for b.Loop() {
		Pack(ir.MXFP4, n, k, data).Free()
	}
	b.ReportMetric(float64(len(data))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
