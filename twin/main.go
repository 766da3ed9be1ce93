// Command rackcert-vcsim is rackcert's rack twin: govmomi's vCenter simulator
// (vcsim) extended with what rackcert talks to on a real GPU rack.
//
// The simulator of govmomi 0.24 has hosts without GPUs, no
// HostPciPassthruSystem, an empty QueryConfigTarget().pciPassthrough, one
// advanced-option list shared by all hosts and no host reboot. This harness
// builds the rack from a JSON description written by rackcert/lab/twin.py
// (hosts with the spec's PCI devices, NUMA nodes, passthrough state and ATS
// setting), adds the missing managed objects in the style of the simulator's
// own example_extend_test.go, serves SOAP over TLS on loopback, and injects
// faults on request (a failing task, a slow call, a dropped connection).
// README.md lists what the twin models of vCenter/ESXi 7.0.3, and what not.
//
// Build (GOPATH mode, Debian's govmomi source):
//
//	GOPATH=/usr/share/gocode GO111MODULE=off go build -o rackcert-vcsim .
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	descPath := flag.String("desc", "", "rack description (JSON) written by rackcert")
	statePath := flag.String("state", "", "write {url, port, pid, thumbprint} here once listening")
	flag.Parse()
	if *descPath == "" {
		log.Fatal("rackcert-vcsim: -desc is required")
	}
	raw, err := os.ReadFile(*descPath)
	if err != nil {
		log.Fatalf("rackcert-vcsim: %v", err)
	}
	var desc Description
	if err := json.Unmarshal(raw, &desc); err != nil {
		log.Fatalf("rackcert-vcsim: %s: %v", *descPath, err)
	}
	password, err := readPassword(desc.PasswordFile)
	if err != nil {
		log.Fatalf("rackcert-vcsim: %v", err)
	}

	if err := selectRelease(desc.VcenterVersion); err != nil { // vsphere8.go
		log.Fatalf("rackcert-vcsim: %s: %v", *descPath, err)
	}
	ctx := context.Background()
	rack, err := BuildRack(ctx, &desc)
	if err != nil {
		log.Fatalf("rackcert-vcsim: building the rack: %v", err)
	}
	defer rack.Model.Remove()
	if err := ApplyReplay(ctx, rack, raw); err != nil { // a capture's replay block (capture.go)
		log.Fatalf("rackcert-vcsim: %v", err)
	}

	setupVlcm(&desc, orDefault(desc.VcenterVersion, "7.0.3")) // vlcm.go: desired state, depot

	srv, err := Serve(rack, &desc, password)
	if err != nil {
		log.Fatalf("rackcert-vcsim: %v", err)
	}
	state := map[string]interface{}{
		"url":        srv.URL,
		"port":       srv.Port,
		"pid":        os.Getpid(),
		"thumbprint": srv.Thumbprint,
		"hosts":      len(desc.Hosts),
	}
	out, _ := json.Marshal(state)
	if *statePath != "" {
		tmp := *statePath + ".tmp"
		if err := os.WriteFile(tmp, out, 0o600); err != nil {
			log.Fatalf("rackcert-vcsim: %v", err)
		}
		if err := os.Rename(tmp, *statePath); err != nil {
			log.Fatalf("rackcert-vcsim: %v", err)
		}
	}
	fmt.Println(string(out))

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	srv.Close()
}

func readPassword(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("password_file is required")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	text := string(raw)
	for len(text) > 0 && (text[len(text)-1] == '\n' || text[len(text)-1] == '\r') {
		text = text[:len(text)-1]
	}
	return text, nil
}
