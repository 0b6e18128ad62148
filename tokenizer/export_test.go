package tokenizer

// Hooks for the external tests (package tokenizer_test, which can load GGUF
// files through frontend/arch without an import cycle).

// PreO200k is the Vocab.Pre value of the exact o200k splitter.
const PreO200k = preO200kName

// EncodeByText encodes like EncodeWith but merges every word by text, as
// llama.cpp does, never by token ids: the reference for mergeSmall.
func (t *Tokenizer) EncodeByText(text string, o EncodeOptions) []int32 {
	c := *t
	c.mergeByID = false
	return c.EncodeWith(text, o)
}
