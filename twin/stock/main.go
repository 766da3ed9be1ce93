// Command stock-vcsim is govmomi 0.24's vCenter simulator as Debian ships it,
// with none of rackcert's extensions: its default VPX inventory (hosts without
// GPUs, no HostPciPassthruSystem, API 6.5), plain http on a loopback port.
// Tests use it to check that rackcert degrades to clear messages against a
// vCenter that has nothing it needs.
//
//	GOPATH=/usr/share/gocode GO111MODULE=off go build -o stock-vcsim .
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/vmware/govmomi/simulator"
)

func main() {
	user := flag.String("user", "user", "login user")
	passwordFile := flag.String("password-file", "", "file with the login password")
	flag.Parse()
	raw, err := os.ReadFile(*passwordFile)
	if err != nil {
		log.Fatalf("stock-vcsim: %v", err)
	}
	model := simulator.VPX()
	if err := model.Create(); err != nil {
		log.Fatalf("stock-vcsim: %v", err)
	}
	defer model.Remove()
	model.Service.Listen = &url.URL{
		Host: "127.0.0.1:0",
		User: url.UserPassword(*user, strings.TrimRight(string(raw), "\r\n")),
	}
	server := model.Service.NewServer()
	defer server.Close()
	out, _ := json.Marshal(map[string]string{"url": server.URL.Host})
	fmt.Println(string(out))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
