// Command testimage is the workload of internal/realnode's own test, built into
// a one-file image like the pause image:
//
//	testimage serve ADDR     answers every HTTP request with "ok" (a pod IP to reach)
//	testimage apiserver      dials the apiserver through the "kubernetes" Service
//	                         ($KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT),
//	                         verifies its certificate with the service-account CA
//	                         and GETs /version with the pod's token; exit 0 or 1
//	testimage echo ARGS...   prints its arguments (something for kubectl exec to run)
//	testimage sleep          waits for SIGTERM
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testimage serve ADDR | apiserver | echo ARGS... | sleep")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		addr := ":8080"
		if len(os.Args) > 2 {
			addr = os.Args[2]
		}
		err := http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, "ok")
		}))
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	case "apiserver":
		if err := apiserver(); err != nil {
			fmt.Fprintln(os.Stderr, "apiserver:", err)
			os.Exit(1)
		}
		fmt.Println("apiserver reachable through the kubernetes Service")
	case "echo":
		fmt.Println(strings.Join(os.Args[2:], " "))
	case "sleep":
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func apiserver() error {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return fmt.Errorf("KUBERNETES_SERVICE_HOST/PORT not set")
	}
	caPEM, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return err
	}
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no certificate in %s/ca.crt", saDir)
	}
	hc := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs:    pool,
			ServerName: "kubernetes.default.svc",
		}},
	}
	req, err := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(host, port)+"/version", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /version: %s: %s", resp.Status, body)
	}
	fmt.Printf("%s\n", body)
	return nil
}
