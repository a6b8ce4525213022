//go:build tools

// Package tools pins the control-plane binaries the sluice e2e harness builds.
// build.sh runs `go build` on each of these packages; the blank imports keep
// them (and their dependencies) in go.mod/go.sum.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
