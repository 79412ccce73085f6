package cli

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/edgequorum/edgequorum/internal/memlimit"
)

// MemoryLimitFlag reads --memory-limit into *V: "auto", or a byte count
// written the Kubernetes way (96Mi, 1G, 0), as operators write it in the
// resource limits next to it.
type MemoryLimitFlag struct{ V *int64 }

func (q MemoryLimitFlag) String() string {
	switch {
	case q.V == nil:
		return ""
	case *q.V == memlimit.Auto:
		return "auto"
	}
	return resource.NewQuantity(*q.V, resource.BinarySI).String()
}

// Set parses s.
func (q MemoryLimitFlag) Set(s string) error {
	if s == "auto" {
		*q.V = memlimit.Auto
		return nil
	}
	r, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("want auto or a quantity such as 96Mi: %w", err)
	}
	*q.V = r.Value()
	return nil
}
