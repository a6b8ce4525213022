//go:build tools

// Package tools pins the kwok release the e2e harness fakes a kubelet with (Pods on a Node
// with no kubelet become Running, get IPs, serve logs). build.sh runs `go build` on it; the
// blank import keeps it (and its dependencies) in go.mod/go.sum.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
