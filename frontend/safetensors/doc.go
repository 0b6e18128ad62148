// Package safetensors reads (and, for tests and synthetic models, writes)
// the SafeTensors container that Hugging Face and MLX model directories
// keep their weights in:
//
//	offset  size  field
//	0       8     u64 little-endian N, the length of the JSON header
//	8       N     JSON object: "__metadata__" (string to string, optional)
//	              and one entry per tensor, {"dtype": "BF16", "shape":
//	              [rows, cols], "data_offsets": [begin, end]}
//	8+N     …     the tensor data; data_offsets are relative to byte 8+N
//
// The safetensors library pads the header with spaces to a multiple of 8,
// so its tensors are 8-byte aligned; mlx's writer does not pad, so an MLX
// file's tensors generally start at odd offsets. This package hands out
// tensor bytes as []byte slices of the mapping and never reinterprets them
// as wider types: whoever decodes them reads bytes (encoding/binary) or
// copies what is misaligned.
//
// A sharded model lists its files in model.safetensors.index.json
// ({"metadata": {...}, "weight_map": {tensor: file}}); ParseIndex reads it
// and NewSet joins the index with the opened shards, checking that each
// names the same tensors.
//
// Every length, offset, shape and dtype is checked before it is used, and
// nothing is allocated on a size that the input alone claims: the header
// length is bounded by the file's size, a shape by the bytes its
// data_offsets span. A malformed file is a one-line *Error naming the
// file, the tensor and the byte offset. Like frontend/gguf, the package
// opens nothing itself: OpenFile maps a file frontend.Open has opened.
package safetensors
