package chat

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// testdata/extra_cases.json holds more conversations per golden template,
// rendered by Python Jinja2 as transformers does (testdata/gen_extra.py).
// Each must render the same here, through the template and, for gpt-oss, the
// built-in harmony renderer; a raise_exception case must fail with its
// message.
func TestExtraCasesMatchJinja2(t *testing.T) {
	data, err := os.ReadFile("testdata/extra_cases.json")
	require.NoError(t, err)
	var extra struct {
		Files []struct {
			Golden string           `json:"golden"`
			Cases  []goldenChatCase `json:"cases"`
		} `json:"files"`
	}
	require.NoError(t, json.Unmarshal(data, &extra))
	goldens := loadChatGoldens(t)
	require.Len(t, extra.Files, len(goldens))
	for _, ef := range extra.Files {
		f, ok := goldens[ef.Golden]
		require.True(t, ok, ef.Golden)
		tpl, err := Compile(f.ChatTemplate)
		require.NoError(t, err)
		renderers := map[string]func(Conversation, Options) (string, error){"template": tpl.Render}
		if ef.Golden == "gpt-oss.json" {
			renderers["harmony"] = RenderHarmony
		}
		for _, c := range ef.Cases {
			name := ef.Golden + "/" + c.Name
			if c.AddGenerationPrompt {
				name += "+gen"
			}
			t.Run(name, func(t *testing.T) {
				conv, opts := caseInputs(t, f, c)
				for rname, r := range renderers {
					got, err := r(conv, opts)
					if c.Error != nil {
						var te *TemplateError
						require.ErrorAs(t, err, &te, rname)
						require.Equal(t, *c.Error, te.Message, rname)
						continue
					}
					require.NoError(t, err, rname)
					require.Equal(t, *c.Expected, got, rname)
				}
			})
		}
	}
}
