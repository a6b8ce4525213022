//go:build tools

// Package tools pins the Helm release the e2e test of charts/sluice renders and
// lints the chart with. build.sh runs `go build` on it; the blank import keeps
// it (and its dependencies) in go.mod/go.sum.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
