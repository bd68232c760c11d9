// dra-oracle answers what k8s.io/dynamic-resource-allocation answers, at the release it is built for: which
// devices the scheduler's structured allocator allocates to a pod's claims on each node (or why it fails), and
// whether a CEL device selector matches a device. It is a test oracle of dra.admin's allocation explainer
// (tests/oracle/), never part of the collection.
//
// Input on stdin, one JSON document; output on stdout, one JSON document (with --serve: one per line, until stdin
// ends):
//
//	{"mode": "allocate", "features": {...}, "slices": [...], "classes": [...], "claims": [...],
//	 "allocated": ["driver/pool/device", ...], "nodes": [...]}
//	-> {"nodes": [{"node": name, "fits": bool, "error": text, "unschedulable": text, "results": [AllocationResult]}]}
//
//	{"mode": "cel", "cases": [{"expression": text, "device": {"driver": d, "attributes": {...}, "capacity": {...}}}]}
//	-> {"cases": [{"matches": bool, "error": text}]}
//
// The objects are in the resource.k8s.io version the release's allocator reads (v1 from 1.34, v1beta1 before).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

type request struct {
	Mode string `json:"mode"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--serve" {
		serve()
		return
	}
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	out, err := answer(data)
	if err != nil {
		fail(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err)
	}
}

// serve answers one JSON document per input line with one line, until stdin ends: {"error": text} for a request
// it cannot read, so that a test can send thousands of cases to one process.
func serve() {
	in := bufio.NewReader(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			out, aerr := answer(line)
			if aerr != nil {
				out = map[string]string{"error": aerr.Error()}
			}
			if eerr := enc.Encode(out); eerr != nil {
				fail(eerr)
			}
		}
		if err != nil {
			if err != io.EOF {
				fail(err)
			}
			return
		}
	}
}

func answer(data []byte) (any, error) {
	var req request
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	switch req.Mode {
	case "allocate":
		return allocate(data)
	case "cel":
		return evaluate(data)
	}
	return nil, fmt.Errorf("mode %q: use allocate or cel", req.Mode)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "dra-oracle:", err)
	os.Exit(2)
}

// nodeOutcome: fits with results, or an error that fails the whole scheduling attempt (error), or one that only
// rules the node out (unschedulable, from 1.36), or neither (no fit).
type nodeOutcome struct {
	Node          string `json:"node"`
	Fits          bool   `json:"fits"`
	Error         string `json:"error,omitempty"`
	Unschedulable string `json:"unschedulable,omitempty"`
	Results       any    `json:"results,omitempty"`
}

type celOutcome struct {
	Matches bool   `json:"matches"`
	Error   string `json:"error,omitempty"`
}
