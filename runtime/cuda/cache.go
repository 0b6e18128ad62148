package cuda

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// cacheFormat versions the key: bump it when what is cached (PTX today)
// or the NVRTC options change.
const cacheFormat = "minerva-cuda-ptx-1"

// cacheKey names a compiled module on disk: the SHA-256 of the source, the
// device's compute capability (NVRTC compiles for exactly that arch) and the
// driver version (cuDriverGetVersion, e.g. 12040: a new driver may JIT or
// accept different PTX). Every field is length-prefixed, so no two distinct
// inputs hash the same bytes.
func cacheKey(source string, ccMajor, ccMinor, driverVersion int) string {
	h := sha256.New()
	var n [8]byte
	put := func(b []byte) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	put([]byte(cacheFormat))
	put([]byte(source))
	put([]byte(fmt.Sprintf("compute capability %d.%d", ccMajor, ccMinor)))
	put([]byte(fmt.Sprint(driverVersion)))
	return hex.EncodeToString(h.Sum(nil))
}

// moduleCache is the on-disk cache of compiled modules, one file per key.
// A zero Dir disables it.
type moduleCache struct {
	Dir string
}

// defaultModuleCache is dir/cuda (Options.CacheDir), or minerva/cuda in
// the user cache directory; disabled when neither exists.
func defaultModuleCache(dir string) moduleCache {
	if dir != "" {
		return moduleCache{Dir: filepath.Join(dir, "cuda")}
	}
	if d, err := os.UserCacheDir(); err == nil {
		return moduleCache{Dir: filepath.Join(d, "minerva", "cuda")}
	}
	return moduleCache{}
}

func (c moduleCache) path(key string) string { return filepath.Join(c.Dir, key+".ptx") }

// load returns the module cached under key; ok is false when there is none
// (or the cache is disabled).
func (c moduleCache) load(key string) (ptx []byte, ok bool, err error) {
	if c.Dir == "" {
		return nil, false, nil
	}
	b, err := os.ReadFile(c.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("cuda: module cache: %w", err)
	}
	return b, true, nil
}

// store writes the module under key atomically (a temporary file renamed
// into place), so a concurrent reader sees the whole module or none.
func (c moduleCache) store(key string, ptx []byte) error {
	if c.Dir == "" {
		return nil
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("cuda: module cache: %w", err)
	}
	f, err := os.CreateTemp(c.Dir, key+".*.tmp")
	if err != nil {
		return fmt.Errorf("cuda: module cache: %w", err)
	}
	_, werr := f.Write(ptx)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), c.path(key))
	}
	if werr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("cuda: module cache: %w", werr)
	}
	return nil
}
