//go:build dra137 || dra138

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type allocateInput struct {
	Features  structured.Features          `json:"features"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
	Allocated []string                     `json:"allocated"`
	Nodes     []*v1.Node                   `json:"nodes"`
}

type classes = classLister[resourceapi.DeviceClass, *resourceapi.DeviceClass]

func allocate(data []byte) (any, error) {
	var in allocateInput
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("allocate input: %w", err)
	}
	ctx := context.Background()
	allocated, err := allocatedDevices(in.Allocated)
	if err != nil {
		return nil, err
	}
	newAllocator, err := allocatorFor(in)
	if err != nil {
		return nil, err
	}
	state := structured.AllocatedState{AllocatedDevices: allocated,
		AllocatedSharedDeviceIDs: emptySharedDeviceIDs(),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection()}
	cache := cel.NewCache(100, cel.Features{EnableConsumableCapacity: in.Features.ConsumableCapacity,
		EnableListTypeAttributes: in.Features.ListTypeAttributes})
	outcomes := []nodeOutcome{}
	for _, node := range in.Nodes {
		out := nodeOutcome{Node: node.Name}
		// A new allocator per node, as the scheduler makes one per scheduling attempt.
		alloc, err := newAllocator(ctx, state, cache)
		if err != nil {
			out.Error = err.Error()
			outcomes = append(outcomes, out)
			continue
		}
		results, err := alloc.Allocate(ctx, node, in.Claims)
		if errors.Is(err, structured.ErrFailedAllocationOnNode) {
			// kube-scheduler: not a fatal error, the node is unschedulable and other nodes are tried.
			out.Unschedulable = err.Error()
		} else if err != nil {
			out.Error = err.Error()
		} else if results != nil {
			out.Fits = true
			out.Results = results
		}
		outcomes = append(outcomes, out)
	}
	return map[string]any{"nodes": outcomes}, nil
}
