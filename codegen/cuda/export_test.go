package cuda

// MMQTile is the integer prefill kernels' token tile and threads per block
// (mmqShape), for the external tests.
func MMQTile() (tokens int64, threads int) {
	wm, wn, _ := mmqTiles()
	return 32 * wm, int(32 * wm * wn)
}
