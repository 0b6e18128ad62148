package cuda

import "github.com/minerva-llm/minerva/ir"

// MMQTile is the integer prefill kernels' token tile and threads per block
// (mmqShape), for the external tests.
func MMQTile() (tokens int64, threads int) {
	wm, wn, _ := mmqTiles()
	return 32 * wm, int(32 * wm * wn)
}

// MMQ reports whether products of dtype dt take the integer prefill tiles
// (for rows of K a multiple of 64).
func MMQ(dt ir.DType) bool { return useMMQ(dt, 64) }
