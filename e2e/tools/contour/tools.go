//go:build tools

// Package tools pins the Contour release the side-by-side benchmark
// (benches/contour.rs) runs beside sluice. build.sh runs `go build` on it; the
// blank import keeps it (and its dependencies) in go.mod/go.sum.
package tools

import (
	_ "github.com/projectcontour/contour/cmd/contour"
)
