// Test peer only (not product code): CoreDNS v1.14.7 with only the plugins the single-node cluster's DNS uses —
// bind, errors, log, cache, template (NXDOMAIN for every name outside the cluster zone) and kubernetes (the cluster
// zone from the apiserver) — so it builds in a fraction of the full plugin set's time.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/template"
)

func init() {
	// The order plugins run in (a subset of CoreDNS's plugin.cfg order).
	dnsserver.Directives = []string{"bind", "errors", "log", "cache", "template", "kubernetes"}
}

func main() {
	coremain.Run()
}
