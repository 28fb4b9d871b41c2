// Renders Go text/template files the way scheduler_perf does, for harness/bench/gotemplate.py's
// golden test: reads [{"path": ..., "env": {...}}] as JSON on stdin, writes [{"output"|"error"}].
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"text/template"
)

func asFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	case string:
		if f, err := strconv.ParseFloat(x, 64); err == nil {
			return f
		}
	}
	panic(fmt.Sprintf("cannot cast %v to float64", v))
}

func asInt(v any) int {
	switch x := v.(type) {
	case float64:
		return int(x)
	case int:
		return x
	case string:
		if i, err := strconv.Atoi(x); err == nil {
			return i
		}
	}
	panic(fmt.Sprintf("cannot cast %v to int", v))
}

func sum(ns ...any) float64 {
	total := 0.0
	for _, n := range ns {
		total += asFloat(n)
	}
	return total
}

func product(ns ...any) float64 {
	total := 1.0
	for _, n := range ns {
		total *= asFloat(n)
	}
	return total
}

func quotient(i, j any) float64 {
	if asFloat(j) == 0 {
		panic("division by zero")
	}
	return asFloat(i) / asFloat(j)
}

var funcs = template.FuncMap{
	"AddFloat":      sum,
	"AddInt":        func(ns ...any) int { return int(sum(ns...)) },
	"SubtractFloat": func(i, j any) float64 { return asFloat(i) - asFloat(j) },
	"SubtractInt":   func(i, j any) int { return int(asFloat(i) - asFloat(j)) },
	"MultiplyFloat": product,
	"MultiplyInt":   func(ns ...any) int { return int(product(ns...)) },
	"DivideFloat":   quotient,
	"DivideInt":     func(i, j any) int { return int(quotient(i, j)) },
	"Mod":           func(a, b any) int { return int(asFloat(a)) % int(asFloat(b)) },
	"Int":           asInt,
	"JSON": func(v any) string {
		var b strings.Builder
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		if err := e.Encode(v); err != nil {
			panic(err)
		}
		return strings.TrimSpace(b.String())
	},
}

// JSON numbers decode as float64; scheduler_perf's params come from YAML as ints.
func ints(v any) any {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) {
			return int(x)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = ints(e)
		}
	case []any:
		for i, e := range x {
			x[i] = ints(e)
		}
	}
	return v
}

func main() {
	var jobs []struct {
		Path string         `json:"path"`
		Env  map[string]any `json:"env"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&jobs); err != nil {
		panic(err)
	}
	results := make([]map[string]string, 0, len(jobs))
	for _, job := range jobs {
		results = append(results, render(job.Path, ints(job.Env).(map[string]any)))
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		panic(err)
	}
}

func render(path string, env map[string]any) (result map[string]string) {
	defer func() {
		if r := recover(); r != nil {
			result = map[string]string{"error": fmt.Sprint(r)}
		}
	}()
	content, err := os.ReadFile(path)
	if err != nil {
		return map[string]string{"error": err.Error()}
	}
	tmpl, err := template.New("object").Funcs(funcs).Parse(string(content))
	if err != nil {
		return map[string]string{"error": err.Error()}
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, env); err != nil {
		return map[string]string{"error": err.Error()}
	}
	return map[string]string{"output": out.String()}
}
