package hf

import "testing"

// SetRepackSlice makes repacks read n stored bytes a slice, until the test
// ends.
func SetRepackSlice(t *testing.T, n int) {
	old := repackSlice
	repackSlice = n
	t.Cleanup(func() { repackSlice = old })
}
