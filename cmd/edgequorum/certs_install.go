package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/edgequorum/edgequorum/admission/webhookcerts"
	"github.com/edgequorum/edgequorum/internal/cli"
)

// writeInstall prints the manifests in path with every webhook's caBundle set to
// b's CA, followed by the TLS Secret the webhook Deployment mounts, as one
// stream for `kubectl apply -f -`: the certificate, its Secret and the
// configuration that trusts it always change together.
func writeInstall(w io.Writer, path string, b *webhookcerts.Bundle, namespace, secretName string) error {
	f, err := os.Open(path)
	if err != nil {
		return cli.Usagef("--install: %v", err)
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var out bytes.Buffer
	hooks := 0
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("--install %s: %w", path, err)
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return fmt.Errorf("--install %s: %w", path, err)
		}
		if len(obj) == 0 {
			continue
		}
		if obj["kind"] == "MutatingWebhookConfiguration" {
			ws, _, _ := unstructured.NestedSlice(obj, "webhooks")
			for _, wh := range ws {
				m, ok := wh.(map[string]any)
				if !ok {
					return fmt.Errorf("--install %s: a webhook entry is not an object", path)
				}
				if err := unstructured.SetNestedField(m, b.CABundle(), "clientConfig", "caBundle"); err != nil {
					return fmt.Errorf("--install %s: %w", path, err)
				}
				hooks++
			}
			if err := unstructured.SetNestedSlice(obj, ws, "webhooks"); err != nil {
				return fmt.Errorf("--install %s: %w", path, err)
			}
		}
		if err := appendYAML(&out, obj); err != nil {
			return err
		}
	}
	if hooks == 0 {
		return cli.Usagef("--install %s: no MutatingWebhookConfiguration with webhooks in it", path)
	}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: b.Cert, corev1.TLSPrivateKeyKey: b.Key, "ca.crt": b.CACert},
	}
	if err := appendYAML(&out, secret); err != nil {
		return err
	}
	_, err = w.Write(out.Bytes())
	return err
}

func appendYAML(out *bytes.Buffer, obj any) error {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	out.WriteString("---\n")
	out.Write(b)
	return nil
}
