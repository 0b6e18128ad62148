package tokenizer

import (
	"slices"
	"strings"
)

// fragment is a piece of the input: raw text to tokenize, or (when id >= 0) a
// special token that was found literally in the text.
type fragment struct {
	text string
	id   int32
}

// specialIndex holds the tokens that can be cut out of input text before the
// model's algorithm runs: llama.cpp's cache_special_tokens, every token with
// the control, user_defined or unknown attribute, longest text first (ties
// by id). A trie over their texts finds, in one pass, which of them occur in
// a text at all, so that the exact (and per token costly) partition only runs
// for those.
type specialIndex struct {
	ids   []int32 // in partition order
	nodes []trieNode
	first [256]bool // bytes that start a special token
}

type trieNode struct {
	edges []trieEdge
	rank  int32 // index into ids of the token ending here, -1 for none
}

type trieEdge struct {
	b    byte
	node int32
}

func (t *Tokenizer) buildSpecialIndex() specialIndex {
	var x specialIndex
	for id, a := range t.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			x.ids = append(x.ids, int32(id))
		}
	}
	sortByLengthDesc(x.ids, t.tokens)
	x.nodes = []trieNode{{rank: -1}}
	for rank, id := range x.ids {
		n := int32(0)
		x.first[t.tokens[id][0]] = true
		for _, b := range []byte(t.tokens[id]) {
			n = x.child(n, b, true)
		}
		x.nodes[n].rank = int32(rank)
	}
	return x
}

// child returns the node below n for byte b, adding it when add is set; -1
// when there is none.
func (x *specialIndex) child(n int32, b byte, add bool) int32 {
	for _, e := range x.nodes[n].edges {
		if e.b == b {
			return e.node
		}
	}
	if !add {
		return -1
	}
	c := int32(len(x.nodes))
	x.nodes = append(x.nodes, trieNode{rank: -1})
	x.nodes[n].edges = append(x.nodes[n].edges, trieEdge{b: b, node: c})
	return c
}

// present returns, in partition order, the special tokens that occur in text
// and are wanted: all of them with parseSpecial, else only those that are
// user_defined and neither control nor unknown.
func (t *Tokenizer) presentSpecials(text string, parseSpecial bool) []int32 {
	x := &t.specials
	if len(x.ids) == 0 {
		return nil
	}
	var ranks []int32
	for i := 0; i < len(text); i++ {
		if !x.first[text[i]] {
			continue // the common case: no special token starts here
		}
		for n, j := int32(0), i; j < len(text); j++ {
			if n = x.child(n, text[j], false); n < 0 {
				break
			}
			if r := x.nodes[n].rank; r >= 0 && t.specialWanted(x.ids[r], parseSpecial) {
				ranks = append(ranks, r)
			}
		}
	}
	if len(ranks) == 0 {
		return nil
	}
	slices.Sort(ranks)
	ranks = slices.Compact(ranks)
	ids := make([]int32, len(ranks))
	for i, r := range ranks {
		ids[i] = x.ids[r]
	}
	return ids
}

// specialWanted: without special-token parsing llama.cpp skips control and
// unknown tokens but still cuts out user_defined ones.
func (t *Tokenizer) specialWanted(id int32, parseSpecial bool) bool {
	return parseSpecial || t.attrs[id]&(attrControl|attrUnknown) == 0
}

// partition is llama.cpp's tokenizer_st_partition: each special token, longest
// first, is searched in what is still raw text and every occurrence, leftmost
// first, becomes a token of its own. The order matters: a longer token wins
// over a shorter one wherever they overlap, even if the shorter one starts
// earlier.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	frags := []fragment{{text: text, id: -1}}
	for _, id := range t.presentSpecials(text, parseSpecial) {
		tok := t.tokens[id]
		var next []fragment
		for _, f := range frags {
			if f.id >= 0 || !strings.Contains(f.text, tok) {
				next = append(next, f)
				continue
			}
			s := f.text
			for {
				i := strings.Index(s, tok)
				if i < 0 {
					break
				}
				if i > 0 {
					next = append(next, fragment{text: s[:i], id: -1})
				}
				next = append(next, fragment{id: id})
				s = s[i+len(tok):]
			}
			if s != "" {
				next = append(next, fragment{text: s, id: -1})
			}
		}
		frags = next
	}
	return frags
}
