package mmap

import (
	"math/rand/v2"
	"os"
	"testing"
	"unsafe"

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
	b, unmap := mapFile(t, want)
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

// TestReleaseMappedOnlyFileMappings: ReleaseMapped leaves heap and
// anonymous memory alone (MADV_DONTNEED would zero them), releases a range
// of a live file mapping (its pages leave the resident set, its bytes read
// back from the file), and forgets a mapping once it is unmapped.
func TestReleaseMappedOnlyFileMappings(t *testing.T) {
	const n = 8 << 20
	r := rand.New(rand.NewPCG(3, 4))
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(r.Uint32() | 1)
		}
	}

	heap := make([]byte, n)
	fill(heap)
	want := append([]byte(nil), heap...)
	require.False(t, ReleaseMapped(heap), "heap memory is not a file mapping")
	require.False(t, ReleaseMapped(heap[4096:n-4096]))
	require.Equal(t, want, heap, "heap bytes intact")

	anon, free, err := Anon(n)
	require.NoError(t, err)
	defer free()
	fill(anon)
	want = append(want[:0], anon...)
	require.False(t, ReleaseMapped(anon), "anonymous memory is not a file mapping")
	require.Equal(t, want, anon, "anonymous bytes intact")

	b, unmap := mapFile(t, want)
	Populate(b)
	require.Greater(t, rssOf(t, b), int64(n*9/10), "read pages are resident")
	require.True(t, ReleaseMapped(b[100:n-100]))
	require.LessOrEqual(t, rssOf(t, b), int64(2*os.Getpagesize()), "only the two partial end pages stay")
	require.Equal(t, want, b, "the bytes read back from the file")
	require.False(t, ReleaseMapped(nil))

	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	require.NoError(t, unmap())
	mapped.mu.RLock()
	_, live := mapped.ranges[start]
	mapped.mu.RUnlock()
	require.False(t, live, "an unmapped file is forgotten")
	require.Error(t, unmap(), "a second unmap fails as before")
}

// TestZeroAnon: ZeroAnon of a range inside an anonymous mapping leaves it
// all zeros, the bytes around it unchanged, and its whole pages out of the
// resident set.
func TestZeroAnon(t *testing.T) {
	const n = 16 << 20
	b, unmap, err := Anon(n)
	require.NoError(t, err)
	defer unmap()
	r := rand.New(rand.NewPCG(3, 4))
	for i := range b {
		b[i] = byte(r.Uint32() | 1)
	}
	keep := append([]byte(nil), b...)
	full := rssOf(t, b)
	require.GreaterOrEqual(t, full, int64(n), "written pages are resident")
	lo, hi := 1000, n-777
	ZeroAnon(b[lo:hi])
	require.Less(t, rssOf(t, b), full/2, "the whole pages left the resident set")
	require.Equal(t, keep[:lo], b[:lo])
	require.Equal(t, keep[hi:], b[hi:])
	for i, v := range b[lo:hi] {
		if v != 0 {
			t.Fatalf("byte %d is %d after ZeroAnon", lo+i, v)
		}
	}
}

// TestResidentPages: ResidentPages counts the pages of its slice alone —
// the written ones of a sparse mapping, none after ZeroAnon, and none of a
// neighbour in the same mapping — where Resident reports the whole
// mapping's Rss.
func TestResidentPages(t *testing.T) {
	ps := os.Getpagesize()
	const pages = 64
	b, unmap, err := AnonSparse(pages * ps)
	require.NoError(t, err)
	defer unmap()
	pagesOf := func(s []byte) int64 {
		t.Helper()
		n, err := ResidentPages(s)
		require.NoError(t, err)
		return n / int64(ps)
	}
	require.Zero(t, pagesOf(b), "a fresh mapping has no page in memory")
	for _, p := range []int{3, 4, 40} {
		b[p*ps+17] = 1
	}
	require.Equal(t, int64(3), pagesOf(b))
	require.Equal(t, int64(2), pagesOf(b[:32*ps]), "pages 3 and 4 of the first half")
	require.Equal(t, int64(1), pagesOf(b[32*ps:]), "page 40, not the first half's")
	require.Equal(t, int64(1), pagesOf(b[4*ps+100:4*ps+101]), "a byte's page")
	require.GreaterOrEqual(t, rssOf(t, b[32*ps:]), int64(3*ps), "Resident: the whole mapping")
	ZeroAnon(b[:32*ps])
	require.Equal(t, int64(1), pagesOf(b))
	_, err = ResidentPages(nil)
	require.Error(t, err)
}
