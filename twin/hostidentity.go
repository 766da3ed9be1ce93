package main

import (
	"crypto/sha256"
	"fmt"
	"net"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// A host's identity as ESXi reports it: the DNS configuration (HostDnsConfig:
// hostName, domainName; vSphere API reference, HostNetworkInfo.dnsConfig and
// HostNetStackInstance.dnsConfig of the default TCP/IP stack) and the
// management VMkernel NIC vmk0 (HostVirtualNic on the "Management Network"
// port group, HostVirtualNicSpec.ip). On a real rack these agree with the
// name vCenter knows the host by, which is how SearchIndex.FindByDnsName and
// FindByIp find it (searchindex.go) and how VMware's esxcli resolves
// `--vihost` through vCenter. govmomi 0.24's simulator leaves every host at
// localhost.localdomain, vmk0 127.0.0.1.
//
// The management address is the description's (the spec's host address when
// it is an IP address) or, for a host known by its DNS name, one of the lab
// range 198.18.0.0/15 (RFC 2544's benchmarking range, never routed), the
// host's index plus 10: 198.18.0.10, 198.18.0.11, ...

// labManagementBase is the first address of the lab range for management vmknics.
var labManagementBase = net.IPv4(198, 18, 0, 10).To4()

// managementIP is the host's vmk0 address: the description's, its name if an IP, else the lab range.
func managementIP(hd *HostDesc, index int) string {
	if hd.ManagementIP != "" {
		return hd.ManagementIP
	}
	if ip := net.ParseIP(hd.Name); ip != nil {
		return ip.String()
	}
	n := uint32(labManagementBase[0])<<24 | uint32(labManagementBase[1])<<16 |
		uint32(labManagementBase[2])<<8 | uint32(labManagementBase[3])
	n += uint32(index)
	return net.IPv4(byte(n>>24), byte(n>>16), byte(n>>8), byte(n)).String()
}

// dnsNames splits the inventory name into host name and domain (an IP address: esx<index>, no domain).
func dnsNames(name string, index int) (string, string) {
	if net.ParseIP(name) != nil {
		return fmt.Sprintf("esx%02d", index+1), ""
	}
	name = strings.TrimSuffix(name, ".")
	if i := strings.IndexByte(name, '.'); i > 0 {
		return name[:i], name[i+1:]
	}
	return name, ""
}

// hostFQDN is the host's fully qualified DNS name (hostName.domainName).
func hostFQDN(dns *types.HostDnsConfig) string {
	if dns == nil || dns.HostName == "" {
		return ""
	}
	if dns.DomainName == "" {
		return dns.HostName
	}
	return dns.HostName + "." + dns.DomainName
}

// managementMAC is a locally administered, stable MAC for vmk0 (ESXi derives vmk0's from the first uplink).
func managementMAC(name string) string {
	sum := sha256.Sum256([]byte(name))
	return fmt.Sprintf("00:50:56:%02x:%02x:%02x", sum[0]&0x3f, sum[1], sum[2])
}

// setHostIdentity sets the host's DNS configuration and vmk0 from its inventory name.
func setHostIdentity(hs *simulator.HostSystem, hd *HostDesc, index int) {
	host, domain := dnsNames(hd.Name, index)
	ip := managementIP(hd, index)
	dns := &types.HostDnsConfig{HostName: host, DomainName: domain, Dhcp: false}
	if domain != "" {
		dns.SearchDomain = []string{domain}
	}
	network := hs.Config.Network
	if network == nil {
		return
	}
	network.DnsConfig = dns
	for i := range network.NetStackInstance {
		if network.NetStackInstance[i].Key == "defaultTcpipStack" {
			copied := *dns
			network.NetStackInstance[i].DnsConfig = &copied
		}
	}
	mac := managementMAC(hd.Name)
	for i := range network.Vnic {
		if network.Vnic[i].Device == "vmk0" {
			setVnicAddress(&network.Vnic[i], ip, mac)
		}
	}
	if info := hs.Config.VirtualNicManagerInfo; info != nil {
		for i := range info.NetConfig {
			for j := range info.NetConfig[i].CandidateVnic {
				if v := &info.NetConfig[i].CandidateVnic[j]; v.Device == "vmk0" {
					setVnicAddress(v, ip, mac)
				}
			}
		}
	}
	if hs.ConfigManager.NetworkSystem != nil {
		if ns, ok := simulator.Map.Get(*hs.ConfigManager.NetworkSystem).(*simulator.HostNetworkSystem); ok {
			copied := *dns
			ns.DnsConfig = &copied
			if ns.NetworkInfo != nil {
				ns.NetworkInfo.DnsConfig = &copied
				ns.NetworkInfo.Vnic = network.Vnic
			}
		}
	}
}

func setVnicAddress(v *types.HostVirtualNic, ip, mac string) {
	if v.Spec.Ip == nil {
		v.Spec.Ip = &types.HostIpConfig{}
	}
	v.Spec.Ip.Dhcp = false
	v.Spec.Ip.IpAddress = ip
	v.Spec.Ip.SubnetMask = "255.254.0.0"
	v.Spec.Mac = mac
}
