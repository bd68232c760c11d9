// Command healthdriver is a DRA kubelet plugin for tests of device health on real nodes.
//
// It publishes a few devices (dev-0, dev-1, ...) of its node in a ResourceSlice, prepares claims on them with a
// static CDI spec (one CDI device per device, setting DRA_HEALTH_DEVICE in the container) and reports each
// device's health to the kubelet through the DRAResourceHealth service. The health of a device is read from a
// file on the node, <health-dir>/<device>, holding Healthy, Unhealthy or Unknown (a missing file reads as
// Healthy). A file holding "silent" leaves the device out of the reports, so that the kubelet's timeout turns it
// Unknown. Reports are sent at least every -interval and within a second of a file's change.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// silent is the file content that leaves a device out of the health reports.
const silent = "silent"

type driver struct {
	name      string
	cdiKind   string
	healthDir string
	pool      string
	devices   []string
	interval  time.Duration
	cancel    context.CancelCauseFunc
}

func main() {
	klog.InitFlags(nil)
	name := flag.String("driver-name", "health.dra-admin.test", "DRA driver name")
	count := flag.Int("devices", 4, "number of devices to publish")
	healthDir := flag.String("health-dir", "/var/lib/dra-admin-health", "directory of the per-device health files")
	cdiDir := flag.String("cdi-dir", "/var/run/cdi", "directory for the CDI spec (empty: no CDI devices)")
	interval := flag.Duration("interval", 5*time.Second, "longest time between two health reports")
	flag.Parse()

	node := os.Getenv("NODE_NAME")
	if node == "" {
		klog.Fatal("NODE_NAME is not set")
	}
	d := &driver{name: *name, healthDir: *healthDir, pool: node, interval: *interval}
	for i := 0; i < *count; i++ {
		d.devices = append(d.devices, fmt.Sprintf("dev-%d", i))
	}
	if err := run(d, node, *cdiDir); err != nil {
		klog.Fatal(err)
	}
}

func run(d *driver, node, cdiDir string) error {
	// The helper listens in the plugin's own directory under the kubelet's plugins directory; it must exist.
	for _, dir := range []string{d.healthDir, filepath.Join(kubeletplugin.KubeletPluginsDir, d.name)} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
	}
	if cdiDir != "" {
		d.cdiKind = d.name + "/device"
		if err := d.writeCDISpec(cdiDir); err != nil {
			return err
		}
	}
	config, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("in-cluster configuration: %w", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	d.cancel = cancel
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-signals
		cancel(fmt.Errorf("signal %v", sig))
	}()

	helper, err := kubeletplugin.Start(ctx, d, kubeletplugin.DriverName(d.name), kubeletplugin.KubeClient(client),
		kubeletplugin.NodeName(node))
	if err != nil {
		return fmt.Errorf("start the kubelet plugin: %w", err)
	}
	defer helper.Stop()
	if err := helper.PublishResources(ctx, d.resources()); err != nil {
		return fmt.Errorf("publish the devices: %w", err)
	}
	klog.InfoS("running", "driver", d.name, "node", node, "devices", d.devices, "healthDir", d.healthDir)
	<-ctx.Done()
	klog.InfoS("stopping", "cause", context.Cause(ctx))
	return nil
}

// resources are the node's devices, in one pool named after the node.
func (d *driver) resources() resourceslice.DriverResources {
	devices := make([]resourceapi.Device, 0, len(d.devices))
	for _, name := range d.devices {
		devices = append(devices, resourceapi.Device{
			Name: name,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"uuid":  {StringValue: ptr.To(fmt.Sprintf("%s-%s", d.pool, name))},
				"index": {IntValue: ptr.To(int64(len(devices)))},
			},
		})
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		d.pool: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}
}

// writeCDISpec writes one CDI device per published device; the spec never changes, so preparing a claim only
// names its devices.
func (d *driver) writeCDISpec(dir string) error {
	var entries []string
	for _, name := range d.devices {
		entries = append(entries, fmt.Sprintf(`{"name":%q,"containerEdits":{"env":["DRA_HEALTH_DEVICE=%s"]}}`,
			name, name))
	}
	spec := fmt.Sprintf(`{"cdiVersion":"0.6.0","kind":%q,"devices":[%s]}`+"\n", d.cdiKind,
		strings.Join(entries, ","))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, strings.ReplaceAll(d.name, "/", "_")+".json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(spec), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// PrepareResourceClaims names the allocated devices of this driver (and their CDI devices) per request.
func (d *driver) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (
	map[types.UID]kubeletplugin.PrepareResult, error) {
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		var devices []kubeletplugin.Device
		if claim.Status.Allocation == nil {
			result[claim.UID] = kubeletplugin.PrepareResult{Err: errors.New("claim is not allocated")}
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != d.name {
				continue
			}
			device := kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device}
			if d.cdiKind != "" {
				device.CDIDeviceIDs = []string{d.cdiKind + "=" + r.Device}
			}
			devices = append(devices, device)
		}
		klog.InfoS("prepared", "claim", klog.KObj(claim), "devices", len(devices))
		result[claim.UID] = kubeletplugin.PrepareResult{Devices: devices}
	}
	return result, nil
}

// UnprepareResourceClaims has nothing to undo: the CDI spec is static.
func (d *driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (
	map[types.UID]error, error) {
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		klog.InfoS("unprepared", "claim", claim.String())
		result[claim.UID] = nil
	}
	return result, nil
}

// HandleError logs background errors and stops the plugin on a fatal one.
func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && d.cancel != nil {
		d.cancel(fmt.Errorf("fatal background error: %w", err))
	}
}

// readHealth reads the health files: the report of the devices not silent, and a digest of every file's content
// (to see a change).
func (d *driver) readHealth() (kubeletplugin.DeviceHealthReport, string) {
	var report kubeletplugin.DeviceHealthReport
	var states []string
	for _, name := range d.devices {
		path := filepath.Join(d.healthDir, name)
		state := string(kubeletplugin.HealthStatusHealthy)
		if data, err := os.ReadFile(path); err == nil {
			state = strings.TrimSpace(string(data))
		}
		states = append(states, name+"="+state)
		if state == silent {
			continue
		}
		health := kubeletplugin.HealthStatus(state)
		switch health {
		case kubeletplugin.HealthStatusHealthy, kubeletplugin.HealthStatusUnhealthy, kubeletplugin.HealthStatusUnknown:
		default:
			health = kubeletplugin.HealthStatusUnknown
		}
		report.Devices = append(report.Devices, kubeletplugin.DeviceHealth{
			PoolName: d.pool, DeviceName: name, Health: health, LastUpdated: time.Now(),
			Message: fmt.Sprintf("%s read from %s", state, path),
		})
	}
	return report, strings.Join(states, " ")
}

// WatchHealthStatus sends the health of the devices not silent at least every interval, and within a second of
// a change of the health files. With every device silent nothing is sent.
func (d *driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	logger := klog.FromContext(ctx)
	logger.Info("kubelet watches the device health")
	var last string
	var sent time.Time
	for {
		report, states := d.readHealth()
		if states != last || time.Since(sent) >= d.interval {
			if states != last {
				logger.Info("device health", "states", states)
			}
			last, sent = states, time.Now()
			if len(report.Devices) > 0 {
				select {
				case <-ctx.Done():
					return nil
				case reports <- report:
				}
			}
		}
		select {
		case <-ctx.Done():
			logger.Info("kubelet stopped watching the device health")
			return nil
		case <-time.After(time.Second):
		}
	}
}
