// Command celoracle evaluates DRA CEL selectors with kube-scheduler v1.37.2's own library
// (k8s.io/dynamic-resource-allocation/cel, through the cache the DynamicResources plugin
// builds), so plugins/dynamicresources/cel.py can be compared with the real thing.
//
// Input on stdin: a JSON list of {expression, driver, attributes, capacity,
// allowMultipleAllocations}, attributes and capacity as in a resource.k8s.io/v1 Device.
// Output on stdout: one JSON object per case, {"kind": "match", "value": bool} or
// {"kind": "compile" | "runtime", "message": text}.
package main

import (
	"context"
	"encoding/json"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
)

type selectorCase struct {
	Expression               string                                                    `json:"expression"`
	Driver                   string                                                    `json:"driver"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
	AllowMultipleAllocations bool                                                      `json:"allowMultipleAllocations"`
}

type outcome struct {
	Kind    string `json:"kind"`
	Value   *bool  `json:"value,omitempty"`
	Message string `json:"message,omitempty"`
}

func main() {
	var cases []selectorCase
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		panic(err)
	}
	// The scheduler's features in v1.37.2: DRAConsumableCapacity on, DRAListTypeAttributes off.
	cache := cel.NewCache(10, cel.Features{EnableConsumableCapacity: true})
	results := make([]outcome, 0, len(cases))
	for _, c := range cases {
		compiled := cache.GetOrCompile(c.Expression)
		if compiled.Error != nil {
			results = append(results, outcome{Kind: "compile", Message: compiled.Error.Error()})
			continue
		}
		multi := c.AllowMultipleAllocations
		device := cel.Device{Driver: c.Driver, AllowMultipleAllocations: &multi, Attributes: c.Attributes, Capacity: c.Capacity}
		matches, _, err := compiled.DeviceMatches(context.Background(), device)
		if err != nil {
			results = append(results, outcome{Kind: "runtime", Message: err.Error()})
			continue
		}
		results = append(results, outcome{Kind: "match", Value: &matches})
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		panic(err)
	}
}
