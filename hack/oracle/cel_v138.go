//go:build dra138

package main

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
)

// celDevice is the case's device as the allocator hands it to CEL from 1.38: a device of a converted slice (the
// allocator's own attribute and capacity types, with the slice's unique strings).
func celDevice(c celCase) (cel.Device, error) {
	slice := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: c.Device.Driver,
		Pool: resourceapi.ResourcePool{Name: "pool", ResourceSliceCount: 1},
		Devices: []resourceapi.Device{{Name: "device", Attributes: c.Device.Attributes,
			Capacity: c.Device.Capacity, AllowMultipleAllocations: c.Device.AllowMultipleAllocations}}}}
	converted, err := internalSlices([]*resourceapi.ResourceSlice{slice})
	if err != nil {
		return cel.Device{}, err
	}
	device := converted[0].Spec.Devices[0]
	return cel.Device{Driver: c.Device.Driver, AllowMultipleAllocations: device.AllowMultipleAllocations,
		Attributes: device.Attributes, Capacity: device.Capacity,
		LookupUniqueString: converted[0].LookupUniqueString}, nil
}
