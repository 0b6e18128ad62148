package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// HFConfig is what a Hugging Face tokenizer_config.json holds besides the
// vocabulary settings that ParseHF puts in the Vocab.
type HFConfig struct {
	// ChatTemplate is the Jinja chat template ("" when there is none). A
	// file with a list of named templates gives the one named "default".
	ChatTemplate string
	// ChatTemplates holds every named template of such a list (nil for a
	// file with a single template).
	ChatTemplates map[string]string
	// The special-token texts the file names, as transformers passes them
	// to a chat template (bos_token, eos_token, …); "" when not set.
	BOSToken, EOSToken, UNKToken, PADToken string
}

// LoadHF reads a Hugging Face tokenizer: path is a tokenizer.json file or a
// directory holding one; tokenizer_config.json beside it is read when it
// exists. Errors name the file.
func LoadHF(path string) (Vocab, HFConfig, error) {
	dir, file := path, filepath.Join(path, "tokenizer.json")
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		dir, file = filepath.Dir(path), path
	}
	tj, err := os.ReadFile(file)
	if err != nil {
		return Vocab{}, HFConfig{}, err
	}
	cj, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if errors.Is(err, fs.ErrNotExist) {
		cj, err = nil, nil
	}
	if err != nil {
		return Vocab{}, HFConfig{}, err
	}
	v, c, err := ParseHF(tj, cj)
	if err != nil {
		return Vocab{}, HFConfig{}, fmt.Errorf("%s: %w", dir, err)
	}
	return v, c, nil
}

// ParseHF builds a Vocab from the contents of a Hugging Face tokenizer.json
// and tokenizer_config.json (nil when there is none), such that New gives
// the tokenizer the file describes. Two kinds are understood, those that
// decoder-only models ship:
//
//   - byte-level BPE (GPT-2, Llama-3, Qwen, gpt-oss): a ByteLevel
//     pre-tokenizer, alone or after a Split whose regex is one of the
//     known ones (see hfSplitRegexes), optionally an NFC normalizer;
//   - SentencePiece-style BPE (Llama-2, Mistral, TinyLlama): the normalizer
//     that prepends "▁" and replaces spaces by it, byte_fallback, the
//     <0xNN> byte tokens. This becomes a "llama" vocabulary, merged by
//     scores that rank every token by its first merge, which is the order
//     the merges list was made in.
//
// Anything else (another model type, an unknown regex or normalizer) is an
// error that says what was found, never a silent approximation. Errors
// start with the name of the file at fault.
func ParseHF(tokenizerJSON, configJSON []byte) (Vocab, HFConfig, error) {
	var f hfFile
	if err := json.Unmarshal(tokenizerJSON, &f); err != nil {
		return Vocab{}, HFConfig{}, fmt.Errorf("tokenizer.json: %w", jsonError(err))
	}
	var cfg hfConfigFile
	if configJSON != nil {
		if err := json.Unmarshal(configJSON, &cfg); err != nil {
			return Vocab{}, HFConfig{}, fmt.Errorf("tokenizer_config.json: %w", jsonError(err))
		}
	}
	v, err := f.vocab()
	if err != nil {
		return Vocab{}, HFConfig{}, fmt.Errorf("tokenizer.json: %w", err)
	}
	c, err := cfg.config()
	if err != nil {
		return Vocab{}, HFConfig{}, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	if err := f.specials(&v, &cfg, configJSON != nil); err != nil {
		return Vocab{}, HFConfig{}, err
	}
	return v, c, nil
}

// jsonError shortens encoding/json's errors to what a user can act on.
func jsonError(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("not valid JSON at byte %d: %v", se.Offset, err)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("field %q holds a JSON %s, not the expected kind of value", te.Field, te.Value)
	}
	return err
}

// hfFile is the part of tokenizer.json that matters for encoding.
type hfFile struct {
	AddedTokens   []hfAddedToken `json:"added_tokens"`
	Normalizer    *hfNode        `json:"normalizer"`
	PreTokenizer  *hfNode        `json:"pre_tokenizer"`
	PostProcessor *hfNode        `json:"post_processor"`
	Decoder       *hfNode        `json:"decoder"`
	Model         hfModel        `json:"model"`
}

type hfAddedToken struct {
	ID      int64  `json:"id"`
	Content string `json:"content"`
	Special bool   `json:"special"`
}

type hfModel struct {
	Type                    string          `json:"type"`
	Vocab                   json.RawMessage `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
	UnkToken                *string         `json:"unk_token"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Dropout                 *float64        `json:"dropout"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
}

// maxIDGap bounds the ids a file may leave unused (filled with [PADn]
// tokens, as llama.cpp's converter does), so that a stray huge id is an
// error rather than a giant allocation.
const maxIDGap = 1 << 16

// vocab reads the model, the added tokens and the pipeline into a Vocab
// (special ids are set by specials).
func (f *hfFile) vocab() (Vocab, error) {
	m := &f.Model
	if m.Type == "" && m.Merges != nil {
		m.Type = "BPE" // files from before "type" was written
	}
	if m.Type != "BPE" {
		return Vocab{}, fmt.Errorf("model type %q is not supported (only BPE)", m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return Vocab{}, fmt.Errorf("BPE dropout %g is not supported", *m.Dropout)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" ||
		m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return Vocab{}, errors.New("BPE continuing_subword_prefix / end_of_word_suffix are not supported")
	}
	var vocab map[string]int64
	if err := json.Unmarshal(m.Vocab, &vocab); err != nil || vocab == nil {
		return Vocab{}, errors.New("model.vocab is not an object of token → id")
	}
	merges, err := hfMerges(m.Merges)
	if err != nil {
		return Vocab{}, err
	}

	// Tokens by id: the model's vocabulary, then the added tokens (which
	// may repeat an entry of it with the same id).
	n := int64(0)
	byID := map[int64]string{}
	put := func(id int64, text string) error {
		if id < 0 || id >= int64(len(vocab)+len(f.AddedTokens))+maxIDGap {
			return fmt.Errorf("token %q has id %d, outside the vocabulary", text, id)
		}
		if old, ok := byID[id]; ok && old != text {
			return fmt.Errorf("id %d is given to both %q and %q", id, old, text)
		}
		byID[id] = text
		n = max(n, id+1)
		return nil
	}
	for text, id := range vocab {
		if err := put(id, text); err != nil {
			return Vocab{}, err
		}
	}
	added := map[int64]hfAddedToken{}
	for _, a := range f.AddedTokens {
		if err := put(a.ID, a.Content); err != nil {
			return Vocab{}, err
		}
		added[a.ID] = a
	}
	if n == 0 {
		return Vocab{}, errors.New("the vocabulary is empty")
	}

	v := Vocab{BOS: -1, EOS: -1, UNK: -1, PAD: -1, Merges: merges}
	v.Tokens = make([]string, n)
	v.Types = make([]int32, n)
	for id := range v.Tokens {
		text, ok := byID[int64(id)]
		if !ok {
			// A hole in the ids: llama.cpp's converter fills it so.
			v.Tokens[id] = fmt.Sprintf("[PAD%d]", id)
			v.Types[id] = int32(TypeUnused)
			continue
		}
		v.Tokens[id] = text
		v.Types[id] = int32(TypeNormal)
		if a, ok := added[int64(id)]; ok {
			// As llama.cpp's converter decides (does_token_look_special).
			v.Types[id] = int32(TypeUserDefined)
			if a.Special || looksSpecial(a.Content) {
				v.Types[id] = int32(TypeControl)
			}
		}
	}

	byteLevel, err := hfIsByteLevel(f.PreTokenizer)
	if err != nil {
		return Vocab{}, err
	}
	if byteLevel {
		err = f.byteLevel(&v)
	} else {
		err = f.sentencePiece(&v, vocab)
	}
	return v, err
}

// hfMerges reads model.merges: strings "left right" (the classic form) or
// pairs ["left", "right"] (tokenizers ≥ 0.20), into the "left right" form of
// Vocab.Merges.
func hfMerges(raw json.RawMessage) ([]string, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errors.New("model.merges is not a list")
	}
	out := make([]string, len(items))
	for i, it := range items {
		var s string
		if json.Unmarshal(it, &s) == nil {
			out[i] = s
			continue
		}
		var pair []string
		if json.Unmarshal(it, &pair) != nil || len(pair) != 2 {
			return nil, fmt.Errorf("merge %d is neither \"left right\" nor a pair of strings", i)
		}
		if strings.Contains(pair[0], " ") || strings.Contains(pair[1], " ") {
			// A space inside a side cannot be written in the "left
			// right" form the tokenizer looks merges up in.
			return nil, fmt.Errorf("merge %d (%q, %q) has a space inside a side", i, pair[0], pair[1])
		}
		out[i] = pair[0] + " " + pair[1]
	}
	return out, nil
}

// looksSpecial is llama.cpp's convert_hf_to_gguf does_token_look_special:
// added tokens that are written like control tokens become control tokens
// even when the file does not mark them special.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>") ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}

// byteLevel fills in a byte-level BPE vocabulary: pre-tokenizer, NFC,
// ignore_merges, and checks the decoder.
func (f *hfFile) byteLevel(v *Vocab) error {
	v.Model = string(KindBPE)
	if f.Model.ByteFallback {
		return errors.New("byte_fallback with a ByteLevel pre-tokenizer is not supported")
	}
	if len(v.Merges) == 0 {
		return errors.New("the BPE model has no merges")
	}
	pre, err := hfByteLevelPre(f.PreTokenizer, f.Model.IgnoreMerges)
	if err != nil {
		return err
	}
	v.Pre = pre
	v.IgnoreMerges = f.Model.IgnoreMerges
	if v.NFC, err = hfByteLevelNormalizer(f.Normalizer); err != nil {
		return err
	}
	return hfCheckDecoder(f.Decoder, true)
}

// sentencePiece fills in a SentencePiece-style vocabulary.
func (f *hfFile) sentencePiece(v *Vocab, vocab map[string]int64) error {
	v.Model = string(KindSPM)
	if f.PreTokenizer != nil {
		return fmt.Errorf("pre-tokenizer %s is not supported without ByteLevel (only the legacy Prepend/Replace normalizer and no pre-tokenizer)", f.PreTokenizer.describe())
	}
	prefix, err := hfSPMNormalizer(f.Normalizer)
	if err != nil {
		return err
	}
	v.NoSpacePrefix = !prefix
	if !f.Model.ByteFallback {
		return errors.New("a BPE model without ByteLevel needs byte_fallback (SentencePiece style)")
	}
	if err := hfCheckDecoder(f.Decoder, false); err != nil {
		return err
	}
	for id, text := range v.Tokens {
		if v.Types[id] == int32(TypeNormal) && hfByteToken.MatchString(text) {
			v.Types[id] = int32(TypeByte)
		}
	}
	if u := f.Model.UnkToken; u != nil {
		id, ok := vocab[*u]
		if !ok {
			return fmt.Errorf("unk_token %q is not in the vocabulary", *u)
		}
		// SentencePiece's <unk> has type UNKNOWN in a converted GGUF.
		v.Types[id] = int32(TypeUnknown)
		v.UNK = int32(id)
	}
	v.Scores = mergeScores(v.Tokens, v.Merges)
	return nil
}

var hfByteToken = regexp.MustCompile(`^<0x[0-9A-Fa-f]{2}>$`)

// mergeScores gives each token made by a merge the score -(rank of its first
// merge) and the others 0. The merges of a SentencePiece-derived file are
// ordered by the score of the token they make (transformers'
// generate_merges), so merging by these scores, best first, is the original
// SentencePiece order.
func mergeScores(tokens []string, merges []string) []float32 {
	first := make(map[string]int, len(merges))
	for i, m := range merges {
		sp := strings.IndexByte(m[min(1, len(m)):], ' ')
		if sp < 0 {
			continue
		}
		sp += min(1, len(m))
		tok := m[:sp] + m[sp+1:]
		if _, ok := first[tok]; !ok {
			first[tok] = i
		}
	}
	scores := make([]float32, len(tokens))
	for id, text := range tokens {
		if r, ok := first[text]; ok {
			scores[id] = -float32(r + 1)
		}
	}
	return scores
}

// specials sets BOS, EOS, UNK, PAD and add_bos/add_eos the way llama.cpp's
// converter (gguf-py SpecialVocab) reads them: token texts from
// tokenizer_config.json, else from the post-processor's template; whether to
// add BOS/EOS from the template, overridden by add_bos_token/add_eos_token.
func (f *hfFile) specials(v *Vocab, cfg *hfConfigFile, haveConfig bool) error {
	first, last, err := hfTemplateEnds(f.PostProcessor)
	if err != nil {
		return fmt.Errorf("tokenizer.json: %w", err)
	}
	bos, eos := cfg.BOSToken.text, cfg.EOSToken.text
	if !haveConfig {
		bos, eos = first, last
	}
	v.AddBOS = first != "" && first == bos
	v.AddEOS = last != "" && last == eos
	if cfg.AddBOSToken != nil {
		v.AddBOS = *cfg.AddBOSToken
	}
	if cfg.AddEOSToken != nil {
		v.AddEOS = *cfg.AddEOSToken
	}

	lookup := func(what, text string, dst *int32) error {
		if text == "" {
			return nil
		}
		// Added tokens first, as the converter looks them up.
		for _, a := range f.AddedTokens {
			if a.Content == text {
				*dst = int32(a.ID)
				return nil
			}
		}
		for id, t := range v.Tokens {
			if t == text {
				*dst = int32(id)
				return nil
			}
		}
		return fmt.Errorf("tokenizer_config.json: %s %q is not in the vocabulary", what, text)
	}
	for _, s := range []struct {
		what, text string
		dst        *int32
	}{
		{"bos_token", bos, &v.BOS}, {"eos_token", eos, &v.EOS},
		{"unk_token", cfg.UNKToken.text, &v.UNK}, {"pad_token", cfg.PADToken.text, &v.PAD},
	} {
		if err := lookup(s.what, s.text, s.dst); err != nil {
			return err
		}
	}
	if v.AddBOS && v.BOS < 0 {
		return errors.New("tokenizer_config.json: add_bos_token is set but there is no bos_token")
	}
	if v.AddEOS && v.EOS < 0 {
		return errors.New("tokenizer_config.json: add_eos_token is set but there is no eos_token")
	}
	return nil
}

// hfConfigFile is the part of tokenizer_config.json that matters.
type hfConfigFile struct {
	AddBOSToken  *bool           `json:"add_bos_token"`
	AddEOSToken  *bool           `json:"add_eos_token"`
	BOSToken     hfTokenRef      `json:"bos_token"`
	EOSToken     hfTokenRef      `json:"eos_token"`
	UNKToken     hfTokenRef      `json:"unk_token"`
	PADToken     hfTokenRef      `json:"pad_token"`
	ChatTemplate json.RawMessage `json:"chat_template"`
}

// hfTokenRef is a special token as tokenizer_config.json names it: a string,
// an AddedToken object with "content", or null.
type hfTokenRef struct{ text string }

func (r *hfTokenRef) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if json.Unmarshal(b, &r.text) == nil {
		return nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return errors.New("a special token is neither a string nor an object with content")
	}
	r.text = obj.Content
	return nil
}

func (c *hfConfigFile) config() (HFConfig, error) {
	out := HFConfig{BOSToken: c.BOSToken.text, EOSToken: c.EOSToken.text, UNKToken: c.UNKToken.text, PADToken: c.PADToken.text}
	if len(c.ChatTemplate) == 0 || string(c.ChatTemplate) == "null" {
		return out, nil
	}
	if json.Unmarshal(c.ChatTemplate, &out.ChatTemplate) == nil {
		return out, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(c.ChatTemplate, &named); err != nil {
		return out, errors.New("chat_template is neither a string nor a list of {name, template}")
	}
	out.ChatTemplates = map[string]string{}
	for _, t := range named {
		out.ChatTemplates[t.Name] = t.Template
	}
	out.ChatTemplate = out.ChatTemplates["default"]
	return out, nil
}
