//go:build !(linux && amd64)

package amx

import "errors"

func requestTileData() error { return errors.New("amx: tile state is only requested on Linux/amd64") }
