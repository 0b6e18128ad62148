package amx

// dotTile is DotTile summed iters times (c = iters·A·B, wrapping), for the
// benchmark; cfg is the tile configuration.
//
//go:noescape
func dotTile(cfg *[64]byte, a, b *[Rows * Bytes]byte, c *[Sums]int32, iters int)

// dotTile6 runs iters rounds of six independent TDPBUSD into six
// accumulator tiles (throughput, not latency) and stores the first.
//
//go:noescape
func dotTile6(cfg *[64]byte, a, b *[Rows * Bytes]byte, c *[Sums]int32, iters int)
