package serve

import (
	"fmt"

	"github.com/minerva-llm/minerva/ir"
)

// KVCacheBytes is the storage of a program's KV caches for g with slots
// sequences of ctx positions: every state leaf ([C, W] of f32 or f16)
// holds slots·ctx rows. ok is false when the product overflows.
func KVCacheBytes(g *ir.Graph, ctx, slots int) (bytes int64, ok bool) {
	var perRow int64
	for _, v := range g.Values {
		if v.Op == ir.OpState && len(v.Type.Shape) == 2 && v.Type.Shape[1].IsConst() {
			perRow += v.Type.Shape[1].N * int64(v.Type.DType.BlockBytes())
		}
	}
	rows := int64(ctx) * int64(slots)
	if ctx < 0 || slots < 0 || rows/int64(max(slots, 1)) != int64(ctx) {
		return 0, false
	}
	n := perRow * rows
	if perRow > 0 && n/perRow != rows {
		return 0, false
	}
	return n, true
}

// CheckKVMemory refuses, before anything is allocated, a --ctx and
// --parallel whose KV caches alone need more than avail bytes (0: unknown,
// no check), in one line that names both flags.
func CheckKVMemory(g *ir.Graph, ctx, slots int, avail int64) error {
	need, ok := KVCacheBytes(g, ctx, slots)
	if !ok || avail > 0 && need > avail {
		what := "more than 9 EB"
		if ok {
			what = gb(need)
		}
		return fmt.Errorf("--ctx %d × --parallel %d needs %s of KV cache; this machine has %s available (lower --ctx or --parallel)",
			ctx, slots, what, gb(avail))
	}
	return nil
}

func gb(b int64) string {
	if b >= 1e9 {
		return fmt.Sprintf("%.1f GB", float64(b)/1e9)
	}
	return fmt.Sprintf("%.1f MB", float64(b)/1e6)
}
