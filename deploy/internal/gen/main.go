// Command gen writes deploy/install/<name>.yaml for each of
// kustomize.Installs, the rendered kustomizations that operators without
// kustomize apply and that edgequorum's demo and test harness embed. Run it with `go generate ./deploy`; deploy's tests fail while
// a file is stale.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/edgequorum/edgequorum/deploy/internal/kustomize"
)

func main() {
	for _, in := range kustomize.Installs {
		b, err := kustomize.YAML(kustomize.Dir(in.Dir))
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		path := filepath.Join(kustomize.Dir("install"), in.Name+".yaml")
		if err := os.WriteFile(path, kustomize.InstallFile(in, b), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", path)
	}
}
