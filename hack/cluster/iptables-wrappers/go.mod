// The API of sigs.k8s.io/iptables-wrappers/pkg/iptables that Kubernetes 1.38 imports, which the Go module proxy does
// not serve: this project's adapter over Kubernetes' own in-tree package of 1.37 (k8s.io/kubernetes/pkg/util/iptables),
// which hack/cluster/build copies from the module cache into internal/intree at build time. Used only to build
// 1.38's kubelet and kube-proxy here (a replace directive of the build's wrapper module); never shipped.
module sigs.k8s.io/iptables-wrappers

go 1.24
