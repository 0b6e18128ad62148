package chat

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// render is a test helper: the template alone, with x bound to a JSON value.
func render(t *testing.T, src, xJSON string) (string, error) {
	t.Helper()
	opts := Options{Now: goldenClock}
	if xJSON != "" {
		v, err := ParseJSON([]byte(xJSON))
		require.NoError(t, err)
		opts.Vars = map[string]any{"x": v}
	}
	return Render(src, Conversation{}, opts)
}

// Expected values are Python 3's (Jinja2 3.1 for the filters), the behaviour
// transformers renders templates with.
func TestPythonStringMethods(t *testing.T) {
	cases := []struct{ src, want string }{
		{`{{ "  a b  c  ".split()|tojson }}`, `["a", "b", "c"]`},
		{`{{ "  a b  c  ".split(none, 1)|tojson }}`, `["a", "b  c  "]`},
		{`{{ "a,b,,c".split(",", 2)|tojson }}`, `["a", "b", ",c"]`},
		{`{{ "  a b  c  ".rsplit(none, 1)|tojson }}`, `["  a b", "c"]`},
		{`{{ "a,b,,c".rsplit(",", 1)|tojson }}`, `["a,b,", "c"]`},
		{`{{ "x</think>\n\nanswer".split("</think>")[-1].lstrip("\n") }}`, `answer`},
		{`{{ "\n\nthink\n".strip("\n") }}|{{ "\x1c x \x1f".strip() }}|{{ "  é  ".rstrip() }}|`, "think|x|  é|"},
		{`{{ "xxaxx".lstrip("x") }}{{ "ééaéé".strip("é") }}`, `axxa`},
		{`{{ "<tool_response>x</tool_response>".startswith("<tool_response>") }}{{ "abc".endswith(("x", "bc")) }}{{ "abc".startswith("b", 1) }}`, `TrueTrueTrue`},
		{`{{ "abc".replace("", "-", 2) }}|{{ "aaa".replace("a", "b") }}|{{ "aaa".replace("a", "b", 1) }}`, `-a-bc|bbb|baa`},
		{`{{ "Hi"|trim }}|{{ "  Hi \n"|trim }}|{{ "xxHixx"|trim("x") }}`, `Hi|Hi|Hi`},
		{`{{ "ab".upper() }}{{ "AB".lower() }}{{ "ab cd".title() }}`, `ABabAb Cd`},
	}
	for _, c := range cases {
		got, err := render(t, c.src, "")
		require.NoError(t, err, c.src)
		require.Equal(t, c.want, got, c.src)
	}
}

func TestDictOrderAndLists(t *testing.T) {
	const x = `{"zeta": 1, "alpha": {"items": [1], "m": 2}, "mid": [10, 20, 30], "n": null}`
	cases := []struct{ src, want string }{
		{`{% for k, v in x.items() %}{{ k }}={{ v|tojson }};{% endfor %}`, `zeta=1;alpha={"items": [1], "m": 2};mid=[10, 20, 30];n=null;`},
		{`{% for k, v in x|items %}{{ k }};{% endfor %}`, `zeta;alpha;mid;n;`},
		{`{{ x.keys()|list|tojson }}|{{ x.values()|list|length }}|{{ x|list|tojson }}`, `["zeta", "alpha", "mid", "n"]|4|["zeta", "alpha", "mid", "n"]`},
		{`{{ x.get("mid")[-1] }}|{{ x.get("nope", "d") }}|{{ x.get("nope") is none }}`, `30|d|True`},
		// A key named like a dict method is still reachable by subscript, and the method by call.
		{`{{ x.alpha["items"]|tojson }}|{{ x.alpha.items()|list|length }}`, `[1]|2`},
		{`{{ x.mid[-3] }}{{ x.mid[-1] }}{{ x.mid[0] }}|{{ x.mid[-4] is defined }}|{{ x.mid[1:]|tojson }}|{{ x.mid[::-1][0] }}`, `103010|False|[20, 30]|30`},
		{`{{ x.n is defined }}|{{ x.missing is defined }}|{{ x.n is none }}|{{ x.n is undefined }}|{{ tools is defined }}{{ tools is none }}`, `True|False|True|False|TrueTrue`},
		{`{{ "zeta" in x }}{{ "nope" in x }}{{ x|length }}{{ x is mapping }}{{ x.mid is iterable }}`, `TrueFalse4TrueTrue`},
		{`{{ (x.mid|selectattr("real", "defined")|list) is iterable }}|{{ ([1]|list)[-1] }}`, `True|1`},
	}
	for _, c := range cases {
		got, err := render(t, c.src, x)
		require.NoError(t, err, c.src)
		require.Equal(t, c.want, got, c.src)
	}
}

func TestConditionalExpressions(t *testing.T) {
	cases := []struct{ src, want string }{
		{`{{ (x.a if x.a is defined else "json") + "!" }}`, `1!`},
		{`{{ (x.b if x.b is defined else "json") + "!" }}`, `json!`},
		{`{{ [1 if x.a else 2, 3 if not x.a else 4 if x.a == 1 else 5]|tojson }}`, `[1, 4]`},
		{`{{ f(1) if false else "lazy" }}`, `lazy`}, // f is undefined: never called
		{`{% for i in [1, 2, 3] if i != 2 %}{{ i }}{% endfor %}`, `13`},
		{`{% for i in ([1, 2] if x.a else [3]) if i > 1 %}{{ i }}{% endfor %}`, `2`},
		{`{% set v = {"k": "y" if x.a else "n"} %}{{ v.k }}`, `y`},
		{`{% macro m(p=("d" if not x.a else "e")) %}{{ p }}{% endmacro %}{{ m() }}`, `e`},
		{`{{ "t" if x.a }}|{{ "t" if x.b }}|`, `t||`},
		{`{{ x.a if (x.a if x.a else 0) else 9 }}`, `1`},
	}
	for _, c := range cases {
		got, err := render(t, c.src, `{"a": 1}`)
		require.NoError(t, err, c.src)
		require.Equal(t, c.want, got, c.src)
	}
}

func TestStrftimeMatchesPython(t *testing.T) {
	const format = "%Y-%m-%d|%d %b %Y|%A %B %j %U %W %V %G %u %w %I %p %e %-d %c %x %X %%|%z|%Z|%Q"
	// datetime(...).strftime(format) in Python 3 on Linux.
	cases := []struct {
		at   time.Time
		want string
	}{
		{goldenClock, "2026-11-24|24 Nov 2026|Tuesday November 328 47 47 48 2026 2 2 12 PM 24 24 Tue Nov 24 12:00:00 2026 11/24/26 12:00:00 %|||%Q"},
		{time.Date(2027, 1, 3, 7, 5, 9, 0, time.UTC), "2027-01-03|03 Jan 2027|Sunday January 003 01 00 53 2026 7 0 07 AM  3 3 Sun Jan  3 07:05:09 2027 01/03/27 07:05:09 %|||%Q"},
	}
	for _, c := range cases {
		require.Equal(t, c.want, strftime(c.at, format))
	}
	got, err := Render(`{{ strftime_now("%d %b %Y") }}`, Conversation{}, Options{Now: goldenClock})
	require.NoError(t, err)
	require.Equal(t, "24 Nov 2026", got)
}

func TestTemplateErrors(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"raise_exception", `{% if true %}{{ raise_exception("roles must alternate") }}{% endif %}`, "chat template error: roles must alternate"},
		{"unclosed block", `{% if x %}oops`, "chat template: cannot parse"},
		{"unknown filter", `{{ x|nosuchfilter }}`, "nosuchfilter"},
		{"bad tojson indent", `{{ x|tojson(indent=[1]) }}`, "indent"},
		{"strftime_now without format", `{{ strftime_now() }}`, "strftime_now takes one format string"},
		{"empty separator", `{{ "a".split("") }}`, "empty separator"},
		{"endless macro recursion", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`, "nested deeper than 200"},
		{"range too big", `{% for i in range(1000000) %}{% endfor %}`, "range() too big"},
		{"include has nothing to load", `{% include "/chat_template" %}`, "cannot parse"},
		{"import has nothing to load", `{% import "x" as y %}`, "cannot parse"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := render(t, c.src, `{"a": 1}`)
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
			require.NotContains(t, err.Error(), "\n", "errors are one line")
		})
	}
	var te *TemplateError
	_, err := render(t, `{{ raise_exception("no") }}`, "")
	require.ErrorAs(t, err, &te)
	require.Equal(t, "no", te.Message)
	require.Equal(t, "model has no chat template; pass --chat-template FILE", ErrNoTemplate.Error())
}

func TestRangeAndMacros(t *testing.T) {
	cases := []struct{ src, want string }{
		{`{{ range(3)|list|tojson }}{{ range(1, 10, 3)|list|tojson }}{{ range(5, 0, -2)|list|tojson }}{{ range(0)|list|tojson }}`, `[0, 1, 2][1, 4, 7][5, 3, 1][]`},
		{`{% for i in range(100) %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endfor %}`, `01`},
		{`{% macro depth(n) %}{% if n > 0 %}({{ depth(n - 1) }}){% endif %}{% endmacro %}{{ depth(3) }}|{{ depth(150)|length }}`, `((()))|300`},
		{`{% for i in range(3) %}{% continue %}x{% endfor %}done`, `done`},
	}
	for _, c := range cases {
		got, err := render(t, c.src, "")
		require.NoError(t, err, c.src)
		require.Equal(t, c.want, got, c.src)
	}
	var one Conversation
	one.Add("user", "only")
	got, err := Render(`{{ messages[-1].content }}|{{ messages[1:]|length }}|{{ (messages + messages)[-1].role }}`, one, Options{})
	require.NoError(t, err)
	require.Equal(t, "only|0|user", got)

	_, err = Render(`{{ x }}`, Conversation{}, Options{Vars: map[string]any{"messages": 1}})
	require.ErrorContains(t, err, `variable "messages" comes from the conversation`)
}

func TestParseConversation(t *testing.T) {
	conv, err := ParseConversation([]byte(`{"model": "m", "messages": [{"role": "user", "content": "hi", "zz": 1, "aa": 2}], "tools": null}`))
	require.NoError(t, err)
	require.Len(t, conv.Messages, 1)
	require.Equal(t, []string{"role", "content", "zz", "aa"}, conv.Messages[0].Keys())
	require.Nil(t, conv.Tools)

	bad := map[string]string{
		`[]`:                               "must be a JSON object",
		`{}`:                               `no "messages"`,
		`{"messages": {}}`:                 `"messages" must be an array`,
		`{"messages": [1]}`:                "message 0 must be an object",
		`{"messages": [{"content": "x"}]}`: `message 0 has no "role"`,
		`{"messages": [{"role": 1}]}`:      `"role" must be a string`,
		`{"messages": [], "tools": {}}`:    `"tools" must be an array or null`,
		`{"messages": [`:                   "bad JSON",
	}
	for in, want := range bad {
		_, err := ParseConversation([]byte(in))
		require.Error(t, err, in)
		require.Contains(t, err.Error(), want, in)
		require.False(t, strings.Contains(err.Error(), "\n"))
	}
}

// A template cannot change the caller's conversation, and one compiled
// template renders concurrently.
func TestRenderIsolationAndConcurrency(t *testing.T) {
	var conv Conversation
	conv.Add("user", "hi")
	tpl, err := Compile(`{% set m = messages[0] %}{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ m.role }}{{ ns.n }}`)
	require.NoError(t, err)
	done := make(chan string, 8)
	for i := 0; i < 8; i++ {
		go func() {
			out, err := tpl.Render(conv, Options{})
			if err != nil {
				out = err.Error()
			}
			done <- out
		}()
	}
	for i := 0; i < 8; i++ {
		require.Equal(t, "user3", <-done)
	}
	require.Equal(t, "hi", conv.Messages[0].String("content"))
}
