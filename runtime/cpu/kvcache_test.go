package cpu_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/cpu"
	"github.com/minerva-llm/minerva/synth"
)

// TestKVCacheAbsurdSizes: slot and context counts whose cache cannot be
// addressed are refused with an error naming the cache, before anything
// is mapped, never a panic or a wrapped-around size.
func TestKVCacheAbsurdSizes(t *testing.T) {
	am := synthModel(t, synth.Default())
	for _, cfg := range []runtime.ProgramConfig{
		{Context: 1 << 40, Slots: 1 << 30}, // slots·context wraps around
		{Context: 1 << 30, Slots: 1 << 20}, // rows·width past 1<<40
		{Context: 1 << 35, Slots: 1},       // each state 1<<40 values: the arena past 2 TB
	} {
		_, err := cpu.Backend{Threads: 1}.Compile(am.Graph, am.Weights, cfg)
		require.Error(t, err, "%+v", cfg)
		require.Regexp(t, `KV cache .*(overflow|too large)|overflow`, err.Error(), "%+v", cfg)
		t.Log(err)
	}
}
