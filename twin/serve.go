package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io/ioutil"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/vmware/govmomi/simulator"
)

// Server is the twin's listening HTTP(S) server.
type Server struct {
	URL        string
	Port       int
	Thumbprint string
	http       *http.Server
}

// Close stops serving.
func (s *Server) Close() { _ = s.http.Close() }

// Serve starts the SOAP endpoint on a loopback address only.
func Serve(rack *Rack, desc *Description, password string) (*Server, error) {
	listen := orDefault(desc.Listen, "127.0.0.1:0")
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %v", listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("listen %q: the twin listens on loopback addresses only", listen)
	}
	svc := rack.Model.Service
	// Login checks user and password against Listen.User (SessionManager.validLogin).
	svc.Listen = &url.URL{User: url.UserPassword(orDefault(desc.User, "rackcert"), password)}
	svc.RegisterSDK(simulator.Map)
	// pyVmomi's SmartConnect negotiates the API version from this file.
	svc.ServeMux.HandleFunc(simulator.Map.Path+"/vimServiceVersions.xml", serviceVersions)
	svc.ServeMux.HandleFunc("/about", svc.About)
	// VMware Tools in the lab's guests report through this channel (tools.go).
	svc.ServeMux.HandleFunc("/guestrpc/", guestRPC)
	// The Automation API (vAPI JSON-RPC), where vLCM lives (vapi.go, vlcm.go).
	vapiLogin.User, vapiLogin.Password = orDefault(desc.User, "rackcert"), password
	svc.ServeMux.HandleFunc("/api", serveVapi)
	svc.ServeMux.HandleFunc("/api/session", serveRESTSession)

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	scheme := "http"
	thumb := ""
	if desc.TLS {
		cert, err := loadOrCreateCert(desc.CertFile, desc.KeyFile)
		if err != nil {
			ln.Close()
			return nil, err
		}
		sum := sha256.Sum256(cert.Certificate[0])
		parts := make([]string, len(sum))
		for i, b := range sum {
			parts[i] = fmt.Sprintf("%02X", b)
		}
		thumb = strings.Join(parts, ":")
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})
		scheme = "https"
	}
	hs := &http.Server{Handler: NewInterceptor(svc.ServeMux, &desc.Faults)}
	go func() { _ = hs.Serve(ln) }()
	return &Server{
		URL:        fmt.Sprintf("%s://%s/sdk", scheme, ln.Addr().String()),
		Port:       port,
		Thumbprint: thumb,
		http:       hs,
	}, nil
}

// loadOrCreateCert reuses the twin's certificate so a CA file handed out by
// `rackcert lab up` stays valid across restarts; it creates a self-signed one
// for 127.0.0.1, ::1 and localhost when there is none yet.
func loadOrCreateCert(certFile, keyFile string) (tls.Certificate, error) {
	if certFile == "" || keyFile == "" {
		return tls.Certificate{}, fmt.Errorf("tls needs cert_file and key_file")
	}
	if _, err := os.Stat(certFile); err == nil {
		if _, err := os.Stat(keyFile); err == nil {
			return tls.LoadX509KeyPair(certFile, keyFile)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "rackcert-vcsim", Organization: []string{"rackcert lab"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyDer, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	certPem := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPem := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDer})
	if err := ioutil.WriteFile(keyFile, keyPem, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	if err := ioutil.WriteFile(certFile, certPem, 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPem, keyPem)
}
