package mmap

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// rssOf is the resident size, in bytes, of the mapping that starts at b's
// first byte (/proc/self/smaps).
func rssOf(t *testing.T, b []byte) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		// A mapping's header: "start-end perms offset dev inode [path]".
		if f := strings.Fields(line); len(f) >= 5 && strings.Contains(f[0], "-") && len(f[1]) == 4 {
			in = strings.HasPrefix(line, start)
			continue
		}
		if in && strings.HasPrefix(line, "Rss:") {
			var kb int64
			_, err := fmt.Sscanf(line, "Rss: %d kB", &kb)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no mapping at %s in /proc/self/smaps", start)
	return 0
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
