// Command gen writes deploy/install/<name>.yaml, the rendered kustomizations
// that operators without kustomize apply and that edgequorum's demo and test
// harness embed. Run it with `go generate ./deploy`; deploy's tests fail while
// a file is stale.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/edgequorum/edgequorum/deploy/internal/kustomize"
)

func main() {
	for _, name := range kustomize.Installs {
		b, err := kustomize.YAML(kustomize.Dir(name))
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		path := filepath.Join(kustomize.Dir("install"), name+".yaml")
		if err := os.WriteFile(path, kustomize.InstallFile(name, b), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", path)
	}
}
