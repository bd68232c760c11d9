// nodenet is the pod network of the kind backend's nodes (hack/cluster/kind): kind's own
// kindnetd is not served by the Go module proxy, so this small daemon does its job.
//
// On every node (a hostNetwork DaemonSet) it reads the Node objects from the API server and
//   - writes the node's CNI configuration (ptp + host-local on the node's podCIDR, portmap)
//     once the node has a podCIDR, so containerd reports the network ready;
//   - routes every other node's podCIDR via that node's InternalIP (`ip route replace`).
//
// Pods reach everything outside their node's podCIDR masqueraded to the node's address
// (ptp's ipMasq), so the host's bridge filtering sees node addresses only.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

type nodeList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			PodCIDR  string   `json:"podCIDR"`
			PodCIDRs []string `json:"podCIDRs"`
		} `json:"spec"`
		Status struct {
			Addresses []struct {
				Type    string `json:"type"`
				Address string `json:"address"`
			} `json:"addresses"`
		} `json:"status"`
	} `json:"items"`
}

type node struct {
	name, podCIDR, internalIP string
}

func getenv(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

func apiClient() (*http.Client, string, error) {
	ca, err := os.ReadFile(filepath.Join(serviceAccountDir, "ca.crt"))
	if err != nil {
		return nil, "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, "", fmt.Errorf("no certificate in %s/ca.crt", serviceAccountDir)
	}
	// kind sets CONTROL_PLANE_ENDPOINT (host:port): the Service network needs kube-proxy,
	// which may not run before the node network does.
	endpoint := os.Getenv("CONTROL_PLANE_ENDPOINT")
	if endpoint == "" {
		endpoint = os.Getenv("KUBERNETES_SERVICE_HOST") + ":" + os.Getenv("KUBERNETES_SERVICE_PORT")
	}
	client := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return client, "https://" + endpoint, nil
}

func listNodes(client *http.Client, base string) ([]node, error) {
	token, err := os.ReadFile(filepath.Join(serviceAccountDir, "token"))
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest("GET", base+"/api/v1/nodes", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/nodes: %s", resp.Status)
	}
	var list nodeList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	var nodes []node
	for _, item := range list.Items {
		n := node{name: item.Metadata.Name, podCIDR: item.Spec.PodCIDR}
		for _, cidr := range item.Spec.PodCIDRs {
			if !strings.Contains(cidr, ":") {
				n.podCIDR = cidr
				break
			}
		}
		for _, a := range item.Status.Addresses {
			if a.Type == "InternalIP" && !strings.Contains(a.Address, ":") {
				n.internalIP = a.Address
				break
			}
		}
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].name < nodes[j].name })
	return nodes, nil
}

func cniConfig(podCIDR string) []byte {
	conf := map[string]interface{}{
		"cniVersion": "1.0.0",
		"name":       "nodenet",
		"plugins": []interface{}{
			map[string]interface{}{
				"type":   "ptp",
				"ipMasq": true,
				"ipam": map[string]interface{}{
					"type":    "host-local",
					"dataDir": "/run/cni-ipam-state",
					"routes":  []interface{}{map[string]string{"dst": "0.0.0.0/0"}},
					"ranges":  [][]map[string]string{{{"subnet": podCIDR}}},
				},
			},
			map[string]interface{}{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	out, _ := json.MarshalIndent(conf, "", "  ")
	return append(out, '\n')
}

// writeIfChanged writes path atomically when its content differs; true when it wrote.
func writeIfChanged(path string, content []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return false, nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, path)
}

func main() {
	self := os.Getenv("NODE_NAME")
	if self == "" {
		log.Fatal("NODE_NAME is not set (downward API spec.nodeName)")
	}
	confPath := filepath.Join(getenv("CNI_CONF_DIR", "/etc/cni/net.d"), "10-nodenet.conflist")
	interval, err := time.ParseDuration(getenv("SYNC_INTERVAL", "2s"))
	if err != nil {
		log.Fatalf("SYNC_INTERVAL: %v", err)
	}
	client, base, err := apiClient()
	if err != nil {
		log.Fatalf("API client: %v", err)
	}
	routed := map[string]string{} // podCIDR -> gateway, as last applied
	for {
		nodes, err := listNodes(client, base)
		if err != nil {
			log.Printf("listing nodes: %v", err)
		}
		for _, n := range nodes {
			switch {
			case n.podCIDR == "":
				continue
			case n.name == self:
				wrote, err := writeIfChanged(confPath, cniConfig(n.podCIDR))
				if err != nil {
					log.Printf("writing %s: %v", confPath, err)
				} else if wrote {
					log.Printf("wrote %s for podCIDR %s", confPath, n.podCIDR)
				}
			case n.internalIP != "" && routed[n.podCIDR] != n.internalIP:
				out, err := exec.Command("ip", "route", "replace", n.podCIDR, "via", n.internalIP).CombinedOutput()
				if err != nil {
					log.Printf("route %s via %s (node %s): %v: %s", n.podCIDR, n.internalIP, n.name, err, out)
					continue
				}
				routed[n.podCIDR] = n.internalIP
				log.Printf("route %s via %s (node %s)", n.podCIDR, n.internalIP, n.name)
			}
		}
		time.Sleep(interval)
	}
}
