package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// quantityFlag reads a byte count written the Kubernetes way (48Mi, 1G, 0), as
// operators write it in resource limits next to it.
type quantityFlag struct{ v *int64 }

func (q quantityFlag) String() string {
	if q.v == nil {
		return ""
	}
	return resource.NewQuantity(*q.v, resource.BinarySI).String()
}

func (q quantityFlag) Set(s string) error {
	r, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("want a quantity such as 48Mi: %w", err)
	}
	*q.v = r.Value()
	return nil
}
