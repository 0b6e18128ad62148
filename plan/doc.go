// Package plan reads and writes plan files, the output of
// `minervac compile -o plan.bin` and the input of `minervac run plan.bin`:
// a compiled graph with everything needed to run it (tokenizer, config,
// memory plan, sampling defaults, per-target kernels) and either the
// weights themselves or a checked reference to the model file holding them.
//
// A plan outlives the process that wrote it, so every part is versioned and
// checksummed, and every failure to read one is a one-line *Error wrapping
// one of the Err* sentinels: not a plan, another format version, truncated
// (naming the section and its byte range), checksum mismatch (naming the
// section), missing or undecodable section, another target. (A referenced
// model file that is missing or has changed is frontend.Open's error: it
// opens that file.)
//
// The package sits on a floor below the frontends (docs/ARCHITECTURE.md):
// it imports only ir, tokenizer and the mapping helper, so that anything
// (frontend.Open, a runtime, a tool) can read a plan without the GGUF
// reader or the architecture builders. The architecture summary a plan
// records, Config, is defined here for that reason.
//
// # File layout (format version 3)
//
// All integers are little-endian. A string is a u32 byte length and the
// bytes (no terminator, any bytes).
//
//	offset  size  field
//	0       8     magic "MNRVPLAN"
//	8       4     u32 format version (3)
//	12      4     u32 flags: bit 0 = weights embedded; other bits must be 0
//	16      4     u32 H, length of the header body (at most 1 MiB)
//	20      4     u32 CRC-32C of bytes [0, 20) followed by the header body
//	24      H     header body:
//	                u64 file size (the end of the last section)
//	                string compiler version ("minervac dev")
//	                string target ("reference", "goasm", "cuda", "metal")
//	                model reference: string absolute path, u64 size,
//	                  string hex SHA-256 of the model's bytes [0, DataOffset),
//	                  string general.name, string general.architecture
//	                  (a model directory: see ModelRef), string weights
//	                  digest ("crc32c:" and 8 hex digits over the tensor
//	                  data the graph uses, or "")
//	                u32 section count, then per section:
//	                  string name, u64 offset, u64 length, u32 CRC-32C
//
// Sections follow, in table order, each at a file offset that is a
// multiple of 64, zero padding between them; the file ends at the end of
// the last. A reader checks magic, then version (so a future layout is
// reported as a version, not as corruption), then the header checksum, then
// that the table is ordered, aligned and inside the file, then every
// section's checksum, then the contents. Checksums are CRC-32C (Castagnoli,
// hardware-accelerated by hash/crc32): SHA-256 would make opening a plan
// with gigabytes of embedded weights noticeably slow, and the checks are
// against corruption, not tampering.
//
// Sections, in the order Write emits them:
//
//	graph           the compiled graph in the IR text form (ir.Print; read
//	                back with ir.Parse, which verifies it)
//	tokenizer       tokenizer.Vocab, binary: string model, string pre;
//	                tokens (u32 count, strings), scores (u32 count, f32
//	                bits), types (u32 count, i32), merges (u32 count,
//	                strings), where a count of 0xFFFFFFFF is a nil list;
//	                i32 BOS, EOS, UNK, PAD; u8 flags (1 AddBOS, 2 AddEOS,
//	                4 NoSpacePrefix). Binary because token texts need not be
//	                UTF-8 and scores may be infinite.
//	config          JSON {"config": Config, "context": default KV length}
//	sampling        JSON of Sampling
//	memory          JSON of Memory: the plan-memory pass's arena figures and
//	                the KV and weight bytes; checked against the graph
//	kernels/TARGET  opaque bytes for one target (none for reference)
//	weights         only when embedded: u32 count, then per tensor string
//	                name, u64 offset, u64 length (relative to the section,
//	                multiples of 64, increasing), then the tensor bytes as
//	                stored in the model file (quantized blocks as is)
//
// The graph, tokenizer, config, sampling and memory sections are required;
// a weights section exactly when flag bit 0 is set. Unknown sections are
// errors: a new kind of section is a new format version.
//
// # Referenced and embedded weights
//
// Without embedded weights a plan names the model file by absolute path,
// size and SHA-256 over its header and tensor table (ModelRef).
// frontend.Open resolves the reference: it checks that the file is still
// there, with the same size and hash (a few kilobytes to megabytes, so
// cheap), as it maps it. Version 2 lets the reference name a model
// directory (config.json, SafeTensors shards): its path, the size of the
// files read and a SHA-256 over them (the JSON files whole, each shard's
// header). A version 1 reader would take such a plan's directory for a
// changed file, so the version changed with it; a version 1 plan is
// refused with the version error (recompile). Version 3 adds the weights
// digest to the reference: CRC-32C over the bytes of every weight the graph
// uses, in name order. Open does not check it (it would read every weight);
// `minervac inspect --verify` does, and so finds tensor bytes edited in place
// behind an unchanged header. With embedded weights the plan stands alone and
// File serves the tensors from its own read-only mapping: every tensor is
// 64-byte aligned in the file, so backends can use it in place.
package plan
