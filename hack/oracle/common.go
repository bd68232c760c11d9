package main

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// allocatedDevices reads the devices already allocated ("driver/pool/device").
func allocatedDevices(ids []string) (sets.Set[structured.DeviceID], error) {
	allocated := sets.New[structured.DeviceID]()
	for _, id := range ids {
		parts := strings.SplitN(id, "/", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("allocated %q: want driver/pool/device", id)
		}
		allocated.Insert(structured.MakeDeviceID(parts[0], parts[1], parts[2]))
	}
	return allocated, nil
}

// classLister answers the allocator's DeviceClass lookups from the classes given, for the DeviceClass type C of the
// release's resource.k8s.io version.
type classLister[C any, P interface {
	*C
	GetName() string
}] []P

func (c classLister[C, P]) List() ([]P, error) { return c, nil }

func (c classLister[C, P]) Get(name string) (P, error) {
	for _, class := range c {
		if class.GetName() == name {
			return class, nil
		}
	}
	return nil, fmt.Errorf("deviceclass %q not found", name)
}
