//go:build dra138

package main

import (
	"context"
	"encoding/json"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
)

type celCase struct {
	Expression string `json:"expression"`
	Device     struct {
		Driver                   string                                                    `json:"driver"`
		AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations"`
		Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
		Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
	} `json:"device"`
}

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

func evaluate(data []byte) (any, error) {
	var in struct {
		Features cel.Features `json:"features"`
		Cases    []celCase    `json:"cases"`
	}
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("cel input: %w", err)
	}
	cache := cel.NewCache(1000, in.Features)
	out := []celOutcome{}
	for _, c := range in.Cases {
		result := cache.GetOrCompile(c.Expression)
		if result.Error != nil {
			out = append(out, celOutcome{Error: result.Error.Error()})
			continue
		}
		device, err := celDevice(c)
		if err != nil {
			out = append(out, celOutcome{Error: err.Error()})
			continue
		}
		matches, _, err := result.DeviceMatches(context.Background(), device)
		if err != nil {
			out = append(out, celOutcome{Error: err.Error()})
			continue
		}
		out = append(out, celOutcome{Matches: matches})
	}
	return map[string]any{"cases": out}, nil
}
