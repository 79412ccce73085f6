package main

import (
	"context"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/edgequorum/edgequorum/internal/cli"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zonekeys"
)

func init() {
	register(command{name: "keygen", summary: "generate a zone key line for the agents' key Secret", run: runKeygen})
}

const keygenUsage = `Prints a new zone key as one id:base64 line (32 random bytes), or with
--secret the Secret every agent of the zone mounts as --key-file, ready for
kubectl (the key then never touches a disk):

  edgequorum keygen --id k1 --secret | kubectl create -f -

or, to keep a copy:

  edgequorum keygen --id k1 --out zone.key
  kubectl -n edgequorum-system create secret generic edgequorum-zone-key --from-file=zone.key

Use kubectl create, not apply: apply would copy the key into an annotation.
To rotate, append the new line below the old one everywhere, then move it to
the top (it signs; every line verifies), then drop the old line.`

// zoneKeySecret is the Secret name and key the shipped DaemonSet mounts.
const (
	zoneKeySecret  = "edgequorum-zone-key"
	zoneKeyFileKey = "zone.key"
)

func runKeygen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("keygen", keygenUsage, stderr)
	id := fs.String("id", "k1", "key id (letters, digits, '-', '_', '.')")
	out := fs.String("out", "", "write to this file (mode 0600) instead of stdout")
	secret := fs.Bool("secret", false, "print a Secret manifest holding the key instead of the bare line")
	namespace := fs.String("namespace", zone.DefaultLeaseNamespace, "the Secret's namespace, with --secret")
	name := fs.String("name", zoneKeySecret, "the Secret's name, with --secret")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	line, err := zonekeys.GenerateLine(*id)
	if err != nil {
		return cli.Usagef("--id: %v", err)
	}
	text := []byte(line + "\n")
	if *secret {
		if text, err = yaml.Marshal(&corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: *name, Namespace: *namespace},
			Type:       corev1.SecretTypeOpaque,
			StringData: map[string]string{zoneKeyFileKey: line + "\n"},
		}); err != nil {
			return fmt.Errorf("render the Secret: %w", err)
		}
	}
	if *out == "" {
		_, err := stdout.Write(text)
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if _, err := f.Write(text); err != nil {
		f.Close()
		return fmt.Errorf("--out: %w", err)
	}
	return f.Close()
}
