module github.com/minerva-llm/minerva

go 1.26.0

require (
	github.com/alecthomas/kong v1.17.0
	github.com/ebitengine/purego v0.9.1
	github.com/mmcloughlin/avo v0.5.0
	github.com/stretchr/testify v1.12.1
	golang.org/x/sys v0.49.0
)

require (
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/schollz/progressbar/v3 v3.19.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/mod v0.6.0 // indirect
	golang.org/x/term v0.47.0 // indirect
	golang.org/x/tools v0.2.0 // indirect
)
