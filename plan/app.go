package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"slices"

	"github.com/minerva-llm/minerva/internal/mmap"
)

// An app is a program with a plan appended (minervac build), as llamafile
// carries its weights: the runtime binary unchanged, zero padding to a
// multiple of AppAlign, an embedded plan, the app's metadata (opaque bytes
// for the program: minervac keeps the chat template there), and a
// fixed-size trailer at the very end that says where each is. The program
// finds the trailer in its own executable at start and maps the plan from
// there, so every embedded tensor is 64-byte aligned in memory and used in
// place.
//
// Trailer (AppTrailerSize bytes, little-endian):
//
//	offset  size  field
//	0       8     u64 plan offset in the file (a multiple of AppAlign)
//	8       8     u64 plan length
//	16      8     u64 metadata length (the metadata follows the plan and
//	              ends where the trailer starts)
//	24      32    SHA-256 of the plan's fixed header and header body
//	56      4     u32 CRC-32C of the metadata
//	60      4     u32 trailer version (1)
//	64      4     u32 reserved, 0
//	68      4     u32 CRC-32C of bytes [0, 68)
//	72      8     magic "MNRVAPP1"
//
// The header hash ties the trailer to the plan it was written with; the
// plan's own checksums (every section's CRC-32C, weights included, checked
// by Parse) cover the rest.
const (
	AppMagic       = "MNRVAPP1"
	AppTrailerSize = 80
	// AppAlign is the alignment of the plan inside the program: the
	// largest page size of the platforms we build for (arm64 kernels with
	// 64 KiB pages), so a mapping may start at the plan.
	AppAlign       = 64 << 10
	appVersion     = 1
	appTrailerBody = 68
)

// ErrNoApp is the error of an executable that carries no plan trailer.
var ErrNoApp = errors.New("no Minerva app trailer")

// AppTrailer is a decoded app trailer.
type AppTrailer struct {
	Offset, Length int64 // the plan
	MetaLength     int64 // the metadata, after the plan
	HeaderSHA256   [32]byte
	MetaCRC        uint32
}

// Marshal encodes the trailer.
func (t AppTrailer) Marshal() []byte {
	b := make([]byte, 0, AppTrailerSize)
	b = binary.LittleEndian.AppendUint64(b, uint64(t.Offset))
	b = binary.LittleEndian.AppendUint64(b, uint64(t.Length))
	b = binary.LittleEndian.AppendUint64(b, uint64(t.MetaLength))
	b = append(b, t.HeaderSHA256[:]...)
	b = binary.LittleEndian.AppendUint32(b, t.MetaCRC)
	b = binary.LittleEndian.AppendUint32(b, appVersion)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return append(b, AppMagic...)
}

// MetaChecksum is the CRC-32C an app trailer records of its metadata.
func MetaChecksum(meta []byte) uint32 { return crc32.Checksum(meta, castagnoli) }

// ReadAppTrailer reads and checks the trailer at the end of fh (size bytes
// long): ErrNoApp when the file does not end with the magic, a one-line
// error when the trailer is damaged or does not fit the file.
func ReadAppTrailer(fh io.ReaderAt, size int64) (AppTrailer, error) {
	var t AppTrailer
	if size < AppTrailerSize {
		return t, ErrNoApp
	}
	b := make([]byte, AppTrailerSize)
	if _, err := fh.ReadAt(b, size-AppTrailerSize); err != nil {
		return t, err
	}
	if string(b[appTrailerBody+4:]) != AppMagic {
		return t, ErrNoApp
	}
	if stored, got := binary.LittleEndian.Uint32(b[appTrailerBody:]), crc32.Checksum(b[:appTrailerBody], castagnoli); stored != got {
		return t, fmt.Errorf("the app trailer is corrupt (stored crc32c %08x, computed %08x)", stored, got)
	}
	if v := binary.LittleEndian.Uint32(b[60:]); v != appVersion {
		return t, fmt.Errorf("app trailer version %d (this runtime reads version %d): rebuild the app", v, appVersion)
	}
	off, n, meta := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])
	end := uint64(size - AppTrailerSize)
	if off%AppAlign != 0 || off > end || n > end-off || meta != end-off-n || n > math.MaxInt {
		return t, fmt.Errorf("the app payload is truncated or corrupt: the trailer places the plan at bytes [%d, %d+%d) and %d bytes of metadata after it, the file has %d bytes before the trailer", off, off, n, meta, end)
	}
	t.Offset, t.Length, t.MetaLength = int64(off), int64(n), int64(meta)
	copy(t.HeaderSHA256[:], b[24:56])
	t.MetaCRC = binary.LittleEndian.Uint32(b[56:])
	return t, nil
}

// HeaderSHA256 is the SHA-256 of a plan's fixed header and header body, the
// start of data (what an app trailer records).
func HeaderSHA256(data []byte) ([32]byte, error) {
	if len(data) < prefixSize {
		return [32]byte{}, errorf(ErrTruncated, "truncated: %d bytes, inside the %d-byte fixed header", len(data), prefixSize)
	}
	end := prefixSize + uint64(binary.LittleEndian.Uint32(data[16:]))
	if end > uint64(len(data)) {
		return [32]byte{}, errorf(ErrTruncated, "truncated inside the header: it spans bytes [0, %d) but there are %d bytes", end, len(data))
	}
	return sha256.Sum256(data[:end]), nil
}

// OpenApp maps the plan an app carries (fh is the program, its trailer
// found by ReadAppTrailer) and decodes it as Parse does. The mapping covers
// the whole file, so the plan's 64-byte aligned tensors stay aligned in
// memory. Errors are one line naming the program.
func OpenApp(fh *os.File) (*File, error) {
	path := fh.Name()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("app %s: %w", path, err)
	}
	t, err := ReadAppTrailer(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st.Size() > math.MaxInt {
		return nil, fmt.Errorf("app %s is too large to map (%d bytes)", path, st.Size())
	}
	data, unmap, err := mmap.File(fh, int(st.Size()))
	if err != nil {
		return nil, fmt.Errorf("app %s: %w", path, err)
	}
	payload := data[t.Offset : t.Offset+t.Length : t.Offset+t.Length]
	meta := data[t.Offset+t.Length : t.Offset+t.Length+t.MetaLength]
	sum, err := HeaderSHA256(payload)
	if got := crc32.Checksum(meta, castagnoli); err == nil && got != t.MetaCRC {
		err = fmt.Errorf("checksum mismatch in the app metadata (stored crc32c %08x, computed %08x): the payload is corrupt", t.MetaCRC, got)
	}
	if err == nil && sum != t.HeaderSHA256 {
		err = fmt.Errorf("the plan header does not match the app trailer's hash (sha256 %x…, trailer %x…): the payload is corrupt", sum[:6], t.HeaderSHA256[:6])
	}
	var p *Plan
	if err == nil {
		p, err = Parse(payload, ParseOptions{})
	}
	if err == nil && !p.Embedded {
		err = fmt.Errorf("the app's plan does not embed its weights")
	}
	if err != nil {
		_ = unmap()
		return nil, fmt.Errorf("app %s: %w", path, err)
	}
	return &File{Plan: p, Path: path, App: slices.Clone(meta), unmap: unmap}, nil
}
