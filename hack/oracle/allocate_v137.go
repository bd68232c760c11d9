//go:build dra137

package main

import (
	"context"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// allocatorFor: 1.37's allocator takes the slices as the API serves them.
func allocatorFor(in allocateInput) (func(context.Context, structured.AllocatedState, *cel.Cache) (structured.Allocator, error), error) {
	return func(ctx context.Context, state structured.AllocatedState, cache *cel.Cache) (structured.Allocator, error) {
		return structured.NewAllocator(ctx, in.Features, state, classes(in.Classes), in.Slices, cache)
	}, nil
}

func emptySharedDeviceIDs() sets.Set[structured.SharedDeviceID] {
	return sets.New[structured.SharedDeviceID]()
}
