package tokenizer_test

import (
	"os"
	"testing"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/tokenizer"
)

// FuzzParseHF: no tokenizer.json / tokenizer_config.json pair makes ParseHF
// or New panic, and a vocabulary both accept encodes and decodes. Run with
//
//	go test -run XXX -fuzz FuzzParseHF -fuzztime 60s ./tokenizer
func FuzzParseHF(f *testing.F) {
	for _, dir := range []string{"models/hf/stories260K"} {
		tj, err := os.ReadFile(shared.Path(f, dir+"/tokenizer.json"))
		if err != nil {
			f.Fatal(err)
		}
		cj, err := os.ReadFile(shared.Path(f, dir+"/tokenizer_config.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tj, cj)
		f.Add(tj, []byte(nil))
	}
	small := `{"added_tokens":[{"id":3,"content":"<|end|>","special":true}],` +
		`"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":` +
		`"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},` +
		`"behavior":"Isolated"},{"type":"ByteLevel","use_regex":false}]},"normalizer":{"type":"NFC"},` +
		`"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<|end|>"}},{"Sequence":{"id":"A"}}]},` +
		`"decoder":{"type":"ByteLevel"},"model":{"type":"BPE","ignore_merges":true,"vocab":{"a":0,"b":1,"ab":2,"Ġ":4},"merges":[["a","b"]]}}`
	f.Add([]byte(small), []byte(`{"add_bos_token":false,"bos_token":{"content":"<|end|>"},"chat_template":[{"name":"default","template":"x"}]}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]},"decoder":{"type":"Fuse"}}`), []byte(nil))

	f.Fuzz(func(t *testing.T, tj, cj []byte) {
		v, _, err := tokenizer.ParseHF(tj, cj)
		if err != nil {
			return
		}
		tk, err := tokenizer.New(v)
		if err != nil {
			return
		}
		for _, s := range []string{"", "hello world", " <|end|>ab\u00e9\xff", "<s>a</s>"} {
			ids := tk.EncodeWith(s, tokenizer.EncodeOptions{AddBOS: true, ParseSpecial: true})
			for _, id := range ids {
				if id < 0 || int(id) >= tk.VocabSize() {
					t.Fatalf("id %d outside the vocabulary", id)
				}
			}
			_ = tk.DecodeWith(ids, tokenizer.DecodeOptions{Special: true})
		}
	})
}
