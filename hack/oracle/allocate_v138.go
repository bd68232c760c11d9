//go:build dra138

package main

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	draapi "k8s.io/dynamic-resource-allocation/api"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// internalSlices converts the slices to the allocator's own type, as kube-scheduler's slice tracker does from 1.38.
func internalSlices(slices []*resourceapi.ResourceSlice) ([]*draapi.ResourceSlice, error) {
	out := make([]*draapi.ResourceSlice, 0, len(slices))
	for _, slice := range slices {
		converted := &draapi.ResourceSlice{}
		if err := draapi.Convert_v1_ResourceSlice_To_api_ResourceSlice(slice, converted, nil); err != nil {
			return nil, fmt.Errorf("slice %s: %w", slice.Name, err)
		}
		out = append(out, converted)
	}
	return out, nil
}

// allocatorFor: 1.38's allocator takes the slices converted to its own type, converted once for every node.
func allocatorFor(in allocateInput) (func(context.Context, structured.AllocatedState, *cel.Cache) (structured.Allocator, error), error) {
	slices, err := internalSlices(in.Slices)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, state structured.AllocatedState, cache *cel.Cache) (structured.Allocator, error) {
		return structured.NewAllocator(ctx, in.Features, state, classes(in.Classes), slices, cache)
	}, nil
}

// emptySharedDeviceIDs: from 1.38 a set of DeviceID.
func emptySharedDeviceIDs() sets.Set[structured.DeviceID] { return sets.New[structured.DeviceID]() }
