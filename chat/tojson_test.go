package chat

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The expected strings are what Python 3 prints for
// json.dumps(json.loads(input), ensure_ascii=..., indent=..., separators=...,
// sort_keys=...), which is transformers' tojson.
func TestToJSONMatchesPython(t *testing.T) {
	cases := []struct {
		name, input, call, want string
	}{
		{"defaults keep order and non-ASCII; escape controls", `{"b": 1, "a": [1, 2, {"c": null}], "é": "ü\u2028\u007f\u0001\"\\"}`, `tojson`,
			"{\"b\": 1, \"a\": [1, 2, {\"c\": null}], \"\u00e9\": \"\u00fc\u2028\u007f\\u0001\\\"\\\\\"}"},
		{"indent 2", `{"b": 1, "a": [1, 2, {"c": null}], "e": [], "f": {}}`, `tojson(indent=2)`,
			"{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2,\n    {\n      \"c\": null\n    }\n  ],\n  \"e\": [],\n  \"f\": {}\n}"},
		{"ascii, sorted, compact", `{"b": 1, "a": "é😀"}`, `tojson(ensure_ascii=true, sort_keys=true, separators=(",", ":"))`,
			"{\"a\":\"\\u00e9\\ud83d\\ude00\",\"b\":1}"},
		{"numbers as Python writes them", `[3.0, 0.5, 1e16, 1e15, 1.5e-5, 0.0001, -0.0, 12345678901234567.0, 2, -7, 123456789012345678901234567890, true, false, null]`, `tojson`,
			"[3.0, 0.5, 1e+16, 1000000000000000.0, 1.5e-05, 0.0001, -0.0, 1.2345678901234568e+16, 2, -7, 123456789012345678901234567890, true, false, null]"},
		{"string indent", `{"x": [1, {"y": 2}]}`, `tojson(indent="\t")`,
			"{\n\t\"x\": [\n\t\t1,\n\t\t{\n\t\t\t\"y\": 2\n\t\t}\n\t]\n}"},
		{"indent 0 still breaks lines", `{"x": [1]}`, `tojson(indent=0)`, "{\n\"x\": [\n1\n]\n}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := ParseJSON([]byte(c.input))
			require.NoError(t, err)
			got, err := Render("{{ x|"+c.call+" }}", Conversation{}, Options{Vars: map[string]any{"x": v}})
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

// Values a template builds itself (dict literals, namespace(), loop results)
// serialize too; namespace() is a Go map, written with sorted keys.
func TestToJSONOfTemplateValues(t *testing.T) {
	cases := []struct{ src, want string }{
		{`{{ {"z": 1, "a": [1, 2.5, "x"]}|tojson }}`, `{"z": 1, "a": [1, 2.5, "x"]}`},
		{`{% set ns = namespace(b=1, a="x") %}{{ ns|tojson }}`, `{"a": "x", "b": 1}`},
		{`{{ ("a", none, true)|tojson }}`, `["a", null, true]`},
		{`{{ {1: "i", none: "n", true: "t"}|tojson }}`, `{"1": "i", "null": "n", "true": "t"}`},
		{`{{ "it's"|tojson }}`, `"it's"`},
	}
	for _, c := range cases {
		got, err := Render(c.src, Conversation{}, Options{})
		require.NoError(t, err, c.src)
		require.Equal(t, c.want, got, c.src)
	}
}

func TestObjectJSONRoundTrip(t *testing.T) {
	in := `{"z":1,"a":{"y":[1.0,2,"é"],"b":null},"big":123456789012345678901234567890}`
	var o Object
	require.NoError(t, o.UnmarshalJSON([]byte(in)))
	require.Equal(t, []string{"z", "a", "big"}, o.Keys())
	out, err := o.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, in, string(out))

	// A repeated key keeps its first place and its last value, as json.loads does.
	v, err := ParseJSON([]byte(`{"a": 1, "b": 2, "a": 3}`))
	require.NoError(t, err)
	out, err = v.(*Object).MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, `{"a":3,"b":2}`, string(out))
}

func TestParseJSONErrors(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a": }`, `[1, 2`, `{"a": 1} x`, `nul`} {
		_, err := ParseJSON([]byte(in))
		require.Error(t, err, in)
		require.NotContains(t, err.Error(), "\n")
	}
}
