package mmap

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// rssOf is Resident, which must succeed.
func rssOf(t *testing.T, b []byte) int64 {
	t.Helper()
	n, err := Resident(b)
	require.NoError(t, err)
	return n
}

// TestReleaseDropsPagesKeepsBytes: after a file mapping is read, Release
// of a range inside it takes its whole pages out of the resident set (the
// partial pages at the ends stay), and the bytes read back unchanged from
// the file.
func TestReleaseDropsPagesKeepsBytes(t *testing.T) {
	const n = 16 << 20
	want := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(r.Uint32() | 1)
	}
	path := filepath.Join(t.TempDir(), "weights")
	require.NoError(t, os.WriteFile(path, want, 0o644))
	fh, err := os.Open(path)
	require.NoError(t, err)
	defer fh.Close()
	b, unmap, err := File(fh, n)
	require.NoError(t, err)
	defer unmap()

	Populate(b)
	before := rssOf(t, b)
	require.Greater(t, before, int64(n*9/10), "read pages are resident")

	// An odd range, as MLX's unaligned tensors are: [100, n-100).
	Release(b[100 : n-100])
	after := rssOf(t, b)
	require.LessOrEqual(t, after, int64(2*os.Getpagesize()), "only the two partial end pages stay")
	require.Equal(t, want, b, "the bytes read back from the file")

	Release(b[10:20]) // inside one page: nothing to drop, no error
	Release(nil)
}
