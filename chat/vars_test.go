package chat

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseVar(t *testing.T) {
	cases := []struct {
		in   string
		key  string
		want any
	}{
		{"reasoning_effort=high", "reasoning_effort", "high"},
		{"enable_thinking=false", "enable_thinking", false},
		{`builtin_tools=["python"]`, "builtin_tools", []any{"python"}},
		{"n=3", "n", int64(3)},
		{"s=a=b", "s", "a=b"},
		{"empty=", "empty", ""},
	}
	for _, c := range cases {
		k, v, err := ParseVar(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.key, k)
		require.Equal(t, c.want, v, c.in)
	}
	for _, bad := range []string{"novalue", "=x", ""} {
		_, _, err := ParseVar(bad)
		require.Error(t, err, bad)
	}
}

func TestCheckReasoningEffort(t *testing.T) {
	for _, ok := range []string{"low", "medium", "high"} {
		require.NoError(t, CheckReasoningEffort(ok))
	}
	err := CheckReasoningEffort("max")
	require.EqualError(t, err, `reasoning effort must be low, medium or high, not "max"`)
}

// Go values in Options.Vars ([]string, int, map) reach both renderers as the
// JSON values they stand for.
func TestVarsFromGo(t *testing.T) {
	var conv Conversation
	conv.Add("user", "hi")
	goVars := Options{Now: goldenClock, Vars: map[string]any{"builtin_tools": []string{"python"}, "reasoning_effort": "low"}}
	jsonVars := Options{Now: goldenClock, Vars: map[string]any{"builtin_tools": []any{"python"}, "reasoning_effort": "low"}}
	want, err := RenderHarmony(conv, jsonVars)
	require.NoError(t, err)
	require.Contains(t, want, "## python")
	got, err := RenderHarmony(conv, goVars)
	require.NoError(t, err)
	require.Equal(t, want, got)

	out, err := Render(`{{ n + 1 }} {{ m|tojson }} {{ l|length }}`, conv, Options{Vars: map[string]any{
		"n": 41, "m": map[string]any{"b": 1, "a": "x"}, "l": []string{"a", "b"}}})
	require.NoError(t, err)
	require.Equal(t, `42 {"a": "x", "b": 1} 2`, out)
}
