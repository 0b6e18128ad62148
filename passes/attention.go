package passes

import (
	"fmt"
	"math/bits"

	"github.com/minerva-llm/minerva/ir"
)

// AttentionTiles are the tile sizes of one flash_attention (see ir.OpFlashAttention).
type AttentionTiles struct {
	// TileQ is the number of query rows processed together. It only orders
	// the work; prefill kernels keep TileQ queries' accumulators on chip.
	TileQ int64
	// TileKV is the number of cache rows loaded per step of the online softmax.
	TileKV int64
	// KVSplits is the number of contiguous parts the visible KV range of a
	// query is cut into, computed independently and merged at the end. In
	// decode (one query) this is what spreads the work over workers; for
	// prefill the query tiles already give enough parallelism and the value
	// changes only the merge order.
	KVSplits int64
}

// DefaultAttentionTiles is the rule the registered tile-attention pass uses:
//
//	tile_q    = 16
//	tile_kv   = 8192 / head_dim rounded down to a power of two, clamped to [16, 128]
//	            (one K tile of f32 rows is then at most 32 KiB: 128 rows up to
//	            head_dim 64, 64 rows at 128, 32 at 256, 16 from 512 up)
//	kv_splits = 4
//
// It is a function of head_dim alone so that a backend can substitute its
// own rule (TileAttention) without the pass knowing anything else.
func DefaultAttentionTiles(headDim int64) AttentionTiles {
	kv := int64(128)
	if headDim > 0 {
		kv = 8192 / headDim
		if kv < 16 {
			kv = 16
		}
		kv = 1 << (bits.Len64(uint64(kv)) - 1) // round down to a power of two
		kv = min(kv, 128)
	}
	return AttentionTiles{TileQ: 16, TileKV: kv, KVSplits: 4}
}

func init() {
	register(TileAttention(DefaultAttentionTiles))
}

// TileAttention returns the tile-attention pass with the given tiling rule:
// every attention becomes a flash_attention with the same operands and
// attributes plus tile_q, tile_kv and kv_splits from rule(head_dim).
// flash_attention has exactly attention's meaning, so the rewrite always
// fires; values that already are flash_attention are left as they are.
func TileAttention(rule func(headDim int64) AttentionTiles) Pass {
	return Pass{
		Name: "tile-attention",
		Doc:  "attention → flash_attention with tile sizes chosen from head_dim",
		Run: func(g *ir.Graph) error {
			for _, v := range g.Values {
				if v.Op != ir.OpAttention {
					continue
				}
				tiles := rule(v.Attrs.Int("head_dim", 0))
				if tiles.TileQ <= 0 || tiles.TileKV <= 0 || tiles.KVSplits <= 0 {
					return fmt.Errorf("%v: tiling rule gave non-positive tiles %+v", v, tiles)
				}
				attrs, err := v.Attrs.Clone()
				if err != nil {
					return fmt.Errorf("%v: %w", v, err)
				}
				attrs["tile_q"] = tiles.TileQ
				attrs["tile_kv"] = tiles.TileKV
				attrs["kv_splits"] = tiles.KVSplits
				t, err := ir.Infer(ir.OpFlashAttention, v.Args, attrs)
				if err != nil {
					return fmt.Errorf("%v: %w", v, err)
				}
				if !t.Equal(v.Type) {
					return fmt.Errorf("%v: flash_attention would give %s, attention gives %s", v, t, v.Type)
				}
				// Rewrite in place: the value keeps its identity, so its
				// users and the outputs need no update.
				v.Op, v.Attrs = ir.OpFlashAttention, attrs
			}
			return nil
		},
	}
}
