//go:build dra137

package main

import "k8s.io/dynamic-resource-allocation/cel"

// celDevice is the case's device as 1.37's allocator hands it to CEL: the API's own attribute and capacity maps.
func celDevice(c celCase) (cel.Device, error) {
	return cel.Device{Driver: c.Device.Driver, AllowMultipleAllocations: c.Device.AllowMultipleAllocations,
		Attributes: c.Device.Attributes, Capacity: c.Device.Capacity}, nil
}
