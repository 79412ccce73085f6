package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/edgequorum/edgequorum/admission"
	"github.com/edgequorum/edgequorum/admission/webhookcerts"
	"github.com/edgequorum/edgequorum/internal/cli"
)

func init() {
	register(command{name: "certs", summary: "write a CA and the webhook's serving certificate", run: runCerts})
}

const certsUsage = `Makes a CA and a serving certificate for the webhook Service
<service>.<namespace>.svc, for a webhook that does not keep its own: the
shipped install runs it with --manage-certs, which makes and renews them
itself, so it needs none of this. With --install, prints the given manifests
with every webhook's caBundle set, followed by the TLS Secret, for kubectl:

  edgequorum certs --install deploy/install/webhook.yaml | kubectl apply -f -

With --out-dir, writes ca.crt, tls.crt and tls.key there instead and prints
the base64 caBundle for the MutatingWebhookConfiguration on stdout:

  edgequorum certs --out-dir ./tls > cabundle.txt
  kubectl apply -f deploy/webhook/base/namespace.yaml
  kubectl -n edgequorum-webhook create secret tls edgequorum-webhook-tls \
    --cert=./tls/tls.crt --key=./tls/tls.key

The CA key is not kept: rotating means running this again and updating the
caBundle.`

func runCerts(_ context.Context, args []string, stdout, stderr io.Writer) error {
	opts := webhookcerts.Options{Service: "edgequorum-webhook", Namespace: admission.DefaultNamespace, Validity: 365 * 24 * time.Hour}
	fs := cli.NewFlagSet("certs", certsUsage, stderr)
	fs.StringVar(&opts.Service, "service", opts.Service, "name of the webhook's Service")
	fs.StringVar(&opts.Namespace, "namespace", opts.Namespace, "namespace of the webhook's Service")
	outDir := fs.String("out-dir", "", "directory to write ca.crt, tls.crt and tls.key into")
	install := fs.String("install", "", "manifests (e.g. deploy/install/webhook.yaml) to print with the caBundle filled in and the TLS Secret appended")
	secretName := fs.String("secret", "edgequorum-webhook-tls", "name of the TLS Secret, with --install")
	ipSANs := fs.String("ip-sans", "", "comma-separated extra IP SANs, e.g. 127.0.0.1 for a webhook reached by address in tests")
	fs.DurationVar(&opts.Validity, "validity", opts.Validity, "how long the CA and the certificate are valid")
	force := fs.Bool("force", false, "overwrite existing files in --out-dir")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if (*outDir == "") == (*install == "") {
		return cli.Usagef("give exactly one of --out-dir and --install")
	}
	if opts.Validity <= 0 {
		return cli.Usagef("--validity must be positive, got %s", opts.Validity)
	}
	for _, s := range strings.Split(*ipSANs, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		ip := net.ParseIP(s)
		if ip == nil {
			return cli.Usagef("--ip-sans: %q is not an IP address", s)
		}
		opts.IPs = append(opts.IPs, ip)
	}
	b, err := webhookcerts.Generate(opts)
	if err != nil {
		return cli.Usagef("--service/--namespace: %v", err)
	}
	if *install != "" {
		return writeInstall(stdout, *install, b, opts.Namespace, *secretName)
	}
	if err := b.WriteFiles(*outDir, *force); err != nil {
		if errors.Is(err, webhookcerts.ErrExists) {
			return cli.Usagef("%v (pass --force to overwrite)", err)
		}
		return err
	}
	_, err = fmt.Fprintln(stdout, b.CABundle())
	return err
}
