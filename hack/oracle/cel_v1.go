//go:build dra137 || dra138

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
