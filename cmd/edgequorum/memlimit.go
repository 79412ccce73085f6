package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/edgequorum/edgequorum/internal/memlimit"
)

// memoryLimitFlag reads --memory-limit: "auto", or a byte count written the
// Kubernetes way (96Mi, 1G, 0), as operators write it in the resource limits
// next to it.
type memoryLimitFlag struct{ v *int64 }

func (q memoryLimitFlag) String() string {
	switch {
	case q.v == nil:
		return ""
	case *q.v == memlimit.Auto:
		return "auto"
	}
	return resource.NewQuantity(*q.v, resource.BinarySI).String()
}

func (q memoryLimitFlag) Set(s string) error {
	if s == "auto" {
		*q.v = memlimit.Auto
		return nil
	}
	r, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("want auto or a quantity such as 96Mi: %w", err)
	}
	*q.v = r.Value()
	return nil
}
