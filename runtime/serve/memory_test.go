package serve_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/runtime/serve"
)

// The KV memory is the program's own count (CacheBytes) and a request for
// more than is available is refused up front, naming both flags.
func TestKVMemory(t *testing.T) {
	m := loadStories(t)
	p := m.program(t, 3, 100)
	n, ok := serve.KVCacheBytes(m.g, 100, 3)
	require.True(t, ok)
	require.Equal(t, p.CacheBytes(), n)
	require.NoError(t, serve.CheckKVMemory(m.g, 100, 3, n))
	require.NoError(t, serve.CheckKVMemory(m.g, 100, 3, 0))
	err := serve.CheckKVMemory(m.g, 100, 3, n-1)
	require.ErrorContains(t, err, "--ctx 100 × --parallel 3 needs 0.4 MB of KV cache; this machine has 0.4 MB available (lower --ctx or --parallel)")
	_, ok = serve.KVCacheBytes(m.g, math.MaxInt32, math.MaxInt32)
	require.False(t, ok)
	require.ErrorContains(t, serve.CheckKVMemory(m.g, math.MaxInt32, math.MaxInt32, 1<<30), "more than 9 EB")
}
