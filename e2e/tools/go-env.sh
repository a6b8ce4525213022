# Sourced by the e2e tool builders (build.sh, contour/build.sh, helm/build.sh,
# gateway-api/fetch.sh): puts a Go on PATH, the machine's /usr/local/go when `go` is not
# found (the usual place of a go.dev tarball install), and fails with a message naming the
# caller when there is none. An older Go (>= 1.21) fetches the toolchain a go.mod names.
# shellcheck shell=bash
e2e_go_env() { # caller
	if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then
		export PATH="/usr/local/go/bin:$PATH"
	fi
	command -v go >/dev/null || {
		echo "$1: Go >= 1.24 is needed (Debian bookworm's golang-go is 1.19; install from go.dev, or any Go >= 1.21 fetches the right toolchain itself)" >&2
		return 1
	}
	export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
}
