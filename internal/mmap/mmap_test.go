package mmap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAnonZeroedWritable(t *testing.T) {
	for _, n := range []int{1, 4096, 3<<20 + 17} {
		b, free, err := Anon(n)
		require.NoError(t, err)
		require.Len(t, b, n)
		for i := 0; i < n; i += 997 {
			require.Zero(t, b[i])
			b[i] = byte(i)
		}
		require.Equal(t, byte(n-1), func() byte { b[n-1] = byte(n - 1); return b[n-1] }())
		require.NoError(t, free())
	}
	b, free, err := Anon(0)
	require.NoError(t, err)
	require.Empty(t, b)
	require.NoError(t, free())
}

func TestFileMapsContents(t *testing.T) {
	want := []byte("minerva mapped bytes")
	got, unmap := mapFile(t, want)
	require.Equal(t, want, got)
	require.NoError(t, unmap())
}

// TestPopulate: populating a file mapping and a heap slice (unaligned, both
// ends) leaves the bytes unchanged and does not fail.
func TestPopulate(t *testing.T) {
	want := make([]byte, 3*4096+123)
	for i := range want {
		want[i] = byte(i * 7)
	}
	got, unmap := mapFile(t, want)
	defer unmap()
	Populate(got[5 : len(got)-7])
	Populate(got[:0])
	require.Equal(t, want, got)
	heap := append([]byte(nil), want...)
	Populate(heap[1:])
	require.Equal(t, want, heap)
}

// mapFile writes want to a file and maps it with File.
func mapFile(t *testing.T, want []byte) ([]byte, func() error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "weights")
	require.NoError(t, os.WriteFile(path, want, 0o644))
	fh, err := os.Open(path)
	require.NoError(t, err)
	defer fh.Close()
	b, unmap, err := File(fh, len(want))
	require.NoError(t, err)
	return b, unmap
}
