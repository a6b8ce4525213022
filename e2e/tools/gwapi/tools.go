//go:build tools

// Package tools pins the Gateway API release whose conformance suite `make conformance`
// (e2e/conformance.sh) runs against sluice. build.sh runs `go test -c` on the upstream
// package sigs.k8s.io/gateway-api/conformance (unmodified) and `go build` on its echo-basic
// backend, and takes the release's CustomResourceDefinitions from sigs.k8s.io/gateway-api
// (pkg/consts holds the bundle version the suite checks them against); the blank imports
// keep them (and their dependencies) in go.mod/go.sum.
package tools

import (
	_ "sigs.k8s.io/gateway-api/pkg/consts"
	_ "sigs.k8s.io/gateway-api/conformance"
	_ "sigs.k8s.io/gateway-api/conformance/echo-basic"
)
