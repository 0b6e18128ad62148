package safetensors

import (
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"unicode/utf8"
)

// IndexName is the file that lists a sharded model's shards.
const IndexName = "model.safetensors.index.json"

// Index is a parsed model.safetensors.index.json.
type Index struct {
	// Path names the index in errors.
	Path string
	// WeightMap maps each tensor to the shard file that holds it.
	WeightMap map[string]string
	// Shards are the distinct shard file names, sorted.
	Shards []string
	// Metadata is the "metadata" object (total_size, and for mlx-lm
	// total_parameters), kept as JSON: it describes, it does not decide.
	Metadata map[string]json.RawMessage

	at map[string]int64 // byte offset of each weight_map entry, for messages
}

// ParseIndex parses the contents of an index file (named path in errors).
// A shard name must be a plain file name in the model's directory: an
// index is input, and "../" in it must not reach other files.
func ParseIndex(path string, data []byte) (*Index, error) {
	if !utf8.Valid(data) {
		return nil, errorf(path, "", int64(firstInvalidUTF8(data)), "not valid UTF-8")
	}
	trimmed := strings.TrimLeft(string(data), " \t\r\n")
	if !strings.HasPrefix(trimmed, "{") {
		return nil, errorf(path, "", int64(len(data)-len(trimmed)), "not a JSON object")
	}
	x := &Index{Path: path, WeightMap: map[string]string{}, at: map[string]int64{}}
	var mapAt int64 = -1
	err := walkObject(path, data, 0, true, func(key string, val []byte, at int64) error {
		switch key {
		case "weight_map":
			mapAt = at
			if describe(val) != "an object" {
				return errorf(path, "", at, "weight_map is %s, not an object", describe(val))
			}
			return walkObject(path, val, at, false, func(name string, v []byte, vat int64) error {
				var shard string
				if json.Unmarshal(v, &shard) != nil {
					return errorf(path, name, vat, "weight_map gives %s, not a shard file name", describe(v))
				}
				if err := plainName(shard); err != nil {
					return errorf(path, name, vat, "weight_map shard %s %v", quote(shard), err)
				}
				if name == "" {
					return errorf(path, "", vat, "weight_map has an empty tensor name")
				}
				x.WeightMap[name], x.at[name] = shard, vat
				return nil
			})
		case "metadata":
			if describe(val) == "null" {
				return nil
			}
			if err := json.Unmarshal(val, &x.Metadata); err != nil {
				return errorf(path, "", at, "metadata is %s, not an object", describe(val))
			}
		}
		// Other keys are ignored: the index's job is weight_map, and
		// writers add their own bookkeeping beside it.
		return nil
	})
	if err != nil {
		return nil, err
	}
	if mapAt < 0 {
		return nil, errorf(path, "", -1, "no weight_map")
	}
	if len(x.WeightMap) == 0 {
		return nil, errorf(path, "", mapAt, "weight_map is empty")
	}
	seen := map[string]bool{}
	for _, s := range x.WeightMap {
		if !seen[s] {
			seen[s] = true
			x.Shards = append(x.Shards, s)
		}
	}
	sort.Strings(x.Shards)
	return x, nil
}

// EntryOffset is the byte offset of tensor's weight_map entry in the
// index file, or -1.
func (x *Index) EntryOffset(tensor string) int64 {
	if at, ok := x.at[tensor]; ok {
		return at
	}
	return -1
}

// plainName accepts a file name without any directory part.
func plainName(s string) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case s == "." || s == "..":
		return errors.New("is not a file name")
	case strings.ContainsAny(s, "/\\\x00"):
		return errors.New("is not a plain file name in the model's directory")
	}
	return nil
}

// Set is a model's tensors across its files: one file, or the shards of an
// index.
type Set struct {
	// Index is nil for a model in one file without an index.
	Index *Index
	// Files are the shards in Index.Shards order (the one file, without an
	// index).
	Files []*File

	where map[string]loc
	names []string
}

type loc struct {
	f *File
	t *Tensor
}

// NewSet joins an index with its opened shards (shards[i] is the file
// named idx.Shards[i]), or makes the set of one file when idx is nil
// (shards holds that file). Every tensor of the weight_map must be in the
// shard it names, and every tensor of a shard in the weight_map under that
// shard: a file and an index that disagree describe two different models,
// and which one is meant cannot be told.
func NewSet(idx *Index, shards []*File) (*Set, error) {
	s := &Set{Index: idx, Files: shards, where: map[string]loc{}}
	if idx == nil {
		if len(shards) != 1 {
			return nil, errors.New("safetensors: a model without an index is one file")
		}
		f := shards[0]
		for i := range f.Tensors {
			s.where[f.Tensors[i].Name] = loc{f, &f.Tensors[i]}
		}
	} else {
		if len(shards) != len(idx.Shards) {
			return nil, errorf(idx.Path, "", -1, "%d shards given for the %d the index names", len(shards), len(idx.Shards))
		}
		byName := map[string]*File{}
		for i, name := range idx.Shards {
			byName[name] = shards[i]
		}
		// Sorted, so that the first disagreement reported does not depend
		// on map order.
		names := make([]string, 0, len(idx.WeightMap))
		for n := range idx.WeightMap {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			shard := idx.WeightMap[n]
			f := byName[shard]
			t, ok := f.Tensor(n)
			if !ok {
				return nil, errorf(idx.Path, n, idx.EntryOffset(n), "weight_map puts it in %s, which has no such tensor", quote(shard))
			}
			s.where[n] = loc{f, t}
		}
		for i, name := range idx.Shards {
			f := shards[i]
			for j := range f.Tensors {
				t := &f.Tensors[j]
				switch want, ok := idx.WeightMap[t.Name]; {
				case !ok:
					return nil, errorf(f.Path, t.Name, t.At, "the shard holds it but %s does not list it", IndexName)
				case want != name:
					return nil, errorf(f.Path, t.Name, t.At, "the shard holds it but %s puts it in %s", IndexName, quote(want))
				}
			}
		}
	}
	s.names = make([]string, 0, len(s.where))
	for n := range s.where {
		s.names = append(s.names, n)
	}
	sort.Strings(s.names)
	return s, nil
}

// Names lists every tensor, sorted.
func (s *Set) Names() []string { return s.names }

// Tensor returns the named tensor and the file that holds it.
func (s *Set) Tensor(name string) (*Tensor, *File, bool) {
	l, ok := s.where[name]
	return l.t, l.f, ok
}

// Data returns the named tensor's bytes (File.Data), nil when there is no
// such tensor or its file was closed.
func (s *Set) Data(name string) []byte {
	l, ok := s.where[name]
	if !ok {
		return nil
	}
	return l.f.Data(l.t)
}

// Close closes every file.
func (s *Set) Close() error {
	var errs []error
	for _, f := range s.Files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
