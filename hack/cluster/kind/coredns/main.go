// CoreDNS for the kind node images, compiled from the release pinned in
// hack/cluster/versions.env with the plugins the Corefile of a kubeadm cluster
// uses (errors, health, ready, kubernetes, prometheus, forward, cache, loop,
// reload, loadbalance), and log for debugging. CoreDNS's own main links every
// plugin, with the SDKs of each cloud DNS service: a much longer build for
// code a kind cluster never runs.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	coremain.Run()
}
