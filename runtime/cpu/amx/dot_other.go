//go:build !amd64

package amx

func dotTile(cfg *[64]byte, a, b *[Rows * Bytes]byte, c *[Sums]int32, iters int) {
	panic("amx: no AMX on this architecture")
}

func dotTile6(cfg *[64]byte, a, b *[Rows * Bytes]byte, c *[Sums]int32, iters int) {
	panic("amx: no AMX on this architecture")
}
