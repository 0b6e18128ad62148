// Package tokenizer turns text into token ids and back, exactly as llama.cpp
// (src/llama-vocab.cpp) does for the two vocabulary kinds found in GGUF files:
//
//   - "llama": SentencePiece-style (SPM) — spaces become "▁", adjacent pieces
//     are merged greedily by vocabulary score, and anything left that is not a
//     token falls back to <0xNN> byte tokens.
//   - "gpt2": byte-level BPE — a GPT-2 pre-tokenizer splits the text into
//     words, every byte is mapped to a printable code point, and the words are
//     merged by the rank of tokenizer.ggml.merges.
//
// Exactness matters more than elegance here: the engine's outputs are compared
// token for token with llama.cpp, so the quirks of the reference (tie-breaking
// in the merge queues, how invalid UTF-8 is decoded, which token types print
// nothing) are reproduced on purpose and called out where they occur.
//
// The gpt2 pre-tokenizers are those of GPT-2, Llama-3 ("llama-bpe"), Qwen2
// ("qwen2") and o200k ("gpt-4o", llama.cpp's adaptation; the exact o200k rules
// for tokenizer.json files), each a hand-written matcher for its regex.
//
// Special-token text such as "<s>" is plain text unless the caller asks for
// special tokens to be parsed (EncodeOptions.ParseSpecial). Either way, as in
// llama.cpp, tokens of type user_defined are matched literally before the
// model's own algorithm runs.
//
// A Vocab comes from a GGUF file's tokenizer.ggml.* keys (frontend/arch) or
// from Hugging Face's tokenizer.json and tokenizer_config.json (ParseHF); the
// same Tokenizer runs behind both.
//
// Errors from New do not start with the package name: callers already say
// "<file>: tokenizer: …".
//
// A Tokenizer is immutable after New and safe for concurrent use.
package tokenizer

import (
	"errors"
	"fmt"
	"sort"
)

// Kind is the tokenizer family, the GGUF tokenizer.ggml.model value.
type Kind string

const (
	// KindSPM is the SentencePiece-style tokenizer of LLaMA-1/2 models.
	KindSPM Kind = "llama"
	// KindBPE is the GPT-2 byte-level BPE tokenizer.
	KindBPE Kind = "gpt2"
)

// TokenType is the GGUF token type (tokenizer.ggml.token_type).
type TokenType int32

// GGUF token types. Values outside this list are treated as TypeUndefined, as
// llama.cpp does.
const (
	TypeUndefined   TokenType = 0
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3
	TypeUserDefined TokenType = 4
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6
)

// Vocab is the tokenizer part of a GGUF file's metadata, already read out of
// the file (or the same built from a tokenizer.json by ParseHF). Token ids
// are indexes into Tokens.
type Vocab struct {
	Model  string    // tokenizer.ggml.model: "llama" or "gpt2"
	Pre    string    // tokenizer.ggml.pre: for gpt2 "default", "gpt-2", "llama-bpe", "qwen2", "gpt-4o" or an alias (see supportedPre); ignored for llama
	Tokens []string  // tokenizer.ggml.tokens
	Scores []float32 // tokenizer.ggml.scores; nil means all 0 (usual for gpt2)
	Types  []int32   // tokenizer.ggml.token_type; nil means all normal
	Merges []string  // tokenizer.ggml.merges, "left right" per entry, in rank order; required for gpt2

	// Special token ids, -1 when the GGUF has none. Ids outside the vocabulary
	// are rejected by New, so callers should map a key that holds garbage
	// (e.g. 0xFFFFFFFF) to -1 or to the model default first.
	BOS, EOS, UNK, PAD int32

	// tokenizer.ggml.add_bos_token / add_eos_token. When a key is absent the
	// caller passes the model default (llama: AddBOS true; gpt2: false).
	AddBOS, AddEOS bool

	// NoSpacePrefix is true when tokenizer.ggml.add_space_prefix is present
	// and false. llama.cpp prepends a space to SPM input by default; the field
	// is negated so that the zero value keeps that default. Ignored for gpt2,
	// which never adds a prefix.
	NoSpacePrefix bool

	// IgnoreMerges makes a gpt2 tokenizer take a pre-token that is a whole
	// vocabulary entry as that token, without merging (tokenizer.json's
	// BPE ignore_merges). GGUF files leave it false: New turns it on for the
	// pre-tokenizers llama.cpp turns it on for (llama-bpe and its aliases).
	IgnoreMerges bool

	// NFC normalizes gpt2 input to Unicode NFC before pre-tokenization
	// (a tokenizer.json NFC normalizer, Qwen's). llama.cpp does not
	// normalize, so GGUF files never set it.
	NFC bool
}

// Tokenizer encodes and decodes text for one vocabulary.
type Tokenizer struct {
	kind         Kind
	pre          preTokenizer // gpt2 only
	ignoreMerges bool         // gpt2 only, see Vocab.IgnoreMerges
	nfc          bool         // gpt2 only, see Vocab.NFC
	tokens       []string
	scores       []float32
	types        []TokenType
	attrs        []uint8
	ids          map[string]int32 // token text → id

	// pairs, bytePairs and byteID serve the merges by token ids (see
	// encodeBPE); mergeByID is false when some merge of two tokens makes
	// text that is no token, where only the text-based merge is exact.
	// textMerges is the merges list for that one (gpt2 only).
	pairs      map[uint64]pairMerge
	bytePairs  *[256][256]pairMerge
	byteID     [256]int32
	mergeByID  bool
	textMerges *textMerges

	// maxTokenLen bounds the text an SPM lookup can match, so the merge
	// loop skips lookups that cannot succeed (long runs of one character
	// would otherwise hash ever longer strings).
	maxTokenLen int32

	bos, eos, unk, pad int32
	addBOS, addEOS     bool
	spacePrefix        bool

	// eog is the end-of-generation set (see IsEOG).
	eog map[int32]bool

	// byteToken[b] is the token used for byte b when nothing better matches:
	// SPM <0xNN> (or the one-byte token), gpt2 the one-byte token. -1: none.
	byteToken [256]int32

	// specials finds special tokens written in input text (see special.go).
	specials specialIndex

	// pieceData[pieceOff[id]:pieceOff[id+1]] is what token id prints (see
	// TokenBytes), computed once so that decoding is a copy.
	pieceData []byte
	pieceOff  []uint32
}

// New checks v and builds the lookup tables. The error says what is wrong
// with the vocabulary, so it can be shown to a user as is.
func New(v Vocab) (*Tokenizer, error) {
	n := len(v.Tokens)
	if n == 0 {
		return nil, errors.New("vocabulary has no tokens")
	}
	if int64(n) > 1<<31-1 {
		return nil, fmt.Errorf("vocabulary has %d tokens, more than int32 ids can address", n)
	}
	t := &Tokenizer{kind: Kind(v.Model)}
	switch t.kind {
	case KindSPM:
		t.spacePrefix = !v.NoSpacePrefix
	case KindBPE:
		pre, ok := preTokenizers[v.Pre]
		if !ok {
			return nil, fmt.Errorf("unsupported gpt2 pre-tokenizer %q (tokenizer.ggml.pre); supported: %s", v.Pre, supportedPre())
		}
		t.pre = pre.split
		t.ignoreMerges = pre.ignoreMerges || v.IgnoreMerges
		t.nfc = v.NFC
		if len(v.Merges) == 0 {
			return nil, errors.New("gpt2 vocabulary has no merges")
		}
	default:
		return nil, fmt.Errorf("unknown tokenizer model %q (want %q or %q)", v.Model, KindSPM, KindBPE)
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, fmt.Errorf("%d scores for %d tokens", len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("%d token types for %d tokens", len(v.Types), n)
	}
	for _, s := range []struct {
		name string
		id   int32
	}{{"BOS", v.BOS}, {"EOS", v.EOS}, {"UNK", v.UNK}, {"PAD", v.PAD}} {
		if s.id < -1 || int64(s.id) >= int64(n) {
			return nil, fmt.Errorf("%s id %d is outside the vocabulary [0, %d) (use -1 for none)", s.name, s.id, n)
		}
	}
	if v.AddBOS && v.BOS < 0 {
		return nil, errors.New("add_bos_token is set but the vocabulary has no BOS token")
	}
	if v.AddEOS && v.EOS < 0 {
		return nil, errors.New("add_eos_token is set but the vocabulary has no EOS token")
	}
	t.bos, t.eos, t.unk, t.pad = v.BOS, v.EOS, v.UNK, v.PAD
	t.addBOS, t.addEOS = v.AddBOS, v.AddEOS

	t.tokens = make([]string, n)
	t.scores = make([]float32, n)
	t.types = make([]TokenType, n)
	t.ids = make(map[string]int32, n)
	for i, text := range v.Tokens {
		if text == "" {
			// llama.cpp renames empty tokens so that they cannot match
			// (an empty user_defined token would match everywhere).
			text = fmt.Sprintf("[EMPTY_%d]", i)
		}
		if prev, dup := t.ids[text]; dup {
			return nil, fmt.Errorf("duplicate token %q has ids %d and %d", text, prev, i)
		}
		t.ids[text] = int32(i)
		t.maxTokenLen = max(t.maxTokenLen, int32(len(text)))
		t.tokens[i] = text
		if v.Scores != nil {
			t.scores[i] = v.Scores[i]
		}
		t.types[i] = TypeNormal
		if v.Types != nil {
			t.types[i] = TokenType(v.Types[i])
		}
	}
	t.assignAttrs()

	for b := 0; b < 256; b++ {
		t.byteToken[b] = -1
		if t.kind == KindSPM {
			if id, ok := t.ids[fmt.Sprintf("<0x%02X>", b)]; ok {
				t.byteToken[b] = id
				continue
			}
		}
		if id, ok := t.ids[string([]byte{byte(b)})]; ok {
			t.byteToken[b] = id
		}
	}

	if t.kind == KindBPE {
		t.buildMerges(v.Merges)
	}

	t.specials = t.buildSpecialIndex()
	t.buildPieces()
	return t, nil
}

// sortByLengthDesc orders ids by decreasing token length, ties by id, so that
// a longer user_defined token wins over one of its own prefixes.
func sortByLengthDesc(ids []int32, tokens []string) {
	sort.Slice(ids, func(i, j int) bool {
		a, b := ids[i], ids[j]
		if len(tokens[a]) != len(tokens[b]) {
			return len(tokens[a]) > len(tokens[b])
		}
		return a < b
	})
}

// Kind reports the tokenizer family.
func (t *Tokenizer) Kind() Kind { return t.kind }

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// BOS is the beginning-of-sequence id, -1 if none.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS is the end-of-sequence id, -1 if none.
func (t *Tokenizer) EOS() int32 { return t.eos }

// UNK is the unknown-token id, -1 if none.
func (t *Tokenizer) UNK() int32 { return t.unk }

// PAD is the padding id, -1 if none.
func (t *Tokenizer) PAD() int32 { return t.pad }

// AddBOS reports whether prompts for this model should start with BOS
// (tokenizer.ggml.add_bos_token or the model default).
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether the model wants EOS appended to prompts. Encode never
// appends it; callers that want llama.cpp's add_special behaviour do.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// Piece is the raw text of token id as stored in the vocabulary ("▁the",
// "<0x0A>", "Ġthe"), for printing. It is "" for an id outside the vocabulary.
func (t *Tokenizer) Piece(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// Type is the GGUF type of token id (TypeUndefined outside the vocabulary).
func (t *Tokenizer) Type(id int32) TokenType {
	if id < 0 || int(id) >= len(t.types) {
		return TypeUndefined
	}
	return t.types[id]
}

// Score is the SPM merge score of token id (0 outside the vocabulary).
func (t *Tokenizer) Score(id int32) float32 {
	if id < 0 || int(id) >= len(t.scores) {
		return 0
	}
	return t.scores[id]
}

// TokenID looks a token up by its exact text.
func (t *Tokenizer) TokenID(text string) (int32, bool) {
	id, ok := t.ids[text]
	return id, ok
}
