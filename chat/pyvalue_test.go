package chat

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// str() of a list as Python 3 prints it: print(str([1, 'a', "it's", None,
// True, 2.5, {'k': 'v', 'n': None}, 'tab\there', 'q"\'x',
// '\x00\u00a0é\u2028', 1e16])).
func TestPyStrMatchesPython(t *testing.T) {
	v, err := ParseJSON([]byte(`[1, "a", "it's", null, true, 2.5, {"k": "v", "n": null}, "tab\there", "q\"'x", "\u0000\u00a0é\u2028", 1e16]`))
	require.NoError(t, err)
	require.Equal(t, `[1, 'a', "it's", None, True, 2.5, {'k': 'v', 'n': None}, 'tab\there', 'q"\'x', '\x00\xa0é\u2028', 1e+16]`, pyStr(v))
}

func TestPyTruthy(t *testing.T) {
	for _, c := range []struct {
		json string
		want bool
	}{
		{`null`, false}, {`false`, false}, {`0`, false}, {`0.0`, false}, {`""`, false}, {`[]`, false}, {`{}`, false},
		{`true`, true}, {`-1`, true}, {`0.5`, true}, {`" "`, true}, {`[0]`, true}, {`{"a": null}`, true},
		{`100000000000000000000000`, true},
	} {
		v, err := ParseJSON([]byte(c.json))
		require.NoError(t, err)
		require.Equal(t, c.want, pyTruthy(v), c.json)
	}
}
